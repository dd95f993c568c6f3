/*
 * Stream a synthetic time-lapse of z-stacks with two channels (uint16,
 * acquired t, z, c, y, x: each z position takes both channels) into an
 * OME-Zarr image (OME-NGFF 0.5) with a 3-level mean pyramid, configured
 * with the tz_config struct (the array) and the tz_image struct (the
 * image), created with tz_create_image:
 *
 *   - axes with kinds, units, pixel sizes and the stage position;
 *   - stored t, c, z, y, x (OME-NGFF's order) though acquired t, z, c, y, x;
 *   - y and x halved from level to level, z kept (a coarse z step);
 *   - each channel's name, colour and display window (OME-NGFF's omero
 *     block), which viewers show;
 *   - the user's attributes at create, replaced with tz_set_attributes
 *     before tz_flush (what is only known at the end of the acquisition).
 *
 *   ome_pyramid STORE_PATH [RAW_COPY_PATH [CONFIG_JSON_PATH]]
 *
 * The store is a group: STORE_PATH/zarr.json holds the OME metadata and the
 * attributes, STORE_PATH/0, /1 and /2 are the levels. With RAW_COPY_PATH
 * the frames are also written there as raw bytes, and with
 * CONFIG_JSON_PATH the configuration in its JSON form (the final
 * attributes included), so that a reader can check the store against its
 * input (tests/readback/check_ome.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiledzarr.h"

#define TIMEPOINTS 6 /* the last epoch of 4 is half full: padded at flush */
#define DEPTH 5
#define CHANNELS 2
#define HEIGHT 200
#define WIDTH 180

static const char *const ATTRIBUTES_AT_START =
    "{\"instrument\": {\"name\": \"scope-1\", \"objective\": \"20x/0.8\"},"
    " \"sample\": \"demo\", \"status\": \"acquiring\"}";

/* The channels as viewers show them: a name, a colour (hex RGB) and the
 * intensities mapped from black to full colour. */
static const char *const OMERO =
    "{\"channels\": ["
    "{\"label\": \"DAPI\", \"color\": \"0000FF\","
    " \"window\": {\"start\": 100, \"end\": 2200, \"min\": 0, \"max\": 65535}},"
    " {\"label\": \"GFP\", \"color\": \"00FF00\","
    " \"window\": {\"start\": 150, \"end\": 2250, \"min\": 0, \"max\": 65535}}]}";

/* Known once the acquisition is over. */
static const char *const ATTRIBUTES_AT_END =
    "{\"instrument\": {\"name\": \"scope-1\", \"objective\": \"20x/0.8\"},"
    " \"sample\": \"demo\", \"status\": \"complete\", \"timepoints\": 6}";

/* One camera image: a blob that drifts with t and z, per channel, over a
 * noisy background. */
static void make_image(uint16_t *px, unsigned t, unsigned z, unsigned c, uint32_t *rng) {
    long cy = 60 + 10 * (long)t + 5 * (long)z, cx = 50 + 12 * (long)t + 30 * (long)c;
    for (long y = 0; y < HEIGHT; ++y) {
        for (long x = 0; x < WIDTH; ++x) {
            *rng = *rng * 1664525u + 1013904223u;
            long d2 = (y - cy) * (y - cy) + (x - cx) * (x - cx);
            long v = 100 + 50 * (long)c + (long)((*rng >> 24) & 31);
            if (d2 < 900) v += 2000 - 2 * d2;
            px[y * WIDTH + x] = (uint16_t)v;
        }
    }
}

