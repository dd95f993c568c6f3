// tiledzarr.hpp: a small header-only C++17 wrapper of the TiledZarr C API
// (tiledzarr.h). Errors become exceptions, the stream is an RAII handle.
//
//   tiledzarr::Stream s(R"({"dtype": "uint16", "dimensions": [...],
//                           "store": {"path": "out.zarr"}})");
//   while (left) { size_t n = s.write(p, left); ... }   // 0 = busy, retry
//   s.flush();                                          // before destruction!
//
// OME-Zarr images and several arrays in one stream (positions, a plate's
// wells, cameras) are configured in the JSON (README) or in the struct
// forms: a tz_config with a tz_image, or a std::vector of tz_array
// (tiledzarr.h). set_attributes() replaces the user's attributes until the
// flush; write_to(), write_all_to(), skip(), frame_metadata() and reserve()
// name an array by its index (array_index("A/1/0")).
//
// Notes:
//  * ~Stream() calls tz_destroy and never throws. Without a prior flush(),
//    data not yet emitted is discarded (no partial shard is written), which
//    is also what happens when an exception unwinds past the stream.
//  * Like the C API, one stream is used from one thread at a time;
//    metrics() may be called from any thread.
//  * An optional shard callback (a std::function) runs on a library thread.
//    Throwing from it fails the stream: the exception is caught at the C
//    boundary and its message is kept, and the next failing call throws an
//    Error whose message names both the shard and the exception.
#ifndef TILEDZARR_HPP
#define TILEDZARR_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tiledzarr.h"

namespace tiledzarr {

// A failed call: status() is a tz_status value (TZ_ERR_*), what() the
// library's message.
class Error : public std::runtime_error {
public:
    Error(int32_t status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    int32_t status() const noexcept { return status_; }

private:
    int32_t status_;
};

// write_all() ran out of time: taken() bytes were accepted (the stream goes
// on from there; write the rest later or give up).
class TimeoutError : public Error {
public:
    TimeoutError(std::size_t taken, const std::string& message)
        : Error(TZ_ERR_TIMEOUT, message), taken_(taken) {}
    std::size_t taken() const noexcept { return taken_; }

private:
    std::size_t taken_;
};

// A shard handed to the callback; its pointers are valid only during the
// call (see tz_shard in tiledzarr.h). With a pyramid ("multiscale"), level
// says which level's array it belongs to (0: full resolution).
using Shard = tz_shard;
// Throw to fail the stream.
using ShardCallback = std::function<void(const Shard&)>;

class Stream {
public:
    // Creates a stream from the JSON configuration (README, "Configuration").
    // With a callback, every complete shard is also passed to it; without a
    // "store" in the JSON the callback is the only sink.
    explicit Stream(const std::string& json, ShardCallback callback = {}) {
        callback_ = CallbackState::make(std::move(callback));
        tz_shard_sink_fn sink = callback_ ? &Stream::trampoline : nullptr;
        int32_t rc = tz_create_json(json.c_str(), sink, callback_.get(), &s_);
        if (rc != TZ_OK) {
            s_ = nullptr;
            throw Error(rc, std::string("tz_create_json: ") + tz_last_error());
        }
    }

    // Creates a stream from the struct form (tz_create_image): config from
    // tz_config_init, image from tz_image_init (nullptr: a plain array, as
    // tz_create). With a callback, it replaces config.sink and
    // config.sink_user_data; without one, those are used as they are.
    explicit Stream(tz_config config, const tz_image* image = nullptr,
                    ShardCallback callback = {}) {
        callback_ = CallbackState::attach(config, std::move(callback));
        int32_t rc = tz_create_image(&config, image, &s_);
        if (rc != TZ_OK) {
            s_ = nullptr;
            throw Error(rc, std::string("tz_create_image: ") + tz_last_error());
        }
    }

