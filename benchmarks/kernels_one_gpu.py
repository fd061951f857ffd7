"""ring_kernel and tree_kernel on ONE GPU, where NCCL cannot run two ranks (it refuses two ranks
on one GPU): every rank of a node in one launch (commbench.kernels.gpu.OneGpuNode), bus bandwidth
at 64 MB - 1 GB per rank next to the GPU's own device-to-device copy rate of the same bytes.
Every rank's data then lives in the same HBM, so this measures the protocol's cost against memory
bandwidth (HBM-bound), not a fabric. Several processes on one GPU: `commbench run --backend gloo
--device cuda -a ring_kernel` under MPS (docs/how-to/gpus.md). Several GPUs: benchmarks/kernels_vs_native.py
--device cuda (against NCCL).

    python benchmarks/kernels_one_gpu.py [--ranks 2,4,8] [--sizes 64M,256M,1G] [--channels 16]
    python benchmarks/kernels_one_gpu.py --sizes 64,1K,3K --iters 200   # small calls: one-shot (one channel) too
    python benchmarks/kernels_one_gpu.py --ranks 8 --sizes 64M --channels 4 --only tree:all_reduce,ring:all_reduce
"""

from __future__ import annotations

import argparse


def main() -> None:
    import torch

    from commbench.metrics import bandwidth
    from commbench.collectives import COLLECTIVES
    from commbench.kernels.gpu import OneGpuNode, residency
    from commbench.kernels.abi import ONESHOT_BYTES, entry
    from commbench.spec import parse_size

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--sizes", default="64M,256M,1G")
    ap.add_argument("--channels", type=int, default=16, help="at most (fewer where not all ranks' blocks fit the SMs)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--only", help="algorithm:collective pairs, comma-separated (default: every one)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU: nothing to measure (this benchmark needs one)")
    kinds = (("ring", "all_reduce"), ("tree", "all_reduce"), ("ring", "reduce_scatter"), ("ring", "all_gather"))
    oneshot = tuple(("oneshot", c) for c in ("all_reduce", "reduce_scatter", "all_gather"))  # small messages, 1 channel
    if args.only:
        known = {f"{a}:{c}": (a, c) for a, c in kinds + oneshot}
        if unknown := [pair for pair in args.only.split(",") if pair not in known]:
            raise SystemExit(f"--only: unknown {', '.join(unknown)} (known: {', '.join(known)})")
        chosen = [known[pair] for pair in args.only.split(",")]
        kinds, oneshot = tuple(k for k in kinds if k in chosen), tuple(k for k in oneshot if k in chosen)
    print(f"{torch.cuda.get_device_name()}; channels {args.channels} at most; busbw in GB/s; copy_GB/s: torch's "
          "device-to-device copy of every rank's buffer at once (the HBM's rate for this footprint)")
    print(f"{'ranks':>5} {'size':>8} {'collective':>15} {'algorithm':>7} {'time_us':>10} {'busbw':>8} {'copy_GB/s':>9}")
    for n in map(int, args.ranks.split(",")):
        # every rank's blocks of one launch resident at once (commbench.kernels.gpu.Residency), for each kernel
        fits = min(residency(entry(a, c, "float32", "sum"), "float32", torch.cuda.current_device()).max_channels(n)
                   for a, c in kinds or oneshot)
        channels = min(args.channels, fits)
        if channels < 1:
            print(f"{n:>5} ranks: not one channel each fits this GPU at once; skipped")
            continue
        if channels < args.channels:
            print(f"# {n} ranks: {channels} channels (no more fit: {n} x {channels} blocks resident at once)")
        node = OneGpuNode(n, channels)
        for size in map(parse_size, args.sizes.split(",")):
            count = size // 4
            for algorithm, collective in kinds + oneshot:
                per = count // n if collective != "all_reduce" else count  # one rank's block
                if algorithm == "oneshot" and per * 4 > ONESHOT_BYTES:
                    continue  # (a larger one runs the ring's schedule)
                in_count = per * n if collective == "reduce_scatter" else per
                out_count = per * n if collective == "all_gather" else per
                slab = max(in_count, out_count)
                try:
                    send = torch.ones((n, slab), device="cuda")
                    recv = torch.empty((n, slab), device="cuda")
                except torch.cuda.OutOfMemoryError:
                    print(f"{n:>5} {size:>8} {collective:>15} {algorithm:>7}   (out of GPU memory)")
                    continue
                units = per * 4 if collective == "all_gather" else per
                name = entry(algorithm, collective, "float32", "sum")
                lanes = 1 if algorithm == "oneshot" else channels
                call = lambda: node.run(name, "float32", send.data_ptr(), recv.data_ptr(), units, slab * 4,  # noqa
                                        lanes)
                call()
                torch.cuda.synchronize()
                assert node.error_words[0] == 0
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda._sleep(50_000_000)  # the GPU busy while the host queues every call: GPU time, not launch cost
                start.record()
                for _ in range(args.iters):
                    call()
                stop.record()
                stop.synchronize()
                assert node.error_words[0] == 0
                t = start.elapsed_time(stop) / 1e3 / args.iters
                nbytes = max(in_count, out_count) * 4
                _, busbw = bandwidth(nbytes, t * 1e6, COLLECTIVES[collective].bus_factor(n))
                copy_src = send.view(-1)[: slab * n]
                copy_dst = recv.view(-1)[: slab * n]
                start.record()
                copy_dst.copy_(copy_src)
                stop.record()
                stop.synchronize()
                copy = copy_src.numel() * 4 / (start.elapsed_time(stop) / 1e3) / 1e9
                print(f"{n:>5} {size:>8} {collective:>15} {algorithm:>7} {t * 1e6:>10.1f} {busbw:>8.1f} {copy:>9.1f}")
                del send, recv
                torch.cuda.empty_cache()
        del node
    print("(single-process, all ranks in one launch: HBM-bound; NCCL has no one-GPU multi-rank mode to compare)")


if __name__ == "__main__":
    main()
