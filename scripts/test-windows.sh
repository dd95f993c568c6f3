#!/usr/bin/env bash
# The Windows build, cross-compiled here and tested under Wine:
#
#   scripts/test-windows.sh [--build-only] [WORK_DIR]
#
# --build-only stops after step 3 and the wheel's build; a later call with
# the same WORK_DIR finds the builds done (scripts/test.sh builds beside
# Linux steps that leave a core idle, and tests at its end).
#
# 1. the toolchain, from Debian's packages where missing (Rust 1.96 with the
#    standard library's source for -Zbuild-std, MinGW-w64, Wine 8.0); a
#    throwaway Wine prefix with a stand-in for bcryptprimitives.dll, which
#    Wine 8.0 lacks and every Rust Windows program imports
# 2. tiledzarr.dll, its MinGW import library and the static library, built
#    once with the test programs (profile `wine`, target/windows/)
# 3. the DLL's imports: system DLLs only, no MinGW runtime; its exports
#    against every tz_* function of include/tiledzarr.h, written as
#    tiledzarr.def, from which the MSVC import library tiledzarr.lib is made
# 4. under Wine: the library's and nvcomp-sys's tests and the integration
#    tests that run there (the others are listed with the reason)
# 5. the Python wheel for win_amd64 (abi3, maturin): its files and imports
# 6. the release zip (scripts/package-windows.sh); the C and C++ examples
#    and the C++ wrapper's test program built with MinGW and CMake against
#    its find_package(TiledZarr), shared and static, run under Wine, and
#    their stores read back on Linux by
#    zarr-python, tensorstore and the OME-NGFF checks
#
# Environment: TZ_PY, the venv's python for the read-back (default: from
# scripts/setup-python.sh).
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
trap 'echo "scripts/test-windows.sh: line $LINENO: exit status $? from: $BASH_COMMAND" >&2' ERR
started=$(date +%s)
# Each step with the seconds since this script started, to see where its
# time goes.
step() { printf '\n=== windows [%d s]: %s\n' $(($(date +%s) - started)) "$*" >&2; }
build_only=false
if [[ "${1:-}" == --build-only ]]; then
    build_only=true
    shift
fi
work="${1:-}"
if [[ -z "$work" ]]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

step "toolchain"
scripts/setup-tools.sh
scripts/setup-windows.sh
target=x86_64-pc-windows-gnu
profile=wine
export RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc
export CARGO_TARGET_DIR="$repo/target/windows"
# The GPU kernels as the Linux builds compiled them, where nvcc is found.
export TZ_KERNEL_CACHE="${TZ_KERNEL_CACHE:-$repo/target/kernel-cache}"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
export WINEPREFIX="$work/wine" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
cargo=(/usr/bin/cargo)
# shellcheck disable=SC2054 # the comma is part of one -Zbuild-std argument
build=(-Zbuild-std=std,panic_abort --target "$target" --profile "$profile")
out="$CARGO_TARGET_DIR/$target/$profile"

step "Wine prefix (throwaway) and the bcryptprimitives.dll stand-in"
wineboot -i >/dev/null 2>&1
wineserver -w
x86_64-w64-mingw32-gcc -O2 -shared -o "$work/bcryptprimitives.dll" \
    scripts/windows/bcryptprimitives.c -lbcrypt
cp "$work/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"