    // The struct form with options (tz_create_with): the latency bound, a
    // cap on device memory, the store's bound on a disk or server that
    // does not answer. options from tz_options_init. (A function rather
    // than a constructor, so that Stream(config, image, {}) stays what it
    // was.)
    static Stream with_options(tz_config config, const tz_image* image,
                               const tz_options& options, ShardCallback callback = {}) {
        std::unique_ptr<CallbackState> state = CallbackState::attach(config, std::move(callback));
        tz_stream* s = nullptr;
        int32_t rc = tz_create_with(&config, image, &options, &s);
        if (rc != TZ_OK) throw Error(rc, std::string("tz_create_with: ") + tz_last_error());
        return Stream(s, std::move(state));
    }

    // A stream of several arrays from structs (tz_create_arrays): arrays[i]
    // is the array of index i; the stream's shared settings come from
    // arrays[0].config. With a callback, it replaces arrays[0].config's
    // sink (leave the other arrays' sinks NULL); shards name their array
    // (Shard::array). options: nullptr for the defaults.
    explicit Stream(const std::vector<tz_array>& arrays, const tz_options* options = nullptr,
                    ShardCallback callback = {}) {
        if (arrays.empty() || arrays.size() > UINT32_MAX)
            throw Error(TZ_ERR_INVALID_ARGUMENT,
                        "tz_create_arrays: " + std::to_string(arrays.size()) +
                            " arrays (1 to 2^32-1)");
        std::vector<tz_array> given(arrays);
        tz_config first{};
        if (callback && given[0].config) {
            first = *given[0].config;
            callback_ = CallbackState::attach(first, std::move(callback));
            given[0].config = &first;
        }
        int32_t rc = tz_create_arrays(given.data(), static_cast<uint32_t>(given.size()),
                                      options, &s_);
        if (rc != TZ_OK) {
            s_ = nullptr;
            throw Error(rc, std::string("tz_create_arrays: ") + tz_last_error());
        }
    }

    ~Stream() { tz_destroy(s_); }

    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    Stream(Stream&& other) noexcept
        : s_(std::exchange(other.s_, nullptr)), callback_(std::move(other.callback_)) {}

    Stream& operator=(Stream&& other) noexcept {
        if (this != &other) {
            tz_destroy(s_);  // stops this stream's threads before its callback goes
            s_ = std::exchange(other.s_, nullptr);
            callback_ = std::move(other.callback_);
        }
        return *this;
    }

    // Copies what fits into free staging memory without waiting. Returns the
    // bytes taken: 0 means busy (call again with the same data), or that
    // nbytes was 0. A write may end mid-element; the next one continues the
    // byte stream. Throws Error on failure (TZ_ERR_OVERFLOW past the end of
    // a bounded array, TZ_ERR_FINISHED after flush, a sink or I/O failure).
    std::size_t write(const void* data, std::size_t nbytes) {
        int64_t n = tz_write(s_, data, nbytes);
        if (n < 0) fail("tz_write", static_cast<int32_t>(-n));
        return static_cast<std::size_t>(n);
    }

    // Waits for staging memory until all nbytes are taken. A negative
    // timeout waits for ever; when the time runs out, throws TimeoutError
    // saying how many bytes were taken.
    void write_all(const void* data, std::size_t nbytes,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
        write_all_named("tz_write_all", 0, data, nbytes, timeout);
    }

    // How many arrays the stream writes; the index of the array whose key
    // is `key` (Error TZ_ERR_INVALID_ARGUMENT naming the stream's keys when
    // none has it; a stream of one array has the key "").
    uint32_t array_count() const {
        uint32_t count = 0;
        int32_t rc = tz_array_count(s_, &count);
        if (rc != TZ_OK) fail("tz_array_count", rc);
        return count;
    }

    uint32_t array_index(const std::string& key) const {
        uint32_t index = 0;
        int32_t rc = tz_array_index(s_, key.c_str(), &index);
        if (rc != TZ_OK) fail("tz_array_index", rc);
        return index;
    }

    // write() and write_all() to array `array` (tz_write_to,
    // tz_write_all_to): frames of different arrays may interleave at any
    // frame boundary. An array that does not exist throws Error
    // TZ_ERR_INVALID_ARGUMENT (the stream goes on).
    std::size_t write_to(uint32_t array, const void* data, std::size_t nbytes) {
        int64_t n = tz_write_to(s_, array, data, nbytes);
        if (n < 0) fail("tz_write_to", static_cast<int32_t>(-n));
        return static_cast<std::size_t>(n);
    }

