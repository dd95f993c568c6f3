#!/usr/bin/env bash
# GPU tests and benchmarks in two steps, for a GPU machine that has no Rust
# toolchain and no network:
#
#   scripts/gpu-run.sh bundle          # here: build with the kernels, collect
#                                      # binaries + nvCOMP into bundle/
#   bundle/run.sh [RESULTS_DIR [PHASE...]]
#                                      # there: GPU tests, sanitizers, benchmarks,
#                                      # the whole benchmark protocol with peers
#
# The run fails (non-zero) when any GPU test fails or cannot run: a missing
# GPU, driver or nvCOMP is a failure, never a skip.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
cmd="${1:-bundle}"
[[ "$cmd" == bundle ]] || { echo "usage: $0 bundle" >&2; exit 2; }

bundle="$repo/bundle"
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/lib"

NVCC=$(scripts/setup-cuda-compiler.sh | tail -1)
export NVCC TZ_KERNEL_CACHE="${TZ_KERNEL_CACHE:-$repo/target/kernel-cache}"

# Test executables with the kernels in them.
cargo test --release --no-run --message-format=json 2>/dev/null \
    | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        name = m["target"]["name"]
        if name in ("c_api_roundtrip", "gpu", "gpu_faults", "gpu_memory", "gpu_chunk_order",
                    "c_api_errors", "rust_api",
                    "hardening_api", "hardening_store", "ome_fixtures", "reserve_commit",
                    "latency_bound", "arrays", "skipped_frames"):
            shutil.copy(m["executable"], os.path.join(sys.argv[1], name))
' "$bundle/bin"
cargo build --release --example acquire --example synth_raw --bin tz-bench
cp target/release/examples/acquire target/release/examples/synth_raw target/release/tz-bench "$bundle/bin/"
strip "$bundle"/bin/*

# nvCOMP 6.0 (not ours to ship: fetched from PyPI into the bundle only).
wheel_dir="$repo/.cache/nvcomp"
if [[ ! -f "$wheel_dir/libnvcomp.so.6" ]]; then
    mkdir -p "$wheel_dir"
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 \
        --python-version 3.12 -d "$wheel_dir" nvidia-libnvcomp-cu13==6.0.0.12
    (cd "$wheel_dir" && python3 -m zipfile -e nvidia_libnvcomp_cu13-*.whl wheel \
        && cp wheel/nvidia/libnvcomp/lib64/libnvcomp.so.6 . && rm -rf wheel)
fi
cp "$wheel_dir/libnvcomp.so.6" "$bundle/lib/"

# The peers' Python packages the GPU machine lacks (it has numpy and
# tensorstore), as wheels for its Python 3.12, pinned as for the venv here.
pin() { grep -i "^$1==" scripts/requirements.txt; }
mkdir -p "$bundle/wheels"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$bundle/wheels" \
    "$(pin acquire-zarr)" "$(pin zarr)" "$(pin numcodecs)" "$(pin donfig)" "$(pin google-crc32c)"
# The Python package: its wheel, the kernels inside (about 1 MB), and its
# benchmark. The nvCOMP wheel it installs beside it there is not bundled
# (30 MB): the python phase takes it from TZ_NVCOMP_WHEEL or bundle/python/.
PY=$(scripts/setup-python.sh | tail -1)
TZ_REQUIRE_KERNELS=1 TZ_PY="$PY" scripts/build-wheels.sh --linux-only "$bundle/python"
cp python/bench/bench_numpy.py "$bundle/python/"

mkdir -p "$bundle/scripts"
cp scripts/bench-peers.py scripts/bench_peers_data.py scripts/bench-table.py scripts/durable-write-probe.py \
    scripts/gpu-ratio.py "$bundle/scripts/"
cp scripts/gpu-tests.sh "$bundle/run.sh"
chmod +x "$bundle/run.sh"
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
# Binaries built from uncommitted changes say so in their records.
[[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] || commit="$commit-dirty"
echo "$commit" >"$bundle/COMMIT"
du -sh "$bundle"
