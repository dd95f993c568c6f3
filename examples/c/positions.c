/*
 * A time-lapse of several stage positions into one store: one OME-Zarr
 * image per position, in a bioformats2raw collection (the layout
 * ome-writers writes), all through one stream.
 *
 *   positions STORE_PATH [RAW_DIR]
 *
 * Each time point visits every position in turn and takes both channels
 * there: one frame (channels x height x width) per visit, handed to that
 * position's array with tz_write_to. With RAW_DIR (an existing folder), the
 * configuration is also written to RAW_DIR/config.json and each position's
 * frames to RAW_DIR/<i>.raw, so that a reader can compare the store with
 * its input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiledzarr.h"

#define POSITIONS 3
#define TIME_POINTS 6
#define CHANNELS 2
#define HEIGHT 128
#define WIDTH 96
#define FRAME_PIXELS (CHANNELS * HEIGHT * WIDTH)
#define FRAME_BYTES (sizeof(uint16_t) * FRAME_PIXELS)

/* Images position `pos` at time point `t` into `frame`: a noisy gradient
 * of its own per position and channel; appends it to the raw copy when
 * there is one. */
static void snap(uint16_t *frame, unsigned t, uint32_t pos, FILE *raw) {
    uint32_t rng = 1 + 7919u * pos + 104729u * t;
    for (unsigned i = 0; i < FRAME_PIXELS; ++i) {
        unsigned c = i / (HEIGHT * WIDTH), y = (i / WIDTH) % HEIGHT, x = i % WIDTH;
        rng = rng * 1664525u + 1013904223u;
        frame[i] = (uint16_t)(100 + 500 * pos + 200 * c + x + y + 3 * t + ((rng >> 24) & 15));
    }
    if (raw) fwrite(frame, 1, FRAME_BYTES, raw);
}

static int fail(tz_stream *s, const char *what, int32_t status) {
    fprintf(stderr, "%s: %s: %s\n", what, tz_status_string(status),
            s ? tz_stream_last_error(s) : tz_last_error());
    tz_destroy(s);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE_PATH [RAW_DIR]\n", argv[0]);
        return 2;
    }
    if (strlen(argv[1]) > 1024) {
        fprintf(stderr, "the store path is too long\n");
        return 2;
    }
    /* One entry of "arrays" per position, its key the image's folder. */
    char config[4096];
    int at = snprintf(config, sizeof config, "{\"arrays\": [");
    for (unsigned pos = 0; pos < POSITIONS; ++pos) {
        at += snprintf(config + at, sizeof config - (size_t)at,
                       "%s{\"key\": \"Pos%u\", \"dtype\": \"uint16\", \"dimensions\": ["
                       " {\"name\": \"t\", \"size\": 0, \"tile\": 2, \"tiles_per_shard\": 2},"
                       " {\"name\": \"c\", \"size\": %d, \"tile\": 1, \"tiles_per_shard\": %d},"
                       " {\"name\": \"y\", \"size\": %d, \"tile\": 64, \"tiles_per_shard\": 2},"
                       " {\"name\": \"x\", \"size\": %d, \"tile\": 48, \"tiles_per_shard\": 2}]}",
                       pos ? ", " : "", pos, CHANNELS, CHANNELS, HEIGHT, WIDTH);
    }
    at += snprintf(config + at, sizeof config - (size_t)at,
                   "], \"collection\": \"bioformats2raw\", \"max_latency_ms\": 100,"
                   " \"store\": {\"path\": \"%s\", \"overwrite\": true}}",
                   argv[1]);

    tz_stream *s = NULL;
    int32_t rc = tz_create_json(config, NULL, NULL, &s);
    if (rc != TZ_OK) return fail(NULL, "tz_create_json", rc);
    uint32_t count = 0;
    if ((rc = tz_array_count(s, &count)) != TZ_OK) return fail(s, "tz_array_count", rc);
    if (count != POSITIONS) {
        fprintf(stderr, "expected %d arrays, the stream has %u\n", POSITIONS, count);
        tz_destroy(s);
        return 1;
    }

    FILE *raw[POSITIONS] = {NULL};
    if (argc > 2) {
        char path[4096];
        snprintf(path, sizeof path, "%s/config.json", argv[2]);
        FILE *f = fopen(path, "w");
        if (f) {
            fputs(config, f);
            fclose(f);
        }
        for (unsigned pos = 0; pos < POSITIONS; ++pos) {
            snprintf(path, sizeof path, "%s/%u.raw", argv[2], pos);
            raw[pos] = fopen(path, "wb");
        }
    }
    uint16_t *frame = malloc(FRAME_BYTES);
    const struct timespec busy = {0, 100000};

    for (unsigned t = 0; t < TIME_POINTS; ++t) {
        for (uint32_t pos = 0; pos < POSITIONS; ++pos) { /* pos: the index in "arrays" */
            snap(frame, t, pos, raw[pos]);
            for (size_t done = 0; done < FRAME_BYTES;) {
                int64_t n = tz_write_to(s, pos, (const uint8_t *)frame + done, FRAME_BYTES - done);
                if (n < 0) return fail(s, "tz_write_to", (int32_t)-n);
                if (n == 0) nanosleep(&busy, NULL); /* busy: staging memory is full */
                done += (size_t)n;
            }
        }
    }

    free(frame);
    for (unsigned pos = 0; pos < POSITIONS; ++pos) {
        if (raw[pos]) fclose(raw[pos]);
    }
    if ((rc = tz_flush(s)) != TZ_OK) return fail(s, "tz_flush", rc);
    tz_metrics m;
    tz_get_metrics(s, &m);
    printf("%d positions x %d time points: %llu bytes in, %llu shards\n", POSITIONS,
           TIME_POINTS, (unsigned long long)m.bytes_in, (unsigned long long)m.shards_emitted);
    tz_destroy(s);
    return 0;
}