    void write_all_to(uint32_t array, const void* data, std::size_t nbytes,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(-1)) {
        write_all_named("tz_write_all_to", array, data, nbytes, timeout);
    }

    // Frames the camera dropped (tz_skip): advances array `array` by
    // `nbytes` bytes of whole frames that read as the fill value. Returns
    // the bytes skipped, 0 when busy (call again); Error
    // TZ_ERR_INVALID_ARGUMENT when nbytes is not whole frames.
    std::size_t skip(uint32_t array, std::uint64_t nbytes) {
        int64_t n = tz_skip(s_, array, nbytes);
        if (n < 0) fail("tz_skip", static_cast<int32_t>(-n));
        return static_cast<std::size_t>(n);
    }

    // Records a JSON object as the metadata of frame `frame` (from 0,
    // written or skipped already) of array `array` (tz_frame_metadata; the
    // array's configuration asks for "frame_metadata"). Error
    // TZ_ERR_INVALID_ARGUMENT, the stream going on, for text that is not a
    // JSON object or too long, a frame not written yet or already handed on.
    void frame_metadata(uint32_t array, std::uint64_t frame, const std::string& json) {
        int32_t rc = tz_frame_metadata(s_, array, frame, json.c_str());
        if (rc != TZ_OK) fail("tz_frame_metadata", rc);
    }

    // Free staging memory to write the next bytes of array `array` into
    // (tz_reserve_to): a camera SDK's DMA target, saving write()'s copy.
    // Empty (data nullptr, size 0) when no staging memory is free: call
    // again. End it with commit(n), the bytes written (0 gives it up);
    // until then writes are refused. flush() gives up one still open, the
    // destructor frees it.
    struct Reservation {
        void* data = nullptr;
        std::size_t size = 0;
        explicit operator bool() const noexcept { return data != nullptr; }
    };

    Reservation reserve(uint32_t array = 0) {
        Reservation r;
        int32_t rc = tz_reserve_to(s_, array, &r.data, &r.size);
        if (rc != TZ_OK) fail("tz_reserve_to", rc);
        return r;
    }

    // Passes on the first `nbytes` bytes written into the reservation and
    // ends it (tz_commit). More bytes than it holds throws Error
    // TZ_ERR_INVALID_ARGUMENT and keeps the reservation: commit again.
    void commit(std::size_t nbytes) {
        int32_t rc = tz_commit(s_, nbytes);
        if (rc != TZ_OK) fail("tz_commit", rc);
    }

    // A reservation that ends itself (reserve_scoped): its commit(n) passes
    // on the first n bytes written and ends it; one that goes out of scope
    // uncommitted, as when an exception leaves the code filling it, is given
    // up (a commit of 0 bytes), so the stream takes writes again. Empty
    // (false, data() nullptr) when no staging memory was free. Move-only;
    // end it with its own commit(), not the stream's, and before the stream
    // is moved or destroyed.
    class ScopedReservation {
    public:
        ScopedReservation() = default;
        ScopedReservation(ScopedReservation&& other) noexcept { take(other); }
        ScopedReservation& operator=(ScopedReservation&& other) noexcept {
            if (this != &other) {
                give_up();
                take(other);
            }
            return *this;
        }
        ScopedReservation(const ScopedReservation&) = delete;
        ScopedReservation& operator=(const ScopedReservation&) = delete;
        ~ScopedReservation() { give_up(); }

        void* data() const noexcept { return data_; }
        std::size_t size() const noexcept { return size_; }
        explicit operator bool() const noexcept { return stream_ != nullptr; }

        // Throws as Stream::commit does: more bytes than it holds keep it
        // open (commit again); an empty or ended one throws
        // TZ_ERR_INVALID_ARGUMENT.
        void commit(std::size_t nbytes) {
            if (!stream_)
                throw Error(TZ_ERR_INVALID_ARGUMENT,
                            "commit: the reservation is empty or already ended");
            stream_->commit(nbytes);
            stream_ = nullptr;
        }

