// The peer algorithms' flag barrier waited on by the GPU itself (commbench/rank/peermem.py), for
// peer_oneshot_gpuflags and peer_twoshot_gpuflags: nothing on the host waits for the stream.
//
// peer_barrier(flags, rank, size, epoch), launched as one thread on the rank's stream:
//   1. fence.sc.sys, then a system-scope release store of `epoch` into flags[rank]: everything this
//      stream wrote before (the rank's staged slot) is visible to any reader of the flag;
//   2. for every rank r, system-scope acquire loads of flags[r] until it reaches `epoch`, sleeping
//      briefly between tries; what the stream runs next (the reads of the peers' slots) follows.
// Each flag is its rank's first 64-byte line of its /dev/shm file, registered in every process
// (cudaHostRegister) so that its GPU reads and writes it; the host barrier uses the same words
// and the same epochs, so the two barriers mix within one job.
// Several processes sharing one GPU take turns on it (time slices) unless MPS runs them side by
// side, so there a spinning barrier waits for the others' slices: correct, but slow.
// Cost: one launch, plus the last arrival's flag store crossing PCIe to host memory and back.
//
// cuda/portable.h maps the flags for tests/host_cuda.h, which builds this file for the CPU to run
// the barrier with one host thread per rank: GCC's __atomic builtins with the same orderings.

#include "portable.h"  // the flags' release / acquire and the back-off, shared with the collectives

extern "C" __global__ void peer_barrier(long long* const* flags, int rank, int size, long long epoch) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    cb_store_release((cb_u64*)flags[rank], (cb_u64)epoch);
    for (int r = 0; r < size; ++r) {
        while ((long long)cb_load_acquire((const cb_u64*)flags[r]) < epoch) cb_back_off();
    }
}
