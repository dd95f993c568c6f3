/*
 * Stream synthetic uint16 frames through a shard callback that writes the
 * Zarr v3 store itself: the library tiles, compresses and indexes; this
 * program decides where each shard goes.
 *
 *   callback_sink STORE_PATH [RAW_COPY_PATH]
 *
 * The stream is configured from JSON without a "store", so the callback is
 * the only sink. For every shard it writes <STORE_PATH>/c/<i0>/<i1>/<i2>:
 * the chunks, then the index (the default "index_location": "end"), under a
 * temporary name renamed into place. zarr.json is written here too, with
 * the same content the library's own store writes.
 *
 * The array is bounded, 37 x 300 x 260 uint16, with tiles 16 x 64 x 64 and
 * 2 x 2 x 2 tiles per shard (shards of 32 x 128 x 128), so every dimension
 * ends in a partial shard. STORE_PATH must not exist, or be an empty folder.
 * With RAW_COPY_PATH the frames are also written there as raw bytes, so a
 * reader can compare the store with its input:
 *
 *   check_store.py --store STORE_PATH --raw RAW_COPY_PATH --dtype uint16 --shape 37,300,260
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#ifdef _WIN32
#include <direct.h>
#include <windows.h>
#endif

#include "tiledzarr.h"

/* The two calls that differ on Windows: mkdir takes no mode there, and
 * rename does not replace an existing file (zarr.json is rewritten). */
#ifdef _WIN32
#define make_folder(path) _mkdir(path)
static int replace_file(const char *from, const char *to) {
    return MoveFileExA(from, to, MOVEFILE_REPLACE_EXISTING) ? 0 : -1;
}
#else
#define make_folder(path) mkdir(path, 0777)
static int replace_file(const char *from, const char *to) { return rename(from, to); }
#endif

#define FRAMES 37
#define HEIGHT 300
#define WIDTH 260
#define RANK 3

static const uint64_t SHAPE[RANK] = {FRAMES, HEIGHT, WIDTH};
static const uint64_t TILE[RANK] = {16, 64, 64};
static const uint64_t TILES_PER_SHARD[RANK] = {2, 2, 2};

/* What the callback needs, and what it reports back. The callback runs on a
 * library thread; main reads the results only after tz_flush or tz_destroy,
 * which wait for that thread. */
typedef struct sink_ctx {
    const char *root;
    uint64_t shards;
    uint64_t bytes; /* data + index, as counted by tz_metrics.bytes_out */
    char error[8192];
} sink_ctx;

/* crc32c (Castagnoli, reflected polynomial 0x82F63B78): the checksum that
 * ends every shard index. Bitwise, which is plenty for 128 bytes. */
