/*
 * Stream synthetic uint16 frames into a Zarr v3 store with the library's
 * own filesystem sink, configured from JSON (no callback needed).
 *
 *   stream_to_store STORE_PATH [RAW_COPY_PATH]
 *
 * With RAW_COPY_PATH, the frames are also written there as raw bytes so that
 * a reader can compare the store with its input.
 *
 * Every other frame is made straight in the library's staging memory
 * (tz_reserve / tz_commit, as a camera SDK's DMA would deliver it), the
 * others are copied in by tz_write.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiledzarr.h"

#define FRAMES 40
#define HEIGHT 300
#define WIDTH 260

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
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE_PATH [RAW_COPY_PATH]\n", argv[0]);
        return 2;
    }
    char config[1024];
    snprintf(config, sizeof config,
             "{\"dtype\": \"uint16\","
             " \"dimensions\": ["
             "  {\"name\": \"t\", \"size\": 0,   \"tile\": 16, \"tiles_per_shard\": 2},"
             "  {\"name\": \"y\", \"size\": %d, \"tile\": 64, \"tiles_per_shard\": 2},"
             "  {\"name\": \"x\", \"size\": %d, \"tile\": 64, \"tiles_per_shard\": 2}],"
             " \"codec\": {\"name\": \"zstd\", \"level\": 1},"
             " \"store\": {\"path\": \"%s\", \"overwrite\": true}}",
             HEIGHT, WIDTH, argv[1]);

    tz_stream *s = NULL;
    if (tz_create_json(config, NULL, NULL, &s) != TZ_OK) {
        fprintf(stderr, "tz_create_json: %s\n", tz_last_error());
        return 1;
    }
    FILE *raw = argc > 2 ? fopen(argv[2], "wb") : NULL;
    uint16_t *frame = malloc(sizeof(uint16_t) * HEIGHT * WIDTH);
    uint32_t rng = 1;
    const size_t frame_bytes = sizeof(uint16_t) * HEIGHT * WIDTH;
    for (unsigned t = 0; t < FRAMES; ++t) {
        if (t % 2 == 1) {
            void *dst = NULL;
            size_t room = 0;
            int32_t rc = tz_reserve(s, &dst, &room);
            if (rc != TZ_OK) {
                fprintf(stderr, "tz_reserve: %s: %s\n", tz_status_string(rc),
                        tz_stream_last_error(s));
                tz_destroy(s);
                return 1;
            }
            if (room >= frame_bytes) {
                /* Whole frames so far: the reservation starts on a frame
                 * boundary, aligned for uint16_t. */
                make_frame((uint16_t *)dst, t, &rng);
                if (raw) fwrite(dst, 1, frame_bytes, raw);
                if (tz_commit(s, frame_bytes) != TZ_OK) {
                    fprintf(stderr, "tz_commit: %s\n", tz_stream_last_error(s));
                    tz_destroy(s);
                    return 1;
                }
                continue;
            }
            /* Busy, or the end of a staging buffer: copy this one in. */
            if (room > 0 && tz_commit(s, 0) != TZ_OK) {
                fprintf(stderr, "tz_commit: %s\n", tz_stream_last_error(s));
                tz_destroy(s);
                return 1;
            }
        }
        make_frame(frame, t, &rng);
        if (raw) fwrite(frame, sizeof(uint16_t), HEIGHT * WIDTH, raw);
        const uint8_t *p = (const uint8_t *)frame;
        size_t left = frame_bytes;
        while (left > 0) {
            int64_t n = tz_write(s, p, left);
            if (n < 0) {
                fprintf(stderr, "tz_write: %s: %s\n", tz_status_string((int32_t)-n),
                        tz_stream_last_error(s));
                tz_destroy(s);
                return 1;
            }
            if (n == 0) { /* busy: a camera loop would do other work here */
                struct timespec ts = {0, 100000};
                nanosleep(&ts, NULL);
            }
            p += n;
            left -= (size_t)n;
        }
    }
    free(frame);
    if (raw) fclose(raw);
    if (tz_flush(s) != TZ_OK) {
        fprintf(stderr, "tz_flush: %s\n", tz_stream_last_error(s));
        tz_destroy(s);
        return 1;
    }
    tz_metrics m;
    tz_get_metrics(s, &m);
    printf("tiledzarr %s: %llu bytes in, %llu bytes out in %llu shards (backend: %s)\n",
           tz_version(), (unsigned long long)m.bytes_in, (unsigned long long)m.bytes_out,
           (unsigned long long)m.shards_emitted, m.backend_reason);
    tz_destroy(s);
    return 0;
}
