"""A noisy neighbour for the regression-gate benchmarks: a command run with a CPU-bound process
started some seconds in and stopped when the command ends."""

from __future__ import annotations

import subprocess
import sys


def run(command: list[str], delay: float | None) -> tuple[int, str]:
    """Run `command` (its output dropped, its stderr kept); with `delay`, a CPU-bound neighbour starts
    that many seconds in and is stopped when the command ends. Returns (exit code, stderr)."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    hog = None
    try:
        if delay is not None:
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        _, stderr = proc.communicate()
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    return proc.returncode, stderr
