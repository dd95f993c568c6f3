#!/usr/bin/env bash
# Create (or reuse) the Python virtualenv used by the read-back checks and the
# peer benchmarks, with the exact versions from scripts/requirements.txt.
#
#   PY=$(scripts/setup-python.sh | tail -1)
#
# Environment:
#   TZ_VENV    where to put the venv (default: <repo>/.venv)
#   TZ_PYTHON  interpreter used to create it (default: python3)
#
# Idempotent: when the venv already holds exactly this requirements file
# (checked through a stamp file holding its hash and the interpreter version)
# nothing is installed. All progress goes to stderr; the last (and only) line
# on stdout is the venv's python.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$script_dir/.." && pwd)"
venv="${TZ_VENV:-$repo/.venv}"
python="${TZ_PYTHON:-python3}"
req="$script_dir/requirements.txt"
stamp="$venv/.tz-requirements.stamp"

log() { echo "setup-python: $*" >&2; }

if [[ ! -f "$req" ]]; then
    log "missing $req"
    exit 1
fi
if ! command -v "$python" >/dev/null 2>&1; then
    log "interpreter '$python' not found (set TZ_PYTHON)"
    exit 1
fi

py_version="$("$python" -c 'import sys, platform; print(platform.python_implementation(), sys.version.split()[0], platform.machine())')"
want="$( { cat "$req"; echo "$py_version"; } | sha256sum | cut -d' ' -f1)"
venv_py="$venv/bin/python"

if [[ -x "$venv_py" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
    && "$venv_py" -c 'import numpy, zarr, tensorstore, acquire_zarr, maturin, pytest, s3fs, ome_zarr_models, ome_zarr.reader, yaozarrs, moto.server' >/dev/null 2>&1; then
    log "venv at $venv is up to date"
    echo "$venv_py"
    exit 0
fi

# A venv made by another interpreter version cannot be patched in place.
if [[ -x "$venv_py" ]]; then
    have="$("$venv_py" -c 'import sys, platform; print(platform.python_implementation(), sys.version.split()[0], platform.machine())' 2>/dev/null || true)"
    if [[ "$have" != "$py_version" ]]; then
        log "venv at $venv was made by '$have', recreating with '$py_version'"
        rm -rf "$venv"
    fi
fi

if [[ ! -x "$venv_py" ]]; then
    log "creating venv at $venv ($py_version)"
    if ! "$python" -m venv "$venv" >&2; then
        log "could not create a venv with $python; on Debian/Ubuntu install python3-venv (apt-get install python3-venv)"
        exit 1
    fi
fi

rm -f "$stamp"
log "installing pinned packages from $req"
"$venv_py" -m pip install --disable-pip-version-check --no-input --quiet \
    --only-binary=:all: -r "$req" >&2
"$venv_py" -c 'import numpy, zarr, tensorstore, acquire_zarr, maturin, pytest, s3fs, ome_zarr_models, ome_zarr.reader, yaozarrs, moto.server' >&2
echo "$want" > "$stamp"
log "venv ready: $venv"
echo "$venv_py"
