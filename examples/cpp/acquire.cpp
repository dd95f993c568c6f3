// An acquisition loop with the C++ wrapper (tiledzarr.hpp): a camera thread
// produces uint16 frames at a set rate into a small bounded queue; the main
// thread takes each frame and hands it to the stream with non-blocking
// writes, retrying while the stream is busy. Progress is printed every
// second. Ctrl-C (SIGINT) or SIGTERM stops the camera, the frames already
// captured are written, the stream is flushed and the summary printed
// (exit status 0).
//
//   acquire STORE_PATH [--frames N] [--fps F] [--width W] [--height H] [--overwrite]
//
// Defaults: 200 frames of 1024 x 1024 at 200 frames/s; --frames 0 runs until
// interrupted. The store is a Zarr v3 array (t, y, x) with an unbounded t
// axis: tiles 16 x 128 x 128, shards of 1 x 4 x 4 tiles, zstd level 1. Its
// shape[0] is the number of frames written. Pixel (0, 0) of frame i holds
// i mod 65536, like the frame counter many cameras stamp into their images.
//
// If the writer falls behind, the queue fills and the camera waits for a
// free buffer; those waits are counted as "camera stalls" (a real camera
// would drop those frames).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tiledzarr.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using ull = unsigned long long;  // for printf's %llu

constexpr std::size_t kQueueFrames = 8;
constexpr uint64_t kTileT = 16, kTileYX = 128, kTilesPerShardYX = 4;

// Set by SIGINT/SIGTERM; read by both threads.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

// Later signals find the flag set and change nothing (some tools, such as
// timeout(1), deliver the signal twice); Ctrl-\ (SIGQUIT) still aborts.
extern "C" void on_signal(int) { g_stop.store(true); }

struct Options {
    std::string store;
    uint64_t frames = 200;
    double fps = 200.0;
    uint64_t width = 1024, height = 1024;
    bool overwrite = false;
};

[[noreturn]] void usage(const char* argv0, const std::string& why) {
    if (!why.empty()) std::fprintf(stderr, "%s: %s\n", argv0, why.c_str());
    std::fprintf(stderr,
                 "usage: %s STORE_PATH [--frames N] [--fps F] [--width W] [--height H] "
                 "[--overwrite]\n"
                 "  --frames 0 runs until Ctrl-C; defaults: 200 frames, 200 fps, 1024 x 1024\n",
                 argv0);
    std::exit(2);
}

uint64_t parse_u64(const char* argv0, const std::string& flag, const char* text) {
    char* end = nullptr;
    errno = 0;
    unsigned long long v = std::strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-')
        usage(argv0, flag + " needs a non-negative integer, got '" + text + "'");
    return v;
}

Options parse_args(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto value = [&]() -> const char* {
            if (i + 1 >= argc) usage(argv[0], a + " needs a value");
            return argv[++i];
        };
        if (a == "--frames") {
            o.frames = parse_u64(argv[0], a, value());
        } else if (a == "--fps") {
            const char* text = value();
            char* end = nullptr;
            o.fps = std::strtod(text, &end);
            if (end == text || *end || !(o.fps > 0.0) || o.fps > 1e6)
                usage(argv[0], std::string("--fps needs a rate in (0, 1e6], got '") + text + "'");
        } else if (a == "--width") {
            o.width = parse_u64(argv[0], a, value());
        } else if (a == "--height") {
            o.height = parse_u64(argv[0], a, value());
        } else if (a == "--overwrite") {
            o.overwrite = true;
        } else if (a == "-h" || a == "--help") {
            usage(argv[0], "");
        } else if (!a.empty() && a[0] == '-') {
            usage(argv[0], "unknown option " + a);
        } else if (o.store.empty()) {
            o.store = a;
        } else {
            usage(argv[0], "more than one STORE_PATH");
        }
    }
    if (o.store.empty()) usage(argv[0], "STORE_PATH is required");
    if (o.width == 0 || o.height == 0 || o.width > 65536 || o.height > 65536)
        usage(argv[0], "--width and --height must be 1 to 65536");
    return o;
}

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

