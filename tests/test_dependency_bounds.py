"""pyproject's lower bounds are versions the code runs on: the oldest typer allowed imports the CLI."""

import re
import subprocess
import sys

from conftest import ROOT
from commbench.errors import OK


def _lower_bound(package: str) -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(rf'"{package}>=([0-9.]+)"', text).group(1)


def test_oldest_allowed_typer_imports_the_cli(tmp_path):
    version = _lower_bound("typer")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", tmp_path,
                    f"typer=={version}"], check=True, capture_output=True, timeout=300)
    proc = subprocess.run([sys.executable, "-c", "import typer, commbench.cli; print(typer.__version__)"],
                          capture_output=True, text=True, env={"PYTHONPATH": f"{tmp_path}:{ROOT}"}, timeout=120)
    assert proc.returncode == OK, proc.stderr[-2000:]
    assert proc.stdout.strip() == version