static uint32_t crc32c(const uint8_t *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

static uint64_t load_u64_le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

static uint32_t load_u32_le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The index is chunks-per-shard (offset, nbytes) pairs of little-endian
 * u64, then a crc32c of those pairs. Offsets count from the start of the
 * shard file; with the index at the end the data starts at 0. Chunks outside
 * the array (edge shards) are (2^64-1, 2^64-1). */
static int check_index(const tz_shard *shard, char *why, size_t why_len) {
    size_t chunks = 1;
    for (int d = 0; d < RANK; ++d) chunks *= (size_t)TILES_PER_SHARD[d];
    if (shard->rank != RANK || shard->index_bytes != 16 * chunks + 4) {
        snprintf(why, why_len, "unexpected shard: rank %u, index of %zu bytes", shard->rank,
                 shard->index_bytes);
        return -1;
    }
    uint32_t want = load_u32_le(shard->index + 16 * chunks);
    uint32_t got = crc32c(shard->index, 16 * chunks);
    if (want != got) {
        snprintf(why, why_len, "index crc32c 0x%08x, computed 0x%08x", (unsigned)want,
                 (unsigned)got);
        return -1;
    }
    for (size_t c = 0; c < chunks; ++c) {
        uint64_t off = load_u64_le(shard->index + 16 * c);
        uint64_t len = load_u64_le(shard->index + 16 * c + 8);
        if (off == UINT64_MAX && len == UINT64_MAX) continue; /* empty chunk */
        if (off > shard->data_bytes || len > shard->data_bytes - off) {
            snprintf(why, why_len, "chunk %zu at [%llu, +%llu) is outside the %zu data bytes", c,
                     (unsigned long long)off, (unsigned long long)len, shard->data_bytes);
            return -1;
        }
    }
    return 0;
}

static int make_dir(const char *path) {
    return make_folder(path) == 0 || errno == EEXIST ? 0 : -1;
}

/* Writes the parts to path through "<path>.partial", renamed into place, so
 * a reader never sees a half-written file. */
static int write_file(const char *path, const void *a, size_t na, const void *b, size_t nb,
                      char *why, size_t why_len) {
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.partial", path) >= sizeof tmp) {
        snprintf(why, why_len, "%s: path too long", path);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(why, why_len, "creating %s: %s", tmp, strerror(errno));
        return -1;
    }
    int ok = fwrite(a, 1, na, f) == na && (nb == 0 || fwrite(b, 1, nb, f) == nb);
    int err = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok) {
        snprintf(why, why_len, "writing %s: %s", tmp, strerror(err));
        remove(tmp);
        return -1;
    }
    if (replace_file(tmp, path) != 0) {
        snprintf(why, why_len, "renaming %s into place: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}

/* The tz_shard_sink_fn: called on a library thread, one shard at a time.
 * shard->data and shard->index are only valid during the call. A non-zero
 * return poisons the stream (tz_write/tz_flush then fail with TZ_ERR_SINK). */
static int32_t write_shard(void *user_data, const tz_shard *shard) {
    sink_ctx *ctx = user_data;
    if (check_index(shard, ctx->error, sizeof ctx->error) != 0) return 1;

    /* <root>/c/<i0>/<i1>/<i2>: the default chunk key encoding with "/". */
    char path[4096];
    size_t len = (size_t)snprintf(path, sizeof path, "%s/c", ctx->root);
    for (uint32_t d = 0; d < shard->rank && len < sizeof path; ++d) {
        if (make_dir(path) != 0) {
            snprintf(ctx->error, sizeof ctx->error, "creating %s: %s", path, strerror(errno));
            return 1;
        }
        len += (size_t)snprintf(path + len, sizeof path - len, "/%llu",
                                (unsigned long long)shard->coord[d]);
    }
    if (len >= sizeof path) {
        snprintf(ctx->error, sizeof ctx->error, "shard path under %s too long", ctx->root);
        return 1;
    }
    if (write_file(path, shard->data, shard->data_bytes, shard->index, shard->index_bytes,
                   ctx->error, sizeof ctx->error) != 0)
        return 1;
    ctx->shards += 1;
    ctx->bytes += shard->data_bytes + shard->index_bytes;
    return 0;
}

/* zarr.json, as the library's filesystem store writes it for this config:
 * the chunk grid is the shard shape (tile x tiles per shard), the sharding
 * codec's chunk_shape is the tile. */
static int write_metadata(const char *root, char *why, size_t why_len) {
    uint64_t shard[RANK];
    for (int d = 0; d < RANK; ++d) shard[d] = TILE[d] * TILES_PER_SHARD[d];
    char doc[2048];
    int n = snprintf(
        doc, sizeof doc,
        "{\n"
        "  \"zarr_format\": 3,\n"
        "  \"node_type\": \"array\",\n"
        "  \"shape\": [%llu, %llu, %llu],\n"
        "  \"data_type\": \"uint16\",\n"
        "  \"chunk_grid\": {\"name\": \"regular\","
        " \"configuration\": {\"chunk_shape\": [%llu, %llu, %llu]}},\n"
        "  \"chunk_key_encoding\": {\"name\": \"default\","
        " \"configuration\": {\"separator\": \"/\"}},\n"
        "  \"fill_value\": 0,\n"
        "  \"codecs\": [{\n"
        "    \"name\": \"sharding_indexed\",\n"
        "    \"configuration\": {\n"
        "      \"chunk_shape\": [%llu, %llu, %llu],\n"
        "      \"codecs\": [\n"
        "        {\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}},\n"
        "        {\"name\": \"zstd\", \"configuration\": {\"level\": 1, \"checksum\": false}}\n"
        "      ],\n"
        "      \"index_codecs\": [\n"
        "        {\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}},\n"
        "        {\"name\": \"crc32c\"}\n"
        "      ],\n"
        "      \"index_location\": \"end\"\n"
        "    }\n"
        "  }],\n"
        "  \"attributes\": {},\n"
        "  \"dimension_names\": [\"t\", \"y\", \"x\"]\n"
        "}\n",
        (unsigned long long)SHAPE[0], (unsigned long long)SHAPE[1], (unsigned long long)SHAPE[2],
        (unsigned long long)shard[0], (unsigned long long)shard[1], (unsigned long long)shard[2],
        (unsigned long long)TILE[0], (unsigned long long)TILE[1], (unsigned long long)TILE[2]);
    if (n < 0 || (size_t)n >= sizeof doc) {
        snprintf(why, why_len, "zarr.json does not fit its buffer");
        return -1;
    }
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/zarr.json", root) >= sizeof path) {
        snprintf(why, why_len, "%s: path too long", root);
        return -1;
    }
    return write_file(path, doc, (size_t)n, NULL, 0, why, why_len);
}

/* Creates the store folder: it must not exist, or be an empty folder. */
static int create_root(const char *root) {
    if (make_folder(root) == 0) return 0;
    if (errno != EEXIST) {
        fprintf(stderr, "creating %s: %s\n", root, strerror(errno));
        return -1;
    }
    DIR *dir = opendir(root);
    if (!dir) {
        fprintf(stderr, "%s exists and is not a folder\n", root);
        return -1;
    }
    int empty = 1;
    for (struct dirent *e; empty && (e = readdir(dir)) != NULL;)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(dir);
    if (!empty) {
        fprintf(stderr, "%s exists and is not empty: remove it or choose another path\n", root);
        return -1;
    }
    return 0;
}

/* A noisy gradient: compressible, never constant. */
static void make_frame(uint16_t *px, unsigned t, uint32_t *rng) {
    for (unsigned y = 0; y < HEIGHT; ++y) {
        for (unsigned x = 0; x < WIDTH; ++x) {
            *rng = *rng * 1664525u + 1013904223u;
            px[y * WIDTH + x] = (uint16_t)(100 + x + y + 7 * t + ((*rng >> 24) & 15));
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s STORE_PATH [RAW_COPY_PATH]\n", argv[0]);
        return 2;
    }
    sink_ctx ctx = {argv[1], 0, 0, ""};
    if (create_root(ctx.root) != 0) return 1;

    /* No "store": the callback is the sink. */
    char config[1024];
    snprintf(config, sizeof config,
             "{\"dtype\": \"uint16\","
             " \"dimensions\": ["
             "  {\"name\": \"t\", \"size\": %llu, \"tile\": %llu, \"tiles_per_shard\": %llu},"
             "  {\"name\": \"y\", \"size\": %llu, \"tile\": %llu, \"tiles_per_shard\": %llu},"
             "  {\"name\": \"x\", \"size\": %llu, \"tile\": %llu, \"tiles_per_shard\": %llu}],"
             " \"codec\": {\"name\": \"zstd\", \"level\": 1},"
             " \"index_location\": \"end\"}",
             (unsigned long long)SHAPE[0], (unsigned long long)TILE[0],
             (unsigned long long)TILES_PER_SHARD[0], (unsigned long long)SHAPE[1],
             (unsigned long long)TILE[1], (unsigned long long)TILES_PER_SHARD[1],
             (unsigned long long)SHAPE[2], (unsigned long long)TILE[2],
             (unsigned long long)TILES_PER_SHARD[2]);

    tz_stream *s = NULL;
    if (tz_create_json(config, write_shard, &ctx, &s) != TZ_OK) {
        fprintf(stderr, "tz_create_json: %s\n", tz_last_error());
        return 1;
    }
    char why[512];
    if (write_metadata(ctx.root, why, sizeof why) != 0) {
        fprintf(stderr, "%s\n", why);
        tz_destroy(s);
        return 1;
    }

    FILE *raw = NULL;
    if (argc > 2 && !(raw = fopen(argv[2], "wb"))) {
        fprintf(stderr, "opening %s: %s\n", argv[2], strerror(errno));
        tz_destroy(s);
        return 1;
    }
    const size_t frame_bytes = sizeof(uint16_t) * HEIGHT * WIDTH;
    uint16_t *frame = malloc(frame_bytes);
    if (!frame) {
        fprintf(stderr, "out of memory\n");
        if (raw) fclose(raw);
        tz_destroy(s);
        return 1;
    }
    int failed = 0;
    uint32_t rng = 1;
    for (unsigned t = 0; t < FRAMES && !failed; ++t) {
        make_frame(frame, t, &rng);
        if (raw && fwrite(frame, 1, frame_bytes, raw) != frame_bytes) {
            fprintf(stderr, "writing %s: %s\n", argv[2], strerror(errno));
            failed = 1;
            break;
        }
        const uint8_t *p = (const uint8_t *)frame;
        size_t left = frame_bytes;
        while (left > 0) {
            int64_t n = tz_write(s, p, left);
            if (n < 0) {
                fprintf(stderr, "tz_write: %s: %s\n", tz_status_string((int32_t)-n),
                        tz_stream_last_error(s));
                failed = 1;
                break;
            }
            if (n == 0) { /* busy: staging memory is full, try again shortly */
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
            p += n;
            left -= (size_t)n;
        }
    }
    free(frame);
    if (raw && fclose(raw) != 0 && !failed) {
        fprintf(stderr, "closing %s: %s\n", argv[2], strerror(errno));
        failed = 1;
    }
    if (!failed) {
        int32_t rc = tz_flush(s);
        if (rc != TZ_OK) {
            fprintf(stderr, "tz_flush: %s: %s\n", tz_status_string(rc), tz_stream_last_error(s));
            failed = 1;
        }
    }
    tz_metrics m;
    int have_metrics = !failed && tz_get_metrics(s, &m) == TZ_OK;
    tz_destroy(s); /* waits for the library's threads: ctx is ours again */
    if (ctx.error[0]) fprintf(stderr, "shard callback: %s\n", ctx.error);
    if (failed) return 1;

    if (!have_metrics || m.shards_emitted != ctx.shards || m.bytes_out != ctx.bytes) {
        fprintf(stderr, "the callback saw %llu shards, %llu bytes; the metrics say %llu, %llu\n",
                (unsigned long long)ctx.shards, (unsigned long long)ctx.bytes,
                have_metrics ? (unsigned long long)m.shards_emitted : 0ull,
                have_metrics ? (unsigned long long)m.bytes_out : 0ull);
        return 1;
    }
    printf("tiledzarr %s: %llu bytes in, %llu shards (%llu bytes) written by the callback to %s\n",
           tz_version(), (unsigned long long)m.bytes_in, (unsigned long long)ctx.shards,
           (unsigned long long)ctx.bytes, ctx.root);
    return 0;
}
