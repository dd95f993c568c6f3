// The C++ wrapper (tiledzarr.hpp) against the installed package: a stream
// of two cameras in one store with dropped frames, per-frame metadata and a
// reservation; the struct forms with options and a callback; the memory
// estimate and recovery; and the errors each call throws.
//
//   wrapper STORE_PATH RAW_DIR
//
// RAW_DIR (an existing folder) receives config.json, each camera's frames
// as <i>.raw (a dropped frame as zeros, the fill value) and camera 0's
// frame metadata as 0.frame_metadata.json, for
// tests/readback/check_arrays.py to compare the store with. Exits 1 with a
// message at the first check that fails.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tiledzarr.hpp"

namespace {

constexpr std::size_t kHeight = 64, kWidth = 48, kFrames = 8;
constexpr std::size_t kFramePixels = kHeight * kWidth;
constexpr std::size_t kFrameBytes = kFramePixels * sizeof(uint16_t);

struct Failed {
    std::string what;
};

void check(bool ok, const std::string& what) {
    if (!ok) throw Failed{what};
}

// Runs `call`, which must throw tiledzarr::Error with `status` and a message
// holding `mentions`.
template <typename Call>
void expect_error(const char* what, int32_t status, const std::string& mentions, Call call) {
    try {
        call();
    } catch (const tiledzarr::Error& e) {
        check(e.status() == status, std::string(what) + ": status " + std::to_string(e.status()) +
                                        ", expected " + std::to_string(status) + " (" + e.what() +
                                        ")");
        check(std::string(e.what()).find(mentions) != std::string::npos,
              std::string(what) + ": the message does not mention \"" + mentions + "\": " + e.what());
        return;
    }
    throw Failed{std::string(what) + ": no error"};
}

// Camera `cam`'s frame `t`: a noisy gradient of its own, never zero.
std::vector<uint16_t> frame(unsigned cam, unsigned t) {
    std::vector<uint16_t> f(kFramePixels);
    uint32_t rng = 1 + 7919u * cam + 104729u * t;
    for (std::size_t i = 0; i < kFramePixels; ++i) {
        rng = rng * 1664525u + 1013904223u;
        f[i] = static_cast<uint16_t>(100 + 700 * cam + i % kWidth + i / kWidth + 5 * t +
                                     ((rng >> 24) & 15));
    }
    return f;
}

void write_file(const std::string& path, const void* data, std::size_t n) {
    FILE* f = std::fopen(path.c_str(), "wb");
    check(f != nullptr, "cannot write " + path);
    bool ok = std::fwrite(data, 1, n, f) == n;
    ok = std::fclose(f) == 0 && ok;
    check(ok, "cannot write " + path);
}

std::string config_json(const std::string& store) {
    std::string dims =
        R"("dimensions": [{"name": "t", "size": 0, "tile": 2, "tiles_per_shard": 2},)"
        R"( {"name": "y", "size": 64, "tile": 32, "tiles_per_shard": 2},)"
        R"( {"name": "x", "size": 48, "tile": 16, "tiles_per_shard": 3}])";
    return R"({"arrays": [{"key": "cam0", "dtype": "uint16", )" + dims +
           R"(, "frame_metadata": {"max_bytes": 128}},)"
           R"( {"key": "cam1", "dtype": "uint16", )" +
           dims + R"(}], "collection": "bioformats2raw", "max_latency_ms": 100,)"
                  R"( "store": {"path": ")" +
           store + R"(", "overwrite": true}})";
}

