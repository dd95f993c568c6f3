#!/usr/bin/env bash
# Installs the S3-compatible server the object store tests run against:
# s3s-fs from crates.io (an S3 server over a folder: what it holds survives
# a restart, so a test can kill it mid-stream and look at what is left).
#
#   S3FS=$(scripts/setup-s3-server.sh | tail -1)
#
# Environment:
#   TZ_S3FS_ROOT  where to install it (default: <repo>/.s3-server)
#
# Idempotent: an installed binary of this version is reused. Progress goes
# to stderr; the last (and only) line on stdout is the binary's path.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/.." && pwd)"
root="${TZ_S3FS_ROOT:-$repo/.s3-server}"
# 0.14.1: the newest release that builds with the Rust toolchain CI has.
version=0.14.1
bin="$root/bin/s3s-fs"
stamp="$root/.version"

if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    echo "setup-s3-server: s3s-fs $version at $bin" >&2
    echo "$bin"
    exit 0
fi
echo "setup-s3-server: installing s3s-fs $version (cargo install, a few minutes)" >&2
start=$(date +%s)
# Unoptimized but for the crates that hash and checksum every body (SHA-256,
# MD5, CRCs, their hex and base64): it built in 2 minutes on 2 cores (a
# release build took 6 in the test suite's set-up, beside the Python venv's),
# and the fault matrix ran as fast against it as against a release build.
# Against a wholly unoptimized build (1m54) the fault matrix's multipart
# case missed its 60 s deadline; optimizing these crates alone mended it.
hashing=(sha2 md-5 sha1 crc-fast crc32c hmac digest base64-simd hex-simd vsimd block-buffer)
optimized=()
for crate in "${hashing[@]}"; do
    optimized+=(--config "profile.dev.package.$crate.opt-level=3")
done
CARGO_PROFILE_DEV_DEBUG=0 cargo install --quiet --locked --debug "${optimized[@]}" \
    --features binary --root "$root" "s3s-fs@$version" >&2
echo "$version" >"$stamp"
echo "setup-s3-server: installed in $(($(date +%s) - start)) s" >&2
echo "$bin"
