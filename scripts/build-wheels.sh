#!/usr/bin/env bash
# The Python package's release files, built here:
#
#   scripts/build-wheels.sh [--linux-only | --no-windows | --windows] [OUT_DIR]
#
# into OUT_DIR (default: dist/ in the repository):
#
# 1. the Linux wheel, tiledzarr-<v>-cp310-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl:
#    zig links it against glibc 2.17's symbols (ziglang from PyPI, pinned
#    in scripts/requirements.txt), so that pip takes it on any x86-64
#    Linux with glibc 2.17 or later (RHEL 7 and 8, Debian 11, Ubuntu 20.04).
#    The GPU kernels are inside when nvcc is found (NVCC); with
#    TZ_REQUIRE_KERNELS=1 a wheel without them is an error. auditwheel
#    (pinned) must find it consistent with manylinux_2_17_x86_64, and its
#    extension module may need only glibc's own libraries.
# 2. the source distribution, tiledzarr-<v>.tar.gz (maturin sdist).
# 3. the Windows wheel, tiledzarr-<v>-cp311-abi3-win_amd64.whl (CPython 3.11
#    and later: python/Cargo.toml says why), cross-built with MinGW-w64 as
#    scripts/test-windows.sh builds it, in target/windows. Its toolchain is
#    Debian's rustc-web with the standard library's source and MinGW-w64
#    (scripts/setup-windows.sh). By default the wheel is built when that
#    toolchain is there and skipped, with a notice, when it is not;
#    --windows installs it where missing (apt) and always builds the wheel;
#    --no-windows skips it.
#
# --linux-only builds the Linux wheel alone (scripts/test-python.sh does).
# The Linux build shares target/release with cargo's own release build and
# the tests: nothing they compiled is compiled again.
#
# Environment: TZ_PY, the venv's python with maturin, ziglang and auditwheel
# (default: from scripts/setup-python.sh); NVCC; TZ_REQUIRE_KERNELS.
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
trap 'echo "scripts/build-wheels.sh: line $LINENO: exit status $? from: $BASH_COMMAND" >&2' ERR
# Temporary folders, removed at exit whether the build passed or failed.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
step() { printf '\n=== wheels: %s\n' "$*" >&2; }
usage() { echo "usage: $0 [--linux-only | --no-windows | --windows] [OUT_DIR]" >&2; exit 2; }

sdist=1 windows=auto out=""
for arg in "$@"; do
    case "$arg" in
        --linux-only) sdist=0 windows=no ;;
        --no-windows) windows=no ;;
        --windows) windows=yes ;;
        -*) usage ;;
        *) [[ -z "$out" ]] || usage; out=$arg ;;
    esac
done
out="${out:-$repo/dist}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -f "$out"/tiledzarr-*.whl "$out"/tiledzarr-*.tar.gz

PY=${TZ_PY:-$(scripts/setup-python.sh | tail -1)}
bin="$(dirname "$PY")"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' python/Cargo.toml | head -1)

# The policy the Linux wheel is built for and checked against, and the only
# libraries its extension module may load: glibc's own (the CUDA driver and
# nvCOMP are opened at run time, never linked).
linux_tag=manylinux2014_x86_64.manylinux_2_17_x86_64
policy=manylinux_2_17_x86_64
needed_allowed='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|ld-linux-x86-64\.so\.2)$'

step "Linux wheel: maturin --compatibility manylinux2014, linked by zig against glibc 2.17"
t0=$(date +%s)
# The linker is zig's C compiler for glibc 2.17 (the pinned ziglang
# package), through maturin's wrapper of it (`maturin zig cc`, which drops
# the arguments zig does not take), reached as `cc` on PATH: cargo's
# default linker. Not `maturin --zig`, which builds for the explicit target
# in a folder of its own, nor cargo's linker setting, which is part of every
# unit's fingerprint: either way the whole dependency tree would compile
# again beside the test build's. This way the wheel's build reuses what the
# tests built in target/release and compiles pyo3 and the bindings. C code
# compiled there by the system's compiler is linked against glibc 2.17's
# symbols too: a call glibc 2.17 lacks is caught below.
"$PY" -c 'import ziglang' || { echo "no ziglang package in $PY's venv" >&2; exit 1; }
zigcc="$scratch/zig-linker"
mkdir -p "$zigcc"
printf '#!/bin/sh\nexport CARGO_ZIGBUILD_ZIG_COMMAND=%q CARGO_ZIGBUILD_ZIG_COMMAND_ARGS="-m ziglang"\nexec %q zig cc -- -g -fno-sanitize=all -target x86_64-linux-gnu.2.17 "$@"\n' \
    "$PY" "$bin/maturin" >"$zigcc/cc"
chmod +x "$zigcc/cc"
PATH="$zigcc:$bin:$PATH" "$bin/maturin" build --release --quiet \
    --compatibility manylinux2014 -m python/Cargo.toml -o "$out" >&2
