// What differs between the two targets of cuda/*.cu, and nothing else: the 16-bit float types,
// memory fences and atomics on the flags, waiting, the clock, and who runs a "thread block".
//
// * CUDA (nvcc or NVRTC, __CUDACC__): cuda_fp16.h / cuda_bf16.h; flags are stored with
//   st.release.sys (after the block's bar.sync) and read with ld.acquire.sys (system scope: the peer may be
//   another GPU or another process's kernel on this one); data written by a peer is read with
//   ld.global.cg (from L2, never a stale L1 line); a block is one channel of blockDim.x threads.
// * Host (a plain C++17 compiler, no CUDA headers: commbench/kernels/host.py builds it): the
//   16-bit floats are bit patterns converted to and from float with round-to-nearest-even;
//   flags use GCC's __atomic builtins with the same orderings; large transfers write a peer's FIFO
//   with streaming stores (cb_stream_line, then cb_stream_fence before any flag) and cache hints
//   help smaller ones (cb_prefetch, cb_prefetch_write); a "block" is one host thread
//   (cb_tid() == 0, cb_nthreads() == 1, so loops are plain loops the compiler vectorises), its
//   channel set by the host launcher; waits spin briefly, then yield the core (ranks may
//   outnumber cores).
#pragma once

#if defined(__CUDACC__)
#define CB_DEVICE 1
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef __half cb_half;
typedef __nv_bfloat16 cb_bfloat16;
#define CB_SHARED __shared__
#define CB_LAUNCH_BOUNDS(threads) __launch_bounds__(threads, 1)
#define CB_HOST_NOINLINE
#else
#if defined(__AVX__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#ifndef __device__
#define __device__
#endif
#ifndef __global__
#define __global__ CB_EXPORT
#endif
// The host build hides every symbol but these (-fvisibility=hidden, commbench/kernels/host.py): calls to its
// hidden functions are direct, not through the PLT (cb_host_time's to the exported cb_host_call still is: called
// directly, the 2-rank 1 KB reduce-scatter took 1.17x its time and the all-reduce 0.83-0.86x, code placement).
#define CB_EXPORT __attribute__((visibility("default")))
#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif
#define CB_SHARED
#define CB_LAUNCH_BOUNDS(threads)
#define CB_HOST_NOINLINE __attribute__((noinline))  // (a call on the host, inlined on a GPU)

namespace cb_host {
inline float bits_to_float(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

inline float half_to_float(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0x1f) return bits_to_float(sign | 0x7f800000u | (m << 13));
    if (e) return bits_to_float(sign | ((e + 112) << 23) | (m << 13));
    if (!m) return bits_to_float(sign);
    e = 113;  // subnormal: m * 2^-24, normalised
    while (!(m & 0x400)) { m <<= 1; --e; }
    return bits_to_float(sign | (e << 23) | ((m & 0x3ff) << 13));
}

inline uint16_t float_to_half(float f) {  // round to nearest, ties to even
    uint32_t x = float_to_bits(f), sign = (x >> 16) & 0x8000;
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((x >> 13) & 0x3ff));  // NaN stays NaN
    if (x >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // from halfway above 65504: infinity
    if (x >= 0x38800000u) {  // a normal half
        uint32_t r = x - 0x38000000u;
        r += 0x0fffu + ((r >> 13) & 1);
        return uint16_t(sign | (r >> 13));
    }
    if (x <= 0x33000000u) return uint16_t(sign);  // at most half the smallest subnormal: zero
    uint32_t shift = 126 - (x >> 23), m = (x & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1))) ++q;
    return uint16_t(sign | q);
}

inline float bfloat16_to_float(uint16_t b) { return bits_to_float(uint32_t(b) << 16); }

inline uint16_t float_to_bfloat16(float f) {
    uint32_t x = float_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet NaN
    x += 0x7fffu + ((x >> 16) & 1);
    return uint16_t(x >> 16);
}
}  // namespace cb_host

struct cb_half {
    uint16_t bits;
    cb_half() = default;
    explicit cb_half(float f) : bits(cb_host::float_to_half(f)) {}
    explicit operator float() const { return cb_host::half_to_float(bits); }
};
struct cb_bfloat16 {
    uint16_t bits;
    cb_bfloat16() = default;
    explicit cb_bfloat16(float f) : bits(cb_host::float_to_bfloat16(f)) {}
    explicit operator float() const { return cb_host::bfloat16_to_float(bits); }
};
#endif

