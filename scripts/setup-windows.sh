#!/usr/bin/env bash
# Installs what the Windows build needs, from Debian's packages (no Windows
# target can be downloaded here): Rust 1.96 (rustc-web, cargo-web) with the
# standard library's source (rust-web-src, for -Zbuild-std), MinGW-w64 (C
# and C++) and Wine. Idempotent: does nothing when they are there. About 2 GB, a minute.
set -euo pipefail

ready() {
    [[ -x /usr/bin/rustc && -x /usr/bin/cargo && -d /usr/lib/rustlib/src/rust/library/std ]] &&
        command -v x86_64-w64-mingw32-gcc >/dev/null && command -v wine >/dev/null &&
        command -v x86_64-w64-mingw32-g++-posix >/dev/null &&
        command -v x86_64-w64-mingw32-dlltool >/dev/null &&
        # Debian's bookworm rustc-web is 1.85 before the security update: too old.
        [[ "$(/usr/bin/rustc --version | awk '{print $2}' | cut -d. -f2)" -ge 89 ]]
}
if ready; then
    echo "setup-windows: $(/usr/bin/rustc --version), $(x86_64-w64-mingw32-gcc --version | head -1), $(wine --version 2>/dev/null)" >&2
    exit 0
fi
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
echo "setup-windows: installing rustc-web cargo-web rust-web-src, MinGW-w64 (C, C++), wine64 wine" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends rustc-web cargo-web rust-web-src \
    gcc-mingw-w64-x86-64 g++-mingw-w64-x86-64 binutils-mingw-w64-x86-64 wine64 wine >&2
ready || { echo "setup-windows: the toolchain is still incomplete" >&2; exit 1; }
