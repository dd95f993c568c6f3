#!/usr/bin/env bash
# Installs the CUDA 13.0 compiler from PyPI (no GPU needed) into a venv and
# prints the path of nvcc as the last line on stdout:
#
#   export NVCC=$(scripts/setup-cuda-compiler.sh | tail -1)
#
# The four wheels are pinned together: an unpinned nvvm pulls a newer
# release whose PTX a CUDA 13.0 driver rejects. Idempotent.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${TZ_CUDA_VENV:-$repo/.cuda-venv}"
python="${TZ_PYTHON:-python3}"
wheels=(nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-runtime==13.0.96)
stamp="$venv/.tz-cuda.stamp"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "${wheels[*]}" ]]; then
    echo "setup-cuda-compiler: installing ${wheels[*]} into $venv" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: "${wheels[@]}" >&2
    echo "${wheels[*]}" >"$stamp"
fi
nvcc=$(find "$venv" -path '*/nvidia/cu13/bin/nvcc' -type f | head -1)
[[ -x "$nvcc" ]] || { echo "setup-cuda-compiler: nvcc not found under $venv" >&2; exit 1; }
echo "$nvcc"