wheel="$out/tiledzarr-$version-cp310-abi3-$linux_tag.whl"
[[ -f "$wheel" ]] || { echo "no $(basename "$wheel") in $out:" >&2; ls "$out" >&2; exit 1; }
echo "built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB) in $(($(date +%s) - t0)) s" >&2

step "Linux wheel: auditwheel show (expected: $policy)"
shown=$("$bin/auditwheel" show "$wheel")
printf '%s\n' "$shown" >&2
flat=$(tr -s ' \n' ' ' <<<"$shown")
if ! grep -qF "is consistent with the following platform tag: \"$policy\"" <<<"$flat"; then
    echo "auditwheel does not find the wheel consistent with $policy" >&2
    exit 1
fi
if grep -qi 'external shared libraries are required' <<<"$flat"; then
    echo "the wheel needs shared libraries outside the manylinux allow-list" >&2
    exit 1
fi
x="$scratch/wheel"
mkdir -p "$x"
"$PY" -m zipfile -e "$wheel" "$x"
so=$(echo "$x"/tiledzarr/_native*.so)
needed=$(objdump -p "$so" | awk '$1 == "NEEDED" {print $2}')
printf '_native: NEEDED %s\n' "$(paste -sd' ' <<<"$needed")" >&2
bad=$(grep -Ev "$needed_allowed" <<<"$needed" || true)
[[ -z "$bad" ]] || { printf 'the extension module links libraries beyond glibc:\n%s\n' "$bad" >&2; exit 1; }
# Every function it calls from glibc carries a symbol version (2.17's or
# older: auditwheel checked them). One without a version that is neither
# weak (looked up by the standard library only where it exists) nor the
# interpreter's would be a call the link could not bind to glibc 2.17.
unbound=$(objdump -T "$so" | awk '/\*UND\*/ && !/GLIBC_/ && $2 != "w" {print $NF}' | grep -Ev '^_?Py' || true)
[[ -z "$unbound" ]] || { printf 'the extension module calls functions glibc 2.17 lacks:\n%s\n' "$unbound" >&2; exit 1; }
# The library with its kernels inside: a wheel without them would leave the
# GPU backend unusable on every machine. Each fatbin nvcc makes (scatter,
# aggregate, ...) starts with this magic.
if [[ "${TZ_REQUIRE_KERNELS:-0}" == 1 ]]; then
    fatbins=$("$PY" -c 'import sys; print(open(sys.argv[1], "rb").read().count(bytes.fromhex("50ed55ba")))' "$so")
    ((fatbins >= 2)) || { echo "$(basename "$wheel"): no CUDA kernels inside" >&2; exit 1; }
    echo "_native: $fatbins CUDA fatbins inside" >&2
fi
rm -rf "$x"

if ((sdist)); then
    step "source distribution: maturin sdist"
    # cargo's notes on the crates' manifests (no homepage, ...) left out.
    log=$("$bin/maturin" sdist -m python/Cargo.toml -o "$out" 2>&1) || { printf '%s\n' "$log" >&2; exit 1; }
    grep -v -e '^warning: manifest has no' -e 'package-metadata' -e '^ *|$' -e '^From `cargo package' \
        <<<"$log" >&2 || true
    [[ -f "$out/tiledzarr-$version.tar.gz" ]] || { echo "no tiledzarr-$version.tar.gz in $out" >&2; exit 1; }
fi

windows_ready() {
    [[ -x /usr/bin/rustc && -d /usr/lib/rustlib/src/rust/library/std ]] &&
        command -v x86_64-w64-mingw32-gcc >/dev/null &&
        [[ "$(/usr/bin/rustc --version | awk '{print $2}' | cut -d. -f2)" -ge 89 ]]
}
if [[ $windows == yes ]] && ! windows_ready; then
    scripts/setup-windows.sh
fi
if [[ $windows == auto ]] && ! windows_ready; then
    step "Windows wheel: skipped (no MinGW-w64 or Debian's rustc with the standard library's source;" \
        "scripts/setup-windows.sh installs them, --windows runs it)"
elif [[ $windows != no ]]; then
    step "Windows wheel: MinGW-w64 cross-build (abi3, CPython 3.11 and later)"
    t0=$(date +%s)
    # As scripts/test-windows.sh: the same target folder, profile and
    # standard library (with `test`), so that the test build's crates serve.
    RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$repo/target/windows" \
        CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
        "$bin/maturin" build --quiet -m python/Cargo.toml --no-default-features --features abi3-py311 \
        --target x86_64-pc-windows-gnu --profile wine -Zbuild-std=std,panic_abort,test -o "$out" >&2
    win="$out/tiledzarr-$version-cp311-abi3-win_amd64.whl"
    [[ -f "$win" ]] || { echo "no $(basename "$win") in $out:" >&2; ls "$out" >&2; exit 1; }
    echo "built $(basename "$win") ($(du -k "$win" | cut -f1) KiB) in $(($(date +%s) - t0)) s" >&2
fi

step "built into $out"
(cd "$out" && ls -l tiledzarr-* >&2)
