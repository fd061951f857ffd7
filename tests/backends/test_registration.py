"""NCCL buffer registration as a run's setting (--registration, nccl-tests' -R): its names, its
refusals before anything starts (one line, exit 2), the spec and the rows that record it, and the
context compare names. The registering itself is NCCL's on a GPU: tests/gpu/test_nccl.py."""

import json

import pytest
from cli_inprocess import run_cli

from commbench.analysis.conditions import facts
from commbench.backends.registration import REGISTRATIONS, resolve
from commbench.errors import BAD_INPUT, InputError
from commbench.spec import SweepSpec


@pytest.mark.parametrize("given,name", [("none", "none"), ("local", "local"), ("WINDOW", "window"), ("0", "none"),
                                        ("1", "local"), ("2", "window")])
def test_names_and_nccl_tests_numbers(given, name):
    assert resolve(given) == name


def test_an_unknown_registration_is_one_line():
    with pytest.raises(InputError, match=r"unknown --registration '3' \(accepted: none, local, window") as exc:
        resolve("3")
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("args,message", [
    (["--backend", "gloo", "--registration", "local"], "--registration local registers NCCL's buffers: it needs "
                                                       "--backend nccl (on --device cuda), not gloo"),
    (["--backend", "mpi", "--registration", "2"], "not mpi"),
    (["--backend", "nccl", "--device", "cuda", "-a", "ring", "--registration", "window"],
     "--registration window is for NCCL's own calls (-a native): not ring"),
    (["--registration", "always"], "unknown --registration 'always'"),
])
def test_registration_nothing_would_do_is_refused_before_anything_starts(args, message, tmp_path):
    outcome = run_cli("run", "-n", 1, *args, "--out", tmp_path / "r")
    assert outcome.code == BAD_INPUT and message in outcome.stderr, outcome.stderr
    assert len(outcome.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_the_spec_records_it_only_where_asked():
    plain = SweepSpec(backends=["gloo"], nprocs=1).validate()
    assert plain.registration == "none" and plain.row_registration == ""
    assert "registration" not in json.loads(plain.to_json())  # (the ranks of an older commbench read it)
    asked = SweepSpec(backends=["nccl"], device="cuda", nprocs=1, registration="1").validate()
    assert asked.registration == "local" and asked.row_registration == "local"
    back = SweepSpec.from_json(asked.to_json())
    assert back.registration == "local" and json.loads(asked.to_json())["registration"] == "local"


def test_compare_names_the_registration_as_a_context():
    assert facts({"spec": {"registration": "window"}})[0]["NCCL registration"] == "window"
    assert facts({"spec": {"split": None}})[0]["NCCL registration"] == "none"  # a run before the field
    assert REGISTRATIONS == ("none", "local", "window")