std::string config_json(const Options& o) {
    // Staging memory: 256 MiB, or four epochs (tile[0] frames) when larger.
    uint64_t epoch = kTileT * o.width * o.height * sizeof(uint16_t);
    uint64_t staging = std::max<uint64_t>(256ull << 20, 4 * epoch);
    auto dim = [](const char* name, uint64_t size, uint64_t tile, uint64_t per_shard) {
        return std::string("{\"name\": \"") + name + "\", \"size\": " + std::to_string(size) +
               ", \"tile\": " + std::to_string(tile) +
               ", \"tiles_per_shard\": " + std::to_string(per_shard) + "}";
    };
    return "{\"dtype\": \"uint16\", \"dimensions\": [" + dim("t", 0, kTileT, 1) + ", " +
           dim("y", o.height, kTileYX, kTilesPerShardYX) + ", " +
           dim("x", o.width, kTileYX, kTilesPerShardYX) +
           "], \"codec\": {\"name\": \"zstd\", \"level\": 1}, \"staging_bytes\": " +
           std::to_string(staging) + ", \"store\": {\"path\": " + json_string(o.store) +
           ", \"overwrite\": " + (o.overwrite ? "true" : "false") + "}}";
}

// A synthetic sensor: a smooth background, a bright spot drifting across
// the field, and per-pixel noise. The noise comes from a precomputed table
// read at a random offset per frame, so that making a frame costs about as
// much as copying it.
class SyntheticCamera {
public:
    SyntheticCamera(uint64_t width, uint64_t height)
        : w_(width), h_(height), background_(width * height), noise_(2 * width * height) {
        for (uint64_t y = 0; y < h_; ++y)
            for (uint64_t x = 0; x < w_; ++x) {
                double dx = (x + 0.5) / w_ - 0.5, dy = (y + 0.5) / h_ - 0.5;
                double level = 400 + 600 * (1 - 2 * (dx * dx + dy * dy));  // vignetting
                background_[y * w_ + x] = static_cast<uint16_t>(level);
            }
        for (auto& n : noise_) n = static_cast<uint16_t>(next() % 64);
    }

    void fill(std::vector<uint16_t>& px, uint64_t index) {
        const uint16_t* noise = noise_.data() + next() % (w_ * h_);
        for (std::size_t i = 0; i < px.size(); ++i)
            px[i] = static_cast<uint16_t>(background_[i] + noise[i]);
        // A 32 x 32 spot moving diagonally.
        uint64_t cx = (index * 7) % w_, cy = (index * 5) % h_;
        for (uint64_t y = cy; y < std::min(h_, cy + 32); ++y)
            for (uint64_t x = cx; x < std::min(w_, cx + 32); ++x) px[y * w_ + x] += 3000;
        px[0] = static_cast<uint16_t>(index);  // frame counter
    }

private:
    uint32_t next() {  // xorshift32
        rng_ ^= rng_ << 13;
        rng_ ^= rng_ >> 17;
        rng_ ^= rng_ << 5;
        return rng_;
    }
    uint64_t w_, h_;
    std::vector<uint16_t> background_, noise_;
    uint32_t rng_ = 2463534242u;
};

struct Frame {
    uint64_t index = 0;
    std::vector<uint16_t> pixels;
};

// A bounded queue over a fixed pool of frame buffers: the camera takes a
// free buffer, fills it and pushes it; the writer pops it and gives the
// buffer back. No allocation once running.
class FrameQueue {
public:
    FrameQueue(std::size_t frames, std::size_t pixels) {
        for (std::size_t i = 0; i < frames; ++i)
            free_.push_back(Frame{0, std::vector<uint16_t>(pixels)});
    }

    // A free buffer, waiting while none is (sets *waited); nullopt once stopped.
    std::optional<Frame> take_free(bool* waited) {
        std::unique_lock<std::mutex> lock(m_);
        *waited = free_.empty();
        while (free_.empty()) {
            if (g_stop.load()) return std::nullopt;
            free_cv_.wait_for(lock, std::chrono::milliseconds(20));
        }
        Frame f = std::move(free_.front());
        free_.pop_front();
        return f;
    }

