"""The Python API measures what the CLI measures: `SweepSpec()`'s defaults, `SweepSpec.from_options()`
and `commbench run` with no options are one spec, all taken from the option table
(commbench.options), and the API takes the sizes and lists the CLI takes (text: '1K', 'a,b')."""

from __future__ import annotations

import dataclasses

import pytest
import typer

from commbench import options
from commbench.errors import InputError
from commbench.spec import SweepSpec


def _cli_spec(*args) -> SweepSpec:
    from commbench.cli import app

    values = typer.main.get_command(app).commands["run"].make_context("run", list(args)).params
    return SweepSpec.from_options(**options.spec_arguments(options.cli_fields(values)))


def test_api_defaults_are_the_clis():
    assert SweepSpec().validate() == SweepSpec.from_options() == _cli_spec()


def test_each_default_comes_from_the_table():
    """Field by field, so that a drift names the field: the mode (both buffer modes), then the rest."""
    api, cli = SweepSpec().validate(), _cli_spec()
    assert api.in_place == list(options.MODES[options.BY_NAME["mode"].default]) == [False, True]
    for f in dataclasses.fields(SweepSpec):
        assert getattr(api, f.name) == getattr(cli, f.name), f.name


def test_the_readme_api_example_measures_both_buffer_modes():
    spec = SweepSpec(backends=["mpi"], nprocs=4, collectives=["all_reduce"], sizes=[8, 1 << 20]).validate()
    assert spec.point_count() == 4
    assert _cli_spec("--backend", "mpi", "-n", "4", "-c", "all_reduce", "--sizes", "8,1M").point_count() == 4


@pytest.mark.parametrize("sizes,expected", [(["1K"], [1024]), (["1K", 8], [8, 1024]), ("8,1K", [8, 1024]),
                                            ("4M", [4 << 20]), ([8, 1024], [8, 1024])])
def test_api_takes_the_clis_size_text(sizes, expected):
    assert SweepSpec(sizes=sizes).validate().sizes == expected
    if isinstance(sizes, str):
        assert SweepSpec.from_options(sizes=sizes).sizes == expected


def test_api_size_text_is_checked_like_the_clis():
    for bad, message in (("12Q", "invalid size '12Q'"), (["2T"], "larger than 1T")):
        with pytest.raises(InputError, match=message):
            SweepSpec(sizes=bad).validate()


def test_api_takes_comma_text_for_lists_and_size_text_for_segments():
    spec = SweepSpec(collectives="all_reduce,all_gather", backends="gloo", dtypes="float,int8", ops="sum,max",
                     algorithms="native,ring", segment_bytes="64K").validate()
    assert (spec.collectives, spec.backends, spec.dtypes, spec.ops, spec.algorithms, spec.segment_bytes) == (
        ["all_reduce", "all_gather"], ["gloo"], ["float32", "int8"], ["sum", "max"], ["native", "ring"], 65536)
