// Element-wise reductions for commbench's own algorithms on the GPU: dst[i] = a[i] OP b[i], and
// its n-ary form dst[i] = s0[i] OP s1[i] OP ... OP s(k-1)[i] in one pass (up to MANY inputs).
//
// In place (dst == a, or dst == s0) is the usual call; out of place lets an algorithm read its
// input buffer without a copy. The n-ary form serves the peer-memory collectives, which reduce
// every rank's slot at once: one pass writing dst instead of k-1 passes over it. It rounds after
// every OP, left to right, so its result is bit-identical to the chain of binary calls.
// Loaded at run time by CuPy (RawModule, NVRTC) from commbench/kernels/reducers.py, compile-checked with
// nvcc for sm_80 and sm_90 by tests/test_cuda_compile.py, and run on the CPU (built by g++) by
// tests/test_kernels_on_host.py.
//
// * vectorised: each thread moves 16 bytes per load and store (uint4) when every pointer is
//   16-byte aligned (the *_scalar entry points serve the others);
// * grid-stride loops: any grid covers any length, so the launch picks a grid for the GPU
//   (a few waves of blocks), not for the buffer;
// * the arithmetic (rounding, NaN, subnormals) is cuda/arith.h's, shared with the collectives.
// Entry points, dtype in float32 float64 float16 bfloat16 int32 int64 int8 uint8, op in sum prod
// min max:
//   reduce_<dtype>_<op>[_scalar](T* dst, const T* a, const T* b, long long n)
//   reduce_many_<dtype>_<op>[_scalar](T* dst, long long n, int k, const T* s0, ..., const T* s7)
//     (1 <= k <= MANY; the unused pointers are ignored)

#include "arith.h"

template <typename T, int OP>
__device__ void reduce_scalar(T* dst, const T* a, const T* b, long long n) {
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = combine<T, OP>(a[i], b[i]);
    }
}

template <typename T, int OP>
__device__ void reduce_vector(T* dst, const T* a, const T* b, long long n) {
    constexpr int V = 16 / sizeof(T);  // elements per 16-byte access
    const long long stride = (long long)blockDim.x * gridDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long vectors = n / V;
    const uint4* av = reinterpret_cast<const uint4*>(a);
    const uint4* bv = reinterpret_cast<const uint4*>(b);
    uint4* dv = reinterpret_cast<uint4*>(dst);
    for (long long i = first; i < vectors; i += stride) {
        uint4 x = av[i];
        uint4 y = bv[i];
        uint4 z;
        const T* xs = reinterpret_cast<const T*>(&x);
        const T* ys = reinterpret_cast<const T*>(&y);
        T* zs = reinterpret_cast<T*>(&z);
#pragma unroll
        for (int k = 0; k < V; ++k) zs[k] = combine<T, OP>(xs[k], ys[k]);
        dv[i] = z;
    }
    for (long long i = vectors * V + first; i < n; i += stride) {  // the tail, under 16 bytes
        dst[i] = combine<T, OP>(a[i], b[i]);
    }
}

enum { MANY = 8 };  // inputs of one n-ary call; more take further calls with dst as s0

template <typename T> struct Sources { const T* p[MANY]; };

template <typename T, int OP>
__device__ __forceinline__ T reduce_at(const Sources<T>& s, int k, long long i) {
    T acc = s.p[0][i];
#pragma unroll
    for (int j = 1; j < MANY; ++j) {
        if (j < k) acc = combine<T, OP>(acc, s.p[j][i]);
    }
    return acc;
}

template <typename T, int OP>
__device__ void reduce_many_scalar(T* dst, long long n, int k, const Sources<T>& s) {
    const long long stride = (long long)blockDim.x * gridDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        dst[i] = reduce_at<T, OP>(s, k, i);
    }
}

template <typename T, int OP>
__device__ void reduce_many_vector(T* dst, long long n, int k, const Sources<T>& s) {
    constexpr int V = 16 / sizeof(T);
    const long long stride = (long long)blockDim.x * gridDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long vectors = n / V;
    for (long long i = first; i < vectors; i += stride) {
        uint4 acc = reinterpret_cast<const uint4*>(s.p[0])[i];
        T* accs = reinterpret_cast<T*>(&acc);
#pragma unroll
        for (int j = 1; j < MANY; ++j) {
            if (j < k) {
                const uint4 x = reinterpret_cast<const uint4*>(s.p[j])[i];
                const T* xs = reinterpret_cast<const T*>(&x);
#pragma unroll
                for (int e = 0; e < V; ++e) accs[e] = combine<T, OP>(accs[e], xs[e]);
            }
        }
        reinterpret_cast<uint4*>(dst)[i] = acc;
    }
    for (long long i = vectors * V + first; i < n; i += stride) {  // the tail, under 16 bytes
        dst[i] = reduce_at<T, OP>(s, k, i);
    }
}

#define COMMBENCH_REDUCE(NAME, T, OPNAME, OP)                                                          \
    extern "C" __global__ void reduce_##NAME##_##OPNAME(T* dst, const T* a, const T* b, long long n) { \
        reduce_vector<T, OP>(dst, a, b, n);                                                            \
    }                                                                                                  \
    extern "C" __global__ void reduce_##NAME##_##OPNAME##_scalar(T* dst, const T* a, const T* b,       \
                                                                 long long n) {                        \
        reduce_scalar<T, OP>(dst, a, b, n);                                                            \
    }                                                                                                  \
    extern "C" __global__ void reduce_many_##NAME##_##OPNAME(                                          \
        T* dst, long long n, int k, const T* s0, const T* s1, const T* s2, const T* s3, const T* s4,   \
        const T* s5, const T* s6, const T* s7) {                                                       \
        reduce_many_vector<T, OP>(dst, n, k, Sources<T>{{s0, s1, s2, s3, s4, s5, s6, s7}});            \
    }                                                                                                  \
    extern "C" __global__ void reduce_many_##NAME##_##OPNAME##_scalar(                                 \
        T* dst, long long n, int k, const T* s0, const T* s1, const T* s2, const T* s3, const T* s4,   \
        const T* s5, const T* s6, const T* s7) {                                                       \
        reduce_many_scalar<T, OP>(dst, n, k, Sources<T>{{s0, s1, s2, s3, s4, s5, s6, s7}});            \
    }

#define COMMBENCH_REDUCE_ALL_OPS(NAME, T)     \
    COMMBENCH_REDUCE(NAME, T, sum, SUM)       \
    COMMBENCH_REDUCE(NAME, T, prod, PROD)     \
    COMMBENCH_REDUCE(NAME, T, min, MIN)       \
    COMMBENCH_REDUCE(NAME, T, max, MAX)

COMMBENCH_REDUCE_ALL_OPS(float32, float)
COMMBENCH_REDUCE_ALL_OPS(float64, double)
COMMBENCH_REDUCE_ALL_OPS(float16, cb_half)
COMMBENCH_REDUCE_ALL_OPS(bfloat16, cb_bfloat16)
COMMBENCH_REDUCE_ALL_OPS(int32, int)
COMMBENCH_REDUCE_ALL_OPS(int64, long long)
COMMBENCH_REDUCE_ALL_OPS(int8, signed char)
COMMBENCH_REDUCE_ALL_OPS(uint8, unsigned char)
