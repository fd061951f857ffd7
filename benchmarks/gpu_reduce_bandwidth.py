"""The reduction kernels' bandwidth next to the same GPU's device-to-device copy, in one job.

    python benchmarks/gpu_reduce_bandwidth.py [--sizes 64M,256M,1G]

Bandwidth counts bytes read plus written per second: a copy moves 2 x N (read N, write N), a
three-operand reduction 3 x N (read a and b, write dst), the n-ary reduction of k inputs (what
peer_oneshot runs, k = --inputs) (k + 1) x N. CUDA events around batches of back-to-back calls
(>= 1 ms each, queued behind a spin kernel so no launch is timed: cuda_timing.py), the median of
20 batches after 10 warm-up calls. The target: reduction >= 90 % of copy bandwidth for float32 and
bfloat16 at >= 64 MB.
"""

from __future__ import annotations

import argparse

import torch
from cuda_timing import seconds_per_call as timed

from commbench.kernels.reducers import CudaReducer
from commbench.spec import parse_size, split_list


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64M,256M,1G")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--inputs", type=int, default=4, help="inputs of the n-ary reduction")
    args = parser.parse_args()
    red = CudaReducer(torch.cuda.current_device())
    red.prepare()
    if red.fallback:  # torch's arithmetic would be measured under the kernels' name
        raise SystemExit(red.fallback)
    print(f"{torch.cuda.get_device_name()}")
    many = f"{args.inputs}-input GB/s"
    print(f"{'dtype':>9} {'size':>6} {'copy GB/s':>10} {'reduce GB/s':>12} {'ratio':>6} {many:>15} {'ratio':>6}")
    for dtype in split_list(args.dtypes):
        for text in split_list(args.sizes):
            nbytes = parse_size(text)
            n = nbytes // torch.tensor([], dtype=getattr(torch, dtype)).element_size()
            out, *srcs = (torch.ones(n, dtype=getattr(torch, dtype), device="cuda") for _ in range(1 + args.inputs))
            copy_s = timed(lambda: out.copy_(srcs[0]))  # noqa: B023
            reduce_s = timed(lambda: red.reduce(out, srcs[1], "sum", other=srcs[0]))  # noqa: B023
            many_s = timed(lambda: red.reduce_many(out, srcs, "sum"))  # noqa: B023
            copy_bw, reduce_bw = 2 * nbytes / copy_s / 1e9, 3 * nbytes / reduce_s / 1e9
            many_bw = (args.inputs + 1) * nbytes / many_s / 1e9
            print(f"{dtype:>9} {text:>6} {copy_bw:>10.1f} {reduce_bw:>12.1f} {reduce_bw / copy_bw:>6.3f} "
                  f"{many_bw:>15.1f} {many_bw / copy_bw:>6.3f}")


if __name__ == "__main__":
    main()
