// One-shot (cuda/collectives.cu, Algorithms): small calls' every message at once, in lines that carry the
// call's number (NCCL's LL protocol).
#pragma once

#include "slices.h"
#include "transfer.h"

// --- one-shot: every message at once, each line with the call's number (NCCL's LL protocol) ------
// Sender s's message to rank r lies in r's region at s's place for the call's parity: its lines hold
// CB_INLINE_BYTES of data each and, in their last word, the call's number (released after the data),
// which r waits on; no tail flag, no head flag. Two places suffice: a rank starts call c+2 only after
// every peer's message of call c+1 reached it, and a peer sends that only once it has read all of
// call c. Every rank makes every one-shot call of its communicator, so their numbers agree.
__device__ __forceinline__ int cb_wrap(int i, int n) { return i >= n ? i - n : i < 0 ? i + n : i; }  // i in (-n, 2n)
__device__ __forceinline__ char* oneshot_line(const CbComm* c, int owner, int sender, cb_u64 call, long long line) {
    return c->region[owner] + CB_ONESHOT_OFFSET + ((sender * 2 + (long long)(call & 1)) * CB_ONESHOT_LINES + line) * CB_LINE;
}

// Rank `me`'s message to `to`: `bytes` of src, line by line (threads take lines), each line's number released
// after its data.
__device__ void oneshot_send(const CbComm* c, int me, int to, cb_u64 call, const char* src, long long bytes) {
    const long long lines = (bytes + CB_INLINE_BYTES - 1) / CB_INLINE_BYTES;
    for (long long l = cb_tid(); l < lines; l += cb_nthreads()) {
        char* line = oneshot_line(c, to, me, call, l);
        const long long first = l * CB_INLINE_BYTES, n = bytes - first < CB_INLINE_BYTES ? bytes - first : CB_INLINE_BYTES;
#ifdef CB_DEVICE
        for (long long b = 0; b < n; ++b) line[b] = src[first + b];
#else
        memcpy(line, src + first, (size_t)n);
#endif
        post_line(line, call);
    }
}

// Until every peer's message of `bytes` has arrived (thread 0 waits, then the block syncs); false at a timeout.
// On the host one thread wrote all of a message's lines, so its last line's number, released after all of
// them, is the one waited for (then every line is asked for at once); on a GPU each line's writer released its
// own, so each is waited for. (Inlined on the host, it made the 2-rank 256 B-2 KB all-reduce 6-25 % slower,
// paired, and the 8 B one no faster.)
__device__ bool oneshot_wait(Channel& h, cb_u64 call, long long bytes) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks;
    const long long lines = (bytes + CB_INLINE_BYTES - 1) / CB_INLINE_BYTES;
    CB_SHARED int ok;
    if (cb_tid() == 0) {
        ok = 1;
        for (int k = 1; k < n && ok; ++k) {  // in the order the peers sent (each starts with its right neighbour)
            const int q = cb_wrap(h.me - k, n);
#ifdef CB_DEVICE
            for (long long l = 0; l < lines && ok; ++l)
                ok = h.await_line(oneshot_line(c, h.me, q, call, l), call, q);
#else
            ok = h.await_line(oneshot_line(c, h.me, q, call, lines - 1), call, q);
            cb_prefetch(oneshot_line(c, h.me, q, call, 0), 0, (lines - 1) * CB_LINE);
#endif
        }
    }
    cb_sync();
    ++*h.step;
    return ok;
}

// out = the n messages' elements reduced in rank order (rank `me`'s own from mine): on a GPU threads take
// elements; on the host a line at a time (loops the compiler vectorises), a one-line message element by element.
template <typename T, int OP>
__device__ void oneshot_reduce(const CbComm* c, int me, cb_u64 call, const T* mine, T* out, long long count) {
    constexpr long long PER = CB_INLINE_BYTES / sizeof(T);
    const int n = (int)c->nranks;
#ifdef CB_DEVICE
    for (long long i = cb_tid(); i < count; i += cb_nthreads()) {
        T v = mine[i];
        for (int q = 0; q < n; ++q) {
            const T x = q == me ? mine[i] : cb_load_fresh((const T*)oneshot_line(c, me, q, call, i / PER) + i % PER);
            v = q ? combine<T, OP>(v, x) : x;
        }
        out[i] = v;
    }
#else
    if (count <= PER) {  // one line from each rank: element by element, in rank order (in place too: out[e] is
        for (long long e = 0; e < count; ++e) {  // written after mine[e] is read); 2 ranks, 8 B: 5 % off the call
            T v = cb_load_fresh(me == 0 ? mine + e : (const T*)oneshot_line(c, me, 0, call, 0) + e);
            for (int q = 1; q < n; ++q) {
                const T* x = q == me ? mine : (const T*)oneshot_line(c, me, q, call, 0);
                v = combine<T, OP>(v, cb_load_fresh(x + e));
            }
            out[e] = v;
        }
        return;
    }
    for (long long l = 0; l * PER < count; ++l) {
        const long long first = l * PER, m = count - first < PER ? count - first : PER;
        T v[PER];
        for (int q = 0; q < n; ++q) {
            const T* x = q == me ? mine + first : (const T*)oneshot_line(c, me, q, call, l);
            for (long long e = 0; e < m; ++e) v[e] = q ? combine<T, OP>(v[e], cb_load_fresh(x + e)) : cb_load_fresh(x + e);
        }
        for (long long e = 0; e < m; ++e) out[first + e] = v[e];
    }
#endif
}