# The integration tests that run under Wine, and those that do not, by name.
wine_tests=(rust_api c_api_roundtrip reserve_commit latency_bound store_windows skipped_frames recover_stores unbuffered_store)
declare -A not_under_wine=(
    [c_api_errors]="uses unix symlinks, /dev/full and file permissions"
    [c_api_ome]="guards buffers with mmap/mprotect pages"
    [config_fuzz]="limits its address space with setrlimit"
    [hardening_api]="runs children under RLIMIT_AS"
    [hardening_store]="symlinks, RLIMIT_FSIZE children, kill -9"
    [hardening_fsync]="counts unix folder flushes"
    [memory_cgroup]="Linux cgroups"
    [disk_stall]="mounts a Linux FUSE file system"
    [s3_store]="starts the Linux s3s-fs server"
    [s3_moto]="starts moto from the Linux venv"
    [s3_faults]="starts the Linux S3 servers"
    [readback_fixtures]="writes the fixtures the Linux readers check"
    [ome_fixtures]="writes the fixtures the Linux readers check"
    [arrays]="writes the fixtures the Linux readers check; its property test has not been run under Wine yet"
    [decoder]="checks the tests' own Zarr reader, no library code"
    [gpu]="needs a GPU" [gpu_chunk_order]="needs a GPU" [gpu_faults]="needs a GPU"
    [gpu_memory]="needs a GPU"
)
for t in tests/*.rs; do
    name=$(basename "$t" .rs)
    # shellcheck disable=SC2076 # a literal match of the name between spaces
    if [[ ! " ${wine_tests[*]} " =~ " $name " && -z "${not_under_wine[$name]:-}" ]]; then
        echo "tests/$name.rs is neither run under Wine nor listed with a reason" >&2
        exit 1
    fi
done
# nvcomp-sys's own tests too (nvCOMP's DLL names, its Windows search and the
# loader's module path), in the same command: alone, its dependencies'
# features resolve otherwise and some are built again.
test_args=(-p tiledzarr -p nvcomp-sys --lib)
for t in "${wine_tests[@]}"; do test_args+=(--test "$t"); done

step "no cfg that only the GNU target satisfies (x86_64-pc-windows-msvc must compile too)"
if grep -rn --include='*.rs' 'target_env' src nvcomp-sys/src blosc1 python/src build.rs >&2; then
    echo "a target_env cfg above: the platform layer keys on the system, not the toolchain" >&2
    exit 1
fi

step "build: tiledzarr.dll, libtiledzarr.dll.a, libtiledzarr.a and the test programs"
t0=$(date +%s)
# One feature resolution for the DLL and the tests: `cargo build` makes the
# DLL and the integration tests, `cargo test --no-run` adds the library's
# and nvcomp-sys's own test programs; the dependencies are built once, and
# the tests below only run.
"${cargo[@]}" build "${build[@]}" "${test_args[@]}"
"${cargo[@]}" test --no-run "${build[@]}" "${test_args[@]}"
echo "built in $(($(date +%s) - t0)) s" >&2
for f in tiledzarr.dll libtiledzarr.dll.a libtiledzarr.a; do
    [[ -f "$out/$f" ]] || { echo "missing $out/$f" >&2; exit 1; }
done

step "the DLL's imports: system DLLs only"
imports=$(x86_64-w64-mingw32-objdump -p "$out/tiledzarr.dll" | sed -n 's/^\s*DLL Name: //p' | sort -u)
printf '%s\n' "$imports" >&2
allowed='^(kernel32|ntdll|advapi32|bcrypt|bcryptprimitives|ws2_32|userenv|msvcrt|api-ms-win-[a-z0-9-]+|ucrtbase|crypt32|secur32|ole32|oleaut32|shell32|user32|ncrypt|iphlpapi|psapi)\.dll$'
bad=$(printf '%s\n' "$imports" | tr 'A-Z' 'a-z' | grep -Ev "$allowed" || true)
if [[ -n "$bad" ]]; then
    printf 'tiledzarr.dll imports DLLs a Windows machine may lack:\n%s\n' "$bad" >&2
    exit 1
fi
# A static link needs the same system libraries (MinGW's import libraries),
# but bcryptprimitives: the standard library reaches it through raw-dylib,
# whose import stubs the archive carries itself.
printf '%s\n' "$imports" | tr 'A-Z' 'a-z' | sort -u | grep -Ev '^(api-ms-|bcryptprimitives)' |
    sed 's/\.dll$//' | paste -sd';' >"$out/native-static-libs.txt"

step "exports against the header; tiledzarr.def and the MSVC import library tiledzarr.lib"
header_fns=$(grep -oE '\btz_[a-z0-9_]+\(' include/tiledzarr.h | tr -d '(' | sort -u)
exported=$(x86_64-w64-mingw32-objdump -p "$out/tiledzarr.dll" |
    awk '/\[Ordinal\/Name Pointer\] Table/ {on = 1; next} on && NF == 0 {on = 0} on {print $NF}' |
    grep -E '^tz_' | sort -u)
if [[ "$header_fns" != "$exported" ]]; then
    echo "the DLL's tz_* exports differ from the header's functions:" >&2
    diff <(printf '%s\n' "$header_fns") <(printf '%s\n' "$exported") >&2 || true
    exit 1
fi
echo "$(wc -l <<<"$exported") tz_* functions: every one in the header is exported, and no other" >&2
{
    echo "LIBRARY tiledzarr.dll"
    echo "EXPORTS"
    sed 's/^/    /' <<<"$exported"
} >"$out/tiledzarr.def"
x86_64-w64-mingw32-dlltool -m i386:x86-64 -d "$out/tiledzarr.def" -D tiledzarr.dll -l "$out/tiledzarr.lib"
PY=${TZ_PY:-$(scripts/setup-python.sh | tail -1)}
# The Python wheel for win_amd64 into $work/wheel. The same target folder and
# profile, and the same standard library: a build of test programs adds the
# `test` crate to it, which every crate built then depends on, so it is named
# here too. With the features that python/Cargo.toml unifies, only pyo3 and
# the bindings are new.
build_wheel() {
    "$(dirname "$PY")/maturin" build --quiet -m python/Cargo.toml \
        --no-default-features --features abi3-py311 \
        --target "$target" --profile "$profile" -Zbuild-std=std,panic_abort,test -o "$work/wheel" >&2
}
if $build_only; then
    step "the Python wheel for win_amd64, built (checked on the next call)"
    build_wheel
    step "built (--build-only): the tests run on the next call"
    exit 0
fi

step "tests under Wine"
# Wine's figure for the memory available may leave out what the page cache
# would give back; after the suite's builds the cache holds most of the
# machine, and a stream's create-time memory check could then refuse.
# Best effort: where /proc/sys is read-only nothing changes. (Creates
# refused with "0 bytes available" were another thing: Wine's cached memory
# status, read while its first filling was under way; the library asks
# again then, src/platform/windows/memory.rs.)
sync
{ echo 1 >/proc/sys/vm/drop_caches; } 2>/dev/null || true
# The stores some tests write land under the prefix's temp folder.
# Left out by name:
# - replacing zarr.json under a handle kept with delete sharing: Wine 8 has
#   no POSIX-semantics rename (Windows 10 1607 and later do).
declare -A skip_under_wine=(
    [zarr_json_is_replaced_under_a_handle_kept_with_delete_sharing]="Wine 8 has no POSIX-semantics rename"
)
skip_args=()
for t in "${!skip_under_wine[@]}"; do skip_args+=(--skip "$t"); done
"${cargo[@]}" test "${build[@]}" "${test_args[@]}" -- "${skip_args[@]}" 2>&1 | tee "$work/wine-tests.log" |
    grep -E -A2 '^(test result|running|error|thread .* panicked|test .* FAILED)' >&2
passed=$(awk '/^test result:/ {p += $4} END {print p + 0}' "$work/wine-tests.log")
failed=$(awk '/^test result:/ {f += $6} END {print f + 0}' "$work/wine-tests.log")
echo "under Wine: $passed tests passed, $failed failed" >&2
for name in "${!not_under_wine[@]}"; do
    echo "not under Wine: tests/$name.rs (${not_under_wine[$name]})" >&2
done
for name in "${!skip_under_wine[@]}"; do
    echo "not under Wine: $name (${skip_under_wine[$name]})" >&2
done
((failed == 0 && passed > 0))

step "the Python wheel for win_amd64 (abi3, CPython 3.11 and later: python/Cargo.toml says why)"
build_wheel
wheel=$(echo "$work"/wheel/tiledzarr-*-cp311-abi3-win_amd64.whl)
[[ -f "$wheel" ]] || { echo "no cp311-abi3-win_amd64 wheel in $work/wheel" >&2; ls "$work/wheel" >&2; exit 1; }
python3 -m zipfile -l "$wheel" >&2
listed=$(python3 -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$wheel")
for f in tiledzarr/__init__.py tiledzarr/_native.pyd; do
    grep -qx "$f" <<<"$listed" || { echo "the wheel lacks $f" >&2; exit 1; }
done
python3 -m zipfile -e "$wheel" "$work/wheel/x"
pyd_imports=$(x86_64-w64-mingw32-objdump -p "$work/wheel/x/tiledzarr/_native.pyd" | sed -n 's/^\s*DLL Name: //p' | sort -u)
printf '_native.pyd imports: %s\n' "$(paste -sd' ' <<<"$pyd_imports")" >&2
grep -qix 'python3.dll' <<<"$pyd_imports" || { echo "_native.pyd does not import python3.dll (abi3)" >&2; exit 1; }
bad=$(printf '%s\n' "$pyd_imports" | tr 'A-Z' 'a-z' | grep -v '^python3\.dll$' | grep -Ev "$allowed" || true)
[[ -z "$bad" ]] || { printf '_native.pyd imports DLLs a Windows machine may lack:\n%s\n' "$bad" >&2; exit 1; }

step "the release zip"
zip=$(scripts/package-windows.sh "$out" "$work/dist" | tail -1)
python3 -m zipfile -l "$zip" >&2
release="$work/release"
python3 -m zipfile -e "$zip" "$release"
release=$(echo "$release"/tiledzarr-*)

# The consumer's own MinGW runtime, beside its programs (tiledzarr.dll needs
# none of it).
mingw_runtime=()
for dll in libstdc++-6.dll libgcc_s_seh-1.dll libwinpthread-1.dll; do
    mingw_runtime+=("$(x86_64-w64-mingw32-g++-posix -print-file-name="$dll")")
done
for kind in shared static; do
    step "the examples with MinGW and find_package(TiledZarr) ($kind), under Wine, read back on Linux"
    static=OFF; [[ $kind == static ]] && static=ON
    bin="$work/ds-$kind"
    cmake -S tests/downstream -B "$bin" -DCMAKE_SYSTEM_NAME=Windows \
        -DCMAKE_C_COMPILER=x86_64-w64-mingw32-gcc-posix -DCMAKE_CXX_COMPILER=x86_64-w64-mingw32-g++-posix \
        -DCMAKE_PREFIX_PATH="$release" -DTiledZarr_USE_STATIC=$static >/dev/null
    cmake --build "$bin" >/dev/null
    links=$(x86_64-w64-mingw32-objdump -p "$bin/stream_to_store.exe" | sed -n 's/^\s*DLL Name: //p')
    if [[ $kind == static ]]; then
        ! grep -qi tiledzarr <<<"$links" || { echo "the static build imports tiledzarr.dll" >&2; exit 1; }
    else
        grep -qi '^tiledzarr.dll$' <<<"$links" || { echo "the shared build does not import tiledzarr.dll" >&2; exit 1; }
        cp "$release/bin/tiledzarr.dll" "$bin/"
    fi
    cp "${mingw_runtime[@]}" "$bin/"
    (
        cd "$bin"
        wine stream_to_store.exe s.zarr s.raw
        wine callback_sink.exe cb.zarr cb.raw
        wine ome_pyramid.exe ome.zarr ome.raw ome.json
        mkdir -p positions.raw
        wine positions.exe positions.zarr positions.raw
        wine acquire_cpp.exe cpp.zarr --frames 48 --fps 400 --width 256 --height 192
        mkdir -p wrapper.raw
        wine cpp_wrapper.exe wrapper.zarr wrapper.raw
    ) >"$work/ds-$kind.log" 2>&1 || { cat "$work/ds-$kind.log" >&2; exit 1; }
    "$PY" tests/readback/check_store.py --store "$bin/s.zarr" --raw "$bin/s.raw" --dtype uint16 --shape 40,300,260
    "$PY" tests/readback/check_store.py --store "$bin/cb.zarr" --raw "$bin/cb.raw" --dtype uint16 --shape 37,300,260
    "$PY" tests/readback/check_ome.py --store "$bin/ome.zarr" --raw "$bin/ome.raw" --config "$bin/ome.json"
    "$PY" tests/readback/check_arrays.py --store "$bin/positions.zarr" \
        --config "$bin/positions.raw/config.json" --raw-dir "$bin/positions.raw"
    "$PY" -c "import sys, zarr; a = zarr.open_array(sys.argv[1], mode='r'); assert a.shape == (48, 192, 256), a.shape; assert a[47].any()" "$bin/cpp.zarr"
    "$PY" tests/readback/check_arrays.py --store "$bin/wrapper.zarr" \
        --config "$bin/wrapper.raw/config.json" --raw-dir "$bin/wrapper.raw"
done

step "all passed"
