#!/usr/bin/env bash
# The whole test suite, with its set-up, on a fresh machine (no GPU needed):
#
#   scripts/test.sh
#
# 1. a Python venv with zarr-python and tensorstore (scripts/setup-python.sh)
# 2. formatting, clippy with warnings as errors
# 3. the generated C header must match the committed include/tiledzarr.h
# 4. cargo test (property tests, C-API round trips, bad input, ...)
# 5. stores read back bit-exact by zarr-python and tensorstore
# 6. the header compiled standalone as C99 and C++17, and the C example run
#    and read back
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
step() { printf '\n=== %s\n' "$*" >&2; }

step "python venv"
PY=$(scripts/setup-python.sh | tail -1)

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

step "header is current"
cargo build --release
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    if ! git diff --exit-code -- include/tiledzarr.h; then
        echo "include/tiledzarr.h is stale: commit the regenerated header" >&2
        exit 1
    fi
fi

step "cargo test"
cargo test --release

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step "readback by zarr-python and tensorstore"
TZ_READBACK_DIR="$work/readback" cargo test --release --test readback_fixtures
checked=0
while IFS=$'\t' read -r store raw dtype shape; do
    "$PY" tests/readback/check_store.py --store "$store" --raw "$raw" --dtype "$dtype" --shape "$shape"
    checked=$((checked + 1))
done <"$work/readback/manifest.tsv"
if [[ $checked -lt 13 ]]; then
    echo "expected at least 13 readback fixtures, checked $checked" >&2
    exit 1
fi

step "C header standalone (C99, C++17) and the C example"
cflags=(-Wall -Wextra -Werror -pedantic -Iinclude)
printf '#include "tiledzarr.h"\n#include "tiledzarr.h"\nint main(void) { return TZ_OK; }\n' >"$work/h.c"
gcc -std=c99 "${cflags[@]}" "$work/h.c" -o "$work/h_c"
g++ -std=c++17 "${cflags[@]}" -x c++ "$work/h.c" -o "$work/h_cpp"
gcc -std=c99 "${cflags[@]}" -D_POSIX_C_SOURCE=199309L examples/c/stream_to_store.c \
    -Ltarget/release -ltiledzarr -Wl,-rpath,"$repo/target/release" -o "$work/stream_to_store"
"$work/stream_to_store" "$work/c.zarr" "$work/c.raw"
"$PY" tests/readback/check_store.py --store "$work/c.zarr" --raw "$work/c.raw" --dtype uint16 --shape 40,300,260

step "all tests passed"
