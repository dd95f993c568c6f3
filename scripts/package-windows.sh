#!/usr/bin/env bash
# Packs the Windows release a user downloads, from what
# scripts/test-windows.sh built and checked:
#
#   scripts/package-windows.sh BUILD_DIR DIST_DIR
#
# BUILD_DIR holds tiledzarr.dll, libtiledzarr.dll.a, libtiledzarr.a,
# tiledzarr.def, tiledzarr.lib and native-static-libs.txt; DIST_DIR gets
# tiledzarr-<version>-windows-x86_64.zip:
#
#   bin/tiledzarr.dll                 the library (no MinGW runtime needed)
#   lib/tiledzarr.lib                 import library for MSVC (from tiledzarr.def)
#   lib/tiledzarr.def                 the exports
#   lib/libtiledzarr.dll.a            import library for MinGW
#   lib/libtiledzarr.a                static library (MinGW)
#   lib/cmake/TiledZarr/              find_package(TiledZarr), IMPORTED_IMPLIB set
#   include/tiledzarr.h, tiledzarr.hpp
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=$1
dist=$(mkdir -p "$2" && cd "$2" && pwd)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -1)
name="tiledzarr-$version-windows-x86_64"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/$name"
mkdir -p "$root/bin" "$root/lib/cmake/TiledZarr" "$root/include"
cp "$build/tiledzarr.dll" "$root/bin/"
cp "$build/tiledzarr.lib" "$build/tiledzarr.def" "$build/libtiledzarr.dll.a" "$build/libtiledzarr.a" "$root/lib/"
cp "$repo/include/tiledzarr.h" "$repo/examples/cpp/tiledzarr.hpp" "$root/include/"
cmake -DROOT="$repo" -DDEST="$root/lib/cmake/TiledZarr" \
    -DSTATIC_LIBS="$(cat "$build/native-static-libs.txt")" -P "$repo/cmake/windows-package.cmake"
mkdir -p "$dist"
rm -f "$dist/$name.zip"
(cd "$stage" && python3 -m zipfile -c "$dist/$name.zip" "$name")
echo "$dist/$name.zip"
