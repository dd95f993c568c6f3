#!/usr/bin/env bash
# Installs the system tools the test suite needs (cmake, pkg-config,
# valgrind, patchelf: the CMake package's soname without compiling the
# crate again; shellcheck: the project's scripts; and fusepy for Debian's
# Python: the FUSE file system of tests/disk_stall.rs) where they are
# missing; Debian/Ubuntu, as root or with sudo.
set -euo pipefail
missing=()
for tool in cmake pkg-config valgrind patchelf shellcheck; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
/usr/bin/python3 -c 'import fusepy' >/dev/null 2>&1 || missing+=(python3-fusepy)
[[ ${#missing[@]} -eq 0 ]] && exit 0
sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "setup-tools: installing ${missing[*]}" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
