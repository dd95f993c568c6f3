#!/usr/bin/env bash
# Runs on the GPU machine from the bundle made by `scripts/gpu-run.sh bundle`
# (copied there as run.sh):
#
#   bundle/run.sh [RESULTS_DIR [PHASE...]]
#
# PHASE: tests, sanitizer, bench, codecs, fsync, protocol, python, ome, lean,
# arrays (default: all ten, in that order). arrays writes the acquisitions
# of several arrays per stream (positions, a plate, two cameras, with
# dropped frames) on the GPU backend into RESULTS_DIR/arrays-stores.tgz (the
# build machine reads them back with tests/readback/check_arrays.py),
# runs them under compute-sanitizer memcheck, runs the skipped-frames
# property test on the GPU backend, and benchmarks 96 positions of 2048^2
# uint16 frames, 2 channels, beside one cam-32 stream of the same bytes
# (tz-bench --positions 96; below 0.8 of it, TZ_POSITIONS_MIN_RATIO, the
# phase fails). lean runs the zero-copy and latency
# tests on the GPU backend (the latency bound at 50 MB/s in cam-32's
# shape), compute-sanitizer on them, and cam-32 with the 3 GiB staging of
# earlier versions beside the default, and codec none through write and
# through reservations (--ingest dma), with ceilings: start-up, destroy
# and memory are in the records. ome writes the OME-Zarr fixtures on
# the GPU backend into RESULTS_DIR/ome-stores.tgz (their manifest names
# the paths they had here: the build machine checks them with
# tests/readback/check_ome.py, which has the readers and the validator),
# compares every fixture stored without compression by both backends
# file by file,
# runs them under compute-sanitizer memcheck, and benchmarks cam-32 beside
# cam-32-pyramid (mean and median) in one run, shards discarded (below the
# goals of 0.8 and 0.75 of cam-32, the phase fails). codecs sweeps every codec over cam-32 on the GPU and
# the CPU backend, shards discarded, each with its ceilings (records under
# RESULTS_DIR/codecs). fsync streams cam-32 into a store with and without fsync. protocol runs every configuration of the benchmark protocol
# (TZ_PROTOCOL_CONFIGS to name fewer) on the GPU backend, shards discarded
# and written to a store under TZ_BENCH_DIR (default /tmp), with the
# ceilings and the peers, TZ_PROTOCOL_BYTES (default 8GiB) per run. python
# installs the tiledzarr wheel and the nvCOMP wheel (TZ_NVCOMP_WHEEL, or one
# in bundle/python/) into a virtual environment on the machine's Python (its
# numpy), then streams cam-32 and a time-lapse of 96 positions from numpy
# with no variable naming nvCOMP and compares each with tz-bench on the same
# frames in the same run, failing below 0.9 of it (TZ_PYTHON_BYTES, default
# 8GiB).
# GPU tests (the C-API round trips on the GPU backend, GPU-vs-CPU equality,
# batches compressed in another chunk order, nvCOMP temp-buffer immunity,
# bad input), compute-sanitizer memcheck and
# racecheck on a small stream, then the benchmarks. Exits non-zero when any
# of them fails or cannot run.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
results="${1:-$here/results}"
shift || true
phases=("$@")
[[ ${#phases[@]} -gt 0 ]] || phases=(tests sanitizer bench codecs fsync protocol python ome lean arrays)
wants() { [[ " ${phases[*]} " == *" $1 "* ]]; }
mkdir -p "$results"
# The python phase runs without these two.
ld_library_path_before="${LD_LIBRARY_PATH:-}"
export TZ_NVCOMP_LIBRARY="$here/lib/libnvcomp.so.6"
export LD_LIBRARY_PATH="$here/lib:${LD_LIBRARY_PATH:-}"
TZ_COMMIT=$(cat "$here/COMMIT")
export TZ_COMMIT
failed=()
step() { printf '\n=== %s\n' "$*"; }
check() { local name=$1; shift; if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failed+=("$name"); fi; }

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$results/device.txt"
echo "commit $(cat "$here/COMMIT")" | tee -a "$results/device.txt"

if wants tests; then
step "GPU tests"
check gpu-only "$here/bin/gpu" --ignored --test-threads 4
check memory-plan "$here/bin/gpu_memory" --ignored --nocapture
check faults "$here/bin/gpu_faults" --ignored --nocapture
check chunk-order "$here/bin/gpu_chunk_order" --ignored --nocapture
check roundtrip-gpu env TZ_TEST_BACKEND=gpu "$here/bin/c_api_roundtrip" --test-threads 4
check bad-input env TZ_TEST_BACKEND=gpu "$here/bin/c_api_errors"
check rust-api env TZ_TEST_BACKEND=gpu "$here/bin/rust_api"
check hardening-api env TZ_TEST_BACKEND=gpu "$here/bin/hardening_api"
check hardening-store "$here/bin/hardening_store"
fi

if wants sanitizer; then
step "compute-sanitizer on a small stream"
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
    check "sanitizer-$tool" "$sanitizer" --tool "$tool" --error-exitcode 1 \
        "$here/bin/acquire" --frames 40 --size 256 --out "$results/sanitizer-$tool.zarr" --backend gpu
    rm -rf "$results/sanitizer-$tool.zarr"
    # The codecs' own kernels (shuffles, blosc framing, Adler-32). nvCOMP's
    # deflate kernel for levels 8-9 (`gdeflate::lz_compress_optimal_parse`)
    # reports shared-memory hazard warnings under racecheck, inside nvCOMP
    # and not ours to mend: racecheck leaves that one kernel out, memcheck
    # checks every kernel.
    exclude=()
    [[ $tool == racecheck ]] && exclude=(--kernel-name-exclude kns=lz_compress_optimal_parse)
    check "sanitizer-$tool-codecs" env TZ_GPU_CODEC_CASES=3 "$sanitizer" --tool "$tool" \
        "${exclude[@]}" --error-exitcode 1 "$here/bin/gpu" --ignored --exact \
        every_codec_on_the_gpu_decodes_as_the_cpu_store
    # Batches compressed in another order than the tiles' (kernels/order.cu).
    check "sanitizer-$tool-chunk-order" env TZ_GPU_ORDER_BATCHES=6 "$sanitizer" --tool "$tool" \
        --error-exitcode 1 "$here/bin/gpu_chunk_order" --ignored
done
fi

if wants bench; then
step "benchmarks: cam-32 and cam-128, GPU backend, shards discarded"
for config in cam-32 cam-128; do
    check "bench-$config" "$here/bin/tz-bench" --config "$config" --backend gpu --sink discard \
        --bytes 32GiB --reps 2 --out "$results/bench-$config-gpu-discard.json"
done
check "bench-cam-32-none" "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --codec none --bytes 32GiB --reps 2 --out "$results/bench-cam-32-gpu-discard-none.json"
fi

if wants codecs; then
step "codec sweep: cam-32, GPU and CPU backend, shards discarded, ceilings"
# One record per codec, in $results/codecs.
sweep=zstd,gzip,blosc-zstd-byte,blosc-zstd-bit,blosc-zstd-noshuffle,blosc-lz4-byte,blosc-lz4-bit,blosc-zlib-byte,blosc-zlib-bit,none
check "codecs-gpu" "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --codec "$sweep" --bytes "${TZ_CODEC_BYTES:-8GiB}" --reps 3 --results "$results/codecs"
check "codecs-cpu" "$here/bin/tz-bench" --config cam-32 --backend cpu --sink discard \
    --codec "${sweep%,none}" --bytes "${TZ_CODEC_CPU_BYTES:-2GiB}" --reps 2 --results "$results/codecs"
fi

if wants fsync; then
step "the cost of fsync and of the page cache: cam-32, GPU backend, filesystem store, fsync on and off, shard files through the page cache and around it"
store_dir="${TZ_BENCH_DIR:-/tmp}/tz-bench-fsync"
mkdir -p "$store_dir"
# The disk's own durable write rate, the ceiling of a store with fsync.
check "durable-write-probe" python3 "$here/scripts/durable-write-probe.py" "$store_dir/probe" \
    >"$results/durable-write-probe.txt"
cat "$results/durable-write-probe.txt"
for fsync in on off; do
    for page_cache in off on; do
        check "fsync-$fsync-page-cache-$page_cache" "$here/bin/tz-bench" --config cam-32 \
            --backend gpu --sink fs --store-dir "$store_dir" --fsync "$fsync" \
            --page-cache "$page_cache" --bytes "${TZ_FSYNC_BYTES:-8GiB}" --reps 2 --no-ceilings \
            --out "$results/fsync-$fsync-page-cache-$page_cache-cam-32-gpu-fs.json"
    done
done
rm -rf "$store_dir"
fi

if wants protocol; then
step "benchmark protocol: ${TZ_PROTOCOL_CONFIGS:-all configurations}, GPU backend, both sinks, ceilings, peers"
# The peers' packages travel as wheels; numpy and tensorstore are there.
site="$results/site"
if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$site" "$here"/wheels/*.whl; then
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
    echo "installing the peers' wheels failed: the peers will be recorded as failed"
fi
store_dir="${TZ_BENCH_DIR:-/tmp}/tz-bench-protocol"
mkdir -p "$store_dir"
df -h "$store_dir" | tee "$results/disk.txt"
bytes="${TZ_PROTOCOL_BYTES:-8GiB}"
# The peer script and bench/results are found from the working directory.
cd "$here" || exit 1
for config in ${TZ_PROTOCOL_CONFIGS:-cam-32 cam-64 cam-128 tczyx frames-u8}; do
    check "protocol-$config-discard" "$here/bin/tz-bench" --config "$config" --backend gpu \
        --sink discard --bytes "$bytes" --reps 3 --out "$results/protocol-$config-gpu-discard.json"
    check "protocol-$config-fs" "$here/bin/tz-bench" --config "$config" --backend gpu \
        --sink fs --store-dir "$store_dir" --bytes "$bytes" --reps 2 --peers --python "$(command -v python3)" \
        --out "$results/protocol-$config-gpu-fs.json"
done
cd - >/dev/null || exit 1
python3 "$here/scripts/bench-table.py" "$results"/protocol-*.json | tee "$results/protocol-table.md"
fi

if wants python; then
step "Python package: the wheel with nvCOMP's wheel, cam-32 and 96 positions from numpy beside tz-bench"
python_venv="$results/python-venv"
python_pool="$results/cam-32-pool.raw"
python_bytes="${TZ_PYTHON_BYTES:-8GiB}"
# bench_numpy.py in the venv, as a user runs it: nothing names nvCOMP (the
# package finds the wheel in its environment), and the machine's numpy,
# which may live where a venv does not look (a user site), by its folder.
bench_numpy() {
    local numpy_site
    numpy_site=$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))') || return 1
    env -u TZ_NVCOMP_LIBRARY LD_LIBRARY_PATH="$ld_library_path_before" \
        PYTHONPATH="$numpy_site${PYTHONPATH:+:$PYTHONPATH}" \
        "$python_venv/bin/python" "$here/python/bench_numpy.py" "$results" --raw "$python_pool" \
        --reps 2 --backend gpu --min-ratio 0.9 --nvcomp-from-environment "$@"
}
python_phase() {
    local nvwheel="${TZ_NVCOMP_WHEEL:-}" site
    [[ -n "$nvwheel" ]] || nvwheel=$(ls "$here"/python/nvidia_libnvcomp*.whl 2>/dev/null | head -1)
    if [[ ! -f "$nvwheel" ]]; then
        echo "no nvCOMP wheel: set TZ_NVCOMP_WHEEL or put nvidia_libnvcomp_cu13-*.whl in $here/python" >&2
        return 1
    fi
    # A venv on the machine's Python, seeing its numpy; the wheels go in
    # with the machine's pip (no network, no ensurepip needed).
    rm -rf "$python_venv"
    python3 -m venv --system-site-packages --without-pip "$python_venv" || return 1
    site=$("$python_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" \
        "$here"/python/tiledzarr-*.whl "$nvwheel" || return 1
    # tz-bench's figure on the same frames: synth_raw writes its cam-32 pool.
    "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard --bytes "$python_bytes" --reps 2 \
        --no-ceilings --out "$results/python-tz-bench-cam-32.json" || return 1
    "$here/bin/synth_raw" "$python_pool" 64 || return 1
    bench_numpy --bytes "$python_bytes" --compare "$results/python-tz-bench-cam-32.json"
}
# A time-lapse of 96 positions from Python: `append` waits for staging, so
# the lane must keep its GPU batches full as tz-bench's waiting writes do.
python_positions() {
    if [[ ! -x "$python_venv/bin/python" || ! -f "$python_pool" ]]; then
        echo "python-cam-32 left no venv or frame pool to stream from" >&2
        return 1
    fi
    "$here/bin/tz-bench" --config cam-32 --backend gpu --positions 96 --bytes "$python_bytes" --reps 2 \
        --out "$results/python-tz-bench-positions-96.json" >/dev/null || return 1
    bench_numpy --positions "$results/python-tz-bench-positions-96.json"
}
check python-cam-32 python_phase
check python-positions-96 python_positions
rm -f "$python_pool"
fi

if wants ome; then
step "OME-Zarr: the fixtures on the GPU backend, compute-sanitizer, cam-32-pyramid beside cam-32"
rm -rf "$results/ome-stores"
check ome-fixtures-gpu env TZ_OME_BACKEND=gpu TZ_OME_DIR="$results/ome-stores" \
    "$here/bin/ome_fixtures" --exact write_ome_fixtures
tar -C "$results" -czf "$results/ome-stores.tgz" ome-stores && rm -rf "$results/ome-stores"
check ome-gpu-equals-cpu "$here/bin/ome_fixtures" --ignored --exact gpu_stores_equal_cpu_stores_byte_for_byte
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
check sanitizer-memcheck-ome env TZ_OME_BACKEND=gpu TZ_OME_DIR="$results/ome-sanitizer" \
    "$sanitizer" --tool memcheck --error-exitcode 1 "$here/bin/ome_fixtures" --exact write_ome_fixtures
rm -rf "$results/ome-sanitizer"
bytes="${TZ_OME_BYTES:-8GiB}"
check ome-bench-cam-32 "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --bytes "$bytes" --reps 3 --no-ceilings --out "$results/ome-cam-32-gpu-discard.json"
for method in mean median; do
    check "ome-bench-pyramid-$method" "$here/bin/tz-bench" --config cam-32-pyramid --method "$method" \
        --backend gpu --sink discard --bytes "$bytes" --reps 3 --no-ceilings \
        --out "$results/ome-cam-32-pyramid-$method-gpu-discard.json"
done
check ome-bench-tczyx-ome "$here/bin/tz-bench" --config tczyx-ome --backend gpu --sink discard \
    --bytes "$bytes" --reps 3 --no-ceilings --out "$results/ome-tczyx-ome-gpu-discard.json"
# The pyramid's goals against plain cam-32 (docs/ome-zarr.md): 0.8 with
# mean, 0.75 with median.
check ome-pyramid-mean-goal python3 "$here/scripts/gpu-ratio.py" streams \
    "$results/ome-cam-32-pyramid-mean-gpu-discard.json" "$results/ome-cam-32-gpu-discard.json" 0.8
check ome-pyramid-median-goal python3 "$here/scripts/gpu-ratio.py" streams \
    "$results/ome-cam-32-pyramid-median-gpu-discard.json" "$results/ome-cam-32-gpu-discard.json" 0.75
fi

if wants lean; then
step "lean streams: zero-copy ingest, the latency bound, start-up, memory, codec none"
check reserve-commit-gpu env TZ_TEST_BACKEND=gpu "$here/bin/reserve_commit"
check reserve-roundtrip-gpu env TZ_TEST_BACKEND=gpu "$here/bin/c_api_roundtrip" \
    --exact reserve_and_commit_mixed_with_writes_round_trip
check latency-gpu env TZ_TEST_BACKEND=gpu "$here/bin/latency_bound" --include-ignored --nocapture
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
check sanitizer-memcheck-lean env TZ_TEST_BACKEND=gpu "$sanitizer" --tool memcheck \
    --error-exitcode 1 "$here/bin/reserve_commit"
bytes="${TZ_LEAN_BYTES:-8GiB}"
# Each tz-bench run is a process of its own: its first rep's stream is
# the process's first (a cold start), the others start warm.
check lean-zstd-3gib "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --bytes "$bytes" --reps 3 --staging 3GiB --no-ceilings --out "$results/lean-zstd-3gib.json"
check lean-zstd-default "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --bytes "$bytes" --reps 3 --out "$results/lean-zstd-default.json"
check lean-none-write "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --codec none --bytes "$bytes" --reps 3 --out "$results/lean-none-write.json"
check lean-none-dma "$here/bin/tz-bench" --config cam-32 --backend gpu --sink discard \
    --codec none --ingest dma --bytes "$bytes" --reps 3 --out "$results/lean-none-dma.json"
fi

if wants arrays; then
step "several arrays per stream: acquisitions, dropped frames, 96 positions"
check arrays-gpu env TZ_TEST_BACKEND=gpu TZ_ARRAYS_DIR="$results/arrays-stores" "$here/bin/arrays" \
    --exact acquisitions_through_the_c_api_leave_stores_for_the_readers
(cd "$results" && tar czf arrays-stores.tgz arrays-stores && rm -rf arrays-stores)
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
check sanitizer-memcheck-arrays env TZ_TEST_BACKEND=gpu TZ_ARRAYS_DIR="$results/arrays-sanitizer" \
    "$sanitizer" --tool memcheck --error-exitcode 1 "$here/bin/arrays" \
    --exact acquisitions_through_the_c_api_leave_stores_for_the_readers
rm -rf "$results/arrays-sanitizer"
check skipped-frames-gpu env TZ_TEST_BACKEND=gpu "$here/bin/skipped_frames"
check positions-96 "$here/bin/tz-bench" --positions 96 --backend gpu \
    --bytes "${TZ_POSITIONS_BYTES:-8GiB}" --reps 3 --out "$results/positions-96-gpu.json"
# 0.90-0.92 of one stream when measured; a waiting writer's staging once
# left it at 0.15 with every step passing.
check positions-96-goal python3 "$here/scripts/gpu-ratio.py" positions \
    "$results/positions-96-gpu.json" "${TZ_POSITIONS_MIN_RATIO:-0.8}"
fi

step "summary"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "FAILED: ${failed[*]}"
    exit 1
fi
echo "all GPU tests passed"
