"""Hostile inputs, class 1 of issue 20 (a result folder can run code): a folder given to --resume must
not run anything it names, nor pass a tampered spec (the contract: tests/hostile_contract.py; besides
it, no marker file written by a program the folder names)."""

import json
import os
from pathlib import Path

import pytest

from hostile_contract import case, meets_contract
from hostile_fixtures import edit_json, fixture, meta, no_marker, params, resumable, spec, sweep_folder, write
from commbench.errors import BAD_INPUT, OK
from commbench.folder.schema import RUN_JSON

EVIL_SCRIPT = "#!/bin/sh\necho \"$0 $*\" >> '{S}/PWNED'\nexit 1\n"
SITECUSTOMIZE = "open('{S}/PWNED', 'a').write('sitecustomize imported\\n')\n"


def evil() -> tuple:
    """A script and a sitecustomize.py that write {S}/PWNED when run: what a crafted folder points to."""
    def step(s: Path):
        write("evil.sh", EVIL_SCRIPT)(s)
        os.chmod(s / "evil.sh", 0o755)
        write("evilpy/sitecustomize.py", SITECUSTOMIZE)(s)
        write("evilprefix/bin/prted", EVIL_SCRIPT)(s)
        os.chmod(s / "evilprefix/bin/prted", 0o755)
    return (step,)


def huge_run_json(s: Path) -> str:
    """A 40 MB run.json: BASE's, interrupted, with a 40 MB string in it."""
    doc = json.loads((fixture("BASE") / RUN_JSON).read_text())
    doc["status"] = "interrupted"
    return json.dumps(doc)[:-1] + ', "padding": "' + "x" * (40 * 2**20) + '"}'


R = "run --resume R"


def mk(name, *steps, expect=(BAD_INPUT,), note="", argv=R, outputs=()):
    return case(1, name, argv, *resumable(), *evil(), *steps, expect=expect, checks=(no_marker,), note=note,
                outputs=outputs)


CASES = [
    mk("resume-control-clean", expect=(OK,), outputs=("R",),
       note="control: an interrupted folder with no launcher arguments resumes"),
    mk("launcher-args-mpmd-evil-rank", meta(launcher_args=["--oversubscribe", "{S}/evil.sh", ":", "-n", "1"])),
    mk("launcher-args-plm-rsh-agent", meta(launcher_args=["--mca", "plm_rsh_agent", "{S}/evil.sh",
                                                         "--host", "evilhost:2"])),
    mk("launcher-args-launch-agent", meta(launcher_args=["--launch-agent", "{S}/evil.sh", "--host", "evilhost:2"])),
    mk("launcher-args-x-pythonpath", meta(launcher_args=["-x", "PYTHONPATH={S}/evilpy"])),
    mk("launcher-args-mca-env", meta(launcher_args=["--mca", "mca_base_env_list", "PYTHONPATH={S}/evilpy"])),
    mk("launcher-args-benign-recorded", meta(launcher_args=["--bind-to", "none"]),
       note="recorded arguments are shown and must be confirmed with --launcher-args: refused until given again"),
    mk("launcher-args-confirmed", meta(launcher_args=["--bind-to", "none"]), expect=(OK,), outputs=("R",),
       argv="run --resume R --launcher-args '--bind-to none'",
       note="control: the same arguments given on the command line resume"),
    mk("launcher-args-string", meta(launcher_args="--oversubscribe {S}/evil.sh : -n 1")),
    mk("launcher-args-numbers", meta(launcher_args=[1, 2.5, None, {"x": 1}])),
    mk("launcher-args-null", meta(launcher_args=None), expect=(OK, BAD_INPUT), outputs=("R",),
       note="null may read as no arguments (OK) or as a damaged record (BAD_INPUT)"),
    mk("spec-launcher-torchrun-no-python", spec(launcher="torchrun", backends=["gloo"]),
       meta(launcher_args=["--no-python", "{S}/evil.sh"])),
    mk("spec-launcher-shell", spec(launcher="/bin/sh")),
    mk("recorded-launch-argv-ignored", meta(launch_argv=["/bin/sh", "-c", "echo >> {S}/PWNED"]),
       expect=(OK, BAD_INPUT), outputs=("R",),
       note="launch_argv is a record, not an input: resuming is fine, running it is not"),
    mk("recorded-environment-ignored", meta(environment={"PYTHONPATH": "{S}/evilpy", "LD_PRELOAD": "{S}/evil.so"},
                                            rank0_environment={"PYTHONPATH": "{S}/evilpy"}),
       expect=(OK, BAD_INPUT), outputs=("R",), note="the recorded environment is a record, never applied"),
    mk("spec-nprocs-string", spec(nprocs="2; touch PWNED")),
    mk("spec-nprocs-float", spec(nprocs=2.5)),
    mk("spec-nprocs-huge", spec(nprocs=10**9)),
    mk("spec-sizes-strings", spec(sizes=["8", "$(touch PWNED)"])),
    mk("spec-sizes-negative", spec(sizes=[-8, 1024])),
    mk("spec-backends-string", spec(backends="mpi")),
    mk("spec-iters-huge", spec(iters=10**18)),
    mk("spec-min-time-nan", spec(iters=None, min_time=float("nan"))),
    mk("spec-done-points-text", spec(done_points="all")),
    mk("spec-unknown-field", spec(evil_field="{S}/evil.sh"), expect=(OK, BAD_INPUT), outputs=("R",),
       note="an unknown field may be refused (BAD_INPUT) or ignored (OK); either way never used"),
    mk("spec-missing", edit_json("R/run.json", lambda d, s: d.pop("spec"))),
    mk("spec-is-list", edit_json("R/run.json", lambda d, s: d.update(spec=[1, 2, 3]))),
    mk("spec-out-dir-elsewhere", spec(out_dir="{S}/elsewhere"), expect=(OK, BAD_INPUT), outputs=("R",),
       note="the folder given is where rows go, whatever the record says: nothing under elsewhere/"),
    mk("format-version-future", meta(format_version=99)),
    mk("run-json-list", write("R/run.json", "[1, 2, 3]")),
    mk("run-json-huge-40mb", write("R/run.json", huge_run_json),
       note="a valid record padded to 40 MB: refused by size (BAD_INPUT), bounded"),
    mk("run-json-nested-100k", write("R/run.json", "[" * 100_000 + "]" * 100_000)),
    case(1, "sweep-resume-crafted-run-json", "sweep tiny.yaml --out S --resume",
         *sweep_folder(damage=evil() + (edit_json("S/r1/run.json", lambda d, s: d.update(
             launcher_args=["-x", f"PYTHONPATH={s}/evilpy"])),)),
         expect=(OK, BAD_INPUT), outputs=("S",), checks=(no_marker,),
         note="the suite's own launcher arguments apply (OK), or the recorded ones must be confirmed (BAD_INPUT)"),
]


@pytest.mark.parametrize("c", params(CASES, launching=True))
def test_folders_run_no_code(c, tmp_path, job):
    meets_contract(c, tmp_path)
