"""Where a run folder may go, and what is one: check_place refuses an output folder that readers
(report, compare, model) would not find whole, before anything starts; is_run_folder and
has_run_json tell commbench's run folders from anyone's folder."""

from __future__ import annotations

import csv
import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path

from commbench.errors import InputError
from commbench.folder.outputs import output_folder, probe_folder
from commbench.folder import lock as folder_lock
from commbench.folder.schema import REQUIRED, RESULTS_CSV, RUN_JSON

RESULTS_ROOT = Path("results")  # where a folder goes when --out is not given: results/<run id>[-<name>]


def new_run_id() -> str:
    """A run's id: its UTC start time to the second and 6 random hex digits."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def default_folder(*name: str) -> Path:
    """results/<run id>[-<name>...]: a new folder's place where no --out is given."""
    return RESULTS_ROOT / "-".join((new_run_id(), *name))


def is_run_folder(d: Path) -> bool:
    """Does d hold a commbench run: a results.csv whose header has the schema's required columns,
    or a run.json naming a run? (Anyone's results.csv or run.json is not one.)"""
    try:
        with open(d / RESULTS_CSV, newline="", encoding="utf-8", errors="replace") as f:
            if set(REQUIRED) <= set(next(csv.reader([f.readline(65536)]), [])):
                return True
    except (OSError, csv.Error):
        pass
    return has_run_json(d)


def has_run_json(d: Path) -> bool:
    """Does d hold a run.json commbench wrote (a JSON object naming a run id or format version)?"""
    try:
        with open(d / RUN_JSON, "rb") as f:
            head = f.read(1 << 20)
        meta = json.loads(head)
        return isinstance(meta, dict) and ("run_id" in meta or "format_version" in meta)
    except (OSError, ValueError):
        return False


def _run_below(path: Path, depth: int = 3) -> Path | None:
    """A run folder below path, looking `depth` levels down."""
    base = len(path.parts)
    for root, dirs, files in os.walk(path):
        if Path(root) != path and (RESULTS_CSV in files or RUN_JSON in files) and is_run_folder(Path(root)):
            return Path(root)
        if len(Path(root).parts) - base >= depth:
            dirs.clear()
    return None


def check_place(path, sweep: bool = False, what: str = "--out", probe: bool = True) -> Path:
    """An output folder that readers (report, compare, model: commbench.folder.files.run_dirs)
    will find whole, checked before anything starts: usable (commbench.folder.outputs.output_folder);
    not inside a run folder, since a reader takes a folder holding results.csv as one run and
    looks no further; a sweep's folder not a run folder itself; a new run's folder not above run
    folders, which its results.csv would hide. Returns the path."""
    p = output_folder(path, what, probe=False)
    if (p.absolute().parent / "suite.yaml").is_file():  # in a sweep's folder: not while another sweep writes it
        folder_lock.check_free(p.absolute().parent)
    for parent in p.absolute().parents:
        if is_run_folder(parent):
            raise InputError(f"{what} {str(path)!r} is inside the run folder {str(parent)!r}, where report and "
                             "compare would not see it: choose a folder outside it")
    if sweep and is_run_folder(p):
        raise InputError(f"{what} {str(path)!r} is a run folder: a sweep needs a folder of its own, or report and "
                         "compare would see only that run")
    below = None if sweep or not p.is_dir() else _run_below(p)
    if below is not None:
        raise InputError(f"{what} {str(path)!r} holds run folders ({str(below)!r}): a run's results there would "
                         "hide them from report and compare; choose a folder of its own")
    if probe:  # the caller's own checks first (probe=False), where a folder may be refused before a probe writes in it
        probe_folder(path, what)
    return p
