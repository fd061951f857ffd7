#!/usr/bin/env bash
# The GPU checks of one short device session (README, "The GPU path"), in the order of what they tell: the
# kernels' protocol on the hardware (every schedule, in one launch and in separate processes), small-call
# figures, NCCL, the reducer, NVML and topo, large-call figures. Every step has its own time limit, 595 s in
# all (one device command's most is 600 s). Logs go to $OUT (default gpu-out/).
#
#   bash benchmarks/gpu_checks.sh            # from the repository root, on a machine with a GPU
#
# Wheels in .whl/ (for a machine without a package index: a typer new enough for the CLI, plotly) are
# installed into /tmp/site first. The peer algorithms' test (tests/gpu/test_peer_cuda.py) is left out: on one
# GPU without MPS it outlasts a session (README).
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD" PATH="$(dirname "$(python3 -c 'import sys; print(sys.executable)')"):$PATH"  # torchrun
if compgen -G ".whl/*.whl" >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="$PWD:/tmp/site"
fi
step() { echo "=== $1 ($(date +%T))"; }

step environment
nvidia-smi -L
python3 -c "import torch, cupy, typer; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl',
torch.cuda.nccl.version(), 'cupy', cupy.__version__, 'typer', typer.__version__, torch.cuda.get_device_name())"

step "kernels: every schedule on the GPU"
# Most telling first (node ids run in the order given). NVRTC builds one module per dtype, ~20 s each on an
# H200, inside the first test that uses it: hence the long per-test limit; a one-launch case then takes ~8 s.
K=tests/gpu/test_kernels_cuda.py
timeout 300 python3 -m pytest -v -p no:cacheprovider --timeout 270 -rfEs --durations=8 \
    $K::test_64_mb_and_back_to_back_calls_of_varying_size $K::test_ring_and_tree_kernels_in_separate_processes \
    $K::test_a_launch_that_cannot_be_resident_is_refused_not_hung $K::test_this_gpus_layout_has_no_peer_refusal \
    $K::test_a_wait_that_times_out_names_the_rank_and_the_step $K::test_every_rank_in_one_launch 2>&1 | tee "$OUT/kernels.log"

step "small calls: ring, tree and one-shot, every rank in one launch"
timeout 60 python3 benchmarks/kernels_one_gpu.py --sizes 64,1K,3K --iters 200 2>&1 | tee "$OUT/small.log"

step "NCCL (the CUDA-graph timing first: never run on a GPU yet; stops at the first failure, printing it)"
N=tests/gpu/test_nccl.py
timeout 120 python3 -m pytest -p no:cacheprovider --timeout 80 -x -v -rfEs --durations=8 \
    $N::test_nccl_is_timed_as_a_cuda_graph_unless_no_graph $N 2>&1 | tee "$OUT/nccl.log"

step "reducer, NVML, topo"
timeout 70 python3 -m pytest -p no:cacheprovider --timeout 40 -v -rfEs --durations=8 tests/gpu/test_cuda_reducer.py \
    tests/gpu/test_power_nvml.py tests/gpu/test_topo.py 2>&1 | tee "$OUT/others.log"

step "large calls"
timeout 45 python3 benchmarks/kernels_one_gpu.py --sizes 64M,256M --iters 5 2>&1 | tee "$OUT/large.log"
step done
