"""Where this Python environment holds nvCOMP from NVIDIA's wheels."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Where a ``nvidia-libnvcomp-cu13`` (or ``-cu12``) wheel puts the library,
#: below an entry of ``sys.path``: ``lib64`` on Linux, ``bin`` (the DLLs) on
#: Windows, as NVIDIA's wheels of its CUDA libraries lay them out.
_NVCOMP_WHEEL_DIRS = (
    (Path("nvidia", "libnvcomp", "bin"), Path("nvidia", "libnvcomp", "lib64"))
    if sys.platform == "win32"
    else (Path("nvidia", "libnvcomp", "lib64"),)
)


def nvcomp_search_dirs() -> list[str]:
    """The folders of this Python environment that hold nvCOMP from a
    ``nvidia-libnvcomp-cu13``/``-cu12`` wheel (what ``pip install
    tiledzarr[gpu]`` installs). They are handed to the library at import, so
    the GPU backend finds nvCOMP there before the system's own search;
    ``TZ_NVCOMP_LIBRARY``, when set, still wins."""
    found: list[str] = []
    for entry in sys.path:
        for sub in _NVCOMP_WHEEL_DIRS:
            folder = Path(entry or os.getcwd()) / sub
            try:
                if folder.is_dir() and str(folder) not in found:
                    found.append(str(folder))
            except OSError:
                continue
    return found
