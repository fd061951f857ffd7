// The element-wise arithmetic of every kernel in cuda/: dst = x OP y for each dtype and op, the
// same bits on the GPU and on the host (cuda/portable.h), and the same as the CPU libraries:
// * half and bfloat16 compute in float and round once: exactly the IEEE result of the
//   half-precision operation (float carries at least 2p+2 significand bits for a p-bit half or
//   bfloat16, so rounding the float result of +, *, min, max again is the correctly rounded one);
//   int8 / uint8 compute in int and wrap like the CPU path;
// * min and max propagate NaN, as torch.minimum / torch.maximum (not NCCL: its fminf / __hmin
//   return the other operand): a NaN operand is the result (the first's when both are), and of
//   equal operands (-0.0 and +0.0) the first, as torch's scalar loop on the CPU (std::min);
// * subnormal inputs and results are kept, as on the CPU: CuPy compiles with -ftz=true whatever
//   commbench asks (commbench/kernels/reducers.py, CUPY_NVRTC_OPTIONS), so float's arithmetic and
//   comparisons here are PTX without .ftz (tests/test_cuda_compile.py checks that none is left).
#pragma once
#include "portable.h"

template <typename T> struct Compute { typedef T type; };
template <> struct Compute<cb_half> { typedef float type; };
template <> struct Compute<cb_bfloat16> { typedef float type; };
template <> struct Compute<signed char> { typedef int type; };
template <> struct Compute<unsigned char> { typedef int type; };

enum { SUM = 0, PROD = 1, MIN = 2, MAX = 3 };

// The compute type's +, *, < and NaN test; float's in PTX without .ftz on the GPU (.rn also
// keeps ptxas from contracting a * and a + into one fma).
template <typename C> __device__ __forceinline__ C add(C x, C y) { return x + y; }
template <typename C> __device__ __forceinline__ C mul(C x, C y) { return x * y; }
template <typename C> __device__ __forceinline__ bool less(C x, C y) { return x < y; }
template <typename C> __device__ __forceinline__ bool is_nan(C x) { return x != x; }  // integers: never
#ifdef __CUDA_ARCH__
template <> __device__ __forceinline__ float add(float x, float y) {
    asm("add.rn.f32 %0, %0, %1;" : "+f"(x) : "f"(y));
    return x;
}
template <> __device__ __forceinline__ float mul(float x, float y) {
    asm("mul.rn.f32 %0, %0, %1;" : "+f"(x) : "f"(y));
    return x;
}
template <> __device__ __forceinline__ bool less(float x, float y) {
    unsigned r;
    asm("{ .reg .pred p; setp.lt.f32 p, %1, %2; selp.u32 %0, 1, 0, p; }" : "=r"(r) : "f"(x), "f"(y));
    return r;
}
template <> __device__ __forceinline__ bool is_nan(float x) {
    unsigned r;
    asm("{ .reg .pred p; setp.nan.f32 p, %1, %1; selp.u32 %0, 1, 0, p; }" : "=r"(r) : "f"(x));
    return r;
}
#endif

template <int OP, typename C>
__device__ __forceinline__ C apply(C x, C y) {
    if (OP == SUM) return add(x, y);
    if (OP == PROD) return mul(x, y);
    const bool y_wins = OP == MIN ? less(y, x) : less(x, y);  // ties keep x
    return !is_nan(x) && (y_wins || is_nan(y)) ? y : x;      // NaN propagates, x's first
}

template <typename T, int OP>
__device__ __forceinline__ T combine(T x, T y) {
    typedef typename Compute<T>::type C;
    return static_cast<T>(apply<OP, C>(static_cast<C>(x), static_cast<C>(y)));
}
