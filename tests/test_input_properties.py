"""Property-based: whatever the user types, the answer is a valid spec or one InputError."""

from hypothesis import given, settings
from hypothesis import strategies as st

from commbench.errors import InputError
from commbench.spec import SweepSpec, parse_size

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
size_like = st.one_of(text, st.from_regex(r"-?\d{1,14}\s*[KMGTQkmg]?(i?B)?", fullmatch=True))


@given(size_like)
def test_parse_size_returns_a_positive_int_or_input_error(s):
    try:
        value = parse_size(s)
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert isinstance(value, int) and value >= 1


@settings(max_examples=300, deadline=None)
@given(collective=st.one_of(text, st.sampled_from(["all_reduce", "allgather", "reduce-scatter", "all_reduce,x"])),
       backend=st.one_of(text, st.sampled_from(["mpi", "gloo", "nccl", "mpi,gloo"])),
       algorithm=st.one_of(text, st.sampled_from(["native", "ring,tree", "rhd"])),
       dtype=st.one_of(text, st.sampled_from(["float32", "bfloat16,int8"])),
       op=st.one_of(text, st.sampled_from(["sum", "avg,max"])),
       mode=st.one_of(text, st.sampled_from(["in-place", "out-of-place", "both"])),
       sizes=st.one_of(st.none(), size_like, st.just("8,1K,4M")),
       min_bytes=size_like, max_bytes=size_like,
       step_factor=st.floats(allow_nan=True, allow_infinity=True),
       segment_bytes=size_like,
       nprocs=st.integers(-5, 10**6), warmup=st.integers(-5, 100), iters=st.one_of(st.none(), st.integers(-5, 10)),
       min_time=st.floats(allow_nan=True, allow_infinity=True),
       launcher=st.one_of(text, st.sampled_from(["auto", "local", "mpirun", "none"])),
       device=st.one_of(text, st.sampled_from(["cpu", "cuda"])),
       ring_order=st.one_of(text, st.sampled_from(["rank", "topology"])),
       timeout=st.one_of(st.none(), st.floats(allow_nan=True)),
       batch=st.one_of(st.none(), st.integers(-3, 10)))
def test_any_options_give_a_spec_or_one_input_error(**options):
    try:
        spec = SweepSpec.from_options(**options)
    except InputError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert spec.sizes and spec.nprocs >= 1 and spec.collectives and spec.backends
        assert SweepSpec.from_json(spec.to_json()) == spec
