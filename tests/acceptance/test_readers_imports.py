"""Hostile inputs, class 12 of issue 43 (importers strict by line): a line of nccl-tests text, an
nccl-tests JSON report or OSU output that starts like a result but does not read as one (sizes -8,
0x10, full-width digits, 5000 digits, a time of 1e-320), and a file holding a second run or test (an
OSU Allgather section after the all-reduce one, an nccl-tests log concatenated twice, a rank or a
result listed twice) is refused in one line naming the line, exit 2: never skipped, merged or filed
under the first test. A log's own lines (NCCL INFO, a launcher's warning) are left, exit 0."""

import json

import pytest

from conftest import DATA
from hostile_contract import case, meets_contract
from hostile_fixtures import NCCL_JSON, NCCL_TXT, OSU, copy, nccl_json_set, nccl_text_with, params, write
from commbench.errors import BAD_INPUT, OK

ROW8 = ("           8             2     float     sum      -1    135.8    0.00    0.00      0"
        "    123.5    0.00    0.00      0")
NCCL = "import nccl-tests nccl.txt --out O"
NJSON = "import nccl-tests nccl.json --out O"
OSU_CMD = "import osu osu.txt -n 4 --out O"


def text(name: str) -> str:
    return (DATA / name[5:]).read_text()


def row8(size: str = "8", time: str = "135.8") -> str:
    return ROW8.replace("           8 ", f"{size:>12} ", 1).replace("135.8", time, 1)


def osu_with(first: str | None = None, extra: str = "", whole: str | None = None):
    """osu.txt: the OSU all-reduce output, its first data line replaced, extra appended."""
    def content(s):
        lines = text(OSU).splitlines(keepends=True)
        if first is not None:
            lines[next(i for i, x in enumerate(lines) if x[:1].isdigit())] = first + "\n"
        return (whole if whole is not None else "".join(lines)) + extra
    return write("osu.txt", content)


def json_edit(fn):
    """nccl.json: the nccl-tests JSON report, changed by fn(doc) (in place)."""
    def content(s):
        doc = json.loads(text(NCCL_JSON))
        fn(doc)
        return json.dumps(doc)
    return write("nccl.json", content)


CASES = [case(12, f"nccl-text-size-{name}", NCCL, nccl_text_with(ROW8, row8(size=size)), note="skipped before issue 43")
         for name, size in (("minus-8", "-8"), ("hex-0x10", "0x10"), ("full-width-8", "\uff18"),
                            ("5000-digits", "9" * 5000), ("1e3", "1e3"), ("plus-8", "+8"))]
CASES += [
    case(12, "nccl-text-time-1e-320", NCCL, nccl_text_with(ROW8, row8(time="1e-320")),
         note="ZeroDivisionError (exit 3) before issue 43"),
    case(12, "nccl-text-concatenated-twice", NCCL, write("nccl.txt", lambda s: text(NCCL_TXT) * 2),
         note="world size 32 before issue 43"),
    case(12, "nccl-text-results-twice", NCCL, write("nccl.txt", lambda s: text(NCCL_TXT).replace(ROW8, ROW8 + "\n" + ROW8))),
    case(12, "nccl-text-rank-listed-twice", NCCL, nccl_text_with("#  Rank  1 Group  0", "#  Rank  0 Group  0")),
    case(12, "nccl-text-second-table", NCCL, write("nccl.txt", lambda s: text(NCCL_TXT).replace(
        "# Out of bounds values", "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n" + ROW8 + "\n# Out of bounds values"))),
    case(12, "nccl-text-line-cut-short", NCCL, nccl_text_with(ROW8, ROW8[:60])),
    case(12, "nccl-text-nccl-info-lines-left", NCCL, nccl_text_with(ROW8, ROW8 + "\nnode1:123:456 [0] NCCL INFO comm "
                                                                    "0x5 rank 0 nranks 16 - Init COMPLETE"),
         expect=(OK,), outputs=("O",)),
    case(12, "nccl-json-5000-digit-integer", NJSON, write("nccl.json", lambda s: text(NCCL_JSON).replace(
        '"size": 1024', '"size": ' + "9" * 5000, 1)), note="ValueError (exit 3) before issue 43"),
    case(12, "nccl-json-time-1e-320", NJSON, copy(NCCL_JSON, "nccl.json"),
         nccl_json_set(("out_of_place", "time"), 1e-320)),
    case(12, "nccl-json-result-twice", NJSON, json_edit(lambda d: d["results"].append(d["results"][0]))),
    case(12, "nccl-json-device-twice", NJSON, json_edit(lambda d: d["config"]["devices"].append(
        d["config"]["devices"][0]))),
    case(12, "nccl-json-size-hex-text", NJSON, copy(NCCL_JSON, "nccl.json"), nccl_json_set(("size",), "0x10")),
    case(12, "osu-allgather-section-after-allreduce", OSU_CMD,
         osu_with(extra="\n" + text("data:osu/osu_allgather_4ranks.txt")), note="filed as all-reduce before issue 43"),
    case(12, "osu-concatenated-twice", OSU_CMD, write("osu.txt", lambda s: text(OSU) * 2)),
    case(12, "osu-second-size-header", OSU_CMD, osu_with(extra="# Size         Avg Latency(us)\n8    1.00\n")),
    case(12, "osu-size-repeated", OSU_CMD, osu_with(extra="4                        13.38\n")),
    case(12, "osu-time-1e-320", OSU_CMD, osu_with("8      1e-320"), note="ZeroDivisionError (exit 3) before issue 43"),
    case(12, "osu-launcher-warning-left", OSU_CMD, osu_with(extra="[node1:01234] 3 more processes have sent help "
                                                                  "message help-mpi-btl-base.txt\n"),
         expect=(OK,), outputs=("O",)),
]
CASES += [case(12, f"osu-size-{name}", OSU_CMD, osu_with(f"{size}      13.37"), note="skipped before issue 43")
          for name, size in (("minus-8", "-8"), ("hex-0x10", "0x10"), ("full-width-8", "\uff18"),
                             ("5000-digits", "9" * 5000), ("arabic-indic-8", "\u0668"))]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_readers_imports(c, tmp_path):
    meets_contract(c, tmp_path)


def test_class_size():
    assert len(CASES) >= 25 and all(c.expect in ({BAD_INPUT}, {OK}) for c in CASES)
