// The data path (cuda/collectives.cu): out_k = in_0 OP in_1 OP own, for every element, in 16-byte vectors
// where the pointers allow.
#pragma once

#include "arith.h"
#include "comm.h"

// --- the data path: out_k = in_0 OP in_1 OP own, for every element --------------------------------
template <typename T, int OP, int NIN, bool OWN>
__device__ __forceinline__ T combined(const T* __restrict__ i0, const T* __restrict__ i1, const T* __restrict__ own,
                                      long long i) {
    T v = NIN ? cb_load_fresh(i0 + i) : own[i];
    if (NIN > 1) v = combine<T, OP>(v, cb_load_fresh(i1 + i));
    if (NIN && OWN) v = combine<T, OP>(v, own[i]);
    return v;
}

template <typename T, int OP, int NIN, bool OWN, int NOUT>
__device__ __forceinline__ void combine_scalar(const T* __restrict__ i0, const T* __restrict__ i1,
                                               const T* __restrict__ own, T* __restrict__ o0, T* __restrict__ o1,
                                               T* __restrict__ o2, long long from, long long n) {
    for (long long i = from + cb_tid(); i < n; i += cb_nthreads()) {
        const T v = combined<T, OP, NIN, OWN>(i0, i1, own, i);
        o0[i] = v;
        if (NOUT > 1) o1[i] = v;
        if (NOUT > 2) o2[i] = v;
    }
}

// out[0] is the rank's own output where `local` (1), written through the caches; the others, and out[0]
// where not local, are read by another rank next (FIFO slots, a direct call's output). On the
// host, in[] are FIFO slots, prefetched (cb_prefetch), and the outputs another rank reads are streamed
// from CB_STREAM_BYTES; or, `direct`, a direct call's step out of its left neighbour's buffers:
// not prefetched (2 ranks, 64 KB-4 MB: 3-12 % slower with) and streamed at any size (2 ranks, 128 B-
// 1.5 KB all-gather: 0.23-0.80 x the time of ordinary stores; the right neighbour reads it next).
// How many elements come before the first 16-byte boundary of every pointer in p[] (null ones
// ignored), or -1 where no element index is on a boundary of all of them (they are not co-aligned):
// the head that combine_elements does element by element before its vectors or lines.
template <typename T>
__device__ __forceinline__ long long coaligned_head(const void* const* p, int np, long long n) {
    long long mis = -1;
    for (int k = 0; k < np; ++k) {
        if (!p[k]) continue;
        const long long m = (long long)((unsigned long long)p[k] & 15);
        if (mis >= 0 && m != mis) return -1;
        mis = m;
    }
    if (mis <= 0) return 0;
    if ((16 - mis) % (long long)sizeof(T)) return -1;
    const long long head = (16 - mis) / (long long)sizeof(T);
    return head < n ? head : n;
}

