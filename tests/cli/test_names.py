"""Names as other tools spell them (commbench.spec.resolve_names, commbench.dtypes.DTYPE_ALIASES,
the collectives' own nccl-tests / NCCL / OSU names): accepted wherever commbench takes a dtype or a
collective, mapped to commbench's name; a near miss is refused in one line with "did you mean"
(exit 2), a far one without."""

from __future__ import annotations

import pytest

from cli_inprocess import run_cli
from conftest import DATA

from commbench.folder.load import load_run
from commbench.dtypes import DTYPE_ALIASES, DTYPES
from commbench.errors import BAD_INPUT, InputError, OK
from commbench.collectives import COLLECTIVES
from commbench.run import api
from commbench.spec import SweepSpec, collective_aliases, resolve_names


@pytest.fixture
def specs(monkeypatch):
    """`commbench run`'s measurement replaced: the specs it was handed."""
    seen = []

    def run_sweep(spec, **kwargs):
        seen.append(spec)
        raise InputError("stopped before measuring")

    monkeypatch.setattr(api, "run_sweep", run_sweep)
    return seen


@pytest.mark.parametrize("given,meant", [("float", "float32"), ("half", "float16"), ("double", "float64"),
                                         ("int", "int32"), ("bfloat16", "bfloat16"), ("bf16", "bfloat16"),
                                         ("FLOAT32", "float32"), ("char", "int8"), ("long", "int64")])
def test_nccl_tests_type_names(specs, given, meant):
    outcome = run_cli("run", "-n", "2", "--backend", "gloo", "-d", given, "--sizes", "8")
    assert outcome.code == BAD_INPUT and "stopped before measuring" in outcome.stderr, outcome.stderr
    assert specs[-1].dtypes == [meant]


@pytest.mark.parametrize("given,meant", [("allreduce", "all_reduce"), ("all-reduce", "all_reduce"),
                                         ("AllReduce", "all_reduce"), ("all_reduce_perf", "all_reduce"),
                                         ("osu_allreduce", "all_reduce"), ("allgather", "all_gather"),
                                         ("osu_allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
                                         ("Reduce_scatter", "reduce_scatter"),
                                         ("osu_reduce_scatter", "reduce_scatter")])
def test_nccl_tests_and_osu_collective_names(specs, given, meant):
    run_cli("run", "-n", "2", "--backend", "gloo", "-c", given, "--sizes", "8")
    assert specs[-1].collectives == [meant]


def test_a_list_of_other_names_keeps_order_and_drops_repeats():
    spec = SweepSpec(backends=["gloo"], collectives="allgather,AllReduce,all_gather", dtypes="half,float16,double")
    spec.validate()
    assert spec.collectives == ["all_gather", "all_reduce"] and spec.dtypes == ["float16", "float64"]


def test_aliases_come_from_the_owners_and_name_accepted_types():
    assert set(DTYPE_ALIASES.values()) <= set(DTYPES)
    aliases = collective_aliases()
    assert set(aliases.values()) == set(COLLECTIVES)
    assert {c.osu_name() for c in COLLECTIVES.values()} - {None} <= set(aliases)


@pytest.mark.parametrize("args,line", [
    (["-d", "flaot"], "unknown dtype 'flaot' (accepted: float32, float64, float16, bfloat16, int32, int64, int8, "
                      "uint8); did you mean float (float32)?"),
    (["-c", "alreduce"], "unknown collective 'alreduce' (accepted: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, gather, reduce, scatter, send_recv); did you "
                         "mean all_reduce?"),
    (["-c", "all_reduce,osu_allgathr"], "unknown collective 'osu_allgathr' (accepted: all_reduce, all_gather, reduce_scatter, all_to_all, all_to_allv, broadcast, gather, reduce, scatter, send_recv); did you mean "
                                        "osu_allgather (all_gather)?"),
    (["-o", "summ"], "unknown op 'summ' (accepted: sum, prod, min, max, avg); did you mean sum?"),
    (["-a", "rign"], "did you mean ring?"),
    (["--backend", "mpii"], "unknown backend 'mpii' (accepted: mpi, gloo, nccl); did you mean mpi?"),
])
def test_a_near_miss_gets_did_you_mean_in_one_line(specs, args, line):
    outcome = run_cli("run", "-n", "2", "--sizes", "8", *args)
    outcome.assert_clean()
    assert outcome.code == BAD_INPUT and line in outcome.stderr and outcome.stderr.startswith("commbench: error: ")
    assert specs == []


@pytest.mark.parametrize("kind,value,accepted", [("collective", "permute", COLLECTIVES),
                                                 ("dtype", "complex128", DTYPES), ("op", "xor", ("sum", "max"))])
def test_a_far_miss_gets_no_guess(kind, value, accepted):
    with pytest.raises(InputError) as caught:
        resolve_names(kind, value, accepted)
    assert str(caught.value) == f"unknown {kind} {value!r} (accepted: {', '.join(accepted)})"


def test_import_takes_c_and_other_names(tmp_path):
    nccl = DATA / "nccl_tests_all_reduce_16xH100.txt"
    outcome = run_cli("import", "nccl-tests", nccl, "-c", "AllReduce", "--out", tmp_path / "imp")
    assert outcome.code == OK, outcome.stderr
    rows, _ = load_run(tmp_path / "imp")
    assert set(rows.collective) == {"all_reduce"}
    refused = run_cli("import", "nccl-tests", nccl, "-c", "alreduce", "--out", tmp_path / "no")
    refused.assert_clean()
    assert refused.code == BAD_INPUT and "did you mean all_reduce?" in refused.stderr
    assert not (tmp_path / "no").exists()
    two = run_cli("import", "nccl-tests", nccl, "-c", "allreduce,allgather", "--out", tmp_path / "no")
    assert two.code == BAD_INPUT and "one collective, not 2" in two.stderr
