/*
 * tz_destroy without tz_flush, under AddressSanitizer/LeakSanitizer and
 * valgrind: it must return promptly, leak nothing, and leave no partial
 * shard claiming to be complete. Also tz_destroy on a stream poisoned by
 * its sink, and on a stream that never received data.
 *
 *   destroy_without_flush STORE_PATH
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiledzarr.h"

static int32_t failing_sink(void *user_data, const tz_shard *shard) {
    (void)user_data;
    (void)shard;
    return 7;
}

static int stream_and_abandon(const char *json, tz_shard_sink_fn sink, size_t bytes) {
    tz_stream *s = NULL;
    if (tz_create_json(json, sink, NULL, &s) != TZ_OK) {
        fprintf(stderr, "tz_create_json: %s\n", tz_last_error());
        return 1;
    }
    uint8_t *data = malloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes; ++i) data[i] = (uint8_t)(i * 2654435761u >> 13);
    size_t done = 0;
    while (done < bytes) {
        int64_t n = tz_write_all(s, data + done, bytes - done, 1000);
        if (n <= 0) break; /* a poisoned stream refuses further data: fine here */
        done += (size_t)n;
    }
    free(data);
    tz_destroy(s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s STORE_PATH\n", argv[0]);
        return 2;
    }
    char json[1024];
    snprintf(json, sizeof json,
             "{\"dtype\": \"uint16\", \"backend\": \"cpu\", \"staging_bytes\": 4194304,"
             " \"dimensions\": [{\"size\": 0, \"tile\": 8, \"tiles_per_shard\": 2},"
             " {\"size\": 256, \"tile\": 64, \"tiles_per_shard\": 2},"
             " {\"size\": 200, \"tile\": 64, \"tiles_per_shard\": 2}],"
             " \"store\": {\"path\": \"%s\", \"overwrite\": true}}",
             argv[1]);
    /* 3.5 shard rows: some emitted, the rest in flight when destroyed. */
    size_t row = 2 * 8 * 256 * 200 * 2;
    if (stream_and_abandon(json, NULL, row * 7 / 2)) return 1;
    /* A stream that never saw a byte. */
    if (stream_and_abandon(json, NULL, 0)) return 1;
    /* A stream poisoned by its sink (no store: the callback is the sink). */
    const char *cb_json =
        "{\"dtype\": \"uint8\", \"backend\": \"cpu\", \"staging_bytes\": 65536,"
        " \"dimensions\": [{\"size\": 0, \"tile\": 4, \"tiles_per_shard\": 1},"
        " {\"size\": 100, \"tile\": 10, \"tiles_per_shard\": 5}]}";
    if (stream_and_abandon(cb_json, failing_sink, 100000)) return 1;
    puts("destroy without flush: ok");
    return 0;
}
