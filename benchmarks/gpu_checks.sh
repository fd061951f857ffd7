#!/usr/bin/env bash
# The GPU checks of one short device session (README, "The GPU path"), in the order of what they tell: the
# kernels' protocol on the hardware (every schedule, in one launch and in separate processes), small-call
# figures, NCCL, the reducer, NVML and topo, large-call figures. Every step has its own time limit, at most
# 580 s in all (one device command's most is 600 s). Logs, each with its step's exit code, go to $OUT
# (default gpu-out/); the script exits 1 if any step failed or ran out of time.
#
#   bash benchmarks/gpu_checks.sh            # from the repository root, on a machine with a GPU
#
# Wheels in .whl/ (for a machine without a package index: a typer new enough for the CLI, plotly) are
# installed into /tmp/site first. The peer algorithms' test (tests/gpu/test_peer_cuda.py) is left out: on one
# GPU without MPS it outlasts a session (README).
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
# Distinct node ids run in the order given (pytest merges only overlapping ones). NVRTC builds one module
# per dtype, ~20 s each on an H200, inside the first test that uses it; a one-launch case then takes ~8 s.
step "kernels: the one-shot schedules, back-to-back calls, separate processes, the guards"
limited 250 kernels.log "${PYTEST[@]}" --timeout 230 \
    "$K::test_every_rank_in_one_launch[oneshot-all_reduce-False-2]" \
    "$K::test_every_rank_in_one_launch[oneshot-reduce_scatter-False-8]" \
    "$K::test_every_rank_in_one_launch[oneshot-all_gather-False-3]" \
    $K::test_64_mb_and_back_to_back_calls_of_varying_size $K::test_ring_and_tree_kernels_in_separate_processes \
    $K::test_a_launch_that_cannot_be_resident_is_refused_not_hung $K::test_this_gpus_layout_has_no_peer_refusal \
    $K::test_a_wait_that_times_out_names_the_rank_and_the_step

step "small calls: ring, tree and one-shot, every rank in one launch"
limited 45 small.log python3 benchmarks/kernels_one_gpu.py --sizes 64,1K,3K --iters 200

step "NCCL: the CUDA-graph timing first (never run on a GPU yet)"
limited 110 nccl.log "${PYTEST[@]}" --timeout 80 $N::test_nccl_is_timed_as_a_cuda_graph_unless_no_graph \
    $N::test_nccl_several_ranks_share_one_gpu $N::test_nccl_tuning_records_the_library_choice $N::test_nccl_sweep_exact

step "reducer, NVML, topo"
limited 50 others.log "${PYTEST[@]}" --timeout 40 tests/gpu/test_cuda_reducer.py tests/gpu/test_power_nvml.py \
    tests/gpu/test_topo.py

step "large calls"
limited 40 large.log python3 benchmarks/kernels_one_gpu.py --sizes 64M,256M --iters 5

step "the rest of the one-launch cases, as long as the time lasts"
limited 35 one-launch.log "${PYTEST[@]}" --timeout 30 $K::test_every_rank_in_one_launch
step "done (exit $failed)"
exit $failed