/* Writes all of p, retrying while the stream is busy. */
static int write_all(tz_stream *s, const uint8_t *p, size_t left) {
    while (left > 0) {
        int64_t n = tz_write(s, p, left);
        if (n < 0) {
            fprintf(stderr, "tz_write: %s: %s\n", tz_status_string((int32_t)-n),
                    tz_stream_last_error(s));
            return -1;
        }
        if (n == 0) { /* busy: a camera loop would do other work here */
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        p += n;
        left -= (size_t)n;
    }
    return 0;
}

/* The same configuration in its JSON form, with the final attributes
 * (tz_create_json takes it with a "store" added). */
static int write_config_json(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        return -1;
    }
    fprintf(f,
            "{\"dtype\": \"uint16\",\n"
            " \"dimensions\": [\n"
            "  {\"name\": \"t\", \"size\": 0, \"tile\": 4, \"kind\": \"time\","
            " \"unit\": \"millisecond\", \"scale\": 50.0},\n"
            "  {\"name\": \"z\", \"size\": %d, \"tile\": 1, \"unit\": \"micrometer\","
            " \"scale\": 2.0, \"downsample\": false},\n"
            "  {\"name\": \"c\", \"size\": %d, \"tile\": 1, \"kind\": \"channel\"},\n"
            "  {\"name\": \"y\", \"size\": %d, \"tile\": 64, \"tiles_per_shard\": 2,"
            " \"unit\": \"micrometer\", \"scale\": 0.65, \"translation\": 1200.5},\n"
            "  {\"name\": \"x\", \"size\": %d, \"tile\": 64, \"tiles_per_shard\": 2,"
            " \"unit\": \"micrometer\", \"scale\": 0.65, \"translation\": 830.25}],\n"
            " \"storage_order\": [\"t\", \"c\", \"z\", \"y\", \"x\"],\n"
            " \"multiscale\": {\"levels\": 3, \"method\": \"mean\"},\n"
            " \"ome\": {\"name\": \"ome_pyramid example\", \"omero\": %s},\n"
            " \"attributes\": %s}\n",
            DEPTH, CHANNELS, HEIGHT, WIDTH, OMERO, ATTRIBUTES_AT_END);
    if (fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE_PATH [RAW_COPY_PATH [CONFIG_JSON_PATH]]\n", argv[0]);
        return 2;
    }
    /* Acquisition order, slowest first. */
    const tz_dimension dims[5] = {
        {"t", 0, 4, 1},             /* unbounded: as many timepoints as come */
        {"z", DEPTH, 1, 1},         /* one z plane per chunk */
        {"c", CHANNELS, 1, 1},      /* one channel per chunk */
        {"y", HEIGHT, 64, 2},       /* shards of 128 x 128 pixels */
        {"x", WIDTH, 64, 2},
    };
    /* What each dimension is; scale 0 and downsample -1 are the defaults. */
    const tz_axis axes[5] = {
        {TZ_AXIS_TIME, "millisecond", 50.0, 0.0, -1},     /* 20 timepoints a second */
        {TZ_AXIS_DEFAULT, "micrometer", 2.0, 0.0, 0},     /* "z": space, but kept */
        {TZ_AXIS_CHANNEL, NULL, 0.0, 0.0, -1},
        {TZ_AXIS_DEFAULT, "micrometer", 0.65, 1200.5, -1}, /* the stage position */
        {TZ_AXIS_DEFAULT, "micrometer", 0.65, 830.25, -1},
    };
    const char *const storage_order[5] = {"t", "c", "z", "y", "x"};

    tz_config cfg;
    tz_config_init(&cfg); /* uint16, zstd level 1, backend auto, ... */
    cfg.rank = 5;
    cfg.dimensions = dims;
    cfg.store_path = argv[1];
    cfg.overwrite = 1;

    tz_image img;
    tz_image_init(&img); /* a plain array; sets img.struct_size = sizeof img */
    img.axes = axes;     /* cfg.rank entries, like storage_order */
    img.storage_order = storage_order;
    img.multiscale = 1;
    img.multiscale_levels = 3; /* level 0 included */
    img.multiscale_method = TZ_DOWNSAMPLE_MEAN;
    img.ome = 1;
    img.ome_name = "ome_pyramid example";
    img.omero_json = OMERO; /* since 0.8: one entry per channel */
    img.attributes_json = ATTRIBUTES_AT_START;

    tz_stream *s = NULL;
    if (tz_create_image(&cfg, &img, &s) != TZ_OK) {
        fprintf(stderr, "tz_create_image: %s\n", tz_last_error());
        return 1;
    }
    FILE *raw = NULL;
    if (argc > 2 && !(raw = fopen(argv[2], "wb"))) {
        perror(argv[2]);
        tz_destroy(s);
        return 1;
    }
    const size_t image_bytes = sizeof(uint16_t) * HEIGHT * WIDTH;
    uint16_t *image = malloc(image_bytes);
    if (!image) {
        fprintf(stderr, "out of memory\n");
        if (raw) fclose(raw);
        tz_destroy(s);
        return 1;
    }
    uint32_t rng = 1;
    int failed = 0;
    /* The acquisition's own order: for each timepoint, for each z
     * position, both channels. */
    for (unsigned t = 0; t < TIMEPOINTS && !failed; ++t) {
        for (unsigned z = 0; z < DEPTH && !failed; ++z) {
            for (unsigned c = 0; c < CHANNELS && !failed; ++c) {
                make_image(image, t, z, c, &rng);
                if (raw && fwrite(image, 1, image_bytes, raw) != image_bytes) {
                    perror(argv[2]);
                    failed = 1;
                }
                if (!failed) failed = write_all(s, (const uint8_t *)image, image_bytes) != 0;
            }
        }
    }
    free(image);
    if (raw && fclose(raw) != 0) {
        perror(argv[2]);
        failed = 1;
    }
    /* The attributes may change until the flush: the store writes the
     * last ones. */
    if (!failed && tz_set_attributes(s, ATTRIBUTES_AT_END) != TZ_OK) {
        fprintf(stderr, "tz_set_attributes: %s\n", tz_stream_last_error(s));
        failed = 1;
    }
    if (!failed && tz_flush(s) != TZ_OK) {
        fprintf(stderr, "tz_flush: %s\n", tz_stream_last_error(s));
        failed = 1;
    }
    if (failed) {
        tz_destroy(s);
        return 1;
    }
    tz_metrics m;
    tz_get_metrics(s, &m);
    printf("tiledzarr %s: %llu bytes in, %llu bytes out in %llu shards over 3 levels "
           "(backend: %s)\n",
           tz_version(), (unsigned long long)m.bytes_in, (unsigned long long)m.bytes_out,
           (unsigned long long)m.shards_emitted, m.backend_reason);
    tz_destroy(s);
    if (argc > 3 && write_config_json(argv[3]) != 0) return 1;
    return 0;
}
