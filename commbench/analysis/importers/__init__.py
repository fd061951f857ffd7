"""Other benchmarks' output -> commbench's results layout, so report and compare show
nccl-tests, OSU and commbench numbers side by side.

* nccl-tests text output (the table printed by all_reduce_perf & co.) and its JSON report
  (`-J FILE`): one row per size and buffer mode; per-iteration times become samples when the
  JSON holds them, else the reported average is the one sample.
* OSU Micro-Benchmarks collective latency tests (osu_allreduce & co.), default and `-f`
  output. OSU does not print the number of ranks: give it (--nprocs).

The collectives say which names the tools give them (Collective.nccl_tests_name, osu_title).
Sizes follow commbench's (nccl-tests') semantics: where OSU's Size is one rank's block (all-gather,
gather, all-to-all, scatter) it is multiplied by the number of ranks (Collective.size_of_osu).

The files are data from elsewhere, checked like command-line input before anything is written:
times > 0 and at most MAX_IMPORTED_US, bandwidths finite and >= 0 (nccl-tests prints 0.00 for small
sizes), sizes 1 B .. MAX_SIZE_BYTES (commbench.options: the largest size a run takes), ranks
1 .. MAX_IMPORT_RANKS, names plain words. A result of size 0 (all-gather, reduce-scatter and
all-to-all print them where -b is below ranks x element size) measured nothing and is left out.
nccl-tests' correctness column is its #wrong (elements, "%5g") or, in older versions, its `error`
(the largest |result - expected|, "%5.0le": an error beyond its tolerance counts as 1 wrong), or
N/A (not checked). A file, its points and its samples are bounded (commbench.folder.limits:
IMPORT_BYTES, IMPORT_POINTS, IMPORT_SAMPLES) so a huge or hostile file costs a bounded time and
memory; a FIFO or device is refused before it is opened.

Strict by line: a line that starts like a result (a digit, a sign, a point, any Unicode digit) is
one, and must read as one (sizes plain ASCII digits, times MIN_IMPORTED_US .. MAX_IMPORTED_US µs); a second run or
test in the file (a second device list, '# nThread' line, result table or OSU title), a rank listed
twice or a result measured twice is refused, never merged. Other lines (a log's noise) are left.
Anything else is one InputError, "<file> line N: <problem>" (a JSON report: "<file> result N:
<problem>"). lenient: result lines that do not read are left out and counted (meta
"skipped_lines"); a second run or a repeated result is refused all the same.
"""

from commbench.analysis.importers.base import MAX_IMPORT_RANKS, Imported, max_json_values, read_input, write_import
from commbench.analysis.importers.nccl_tests import parse_nccl_tests, parse_nccl_tests_json, parse_nccl_tests_text
from commbench.analysis.importers.osu import parse_osu

__all__ = ["MAX_IMPORT_RANKS", "Imported", "max_json_values", "parse_nccl_tests", "parse_nccl_tests_json",
           "parse_nccl_tests_text", "parse_osu", "read_input", "write_import"]