    private:
        friend class Stream;
        ScopedReservation(Stream* stream, const Reservation& r)
            : stream_(r ? stream : nullptr), data_(r.data), size_(r.size) {}
        void take(ScopedReservation& other) noexcept {
            stream_ = other.stream_;
            data_ = other.data_;
            size_ = other.size_;
            other.stream_ = nullptr;
        }
        // No throw from a destructor: a stream that failed meanwhile has
        // said so through the call that saw it.
        void give_up() noexcept {
            if (stream_) (void)tz_commit(stream_->s_, 0);
            stream_ = nullptr;
        }

        Stream* stream_ = nullptr;
        void* data_ = nullptr;
        std::size_t size_ = 0;
    };

    ScopedReservation reserve_scoped(uint32_t array = 0) {
        return ScopedReservation(this, reserve(array));
    }

    // Pads the last partial epoch, emits every remaining shard and the final
    // metadata; blocks until done. Terminal: later writes throw
    // TZ_ERR_FINISHED; flushing again repeats the first flush's outcome.
    void flush() {
        int32_t rc = tz_flush(s_);
        if (rc != TZ_OK) fail("tz_flush", rc);
    }

    // Replaces the user's attributes (a JSON object, like the configuration's
    // "attributes"): the store writes them into the image group's zarr.json
    // beside "ome" (the array's zarr.json without OME) at its next metadata
    // update and at flush(). Throws Error: TZ_ERR_INVALID_ARGUMENT for text
    // that is not JSON (or a call from this stream's own callback),
    // TZ_ERR_CONFIG for JSON that is not an object or holds the key "ome",
    // TZ_ERR_FINISHED after flush(). The attributes are unchanged then.
    void set_attributes(const std::string& json) {
        int32_t rc = tz_set_attributes(s_, json.c_str());
        if (rc != TZ_OK) fail("tz_set_attributes", rc);
    }

    // The stream's counters now (bytes in/out, shards, epochs, seconds per
    // stage, backend and why); these three are callable from any thread.
    tz_metrics metrics() const { return counters(tz_get_metrics, "tz_get_metrics"); }
    // The object store's upload counters (all zero for a folder or a callback).
    tz_upload_metrics upload_metrics() const {
        return counters(tz_get_upload_metrics, "tz_get_upload_metrics");
    }
    // Staging memory held now and at most, and the writes that found it full.
    tz_staging_metrics staging_metrics() const {
        return counters(tz_get_staging_metrics, "tz_get_staging_metrics");
    }

    // "MAJOR.MINOR.PATCH" of the loaded library.
    static std::string version() { return tz_version(); }

    // The memory a stream of this JSON configuration would take, without
    // creating it (tz_estimate_memory_json); Error for a bad configuration.
    static tz_memory_plan estimate_memory(const std::string& json) {
        tz_memory_plan plan{};
        int32_t rc = tz_estimate_memory_json(json.c_str(), &plan);
        if (rc != TZ_OK)
            throw Error(rc, std::string("tz_estimate_memory_json: ") + tz_last_error());
        return plan;
    }

    // The C handle, for calls this wrapper does not cover (still owned here).
    tz_stream* get() noexcept { return s_; }
    const tz_stream* get() const noexcept { return s_; }
    explicit operator bool() const noexcept { return s_ != nullptr; }

private:
    struct CallbackState {
        ShardCallback fn;
        std::mutex mutex;     // the message is written on a library thread
        std::string message;  // what the callback threw, first failure kept

        // The state for `callback`; none without one.
        static std::unique_ptr<CallbackState> make(ShardCallback callback) {
            if (!callback) return nullptr;
            auto state = std::make_unique<CallbackState>();
            state->fn = std::move(callback);
            return state;
        }

        // make(), with `config`'s sink replaced by the callback (left as it
        // is without one).
        static std::unique_ptr<CallbackState> attach(tz_config& config, ShardCallback callback) {
            auto state = make(std::move(callback));
            if (state) {
                config.sink = &Stream::trampoline;
                config.sink_user_data = state.get();
            }
            return state;
        }
    };

    // A stream created by with_options().
    Stream(tz_stream* s, std::unique_ptr<CallbackState> callback) noexcept
        : s_(s), callback_(std::move(callback)) {}

