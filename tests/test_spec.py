import pytest

from commbench.errors import InputError
from commbench.spec import SweepSpec, format_size, parse_size, size_range, split_list


@pytest.mark.parametrize("text,value", [("8", 8), ("1K", 1024), ("64k", 65536), ("4M", 4 << 20), ("1G", 1 << 30),
                                        ("1GB", 1 << 30), ("2KiB", 2048), (" 16 ", 16)])
def test_parse_size_binary_suffixes(text, value):
    assert parse_size(text) == value
    assert parse_size(format_size(value)) == value


@pytest.mark.parametrize("text", ["12Q", "-1", "", "0", "1.5K", "K", "1KK", "abc"])
def test_parse_size_rejects(text):
    with pytest.raises(InputError):
        parse_size(text)


def test_size_range_matches_nccl_tests_doubling():
    assert size_range(8, 128, 2) == [8, 16, 32, 64, 128]
    assert size_range(1024, 1024, 2) == [1024]
    assert size_range(8, 100, 3) == [8, 24, 72]


@pytest.mark.parametrize("args", [(16, 8, 2), (8, 16, 1), (8, 16, 0.5), (8, 16, float("nan")), (8, 1 << 30, 1.0000001)])
def test_size_range_rejects(args):
    with pytest.raises(InputError):
        size_range(*args)


def test_split_list():
    assert split_list("a, b,,c") == ["a", "b", "c"]
    assert split_list(["a,b", "c"]) == ["a", "b", "c"]


def test_validate_normalizes_collective_names():
    spec = SweepSpec(collectives=["allreduce", "All-Gather", "reduce_scatter", "all_reduce"]).validate()
    assert spec.collectives == ["all_reduce", "all_gather", "reduce_scatter"]


@pytest.mark.parametrize("field,value,message", [
    ("collectives", ["broadcastx"], "unknown collective"),
    ("backends", ["ucc"], "unknown backend"),
    ("dtypes", ["float8"], "unknown dtype"),
    ("ops", ["xor"], "unknown op"),
    ("nprocs", 0, "at least 1"),
    ("launcher", "ssh", "unknown launcher"),
    ("device", "tpu", "unknown device"),
    ("iters", 0, "iteration count"),
    ("warmup", -1, "warm-up"),
    ("min_time", 0, "min-time"),
    ("timeout", -3, "timeout"),
    ("ranks_per_node", 0, "--ranks-per-node 0: it must be from 1 to the run's 4 ranks"),
    ("ranks_per_node", 5, "--ranks-per-node 5: it must be from 1 to the run's 4 ranks"),  # (a probe: accepted)
])
def test_validate_rejects_with_accepted_values(field, value, message):
    spec = SweepSpec(**{field: value})
    with pytest.raises(InputError, match=message):
        spec.validate()


@pytest.mark.parametrize("backend,device", [("nccl", "cpu"), ("mpi", "cuda")])
def test_backend_device_mismatch(backend, device):
    with pytest.raises(InputError, match="cannot run on device"):
        SweepSpec(backends=[backend], device=device).validate()


def test_gloo_on_cuda_runs_the_peer_algorithms_only():
    with pytest.raises(InputError, match="peer algorithms only"):
        SweepSpec(backends=["gloo"], device="cuda", algorithms=["native", "ring"]).validate()
    spec = SweepSpec(backends=["gloo"], device="cuda", algorithms=["peer_oneshot"]).validate()
    assert spec.algorithms == ["peer_oneshot"]


def test_channels_and_ring_order_given_need_a_run_they_reach_to_use_them():
    """Checked on what a command line gives, across every spec it reaches (a suite's runs, ab's sides), not
    per spec: a suite of native and ring_kernel runs takes --channels, and a recorded spec is not checked."""
    from commbench.cli.common import check_used

    native = SweepSpec(algorithms=["native", "ring"]).validate()
    kernel = SweepSpec(algorithms=["ring_kernel"]).validate()
    with pytest.raises(InputError, match="^--channels sets the kernels' channels, and -a native,ring runs none of them "
                                         r"\(hierarchical_kernel, ring_kernel, tree_kernel\): leave it out$"):
        check_used(["channels"], [native, native])
    check_used(["channels"], [native, kernel])
    check_used([], [native])  # (not given: a suite's own field, or a recorded spec)
    assert SweepSpec(algorithms=["native"], channels=2).validate().channels == 2
    tree = SweepSpec(algorithms=["native", "tree"], ring_order="topology").validate()
    with pytest.raises(InputError, match="^--ring-order topology runs -a ring as ring_topology, and -a native,tree "
                                         "has no ring: leave it out$"):
        check_used(["ring_order"], [tree])
    ring = SweepSpec(algorithms=["ring"], ring_order="topology").validate()
    assert ring.algorithms == ["ring_topology"] and ring.validate().algorithms == ["ring_topology"]  # (resumed)
    check_used(["ring_order"], [tree, ring])
    check_used(["ring_order"], [SweepSpec(algorithms=["native"], ring_order="rank").validate()])  # (the default)


def test_native_han_is_open_mpis_and_needs_the_mpi_backend():
    with pytest.raises(InputError, match="^-a native_han is Open MPI's coll/han: it needs --backend mpi$"):
        SweepSpec(backends=["gloo"], algorithms=["native", "native-han"]).validate()
    spec = SweepSpec(backends=["mpi", "gloo"], algorithms=["Native_HAN", "native"]).validate()
    assert spec.algorithms == ["native_han", "native"]  # (a gloo point of it is skipped with the reason)


def test_spec_json_round_trip():
    spec = SweepSpec(backends=["gloo"], sizes=[8, 1024], in_place=[True], label="x").validate()
    assert SweepSpec.from_json(spec.to_json()) == spec


def test_from_options_starts_from_the_option_table():
    spec = SweepSpec.from_options(backend="gloo")
    assert spec.in_place == [False, True] and spec.nprocs == 4 and spec.algorithms == ["native"]
    assert spec.sizes == size_range(8, 16 << 20, 2) and spec.segment_bytes == 1 << 20 and spec.out_dir == ""
    assert SweepSpec.from_options(backend="gloo", emulate="3x2").nprocs == 6


def test_from_options_rejects_an_unknown_mode():
    with pytest.raises(InputError, match="unknown buffer mode 'sideways' \\(accepted: in-place, out-of-place, both\\)"):
        SweepSpec.from_options(mode="sideways")


def test_a_batch_larger_than_the_fixed_iterations_is_refused():
    """--iters times exactly that many calls: a sample of more was cut to --iters without a word."""
    with pytest.raises(InputError, match="--batch 8 asks for more calls per sample than --iters 4"):
        SweepSpec.from_options(nprocs=2, backend="mpi", iters=4, batch=8)
    assert SweepSpec.from_options(nprocs=2, backend="mpi", iters=8, batch=8).batch == 8