// Two cameras into one store through the JSON form.
void two_cameras(const std::string& store, const std::string& raw_dir) {
    const std::string config = config_json(store);
    tz_memory_plan plan = tiledzarr::Stream::estimate_memory(config);
    check(plan.host_bytes + plan.pinned_bytes > 0, "estimate_memory: no memory planned");
    expect_error("estimate_memory of bad JSON", TZ_ERR_CONFIG, "",
                 [] { tiledzarr::Stream::estimate_memory("{\"arrays\": 3}"); });

    tiledzarr::Stream s(config);
    check(s.array_count() == 2, "array_count is not 2");
    const uint32_t cam0 = s.array_index("cam0"), cam1 = s.array_index("cam1");
    check(cam0 == 0 && cam1 == 1, "array_index: cam0 and cam1 are not 0 and 1");
    expect_error("array_index of a missing key", TZ_ERR_INVALID_ARGUMENT, "cam1",
                 [&] { s.array_index("cam7"); });
    std::vector<uint16_t> f0 = frame(0, 0);
    expect_error("write_to an array that does not exist", TZ_ERR_INVALID_ARGUMENT, "",
                 [&] { s.write_to(2, f0.data(), kFrameBytes); });

    std::vector<uint16_t> raw0, raw1;
    // Camera 0's frame metadata as check_arrays.py expects it: null where
    // none was given (frame 6).
    std::vector<std::string> metadata0(kFrames, "null");
    auto give_metadata = [&](unsigned t) {
        metadata0[t] = "{\"t\": " + std::to_string(t) + ", \"dropped\": " +
                       (t == 3 || t == 4 ? "true" : "false") + "}";
        s.frame_metadata(cam0, t, metadata0[t]);
    };
    for (unsigned t = 0; t < kFrames; ++t) {
        // Camera 0: frames 3 and 4 dropped, the others written without
        // blocking (0: busy, try again); each frame's metadata right after
        // it, dropped frames' too, frame 6's not at all.
        if (t == 3) {
            expect_error("skip of part of a frame", TZ_ERR_INVALID_ARGUMENT, "",
                         [&] { s.skip(cam0, kFrameBytes / 2); });
            std::size_t skipped = 0;
            while ((skipped += s.skip(cam0, 2 * kFrameBytes - skipped)) < 2 * kFrameBytes)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            raw0.resize(raw0.size() + 2 * kFramePixels, 0);
            give_metadata(3);
            give_metadata(4);
        } else if (t != 4) {
            std::vector<uint16_t> f = frame(0, t);
            const uint8_t* p = reinterpret_cast<const uint8_t*>(f.data());
            std::size_t taken = 0;
            while ((taken += s.write_to(cam0, p + taken, kFrameBytes - taken)) < kFrameBytes)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            raw0.insert(raw0.end(), f.begin(), f.end());
            if (t != 6) give_metadata(t);
        }

        // Camera 1: odd frames through a reservation (every other one a
        // scoped one), even ones copied.
        std::vector<uint16_t> f = frame(1, t);
        if (t % 4 == 3) {
            // A scoped reservation left by an exception is given up: the
            // stream takes writes again, and nothing of it is kept.
            try {
                tiledzarr::Stream::ScopedReservation lost;
                while (!(lost = s.reserve_scoped(cam1)))
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                std::memset(lost.data(), 0xff, kFrameBytes);
                throw std::runtime_error("the camera failed");
            } catch (const std::runtime_error& e) {
                check(std::string(e.what()) == "the camera failed", e.what());
            }
            tiledzarr::Stream::ScopedReservation r;
            while (!(r = s.reserve_scoped(cam1)))
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            std::memcpy(r.data(), f.data(), kFrameBytes);
            expect_error("commit past the scoped reservation", TZ_ERR_INVALID_ARGUMENT, "",
                         [&] { r.commit(r.size() + 1); });
            tiledzarr::Stream::ScopedReservation moved = std::move(r);
            check(!r && moved, "a moved scoped reservation");
            moved.commit(kFrameBytes);  // it stayed open: commit again
            expect_error("commit of an ended scoped reservation", TZ_ERR_INVALID_ARGUMENT,
                         "already ended", [&] { moved.commit(kFrameBytes); });
        } else if (t % 2) {
            tiledzarr::Stream::Reservation r;
            while (!(r = s.reserve(cam1))) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            check(r.size >= kFrameBytes && r.size % kFrameBytes == 0,
                  "a reservation of " + std::to_string(r.size) + " bytes, not whole frames");
            std::memcpy(r.data, f.data(), kFrameBytes);
            expect_error("write_to while a reservation is open", TZ_ERR_INVALID_ARGUMENT, "",
                         [&] { s.write_to(cam0, f0.data(), kFrameBytes); });
            expect_error("commit past the reservation", TZ_ERR_INVALID_ARGUMENT, "",
                         [&] { s.commit(r.size + 1); });
            s.commit(kFrameBytes);  // the reservation stayed: commit again
        } else {
            s.write_all_to(cam1, f.data(), kFrameBytes, std::chrono::seconds(30));
        }
        raw1.insert(raw1.end(), f.begin(), f.end());
    }
    std::string metadata_list = "[";
    for (unsigned t = 0; t < kFrames; ++t) metadata_list += (t ? ", " : "") + metadata0[t];
    metadata_list += "]\n";
    expect_error("frame_metadata of text that is no JSON object", TZ_ERR_INVALID_ARGUMENT, "",
                 [&] { s.frame_metadata(cam0, 7, "[1, 2]"); });
    expect_error("frame_metadata of an array without it", TZ_ERR_INVALID_ARGUMENT, "",
                 [&] { s.frame_metadata(cam1, 0, "{}"); });
    expect_error("frame_metadata of a frame not written", TZ_ERR_INVALID_ARGUMENT, "",
                 [&] { s.frame_metadata(cam0, kFrames, "{}"); });
    s.flush();
    tz_metrics m = s.metrics();
    check(m.bytes_in == 2 * kFrames * kFrameBytes - 2 * kFrameBytes,
          "metrics: " + std::to_string(m.bytes_in) + " bytes in");
    check(s.upload_metrics().objects_uploaded == 0, "upload_metrics of a folder store");
    tz_staging_metrics staging = s.staging_metrics();
    check(staging.staging_bytes > 0 && staging.staging_peak_bytes >= staging.staging_bytes,
          "staging_metrics: " + std::to_string(staging.staging_bytes) + " held, " +
              std::to_string(staging.staging_peak_bytes) + " at most");
    expect_error("write_to after flush", TZ_ERR_FINISHED, "",
                 [&] { s.write_to(cam1, f0.data(), kFrameBytes); });

    write_file(raw_dir + "/config.json", config.data(), config.size());
    write_file(raw_dir + "/0.raw", raw0.data(), raw0.size() * sizeof(uint16_t));
    write_file(raw_dir + "/1.raw", raw1.data(), raw1.size() * sizeof(uint16_t));
    write_file(raw_dir + "/0.frame_metadata.json", metadata_list.data(), metadata_list.size());

    // A flushed store needs no repair; a folder that is no store is refused.
    tz_recovery r = tiledzarr::recover(store + "/cam1/0");
    check(r.partial_files_removed == 0 && r.planes_before == kFrames &&
              r.planes_after == kFrames,
          "recover: " + std::to_string(r.planes_before) + " -> " + std::to_string(r.planes_after) +
              " planes, " + std::to_string(r.partial_files_removed) + " partial files");
    expect_error("recover of a folder without zarr.json", TZ_ERR_IO, "zarr.json",
                 [&] { tiledzarr::recover(raw_dir); });
    // With the disk's bound (tz_recover_with): the same, and a bound out of
    // range refused naming it.
    r = tiledzarr::recover(store + "/cam1/0", std::chrono::seconds(5));
    check(r.planes_before == kFrames && r.planes_after == kFrames, "recover with a bound");
    expect_error("recover with a bound past an hour", TZ_ERR_CONFIG, "store_timeout_s",
                 [&] { tiledzarr::recover(store + "/cam1/0", std::chrono::hours(2)); });
}

