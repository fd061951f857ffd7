"""Headless Chromium for report tests: render a page, return its DOM and console output."""

import shutil
import subprocess
import tempfile

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def render(path, screenshot=None, budget_ms=15000):
    """(dom, console lines) of the page after its scripts ran."""
    with tempfile.TemporaryDirectory() as profile:
        args = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}"]
        if screenshot:
            subprocess.run(args + ["--window-size=1400,2400", f"--screenshot={screenshot}", f"file://{path}"],
                           capture_output=True, text=True, timeout=120)
        proc = subprocess.run(args + ["--dump-dom", f"file://{path}"], capture_output=True, text=True, timeout=120)
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    return proc.stdout, console
