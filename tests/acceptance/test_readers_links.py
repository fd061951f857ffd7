"""Hostile inputs, class 11 of issue 43 (links and special files): no reader follows a link out of a
folder (report, compare, model reading a folder's results.csv, samples or run.json that links
elsewhere, or a sweep's sub-folder that does: refused in one line, exit 2); a link loop or a link to
a folder inside the path is never followed (a loop: one line, exit 2, not RuntimeError); a FIFO,
device or folder given as a file to import is refused before it is opened (it used to block forever)."""

import pytest

from hostile_contract import case, meets_contract
from hostile_fixtures import OSU, PREDICT, copy, mkdir, params, remove, symlink
from readers_fixtures import fifo
from commbench.errors import BAD_INPUT, OK

FILES = ("results.csv", "run.json", "samples.csv")


def linked(name: str, dst: str = "R") -> tuple:
    """dst: SYN's files, with `name` a link to the same file of another copy of SYN (OUT), outside dst."""
    return (copy("SYN", "OUT"), mkdir(dst), *(copy_file(f, dst) for f in FILES if f != name),
            symlink(f"{dst}/{name}", f"../OUT/{name}"))


def copy_file(name: str, dst: str):
    def step(s):
        (s / dst / name).write_bytes((s / "OUT" / name).read_bytes())
    return step


CASES = [case(11, f"{cmd.split()[0]}-{name.replace('.', '-')}-links-outside", cmd, *linked(name),
              note="read through the link before issue 43")
         for name in FILES for cmd in ("report R -o r.html", "compare R SYN", "model fit R -o m.json")
         if not (name == "samples.csv" and cmd.startswith(("report", "model")))]
CASES += [
    case(11, "compare-samples-parquet-links-outside", "compare R SYN", copy("SYN"), copy("SYN", "R"),
         copy("SYN", "OUT"), mkdir("P"), symlink("R/samples.parquet", "../P/samples.parquet"),
         copy("data:nccl_tests_all_gather.json", "P/samples.parquet")),
    case(11, "report-sweep-subfolder-links-outside", "report S -o r.html", copy("SYN", "S/r1"), copy("SYN", "OUT"),
         symlink("S/r2", "../OUT")),
    case(11, "compare-sweep-subfolder-links-outside", "compare S SYN", copy("SYN"), copy("SYN", "S/r1"),
         symlink("S/r2", "/")),
    case(11, "report-sweep-link-loop", "report S -o r.html", copy("SYN", "S/r1"), symlink("S/a", "b"),
         symlink("S/b", "a"), note="RuntimeError (exit 3) before issue 43"),
    case(11, "compare-sweep-link-loop", "compare S SYN", copy("SYN"), copy("SYN", "S/r1"), symlink("S/a", "a")),
    case(11, "compare-path-is-a-link-loop", "compare L SYN", copy("SYN"), symlink("L", "L")),
    case(11, "report-results-csv-link-loop", "report R -o r.html", copy("SYN", "R"), remove("R/results.csv"),
         symlink("R/results.csv", "x"), symlink("R/x", "results.csv"), note="a loop where results.csv should be"),
    case(11, "report-results-csv-dangling-link", "report R -o r.html", mkdir("R"), symlink("R/results.csv", "gone")),
    case(11, "compare-results-csv-is-a-fifo", "compare R SYN", copy("SYN"), mkdir("R"), fifo("R/results.csv")),
    case(11, "compare-samples-csv-is-a-fifo", "compare R SYN", copy("SYN"), copy("SYN", "R"), fifo("R/samples.parquet")),
    case(11, "import-nccl-tests-fifo", "import nccl-tests f --out O", fifo("f"), note="blocked forever before issue 43"),
    case(11, "import-osu-fifo", "import osu f -n 4 --out O", fifo("f")),
    case(11, "import-nccl-tests-dev-zero", "import nccl-tests /dev/zero --out O"),
    case(11, "import-osu-folder", "import osu d -n 4 --out O", mkdir("d")),
    case(11, "report-sweep-link-inside-read-once", "report S -o r.html", copy("SYN", "S/r1"), symlink("S/latest", "r1"),
         expect=(OK,), outputs=("r.html",), note="a link to a folder inside the path: the folder is read where it is"),
    case(11, "compare-sweep-self-link", "compare S SYN", copy("SYN"), copy("SYN", "S/r1"), symlink("S/r1/self", "."),
         expect=(OK,), note="a link back up the tree: never followed, no loop"),
    case(11, "import-osu-through-a-link", "import osu l -n 4 --out O", copy(OSU, "osu.txt"), symlink("l", "osu.txt"),
         expect=(OK,), outputs=("O",), note="a file named on the command line may be a link"),
    case(11, "model-predict-model-fifo", f"{PREDICT} --model f", fifo("f")),
    case(11, "report-path-is-a-link-loop", "report L -o r.html", symlink("L", "L")),
    case(11, "model-fit-path-is-a-link-loop", "model fit L -o m.json", symlink("L", "L")),
]


@pytest.mark.parametrize("c", params(CASES, launching=False))
def test_readers_links(c, tmp_path):
    meets_contract(c, tmp_path)


def test_class_size():
    assert len(CASES) >= 20 and all(c.expect in ({BAD_INPUT}, {OK}) for c in CASES)