// Two arrays from structs, the shards to a callback, with options; then
// one array with options and a store beside `store`.
void structs_and_callback(const std::string& store) {
    tz_dimension dims[3] = {{"t", 0, 2, 1}, {"y", kHeight, 32, 2}, {"x", kWidth, 16, 3}};
    tz_config config;
    tz_config_init(&config);
    config.dtype = TZ_DTYPE_UINT16;
    config.rank = 3;
    config.dimensions = dims;
    tz_config second = config;
    second.level = 3;
    std::vector<tz_array> arrays = {{"a", &config, nullptr}, {"b/cam", &second, nullptr}};
    tz_options options;
    tz_options_init(&options);
    options.max_latency_ms = 50;

    // Shards per array, and those that were not what a shard should be
    // (counted here: the callback runs on a library thread).
    std::mutex mutex;
    std::map<uint32_t, std::size_t> shards;
    std::size_t malformed = 0;
    auto count = [&](const tiledzarr::Shard& shard) {
        std::lock_guard<std::mutex> lock(mutex);
        ++shards[shard.array];
        if (shard.rank != 3 || shard.data_bytes == 0 || shard.index_bytes == 0) ++malformed;
    };
    {
        tiledzarr::Stream s(arrays, &options, count);
        check(s.array_index("b/cam") == 1, "array_index(\"b/cam\") is not 1");
        for (unsigned t = 0; t < 4; ++t) {
            for (uint32_t a = 0; a < 2; ++a) {
                std::vector<uint16_t> f = frame(a, t);
                s.write_all_to(a, f.data(), kFrameBytes);
            }
        }
        s.flush();
    }
    // 4 frames, tiles of 2 frames, one per shard: 2 rows of 1 shard each.
    check(malformed == 0, std::to_string(malformed) + " shards without data or index");
    check(shards.size() == 2 && shards[0] == 2 && shards[1] == 2,
          "the callback saw " + std::to_string(shards[0]) + " and " + std::to_string(shards[1]) +
              " shards of arrays 0 and 1, expected 2 and 2");

    // A store's bound and its page cache without a store are refused,
    // naming the field; with one they are taken.
    options.store_timeout_s = 5;
    expect_error("store_timeout_s without a store", TZ_ERR_CONFIG, "options.store_timeout_s",
                 [&] { tiledzarr::Stream::with_options(config, nullptr, options, count); });
    options.store_timeout_s = 0;
    options.store_page_cache = TZ_PAGE_CACHE_THROUGH;
    expect_error("store_page_cache without a store", TZ_ERR_CONFIG, "options.store_page_cache",
                 [&] { tiledzarr::Stream::with_options(config, nullptr, options, count); });
    options.store_timeout_s = 5;
    const std::string path = store + "-options.zarr";
    config.store_path = path.c_str();
    config.overwrite = 1;
    tiledzarr::Stream s = tiledzarr::Stream::with_options(config, nullptr, options);
    for (unsigned t = 0; t < 4; ++t) {
        std::vector<uint16_t> f = frame(0, t);
        s.write_all(f.data(), kFrameBytes);
    }
    s.flush();
    check(s.metrics().shards_emitted == 2,
          "with_options: " + std::to_string(s.metrics().shards_emitted) + " shards, expected 2");

    // A bounded array of 3 frames: write_all of 2 more after 2 takes the
    // one that fits, then throws TZ_ERR_OVERFLOW (not TimeoutError).
    dims[0].size = 3;
    const std::string bounded_path = store + "-bounded.zarr";
    config.store_path = bounded_path.c_str();
    tiledzarr::Stream bounded(config);
    std::vector<uint16_t> two = frame(0, 0);
    two.insert(two.end(), two.begin(), two.end());
    bounded.write_all(two.data(), 2 * kFrameBytes);
    try {
        bounded.write_all(two.data(), 2 * kFrameBytes, std::chrono::seconds(30));
        throw Failed{"write_all past a bounded array's end: no error"};
    } catch (const tiledzarr::TimeoutError& e) {
        throw Failed{std::string("write_all past the end: TimeoutError, not overflow: ") + e.what()};
    } catch (const tiledzarr::Error& e) {
        check(e.status() == TZ_ERR_OVERFLOW,
              std::string("write_all past the end: ") + e.what());
    }
    bounded.flush();
    check(bounded.metrics().bytes_in == 3 * kFrameBytes,
          "the bounded array took " + std::to_string(bounded.metrics().bytes_in) + " bytes");
    expect_error("no array at all", TZ_ERR_INVALID_ARGUMENT, "0 arrays",
                 [&] { tiledzarr::Stream s(std::vector<tz_array>{}, nullptr, count); });
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s STORE_PATH RAW_DIR\n", argv[0]);
        return 2;
    }
    try {
        two_cameras(argv[1], argv[2]);
        structs_and_callback(argv[1]);
        tiledzarr::release_cached_memory();
    } catch (const Failed& f) {
        std::fprintf(stderr, "wrapper: FAILED: %s\n", f.what.c_str());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "wrapper: FAILED: unexpected exception: %s\n", e.what());
        return 1;
    }
    std::printf("wrapper: every check passed (%s)\n", tiledzarr::Stream::version().c_str());
    return 0;
}
