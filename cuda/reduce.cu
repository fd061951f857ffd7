// Element-wise reductions for commbench's own algorithms on the GPU: dst[i] = a[i] OP b[i].
//
// In place (dst == a) is the usual call; out of place lets an algorithm read its input buffer
// without a copy. Loaded at run time by CuPy (RawModule, NVRTC) from commbench/kernels.py,
// compile-checked with nvcc for sm_80 and sm_90 by tests/test_cuda_compile.py.
//
// * vectorised: each thread moves 16 bytes per load and store (uint4) when all three pointers
//   are 16-byte aligned (the *_scalar entry points serve the others);
// * grid-stride loops: any grid covers any length, so the launch picks a grid for the GPU
//   (a few waves of blocks), not for the buffer;
// * half and bfloat16 compute in float and round once: exactly the IEEE result of the
//   half-precision operation (the float result of +, *, min, max of two halves is exact);
//   int8 / uint8 compute in int and wrap like the CPU path.
// Entry points: reduce_<dtype>_<op>[_scalar](T* dst, const T* a, const T* b, long long n),
// dtype in float32 float64 float16 bfloat16 int32 int64 int8 uint8, op in sum prod min max.

#include <cuda_fp16.h>
#include <cuda_bf16.h>

template <typename T> struct Compute { typedef T type; };
template <> struct Compute<__half> { typedef float type; };
template <> struct Compute<__nv_bfloat16> { typedef float type; };
template <> struct Compute<signed char> { typedef int type; };
template <> struct Compute<unsigned char> { typedef int type; };

enum { SUM = 0, PROD = 1, MIN = 2, MAX = 3 };

template <int OP, typename C>
__device__ __forceinline__ C apply(C x, C y) {
    if (OP == SUM) return x + y;
    if (OP == PROD) return x * y;
    if (OP == MIN) return y < x ? y : x;
    return x < y ? y : x;
}

template <typename T, int OP>
__device__ __forceinline__ T combine(T x, T y) {
    typedef typename Compute<T>::type C;
    return static_cast<T>(apply<OP, C>(static_cast<C>(x), static_cast<C>(y)));
}

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

#define COMMBENCH_REDUCE(NAME, T, OPNAME, OP)                                                          \
    extern "C" __global__ void reduce_##NAME##_##OPNAME(T* dst, const T* a, const T* b, long long n) { \
        reduce_vector<T, OP>(dst, a, b, n);                                                            \
    }                                                                                                  \
    extern "C" __global__ void reduce_##NAME##_##OPNAME##_scalar(T* dst, const T* a, const T* b,       \
                                                                 long long n) {                        \
        reduce_scalar<T, OP>(dst, a, b, n);                                                            \
    }

#define COMMBENCH_REDUCE_ALL_OPS(NAME, T)     \
    COMMBENCH_REDUCE(NAME, T, sum, SUM)       \
    COMMBENCH_REDUCE(NAME, T, prod, PROD)     \
    COMMBENCH_REDUCE(NAME, T, min, MIN)       \
    COMMBENCH_REDUCE(NAME, T, max, MAX)

COMMBENCH_REDUCE_ALL_OPS(float32, float)
COMMBENCH_REDUCE_ALL_OPS(float64, double)
COMMBENCH_REDUCE_ALL_OPS(float16, __half)
COMMBENCH_REDUCE_ALL_OPS(bfloat16, __nv_bfloat16)
COMMBENCH_REDUCE_ALL_OPS(int32, int)
COMMBENCH_REDUCE_ALL_OPS(int64, long long)
COMMBENCH_REDUCE_ALL_OPS(int8, signed char)
COMMBENCH_REDUCE_ALL_OPS(uint8, unsigned char)
