"""Every limit a reader of files keeps, in one table (issue 43): report, compare, model, topo-compare
and import read nothing before its size is known to be within these, so a hostile or careless file
costs a bounded time and memory. Each limit has a default and an environment variable that raises
(or lowers) it: a whole number, e.g. COMMBENCH_MAX_SAMPLES=20000000. A refusal is one InputError
naming the limit and its variable.

Sizes are counted before anything is parsed: a file's bytes by stat, a Parquet file's rows from its
metadata, a CSV file's rows by counting its line ends, folders by walking them (no link followed).
A Parquet file stores repeated values in a few bytes (40 M identical samples in 0.93 MB), so its
rows, not its bytes, bound what reading it costs: samples are read in pieces and only their times
kept (commbench.folder.samples), 8 bytes a sample, at most SAMPLES of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from commbench.errors import InputError

MIB = 1 << 20


@dataclass(frozen=True)
class Limit:
    env: str  # the environment variable that sets it
    default: int
    what: str  # what is counted, for the refusal ("samples under one path")
    unit: int = 1  # bytes: shown in MiB (unit = MIB); the variable is in the same unit

    def value(self) -> int:
        """The limit in force: the environment variable (in the limit's unit) or the default."""
        raw = os.environ.get(self.env)
        if raw is None or not raw.strip():
            return self.default * self.unit
        text = raw.strip().replace("_", "")
        if not (text.isascii() and text.isdigit() and len(text) <= 18 and int(text) >= 1):
            raise InputError(f"{self.env}={raw[:40]!r}: give a whole number >= 1 "
                             f"({'MiB, ' if self.unit == MIB else ''}default {self.default})")
        return int(text) * self.unit

    def shown(self, value: int | None = None) -> str:
        value = self.value() if value is None else value
        return f"{value / MIB:g} MiB" if self.unit == MIB else f"{value:,}"

    def refusal(self, subject: str, found: int | None = None) -> InputError:
        """'<subject>: <found> <what>, more than the limit of N (raise it with ENV=...)'."""
        count = "" if found is None else (f"{self.shown(found)} " if self.unit == MIB else f"{found:,} ")
        more = f"{self.value() // self.unit * 4}"
        return InputError(f"{subject}: {count}{self.what}, more than the limit of {self.shown()} "
                          f"(raise it with {self.env}={more})")

    def check(self, subject: str, found: int) -> int:
        """found, or the refusal when it is over the limit."""
        if found > self.value():
            raise self.refusal(subject, found)
        return found


# --- result folders (commbench.folder.load) -----------------------------------------------------
FILE_BYTES = Limit("COMMBENCH_MAX_FILE_MB", 256, "in one file of a result folder", MIB)
READ_BYTES = Limit("COMMBENCH_MAX_READ_MB", 512, "of result files under one path", MIB)
RUN_JSON_BYTES = Limit("COMMBENCH_MAX_RUN_JSON_MB", 32, "in run.json", MIB)  # a spec of 10,000 sizes fits many times
WORKLOAD_JSON_BYTES = Limit("COMMBENCH_MAX_WORKLOAD_JSON_MB", 8, "in workload.json", MIB)  # its totals: a few KB
ROWS = Limit("COMMBENCH_MAX_ROWS", 65_536, "results.csv rows under one path")  # report: 50,000 rows 9.5 s, 640 MB
SAMPLES = Limit("COMMBENCH_MAX_SAMPLES", 2_500_000, "samples under one path")  # compare: 3.9 M took 1.1 GB
COLUMNS = Limit("COMMBENCH_MAX_COLUMNS", 256, "columns in one header")  # results.csv has about 50
DEPTH = Limit("COMMBENCH_MAX_DEPTH", 32, "folder levels below the path")
RUNS = Limit("COMMBENCH_MAX_RUNS", 2_000, "run folders under one path")
FOLDERS = Limit("COMMBENCH_MAX_FOLDERS", 100_000, "folders walked under one path")

# --- imported files (commbench.analysis.importers) ------------------------------------------------
IMPORT_BYTES = Limit("COMMBENCH_MAX_IMPORT_MB", 8, "in the file to import", MIB)  # a benchmark's output: KBs
IMPORT_POINTS = Limit("COMMBENCH_MAX_IMPORT_POINTS", 2048, "results in the file to import")
IMPORT_SAMPLES = Limit("COMMBENCH_MAX_IMPORT_SAMPLES", 200_000, "per-iteration times in the file to import")

# --- the cost model (commbench.analysis.model.fit) -------------------------------------------------
# a fit predicts every row hundreds of times, each rank by rank: 12 rows of 4,096 ranks took 18 s, of
# 16,384 ranks 53 s (2 ranks: 3 s); at this limit about 7 s
FIT_RANKS = Limit("COMMBENCH_MAX_FIT_RANKS", 16_384, "ranks summed over the rows to fit")

ALL = (FILE_BYTES, READ_BYTES, RUN_JSON_BYTES, WORKLOAD_JSON_BYTES, ROWS, SAMPLES, COLUMNS, DEPTH, RUNS, FOLDERS,
       IMPORT_BYTES, IMPORT_POINTS, IMPORT_SAMPLES, FIT_RANKS)


def table() -> list[tuple[str, str, str]]:
    """(variable, default, what) per limit: the docs' environment-variables table."""
    return [(lim.env, lim.shown(lim.default * lim.unit), lim.what) for lim in ALL]
