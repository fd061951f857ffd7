// Lets the host compiler build cuda/*.cu for the CPU (tests/host_cuda.py): a __global__ function
// becomes a plain function, one call of which is one GPU thread; cb_host_thread says which thread
// the calling host thread's next call is (the indices are per host thread, so several host threads
// can each run a kernel at once: the peer barrier's ranks). Fit only for kernels whose threads in
// one launch do not cooperate (no __syncthreads, no shared memory), as commbench's element-wise
// reductions, where each element belongs to one thread: running the threads one after another, in
// any order, computes what the GPU does.
#pragma once
#include <cuda_runtime.h>

namespace cb_host {
inline thread_local uint3 thread_idx, block_idx;
inline thread_local dim3 block_dim, grid_dim;
}  // namespace cb_host

#define threadIdx (::cb_host::thread_idx)
#define blockIdx (::cb_host::block_idx)
#define blockDim (::cb_host::block_dim)
#define gridDim (::cb_host::grid_dim)

extern "C" void cb_host_thread(unsigned block, unsigned thread, unsigned blocks, unsigned threads) {
    cb_host::block_idx = make_uint3(block, 0, 0);
    cb_host::thread_idx = make_uint3(thread, 0, 0);
    cb_host::grid_dim = dim3(blocks);
    cb_host::block_dim = dim3(threads);
}