// A one-shot call runs in channel 0 alone (the caller asks for one; any other does nothing); an empty one
// does nothing (every rank's is empty). A message
// larger than a one-shot one (CB_ONESHOT_BYTES) runs the ring's schedule instead.
#define CB_ONESHOT_BYTES (CB_ONESHOT_LINES * CB_INLINE_BYTES)
__device__ __forceinline__ cb_u64 oneshot_begin(const Channel& h) { return h.c->oneshot_calls + 1; }
__device__ __forceinline__ void oneshot_end(const Channel& h, cb_u64 call) {
    cb_sync();
    if (cb_tid() == 0) ((CbComm*)h.c)->oneshot_calls = call;
}

// All-reduce: the whole input to every peer; every rank reduces the n inputs in rank order (the same
// result on every rank).
template <typename T, int OP>
__device__ bool oneshot_all_reduce(Channel* lanes, const T* send, T* recv, long long count, int channels, long long reach) {
    Channel& h = lanes[0];
    const CbComm* c = h.c;
    const int n = (int)c->nranks, me = h.me;
    if (count * (long long)sizeof(T) > CB_ONESHOT_BYTES) return ring_all_reduce<T, OP>(lanes, send, recv, count, channels, reach);
    if (h.ch || count == 0) return true;
    const cb_u64 call = oneshot_begin(h);
    for (int k = 1; k < n; ++k)
        oneshot_send(c, me, cb_wrap(me + k, n), call, (const char*)send, count * (long long)sizeof(T));
    if (!oneshot_wait(h, call, count * (long long)sizeof(T))) return false;
    oneshot_reduce<T, OP>(c, me, call, send, recv, count);
    oneshot_end(h, call);
    return true;
}

// Reduce-scatter: block p of the input to rank p; block r reduced in rank order.
template <typename T, int OP>
__device__ bool oneshot_reduce_scatter(Channel* lanes, const T* send, T* recv, long long count, int channels,
                                       long long reach) {
    Channel& h = lanes[0];
    const CbComm* c = h.c;
    const int n = (int)c->nranks, me = h.me;
    if (count * (long long)sizeof(T) > CB_ONESHOT_BYTES)
        return ring_reduce_scatter<T, OP>(lanes, send, recv, count, channels, reach);
    if (h.ch || count == 0) return true;
    const cb_u64 call = oneshot_begin(h);
    for (int k = 1; k < n; ++k) {
        const int p = cb_wrap(me + k, n);
        oneshot_send(c, me, p, call, (const char*)(send + p * count), count * (long long)sizeof(T));
    }
    if (!oneshot_wait(h, call, count * (long long)sizeof(T))) return false;
    oneshot_reduce<T, OP>(c, me, call, send + me * count, recv, count);
    oneshot_end(h, call);
    return true;
}

// All-gather (bytes): the own block to every peer; block q of recv from rank q (the own one copied unless
// already in place).
__device__ bool oneshot_all_gather(Channel* lanes, const unsigned char* send, unsigned char* recv, long long count,
                                   int channels, long long reach) {
    Channel& h = lanes[0];
    const CbComm* c = h.c;
    const int n = (int)c->nranks, me = h.me;
    if (count > CB_ONESHOT_BYTES) return ring_all_gather(lanes, send, recv, count, channels, reach);
    if (h.ch || count == 0) return true;
    const cb_u64 call = oneshot_begin(h);
    for (int k = 1; k < n; ++k) oneshot_send(c, me, cb_wrap(me + k, n), call, (const char*)send, count);
    if (!oneshot_wait(h, call, count)) return false;
    for (int q = 0; q < n; ++q) {  // a line at a time (threads take lines)
        unsigned char* dst = recv + q * count;
        if (dst == send) continue;
        for (long long first = cb_tid() * CB_INLINE_BYTES; first < count; first += cb_nthreads() * CB_INLINE_BYTES) {
            const unsigned char* x = q == me ? send + first
                                             : (const unsigned char*)oneshot_line(c, me, q, call, first / CB_INLINE_BYTES);
            const long long m = count - first < CB_INLINE_BYTES ? count - first : CB_INLINE_BYTES;
            for (long long b = 0; b < m; ++b) dst[first + b] = cb_load_fresh(x + b);
        }
    }
    oneshot_end(h, call);
    return true;
}
