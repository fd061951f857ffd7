"""What a collective is (commbench/collectives/base.py): Counts, a library's NativeCall and
the defaults of Collective that each collective overrides or inherits."""

from types import SimpleNamespace

import pytest

from commbench.dtypes import DTYPES
from commbench.collectives import COLLECTIVES, Collective, Counts, NativeCall
from commbench.collectives.patterns import Pattern


def test_count_is_the_larger_per_rank_buffer():
    assert Counts(12, 3, 48).count == 12
    assert Counts(3, 12, 48).count == 12
    assert Counts(5, 5, 20).count == 5


def test_counts_are_frozen():
    with pytest.raises(AttributeError):
        Counts(1, 1, 4).in_count = 2


def test_native_call_resolves_the_first_name_present():
    lib = SimpleNamespace(new=lambda: "new", old=lambda: "old")
    assert NativeCall(("newest", "new", "old"), "c").resolve(lib)() == "new"
    assert NativeCall("old", "c").resolve(lib)() == "old"
    assert NativeCall(("gone", "also_gone"), "c").resolve(lib) is None
    assert NativeCall(("newest", "new"), "c").name == "newest" and NativeCall("old", "c").name == "old"
    assert NativeCall("old", "c").in_place  # by default a call accepts the in-place layout


def test_the_base_collective_has_no_facts_of_its_own():
    bare = Collective()
    for call in (lambda: bare.bus_factor(4), lambda: bare.counts(64, 4, 4),
                 lambda: bare.expected(Pattern("sum", DTYPES["float32"], 2), 0, Counts(1, 1, 4), 0, 1)):
        with pytest.raises(NotImplementedError):
            call()
    assert bare.reduces and bare.native == {} and bare.nccl_function is None


def test_the_defaults_a_collective_inherits():
    bare, counts = Collective(), Counts(6, 2, 24)
    assert bare.size_of_osu(1000, 4) == 1000
    assert bare.in_place_offset(3, counts) == 0
    assert bare.message_elems(counts) == 6


def test_algorithms_need_the_collective_to_bind_them():
    class Broadcast(Collective):
        name = "broadcast"

    with pytest.raises(ValueError, match="commbench's own algorithms do not run broadcast"):
        Broadcast().bind_algorithm(None, None, None, None, None, True, 1, 1)


def test_every_registered_collective_overrides_the_facts():
    """Every collective says its sizes, bus factor and exact output; one an own algorithm runs also
    says how the algorithm binds to it (the others keep the base's refusal)."""
    from commbench.algorithms import ALGORITHMS

    run_by_algorithms = {c for a in ALGORITHMS.values() for c in a.collectives}
    for coll in COLLECTIVES.values():
        for method in ("bus_factor", "counts", "expected") + (("bind_algorithm",) * (coll.name in run_by_algorithms)):
            assert getattr(type(coll), method) is not getattr(Collective, method), (coll.name, method)
        assert set(coll.native) >= {"mpi", "torch"} and all(isinstance(c, NativeCall) for c in coll.native.values())
