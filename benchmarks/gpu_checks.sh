#!/usr/bin/env bash
# The GPU checks of one short device session (docs/how-to/gpus.md, "The GPU path"), in the order of what they tell: the
# kernels' protocol on the hardware (every schedule, in one launch and in separate processes), the tree's
# time against the ring's by rank and channel count, NCCL, the one-launch cases left (all-gather first).
# The reducer, NVML, topo and the large- and small-call figures, which passed on an H200, are `--all`'s.
# Every step has its own time limit: at most 635 s in all without --all, the environment's 50 included (one
# device command's most is 600 s: the last step, as long as the time lasts, is the one cut); --all adds 435 s
# (a second command).
# Logs, each with its step's exit code, go to $OUT (default gpu-out/); the script exits 1 if any step failed
# or ran out of time.
#
#   bash benchmarks/gpu_checks.sh [--all]    # from the repository root, on a machine with a GPU
#
# Wheels in .whl/ (for a machine without a package index: a typer new enough for the CLI, plotly) are
# installed into /tmp/site first. The peer algorithms' test (tests/gpu/test_peer_cuda.py) is left out: on one
# GPU without MPS it outlasts a session (docs/how-to/gpus.md).
set -uo pipefail
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD" PATH="$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH"  # torchrun
failed=0
step() { echo "=== $1 ($(date +%T))"; }
# `limited SECONDS LOG command...`: the command under its time limit, its output also in $OUT/LOG, its exit code said
# (124: it ran out its time) and kept for the script's own
limited() {
    local seconds=$1 log=$2 rc
    shift 2
    timeout "$seconds" "$@" 2>&1 | tee "$OUT/$log"
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 124 ]; then echo "=== exit code 124 (out of time)"; else echo "=== exit code $rc"; fi | tee -a "$OUT/$log"
    [ "$rc" = 0 ] || failed=1
}

step environment
if compgen -G ".whl/*.whl" >/dev/null; then
    timeout 20 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl && export PYTHONPATH="$PWD:/tmp/site"
fi
timeout 10 nvidia-smi -L
timeout 20 python3 -c "import torch, cupy, typer; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl',
torch.cuda.nccl.version(), 'cupy', cupy.__version__, 'typer', typer.__version__, torch.cuda.get_device_name())"

K=tests/gpu/test_kernels_cuda.py N=tests/gpu/test_nccl.py
PYTEST=(python3 -m pytest -v -p no:cacheprovider -rfEs --durations=8)
set -f  # the node ids below hold [ ]: no globbing
one_launch() { for c in "$@"; do echo "$K::test_every_rank_in_one_launch[$c]"; done; }

# NVRTC builds one module per dtype, ~20 s each on an H200, inside the first call that uses it: all eight at
# once here, into CuPy's disk cache (~/.cupy/kernel_cache), which every later process reads.
step "kernels: NVRTC builds every dtype's module at once"
checks_build() {
    local d pid rc=0 pids=()
    for d in float32 float64 float16 bfloat16 int32 int64 int8 uint8; do
        python3 -c "import sys, time; t = time.time(); from commbench.kernels.abi import entry
from commbench.kernels.gpu import gpu_function
gpu_function(entry('ring', 'all_reduce', sys.argv[1], 'sum'), sys.argv[1], 0); print(sys.argv[1], 'built in', round(time.time() - t, 1), 's')" "$d" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
    return $rc
}
limited 75 build.log bash -c "$(declare -f checks_build); checks_build"

# Distinct node ids run in the order given (pytest merges only overlapping ones).
step "kernels: the one-shot schedules, back-to-back calls, the guards, separate processes"
limited 170 kernels.log "${PYTEST[@]}" --timeout 120 \
    $(one_launch oneshot-all_reduce-False-2 oneshot-reduce_scatter-False-8 oneshot-all_gather-False-3) \
    $K::test_64_mb_and_back_to_back_calls_of_varying_size $K::test_a_launch_that_cannot_be_resident_is_refused_not_hung \
    $K::test_this_gpus_layout_has_no_peer_refusal $K::test_a_wait_that_times_out_names_the_rank_and_the_step \
    $K::test_ring_and_tree_kernels_in_separate_processes

# The tree all-reduce took 13.2 ms at 8 ranks against the ring's 1.0 (64 MB, 16 channels): by rank count, then
# by channel count and size at 8 ranks (a cost per chunk or a stall per call).
step "tree against ring by ranks, channels and size"
checks_tree() {
    local only=tree:all_reduce,ring:all_reduce
    python3 benchmarks/kernels_one_gpu.py --ranks 2,4,5,6,7,8 --sizes 64M --only $only &&
    python3 benchmarks/kernels_one_gpu.py --ranks 8 --sizes 1M,4M,64M --channels 1 --only $only &&
    python3 benchmarks/kernels_one_gpu.py --ranks 8 --sizes 1M,4M,64M --channels 4 --only $only
}
limited 55 tree.log bash -c "$(declare -f checks_tree); checks_tree"

step "NCCL: the CUDA-graph timing first"
limited 125 nccl.log "${PYTEST[@]}" --timeout 100 $N::test_nccl_is_timed_as_a_cuda_graph_unless_no_graph \
    $N::test_nccl_several_ranks_share_one_gpu $N::test_nccl_tuning_records_the_library_choice $N::test_nccl_sweep_exact

step "NCCL buffer registration (nccl-tests' -R 1 and 2): exact, recorded"
limited 60 registration.log "${PYTEST[@]}" --timeout 50 $N::test_nccl_registered_buffers_are_exact_and_recorded

step "NCCL as a user runs it: every point's efficiency against this GPU's copy rate"
limited 40 run.log python3 -m commbench run -n 1 --backend nccl --device cuda --sizes 8,1M,64M --out "$(mktemp -d)/run"

step "the one-launch cases not yet run on a GPU, all-gather first, as long as the time lasts"
limited 60 one-launch.log "${PYTEST[@]}" --timeout 50 $(one_launch ring-all_gather-True-2 ring-all_gather-False-8 \
    ring-all_gather-True-8 ring-all_gather-False-3 ring-all_gather-True-3 ring-all_gather-False-2 ring-all_gather-True-4 \
    ring-all_gather-False-4 ring-all_reduce-False-2 ring-reduce_scatter-False-8 oneshot-all_reduce-False-8 \
    oneshot-all_gather-False-8 oneshot-reduce_scatter-False-3)

if [ "${1:-}" = --all ]; then
    step "small calls: ring, tree and one-shot, every rank in one launch"
    limited 45 small.log python3 benchmarks/kernels_one_gpu.py --sizes 64,1K,3K --iters 200
    step "reducer, NVML, topo"
    limited 50 others.log "${PYTEST[@]}" --timeout 40 tests/gpu/test_cuda_reducer.py tests/gpu/test_power_nvml.py \
        tests/gpu/test_topo.py
    step "large calls"
    limited 40 large.log python3 benchmarks/kernels_one_gpu.py --sizes 64M,256M --iters 5
    step "every one-launch case"
    limited 300 every-launch.log "${PYTEST[@]}" --timeout 60 $K::test_every_rank_in_one_launch
fi
step "done (exit $failed)"
exit $failed