    void push(Frame f) {
        {
            std::lock_guard<std::mutex> lock(m_);
            ready_.push_back(std::move(f));
        }
        ready_cv_.notify_one();
    }

    // The next captured frame; nullopt after `timeout` with none, or when the
    // camera is done and every frame has been taken (then *done is set).
    std::optional<Frame> pop(std::chrono::milliseconds timeout, bool* done) {
        std::unique_lock<std::mutex> lock(m_);
        ready_cv_.wait_for(lock, timeout, [&] { return !ready_.empty() || closed_; });
        *done = ready_.empty() && closed_;
        if (ready_.empty()) return std::nullopt;
        Frame f = std::move(ready_.front());
        ready_.pop_front();
        return f;
    }

    void give_back(Frame f) {
        {
            std::lock_guard<std::mutex> lock(m_);
            free_.push_back(std::move(f));
        }
        free_cv_.notify_one();
    }

    void close() {
        {
            std::lock_guard<std::mutex> lock(m_);
            closed_ = true;
        }
        ready_cv_.notify_all();
    }

    std::size_t queued() {
        std::lock_guard<std::mutex> lock(m_);
        return ready_.size();
    }

private:
    std::mutex m_;
    std::condition_variable ready_cv_, free_cv_;
    std::deque<Frame> free_, ready_;
    bool closed_ = false;
};

void camera_loop(const Options& o, FrameQueue& queue, std::atomic<uint64_t>& stalls) {
    SyntheticCamera camera(o.width, o.height);
    const auto period = std::chrono::duration<double>(1.0 / o.fps);
    const auto start = Clock::now();
    for (uint64_t i = 0; (o.frames == 0 || i < o.frames) && !g_stop.load(); ++i) {
        // Wait for frame i's time, in short naps so that a stop is seen soon.
        const auto due =
            start + std::chrono::duration_cast<Clock::duration>(period * static_cast<double>(i));
        for (auto now = Clock::now(); now < due && !g_stop.load(); now = Clock::now())
            std::this_thread::sleep_for(
                std::min<Clock::duration>(due - now, std::chrono::milliseconds(20)));
        if (g_stop.load()) break;
        bool waited = false;
        std::optional<Frame> f = queue.take_free(&waited);
        if (!f) break;
        if (waited) stalls.fetch_add(1);
        f->index = i;
        camera.fill(f->pixels, i);
        queue.push(std::move(*f));
    }
    queue.close();
}

// Joins the camera thread on every way out of main's scope.
struct Joiner {
    std::thread& t;
    ~Joiner() {
        if (t.joinable()) {
            g_stop.store(true);
            t.join();
        }
    }
};

struct Counters {
    uint64_t frames = 0;
    uint64_t busy_retries = 0;
};

