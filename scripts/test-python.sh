#!/usr/bin/env bash
# The Python package, as a user gets it:
#
#   scripts/test-python.sh [WORK_DIR]
#
# 1. the wheel built with maturin (abi3, the GPU kernels inside when NVCC is
#    set, as scripts/test.sh sets it) into WORK_DIR/dist
# 2. `pip install dist/*.whl` into a fresh virtual environment, with numpy,
#    zarr-python and pytest pinned as in scripts/requirements.txt
# 3. the pytest suite (python/tests) run from WORK_DIR, outside the source
#    tree, against the installed wheel
# 4. the example examples/python/acquire.py: numpy frames into a store that
#    zarr-python reads back
#
# maturin builds in the workspace's target/ and reuses what cargo built there.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
PY=$("$repo/scripts/setup-python.sh" | tail -1)
python="${TZ_PYTHON:-python3}"
step() { printf '\n=== %s\n' "$*" >&2; }

step "Python wheel (maturin)"
rm -rf "$work/dist"
"$(dirname "$PY")/maturin" build --release --quiet -m "$repo/python/Cargo.toml" -o "$work/dist"
wheels=("$work"/dist/*.whl)
[[ ${#wheels[@]} -eq 1 ]] || { echo "expected one wheel, found: ${wheels[*]}" >&2; exit 1; }
echo "built $(basename "${wheels[0]}") ($(du -k "${wheels[0]}" | cut -f1) KiB)" >&2
# The library with its kernels inside: a wheel without them would leave
# the GPU backend unusable on every machine.
if [[ "${TZ_REQUIRE_KERNELS:-0}" == 1 ]]; then
    "$python" - "${wheels[0]}" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    lib = next(n for n in z.namelist() if n.startswith("tiledzarr/_native") and n.endswith(".so"))
    # Each fatbin nvcc makes (scatter, aggregate) starts with this magic.
    assert z.read(lib).count(bytes.fromhex("50ed55ba")) >= 2, f"{lib}: no CUDA kernels inside"
PY
fi

step "the wheel in a fresh virtual environment"
venv="$work/wheel-venv"
rm -rf "$venv"
"$python" -m venv "$venv"
(cd "$work" && "$venv/bin/pip" install --disable-pip-version-check --no-input --quiet \
    --only-binary=:all: -c "$repo/scripts/requirements.txt" dist/*.whl numpy zarr pytest >&2)

step "pytest python/tests, against the installed wheel"
(cd "$work" && TZ_HEADER="$repo/include/tiledzarr.h" "$venv/bin/python" -m pytest -q \
    -p no:cacheprovider "$repo/python/tests")

step "examples/python/acquire.py, read back by zarr-python"
(cd "$work" && "$venv/bin/python" "$repo/examples/python/acquire.py" --frames 96 --size 256 \
    --backend cpu --out "$work/py-acquire.zarr")
