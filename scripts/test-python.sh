#!/usr/bin/env bash
# The Python package, as a user gets it:
#
#   scripts/test-python.sh [WORK_DIR]
#
# 1. the Linux wheel that is shipped, built by scripts/build-wheels.sh
#    --linux-only into WORK_DIR/dist: manylinux2014 (glibc 2.17), linked
#    by zig, abi3, the GPU kernels inside when NVCC is set (as
#    scripts/test.sh sets it; TZ_REQUIRE_KERNELS=1 makes their absence an
#    error); it fails unless auditwheel finds the wheel consistent with
#    manylinux_2_17_x86_64 and the extension module links only glibc
# 2. `pip install dist/*.whl` into a fresh virtual environment, with numpy,
#    zarr-python, tensorstore and pytest pinned as in scripts/requirements.txt,
#    and what Stream.from_acquisition's tests compare with and validate by:
#    ome-writers, useq-schema, pymmcore-plus, yaozarrs, ome-zarr-models
# 3. the pytest suite (python/tests), warnings as errors, run from WORK_DIR,
#    outside the source tree, against the installed wheel; its S3 test runs
#    moto's server and the read-back in the test environment of
#    scripts/setup-python.sh; then mypy's stubtest on the installed package:
#    the compiled module's stubs against the module, and the package
#    type-checked
# 4. the examples examples/python/acquire.py (numpy frames into a store) and
#    examples/python/plate.py (a plate's fields, interleaved, into one
#    store), each read back by zarr-python
# 5. python/bench/bench_numpy.py (the GPU script's Python benchmark) on the
#    CPU, against a small tz-bench --positions record, and type-checked
#
# The wheel's build reuses what the tests built in target/release: it
# compiles pyo3 and the bindings alone.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$(mktemp -d)}"
mkdir -p "$work"
PY=$("$repo/scripts/setup-python.sh" | tail -1)
python="${TZ_PYTHON:-python3}"
step() { printf '\n=== %s\n' "$*" >&2; }

step "Python wheel: manylinux2014 (scripts/build-wheels.sh --linux-only)"
rm -rf "$work/dist"
TZ_PY="$PY" "$repo/scripts/build-wheels.sh" --linux-only "$work/dist"
wheels=("$work"/dist/*.whl)
[[ ${#wheels[@]} -eq 1 ]] || { echo "expected one wheel, found: ${wheels[*]}" >&2; exit 1; }

step "the wheel in a fresh virtual environment"
venv="$work/wheel-venv"
rm -rf "$venv"
"$python" -m venv "$venv"
(cd "$work" && "$venv/bin/pip" install --disable-pip-version-check --no-input --quiet \
    --only-binary=:all: -c "$repo/scripts/requirements.txt" dist/*.whl numpy zarr tensorstore pytest \
    ome-writers useq-schema pymmcore-plus yaozarrs ome-zarr-models mypy >&2)

step "pytest python/tests, against the installed wheel, warnings as errors"
(cd "$work" && TZ_HEADER="$repo/include/tiledzarr.h" TZ_MOTO_PYTHON="${TZ_MOTO_PYTHON:-$PY}" \
    "$venv/bin/python" -m pytest -q -W error \
    -p no:cacheprovider "$repo/python/tests")

step "the installed package's types: mypy's stubtest"
# The stubs of the compiled module against what it holds at run time, and
# the whole package type-checked as a user's checker reads it (py.typed).
# PEP 800's @disjoint_base is left out: type checkers older than the
# pinned mypy do not know it.
(cd "$work" && "$venv/bin/python" -m mypy.stubtest --ignore-disjoint-bases tiledzarr)

step "examples/python/acquire.py, read back by zarr-python"
(cd "$work" && "$venv/bin/python" "$repo/examples/python/acquire.py" --frames 96 --size 256 \
    --backend cpu --out "$work/py-acquire.zarr")

step "examples/python/plate.py, a plate of fields read back by zarr-python"
(cd "$work" && "$venv/bin/python" "$repo/examples/python/plate.py" --passes 3 --size 256 \
    --backend cpu --out "$work/py-plate.zarr")

step "python/bench/bench_numpy.py on the CPU: cam-32, and a tz-bench --positions record's stream from Python"
# The GPU script's Python benchmark, run here for what it checks besides
# speed (every byte appended taken, the record's stream rebuilt and its
# bytes matched, a wrong record refused); no ratio is asked of two cores.
tz_bench="$repo/target/release/tz-bench"
[[ -x "$tz_bench" ]] || { echo "$tz_bench is missing: build it first (cargo build --release)" >&2; exit 1; }
"$tz_bench" --config cam-32 --backend cpu --positions 4 --bytes 64MiB --reps 1 \
    --out "$work/tz-bench-positions-4.json" >/dev/null
bench_numpy=("$venv/bin/python" "$repo/python/bench/bench_numpy.py" "$work/bench-numpy" --backend cpu --pool 4 --reps 1)
(cd "$work" && "${bench_numpy[@]}" --positions "$work/tz-bench-positions-4.json" --min-ratio 0 >/dev/null)
(cd "$work" && "${bench_numpy[@]}" --bytes 256MiB >/dev/null)
if (cd "$work" && "${bench_numpy[@]}" --compare "$work/tz-bench-positions-4.json" 2>/dev/null); then
    echo "bench_numpy.py took a --positions record for --compare" >&2
    exit 1
fi
"$venv/bin/python" -m mypy --strict "$repo/python/bench/bench_numpy.py"
