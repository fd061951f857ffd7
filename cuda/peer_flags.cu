// The peer algorithms' flag barrier waited on by the GPU itself (commbench/kernels/peermem.py), for
// peer_oneshot_gpuflags and peer_twoshot_gpuflags: nothing on the host waits for the stream.
//
// peer_barrier(flags, rank, size, epoch, timeout_ns, error), launched as one thread on the rank's stream:
//   1. fence.sc.sys, then a system-scope release store of `epoch` into flags[rank]: everything this
//      stream wrote before (the rank's staged slot, by earlier kernels) is visible to any reader of the flag;
//   2. for every rank r, system-scope acquire loads of flags[r] until it reaches `epoch` (one after
//      another, each across PCIe: no sleep between, see cb_back_off); what the stream runs next (the
//      reads of the peers' slots) follows.
//      A rank that has not arrived within timeout_ns (a dead peer) ends the wait: error[0] = 1,
//      error[1] = that rank (the record the host checks before its next launch; first writer wins),
//      and the kernel returns, so the stream never hangs.
// Each flag is its rank's first 64-byte line of its /dev/shm file, registered in every process
// (cudaHostRegister) so that its GPU reads and writes it; the host barrier uses the same words
// and the same epochs, so the two barriers mix within one job.
// Several processes sharing one GPU take turns on it (time slices) unless MPS runs them side by
// side, so there a spinning barrier waits for the others' slices: correct, but slow.
// Cost: one launch, plus the last arrival's flag store crossing PCIe to host memory and back.
//
// cuda/portable.h maps the flags for tests/host_cuda.h, which builds this file for the CPU to run
// the barrier with one host thread per rank: GCC's __atomic builtins with the same orderings.

#include "portable.h"  // the flags' release / acquire, the back-off and the clock, shared with the collectives

extern "C" __global__ void peer_barrier(long long* const* flags, int rank, int size, long long epoch,
                                        long long timeout_ns, long long* error) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    cb_fence_system();
    cb_store_release((cb_u64*)flags[rank], (cb_u64)epoch);
    const long long start = cb_now_ns();
    for (int r = 0; r < size; ++r) {
        while ((long long)cb_load_acquire((const cb_u64*)flags[r]) < epoch) {
            if (cb_now_ns() - start > timeout_ns) {
                if (cb_compare_swap((cb_u64*)error, 0, ~0ull) == 0) {
                    error[1] = r;
                    cb_store_release((cb_u64*)error, 1);
                }
                return;
            }
            cb_back_off();
        }
    }
}