// Compression ratio of what has been emitted so far. While the stream runs,
// metrics.bytes_in counts input still in staging memory, not yet compressed,
// so bytes_in / bytes_out overstates it; the input behind the emitted shards
// is known from the layout (one shard row = kTileT frames, all shards of a
// row emitted together). After flush the two agree.
double ratio_so_far(const tz_metrics& m, const Options& o) {
    if (m.bytes_out == 0) return 0.0;
    const uint64_t shard_yx = kTileYX * kTilesPerShardYX;
    const double shards_per_row = static_cast<double>(((o.height + shard_yx - 1) / shard_yx) *
                                                      ((o.width + shard_yx - 1) / shard_yx));
    const double row_bytes = static_cast<double>(kTileT * o.width * o.height * sizeof(uint16_t));
    const double emitted_in =
        std::min(static_cast<double>(m.bytes_in),
                 row_bytes * static_cast<double>(m.shards_emitted) / shards_per_row);
    return emitted_in / static_cast<double>(m.bytes_out);
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse_args(argc, argv);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    try {
        tiledzarr::Stream stream(config_json(o));
        const tz_metrics at_start = stream.metrics();
        std::printf("tiledzarr %s, backend: %s\n", tiledzarr::Stream::version().c_str(),
                    at_start.backend_reason);
        std::printf("acquiring %s frames of %llu x %llu uint16 at %.1f fps into %s "
                    "(Ctrl-C stops)\n",
                    o.frames ? std::to_string(o.frames).c_str() : "unlimited", ull(o.width),
                    ull(o.height), o.fps, o.store.c_str());
        std::fflush(stdout);

        const std::size_t pixels = static_cast<std::size_t>(o.width * o.height);
        const std::size_t frame_bytes = pixels * sizeof(uint16_t);
        FrameQueue queue(kQueueFrames, pixels);
        std::atomic<uint64_t> stalls{0};
        const auto start = Clock::now();
        std::thread camera(camera_loop, std::cref(o), std::ref(queue), std::ref(stalls));
        Joiner joiner{camera};

        Counters c;
        auto next_report = start + std::chrono::seconds(1);
        auto report_if_due = [&] {
            const auto now = Clock::now();
            if (now < next_report) return;
            const tz_metrics m = stream.metrics();
            const double s = std::chrono::duration<double>(now - start).count();
            std::printf("%6.1f s  %8llu frames  %6.3f GB/s  ratio %5.2f  %llu shards  queued %zu  "
                        "busy retries %llu  camera stalls %llu\n",
                        s, ull(c.frames), m.bytes_in / s / 1e9, ratio_so_far(m, o),
                        ull(m.shards_emitted), queue.queued(), ull(c.busy_retries),
                        ull(stalls.load()));
            std::fflush(stdout);
            while (next_report <= now) next_report += std::chrono::seconds(1);
        };
        for (bool done = false; !done;) {
            std::optional<Frame> f = queue.pop(std::chrono::milliseconds(100), &done);
            if (f) {
                // A frame is written whole even after Ctrl-C: the store holds
                // whole frames only.
                const auto* p = reinterpret_cast<const unsigned char*>(f->pixels.data());
                std::size_t left = frame_bytes;
                while (left > 0) {
                    std::size_t n = stream.write(p, left);
                    if (n == 0) {  // busy: staging memory is full
                        ++c.busy_retries;
                        report_if_due();
                        std::this_thread::sleep_for(std::chrono::microseconds(100));
                    }
                    p += n;
                    left -= n;
                }
                ++c.frames;
                queue.give_back(std::move(*f));
            }
            report_if_due();
        }
        const bool interrupted = g_stop.load();
        if (camera.joinable()) camera.join();
        const double capture_seconds = std::chrono::duration<double>(Clock::now() - start).count();

        stream.flush();
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const tz_metrics m = stream.metrics();
        const double ratio =
            m.bytes_out ? static_cast<double>(m.bytes_in) / static_cast<double>(m.bytes_out) : 0.0;
        std::printf("%s: wrote %llu frames (%.3f GB, %.1f frames/s captured)\n",
                    interrupted ? "interrupted" : "done", ull(c.frames), m.bytes_in / 1e9,
                    capture_seconds > 0 ? c.frames / capture_seconds : 0.0);
        std::printf("  %.2f s with the flush: %.3f GB/s, compression ratio %.2f "
                    "(%llu bytes in, %llu out, %llu shards)\n",
                    seconds, m.bytes_in / seconds / 1e9, ratio, ull(m.bytes_in), ull(m.bytes_out),
                    ull(m.shards_emitted));
        std::printf("  %llu busy retries, %llu camera stalls\n", ull(c.busy_retries),
                    ull(stalls.load()));
        std::printf("store: %s, shape [%llu, %llu, %llu] (t, y, x)\n", o.store.c_str(),
                    ull(c.frames), ull(o.height), ull(o.width));
        return 0;
    } catch (const tiledzarr::Error& e) {
        std::fprintf(stderr, "error (%s): %s\n", tz_status_string(e.status()), e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