typedef unsigned long long cb_u64;

// --- streaming stores (host): 64 bytes to memory past this core's caches --------------------------
// A FIFO slot is written by one core and read by another. With ordinary stores the reader pulls
// every line out of the writer's cache, a path that slows several-fold for seconds at a time on some
// machines, while lines streamed to memory keep their rate. FIFO transfers of at least CB_STREAM_BYTES
// stream; smaller ones, where a flag's latency is the cost, do not (streaming them is faster while the
// cores share a cache and slower apart). A direct call's output streams at any size (combine_elements).
// The measurements behind the threshold: docs/performance.md (Tuning constants of the kernels).
#ifndef CB_DEVICE
enum { CB_STREAM_BYTES = 8192 };
// Built with AVX (commbench/kernels/host.py, where the CPU has AVX2), a line on a 32-byte boundary goes as
// two 32-byte stores, which stream faster than 16-byte ones (docs/performance.md).
inline void cb_stream_line(void* dst, const void* src) {  // dst 16-byte aligned
#if defined(__AVX__)
    if (!((uintptr_t)dst & 31)) {  // read in 16-byte halves: src is often a line just stored so (forwarded)
        const __m128i* s = (const __m128i*)src;
        for (int k = 0; k < 2; ++k) {
            const __m256i x = _mm256_set_m128i(_mm_loadu_si128(s + 2 * k + 1), _mm_loadu_si128(s + 2 * k));
            _mm256_stream_si256((__m256i*)dst + k, x);
        }
        return;
    }
#endif
#if defined(__SSE2__)
    for (int k = 0; k < 4; ++k) _mm_stream_si128((__m128i*)dst + k, _mm_loadu_si128((const __m128i*)src + k));
#else
    memcpy(dst, src, 64);
#endif
}
// A received chunk's lines are asked for CB_PREFETCH_BYTES ahead of the loads that use them (its
// first CB_PREFETCH_BYTES at once; then, where the copy goes a line at a time, one line per line
// used), so their trips from the writer's core or from memory overlap instead of waiting for the
// hardware prefetcher to see a stream. 2-rank all-reduce, paired, with / without (1 KB threshold):
// 2 KB 0.75-0.94, 4 KB 0.76-0.88, 16-64 KB 0.81-0.91, 1 MB 0.86-0.99; 512 or 2048 bytes ahead, or
// no prefetch past the first lines: no better.
enum { CB_PREFETCH_BYTES = 1024 };
inline void cb_prefetch(const void* p, long long from, long long to) {  // bytes [from, to) of p
    for (long long b = from; b < to; b += 64) __builtin_prefetch((const char*)p + b);
}
// The lines of a FIFO slot about to be written with ordinary stores, asked for with intent to write
// before the transfer waits for its data: the reader's copies of them (its last message there) are
// invalidated meanwhile, not one store at a time after it (2-rank all-reduce, paired, with / without:
// 512 B-1 KB 0.61-0.89, 256 B 0.85-1.04; a one-line slot: 5-10 % slower, so it is not asked for).
#if defined(__x86_64__) || defined(__i386__)
inline const bool cb_has_prefetchw = [] {  // CPUID 0x80000001 ECX bit 8 (PRFCHW): AMD, Intel since 2014
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && ((c >> 8) & 1);
}();
#endif
inline void cb_prefetch_write(const void* p, long long bytes) {
#if defined(__x86_64__) || defined(__i386__)
    if (cb_has_prefetchw)  // (a read prefetch instead would fetch a copy the store must then upgrade)
        for (long long b = 0; b < bytes; b += 64) asm volatile("prefetchw %0" ::"m"(*((const char*)p + b)));
#else
    for (long long b = 0; b < bytes; b += 64) __builtin_prefetch((const char*)p + b, 1);
#endif
}
inline void cb_stream_fence() {  // streaming stores are weakly ordered: drain them before a flag's release
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
#endif

// --- flags: release on write, acquire on read ------------------------------------------------
// One release per flag: the block's data stores come before the releasing thread's store through
// cb_sync (bar.sync orders them within the block; the release makes them visible, cumulatively, to
// whoever acquires the flag at system scope), so no fence goes before it (a fence.sc.sys more per
// flag costs what the small messages chase).
__device__ __forceinline__ void cb_store_release(cb_u64* p, cb_u64 v) {
#ifdef CB_DEVICE
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#else
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
#endif
}

// A full system-scope fence: what earlier kernels on the stream wrote, ordered before what follows
// (the peer barrier, whose one thread did not write the data it publishes).
__device__ __forceinline__ void cb_fence_system() {
#ifdef CB_DEVICE
    __threadfence_system();
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

// *p from `expected` to `desired` if it holds `expected`; what it held. On a GPU, atomic among the
// threads of this device (every writer of a CbComm's error record is: one process's blocks, or one
// launch of every rank); the host reads the record only after its code is released.
__device__ __forceinline__ cb_u64 cb_compare_swap(cb_u64* p, cb_u64 expected, cb_u64 desired) {
#ifdef CB_DEVICE
    return atomicCAS((unsigned long long*)p, expected, desired);
#else
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return expected;
#endif
}

__device__ __forceinline__ cb_u64 cb_load_acquire(const cb_u64* p) {
#ifdef CB_DEVICE
    cb_u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
#else
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
#endif
}

// --- waiting ------------------------------------------------------------------------------------
// A clock read between every CB_SPINS_BETWEEN_CLOCKS looks at a flag also paces the looks, and fewer loads on the
// line leave it to its writer sooner: the 2-rank 8 B one-shot all-reduce (host, ranks as threads, paired in
// alternating rounds) took 2-5 % longer at 16 or 32 looks, 8 % at 128, 16 % at 1024; a pause instruction per
// look instead: level with one, 70 % longer with four. commbench/kernels/floor.cc's 64-look wait is this one.
enum { CB_SPINS_BETWEEN_CLOCKS = 64 };

// nap (host): sleep instead of yielding, for a wait that has lasted long (CbComm.nap_ns). A yield
// gives the core back at once to whoever else is runnable, and a spinning yielder is always runnable;
// a nap leaves the core to threads blocked in the OS (a socket's) when they wake.
enum { CB_NAP_NS = 10000 };  // asked for; on the 2-core VM a 10 us nanosleep takes 80 us

// A wait past its spin (CbComm.spin_ns) backs off and looks at the call's error record between its looks at
// the flag. On the host: at every clock reading, yielding or napping between. On a GPU its thread spins on
// without sleeping and looks at the record, which is in pinned host memory across PCIe, once per
// CB_ABORT_POLL_NS: a 64 ns sleep and a look at the record every 64 looks at the flag stretched the tree
// all-reduce at 8 ranks x 14-16 channels (H200, one launch, 64 MB) from 1.45 ms to 1.8-18.6 ms a call, and
// to 17-19 ms where every wait did so from its start (its long waits slowed the peers that wait on it in turn).
#ifdef CB_DEVICE
enum { CB_ABORT_POLL_NS = 100000 };
#else
enum { CB_ABORT_POLL_NS = 0 };
#endif

__device__ __forceinline__ void cb_back_off(bool nap = false) {
#ifdef CB_DEVICE
    (void)nap;  // spin on (see CB_ABORT_POLL_NS)
#else
    if (nap) {
        const timespec ts = {0, CB_NAP_NS};
        nanosleep(&ts, nullptr);
    } else {
        sched_yield();
    }
#endif
}

__device__ __forceinline__ long long cb_now_ns() {
#ifdef CB_DEVICE
    cb_u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (long long)t;
#else
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
#endif
}

// --- who runs a block ----------------------------------------------------------------------------
#ifdef CB_DEVICE
__device__ __forceinline__ int cb_tid() { return threadIdx.x; }
__device__ __forceinline__ int cb_nthreads() { return blockDim.x; }
__device__ __forceinline__ int cb_channel() { return blockIdx.x; }
__device__ __forceinline__ int cb_launch_rank() { return blockIdx.y; }  // several ranks in one launch (tests)
__device__ __forceinline__ void cb_sync() { __syncthreads(); }
#else
namespace cb_host {
inline thread_local int channel = 0;
}
constexpr int cb_tid() { return 0; }
constexpr int cb_nthreads() { return 1; }
inline int cb_channel() { return cb_host::channel; }
constexpr int cb_launch_rank() { return 0; }
inline void cb_sync() {}
#endif

// --- data a peer wrote: read past any stale cache line -------------------------------------------
template <typename T>
__device__ __forceinline__ T cb_load_fresh(const T* p) {
#ifdef CB_DEVICE
    return __ldcg(p);
#else
    return *p;
#endif
}