template <typename T, int OP, int NIN, bool OWN, int NOUT>
__device__ void combine_elements(const T* const* in, const T* own, T* const* out, int local, long long n,
                                 bool direct) {
    const T* i0 = NIN > 0 ? in[0] : nullptr;
    const T* i1 = NIN > 1 ? in[1] : nullptr;
    T *o0 = out[0], *o1 = NOUT > 1 ? out[1] : nullptr, *o2 = NOUT > 2 ? out[2] : nullptr;
    long long done = 0;
#ifdef CB_DEVICE  // 16 bytes per load and store from where every pointer is on a 16-byte boundary
    constexpr int V = 16 / sizeof(T);
    const void* every[6] = {i0, i1, own, o0, o1, o2};
    const long long head = coaligned_head<T>(every, 6, n);
    if (head >= 0) {
        combine_scalar<T, OP, NIN, OWN, NOUT>(i0, i1, own, o0, o1, o2, 0, head);
        const T* a0 = i0 ? i0 + head : nullptr;
        const T* a1 = i1 ? i1 + head : nullptr;
        const T* aown = own ? own + head : nullptr;
        T *b0 = o0 + head, *b1 = o1 ? o1 + head : nullptr, *b2 = o2 ? o2 + head : nullptr;
        const long long vectors = (n - head) / V;
        for (long long i = cb_tid(); i < vectors; i += cb_nthreads()) {
            uint4 acc = NIN ? cb_load_fresh((const uint4*)a0 + i) : ((const uint4*)aown)[i];
            T* a = (T*)&acc;
            if (NIN > 1) {
                const uint4 x = cb_load_fresh((const uint4*)a1 + i);
#pragma unroll
                for (int e = 0; e < V; ++e) a[e] = combine<T, OP>(a[e], ((const T*)&x)[e]);
            }
            if (NIN && OWN) {
                const uint4 x = ((const uint4*)aown)[i];
#pragma unroll
                for (int e = 0; e < V; ++e) a[e] = combine<T, OP>(a[e], ((const T*)&x)[e]);
            }
            ((uint4*)b0)[i] = acc;
            if (NOUT > 1) ((uint4*)b1)[i] = acc;
            if (NOUT > 2) ((uint4*)b2)[i] = acc;
        }
        done = head + vectors * V;
    }
#else  // a line at a time, streamed to the outputs another rank reads (cb_stream_line) from where they
       // are all on a 16-byte boundary (FIFO slots always are; a direct call's block may not be)
    constexpr int L = CB_LINE / sizeof(T);
    const void* streamed[3] = {local ? nullptr : o0, o1, o2};
    const long long bytes = n * (long long)sizeof(T);
    const long long ahead = direct ? 0 : bytes < CB_PREFETCH_BYTES ? bytes : CB_PREFETCH_BYTES;
    for (int k = 0; k < NIN; ++k) cb_prefetch(k ? i1 : i0, 0, ahead);  // the first lines all at once
    const long long head = direct || bytes >= CB_STREAM_BYTES ? coaligned_head<T>(streamed, 3, n) : -1;
    if (head >= 0) {
        combine_scalar<T, OP, NIN, OWN, NOUT>(i0, i1, own, o0, o1, o2, 0, head);
        const long long lines = (n - head) / L;
        for (long long l = 0; l < lines; ++l) {
            const long long first = head + l * L;
            const long long next = first * (long long)sizeof(T) + ahead;  // then one line, `ahead` bytes on, per line used
            if (ahead && next < bytes)
                for (int k = 0; k < NIN; ++k) cb_prefetch(k ? i1 : i0, next, next + CB_LINE);
            T v[L];  // (a copy's line goes straight from its source, not through the stack)
            const T* line = NIN == 1 && !OWN ? i0 + first : v;
            if (line == v)
                for (int e = 0; e < L; ++e) v[e] = combined<T, OP, NIN, OWN>(i0, i1, own, first + e);
            for (int k = 0; k < NOUT; ++k) {
                T* o = (k == 0 ? o0 : k == 1 ? o1 : o2) + first;
                if (k < local) memcpy(o, line, CB_LINE);
                else cb_stream_line(o, line);
            }
        }
        done = head + lines * L;
        cb_stream_fence();
    }
#endif
    combine_scalar<T, OP, NIN, OWN, NOUT>(i0, i1, own, o0, o1, o2, done, n);
}

template <typename T, int OP>
__device__ void combine_any(const T* const* in, int nin, const T* own, T* const* out, int nout, int local,
                            long long n, bool direct) {
    // the combinations the schedules use: (received, own, outputs)
#define CB_CASE(NIN, OWN, NOUT) \
    if (nin == NIN && (own != nullptr) == OWN && nout == NOUT) \
        return combine_elements<T, OP, NIN, OWN, NOUT>(in, own, out, local, n, direct);
    CB_CASE(0, true, 1) CB_CASE(0, true, 2) CB_CASE(0, true, 3)
    CB_CASE(1, false, 1) CB_CASE(1, false, 2) CB_CASE(1, false, 3)
    CB_CASE(1, true, 1) CB_CASE(1, true, 2)
    CB_CASE(2, true, 1) CB_CASE(2, true, 2) CB_CASE(2, true, 3)
#undef CB_CASE
}
