"""Hostile inputs of issue 43 (suites parsed as data, strictly): a key given twice is refused with its
line; a plain scalar means what it would mean on the command line (no YAML 1.1 octal, sexagesimal,
hex, underscores or yes/no), and a label is checked whole, after parsing. Each suite is shown with
`sweep --dry-run` (nothing is launched), so what it would run is checked (the contract:
tests/hostile_contract.py)."""

import pytest

from hostile_contract import Outcome, case, meets_contract
from hostile_fixtures import params, write
from commbench.errors import OK


def suite(run: str, top: str = "") -> tuple:
    """A one-run suite whose run has these extra lines (indented under it)."""
    lines = "".join(f"    {line}\n" for line in run.splitlines())
    return write("s.yaml", f"{top}runs:\n  - nprocs: 2\n    collective: all_reduce\n{lines}"),


def shows(*texts: str):
    """--dry-run's points name these texts (stdout)."""
    def check(s, out: Outcome) -> list[str]:
        text = out.stdout.decode("utf-8", "replace")
        return [f"--dry-run does not show {t!r}:\n{text[:600]}" for t in texts if t not in text]
    return check


DRY = "sweep s.yaml --dry-run"
CASES = [
    case(10, "suite-runs-twice", DRY, *suite("label: a", top="runs:\n  - label: lost\n"),
         note="a second runs: would drop the first"),
    case(10, "suite-run-key-twice", DRY, *suite("label: a\nsizes: [8]\nsizes: [1M]")),
    case(10, "suite-defaults-key-twice", DRY, *suite("label: a", top="defaults:\n  iters: 10\n  iters: 20\n")),
    case(10, "suite-size-leading-zero", DRY, *suite("label: a\nsizes: 010"), expect=(OK,),
         checks=(shows("out-of-place 10\n"),), note="the CLI reads 010 as 10 B; YAML 1.1 as octal 8"),
    case(10, "suite-size-list-leading-zero", DRY, *suite("label: a\nsizes: [010, 1K]"), expect=(OK,),
         checks=(shows("out-of-place 10 1K\n"),)),
    case(10, "suite-size-sexagesimal", DRY, *suite("label: a\nsizes: 1:20"), note="YAML 1.1: 80"),
    case(10, "suite-size-hex", DRY, *suite("label: a\nsizes: 0x10"), note="the CLI refuses 0x10 too"),
    case(10, "suite-size-underscore", DRY, *suite("label: a\nsizes: 1_000")),
    case(10, "suite-nprocs-octal", DRY, *suite("label: a\nnprocs: 0o2")),
    case(10, "suite-iters-float", DRY, *suite("label: a\niters: 1e3")),
    case(10, "suite-power-yes", DRY, *suite("label: a\npower: yes"), note="YAML 1.1: true"),
    case(10, "suite-power-on", DRY, *suite("label: a\npower: on")),
    case(10, "suite-power-true", DRY, *suite("label: a\npower: true"), expect=(OK,)),
    case(10, "suite-label-leading-zero", DRY, *suite("label: 0777"), expect=(OK,), checks=(shows("== 0777:"),),
         note="YAML 1.1 names the folder 511"),
    case(10, "suite-label-date", DRY, *suite("label: 2024-01-01"), expect=(OK,), checks=(shows("== 2024-01-01:"),)),
    case(10, "suite-label-trailing-newline", DRY, *suite('label: "a\\n"')),
    case(10, "suite-name-trailing-newline", DRY, *suite("label: a", top='name: "ci\\n"\n')),
    case(10, "suite-name-leading-zero", DRY, *suite("label: a", top="name: 007\n"), expect=(OK,),
         checks=(shows("suite 007 "),)),
]


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_suites_as_data(c, tmp_path, job):
    """`sweep --dry-run`: nothing is launched, but the runner counts sweep as a command that may."""
    meets_contract(c, tmp_path)
