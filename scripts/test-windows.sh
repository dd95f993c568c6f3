#!/usr/bin/env bash
# The Windows build, cross-compiled here and tested under Wine:
#
#   scripts/test-windows.sh [WORK_DIR]
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
# 4. under Wine: the library's tests and the integration tests that run
#    there (the others are listed with the reason)
# 5. the C examples built with MinGW against the DLL, run under Wine, and
#    their stores read back on Linux by zarr-python and tensorstore
#
# Environment: TZ_PY, the venv's python for the read-back (default: from
# scripts/setup-python.sh).
set -Eeuo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
trap 'echo "scripts/test-windows.sh: line $LINENO: exit status $? from: $BASH_COMMAND" >&2' ERR
step() { printf '\n=== windows: %s\n' "$*" >&2; }
started=$(date +%s)
work="${1:-}"
if [[ -z "$work" ]]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

step "toolchain"
scripts/setup-windows.sh
target=x86_64-pc-windows-gnu
profile=wine
export RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc
export CARGO_TARGET_DIR="$repo/target/windows"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine
export WINEPREFIX="$work/wine" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
cargo=(/usr/bin/cargo)
build=(-Zbuild-std=std,panic_abort --target "$target" --profile "$profile")
out="$CARGO_TARGET_DIR/$target/$profile"

step "Wine prefix (throwaway) and the bcryptprimitives.dll stand-in"
wineboot -i >/dev/null 2>&1
wineserver -w
x86_64-w64-mingw32-gcc -O2 -shared -o "$work/bcryptprimitives.dll" \
    scripts/windows/bcryptprimitives.c -lbcrypt
cp "$work/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/"

# The integration tests that run under Wine, and those that do not, by name.
wine_tests=(rust_api c_api_roundtrip reserve_commit latency_bound)
declare -A not_under_wine=(
    [c_api_errors]="uses unix symlinks, /dev/full and file permissions"
    [c_api_ome]="guards buffers with mmap/mprotect pages"
    [config_fuzz]="limits its address space with setrlimit"
    [hardening_api]="runs children under RLIMIT_AS"
    [hardening_store]="symlinks, RLIMIT_FSIZE children, kill -9"
    [hardening_fsync]="counts unix folder flushes"
    [memory_cgroup]="Linux cgroups"
    [s3_store]="starts the Linux s3s-fs server"
    [s3_moto]="starts moto from the Linux venv"
    [s3_faults]="starts the Linux S3 servers"
    [readback_fixtures]="writes the fixtures the Linux readers check"
    [ome_fixtures]="writes the fixtures the Linux readers check"
    [gpu]="needs a GPU" [gpu_chunk_order]="needs a GPU" [gpu_faults]="needs a GPU"
    [gpu_memory]="needs a GPU"
)
for t in tests/*.rs; do
    name=$(basename "$t" .rs)
    if [[ ! " ${wine_tests[*]} " =~ " $name " && -z "${not_under_wine[$name]:-}" ]]; then
        echo "tests/$name.rs is neither run under Wine nor listed with a reason" >&2
        exit 1
    fi
done
test_args=(--lib)
for t in "${wine_tests[@]}"; do test_args+=(--test "$t"); done

step "build: tiledzarr.dll, libtiledzarr.dll.a, libtiledzarr.a and the test programs"
t0=$(date +%s)
"${cargo[@]}" test "${build[@]}" --no-run "${test_args[@]}"
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

step "tests under Wine"
# The stores some tests write land under the prefix's temp folder.
"${cargo[@]}" test "${build[@]}" "${test_args[@]}" 2>&1 | tee "$work/wine-tests.log" |
    grep -E '^(test result|running|error|thread .* panicked)' >&2
passed=$(awk '/^test result:/ {p += $4} END {print p + 0}' "$work/wine-tests.log")
failed=$(awk '/^test result:/ {f += $6} END {print f + 0}' "$work/wine-tests.log")
echo "under Wine: $passed tests passed, $failed failed" >&2
for name in "${!not_under_wine[@]}"; do
    echo "not under Wine: tests/$name.rs (${not_under_wine[$name]})" >&2
done
((failed == 0 && passed > 0))

step "the C examples with MinGW against tiledzarr.dll, run under Wine, read back on Linux"
PY=${TZ_PY:-$(scripts/setup-python.sh | tail -1)}
mkdir -p "$work/c"
cp "$out/tiledzarr.dll" "$work/c/"
for ex in stream_to_store callback_sink ome_pyramid; do
    x86_64-w64-mingw32-gcc -std=c99 -Wall -Wextra -Werror -pedantic -O2 -static-libgcc \
        -Iinclude "examples/c/$ex.c" -o "$work/c/$ex.exe" -L"$out" -ltiledzarr -static -Wl,-Bdynamic
done
(
    cd "$work/c"
    wine stream_to_store.exe s.zarr s.raw
    wine callback_sink.exe cb.zarr cb.raw
    wine ome_pyramid.exe ome.zarr ome.raw ome.json
)
"$PY" tests/readback/check_store.py --store "$work/c/s.zarr" --raw "$work/c/s.raw" --dtype uint16 --shape 40,300,260
"$PY" tests/readback/check_store.py --store "$work/c/cb.zarr" --raw "$work/c/cb.raw" --dtype uint16 --shape 37,300,260
"$PY" tests/readback/check_ome.py --store "$work/c/ome.zarr" --raw "$work/c/ome.raw" --config "$work/c/ome.json"

step "windows: all passed in $(($(date +%s) - started)) s"