    static int32_t trampoline(void* user_data, const tz_shard* shard) noexcept {
        auto* state = static_cast<CallbackState*>(user_data);
        try {
            state->fn(*shard);
            return 0;
        } catch (const std::exception& e) {
            remember(state, e.what());
        } catch (...) {
            remember(state, "unknown exception");
        }
        return 1;
    }

    static void remember(CallbackState* state, const char* what) noexcept {
        try {
            std::lock_guard<std::mutex> lock(state->mutex);
            if (state->message.empty()) state->message = what;
        } catch (...) {  // no memory for the message: the status still says it
        }
    }

    // write_all() and write_all_to() (tz_write_all is tz_write_all_to of
    // array 0), `what` naming the call in errors.
    void write_all_named(const char* what, uint32_t array, const void* data, std::size_t nbytes,
                         std::chrono::milliseconds timeout) {
        int64_t n = tz_write_all_to(s_, array, data, nbytes, static_cast<int64_t>(timeout.count()));
        if (n < 0) fail(what, static_cast<int32_t>(-n));
        if (static_cast<std::size_t>(n) < nbytes) {
            // Fewer bytes: the time ran out, or a bounded array is full (the
            // bytes up to its end were taken); the next write tells which.
            int64_t more = tz_write_to(s_, array, static_cast<const uint8_t*>(data) + n,
                                       nbytes - static_cast<std::size_t>(n));
            if (more < 0) fail(what, static_cast<int32_t>(-more));
            n += more;
        }
        if (static_cast<std::size_t>(n) < nbytes)
            throw TimeoutError(static_cast<std::size_t>(n),
                               std::string(what) + ": timed out after " +
                                   std::to_string(timeout.count()) + " ms with " +
                                   std::to_string(n) + " of " + std::to_string(nbytes) +
                                   " bytes taken");
    }

    template <typename T>
    T counters(int32_t (*get)(const tz_stream*, T*), const char* what) const {
        T m{};
        int32_t rc = get(s_, &m);
        if (rc != TZ_OK) fail(what, rc);
        return m;
    }

    [[noreturn]] void fail(const char* what, int32_t status) const {
        std::string message = std::string(what) + ": ";
        const char* detail = s_ ? tz_stream_last_error(s_) : "";
        message += (detail && *detail) ? detail : tz_last_error();
        if (callback_) {
            std::lock_guard<std::mutex> lock(callback_->mutex);
            if (!callback_->message.empty()) message += " (callback: " + callback_->message + ")";
        }
        if (message.size() == std::string(what).size() + 2) message += tz_status_string(status);
        throw Error(status, message);
    }

    tz_stream* s_ = nullptr;
    std::unique_ptr<CallbackState> callback_;
};

// Repairs a store whose stream was killed before its flush (tz_recover):
// what was done. Error TZ_ERR_EXISTS while a stream holds the store,
// TZ_ERR_IO when the disk does not answer for 60 s.
inline tz_recovery recover(const std::string& store_path) {
    tz_recovery r{};
    int32_t rc = tz_recover(store_path.c_str(), &r);
    if (rc != TZ_OK) throw Error(rc, std::string("tz_recover: ") + tz_last_error());
    return r;
}

// The same, giving up on a disk that answers nothing for `timeout` (1 to
// 3600 s; 0 or less: the default 60 s) (tz_recover_with).
inline tz_recovery recover(const std::string& store_path, std::chrono::seconds timeout) {
    tz_options o;
    tz_options_init(&o);
    o.store_timeout_s = timeout.count() > 0 ? static_cast<std::uint64_t>(timeout.count()) : 0;
    tz_recovery r{};
    int32_t rc = tz_recover_with(store_path.c_str(), &o, &r);
    if (rc != TZ_OK) throw Error(rc, std::string("tz_recover_with: ") + tz_last_error());
    return r;
}

// Frees the memory the process keeps for its next stream
// (tz_release_cached_memory); the bytes freed.
inline std::uint64_t release_cached_memory() { return tz_release_cached_memory(); }

}  // namespace tiledzarr

#endif  // TILEDZARR_HPP
