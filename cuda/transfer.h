// The primitive every schedule is made of (cuda/collectives.cu): a channel's lanes, the wait, and
// transfer(), which receives, combines and sends one chunk.
#pragma once

#include "comm.h"
#include "combine.h"
#include "error_record.h"

// --- the primitive -------------------------------------------------------------------------------
struct Channel {  // one lane of a channel, as its schedule sees it
    const CbComm* c;
    int me, ch, lane;
    cb_u64* in_seq;  // this lane's counters (the block's shared memory; written back at the end)
    cb_u64* out_seq;
    cb_u64* out_freed;
    long long* step;  // the channel's transfers so far in this call (all its lanes), for the error message

    // Until *flag >= value (acquire); the value seen then in *seen. False at the timeout. what: 0
    // data, 1 a free slot, 2 the peer's reading of this rank's output, 3 the peer's entering the call
    // (CbComm.error[5]).
    __device__ bool wait(const cb_u64* flag, cb_u64 value, int peer, int what, cb_u64* seen = nullptr) {
        int spins = 0;
        long long start = 0, looked = 0;
        cb_u64 now_seen;
        while ((now_seen = cb_load_acquire(flag)) < value) {
            if (++spins < CB_SPINS_BETWEEN_CLOCKS) continue;
            spins = 0;
            const long long now = cb_now_ns();
            if (start == 0) start = now;
            if (now - start < c->spin_ns) continue;
            if (now - start > c->timeout_ns) {
                record_error(c->error, me, ch, *step, peer, what);
                return false;
            }
            if (now - looked < CB_ABORT_POLL_NS) continue;
            looked = now;
            if (cb_load_acquire((const cb_u64*)c->error)) return false;  // another block's wait timed out: abort

            cb_back_off(c->nap_ns && now - start >= c->nap_ns);
        }
        if (seen) *seen = now_seen;
        return true;
    }
};

// One transfer of n elements: from[] the ranks whose next message is read (0-2), own the rank's
// input (or null), dst the rank's output (or null), to[] the ranks the result is sent to (0-2).
// False if a wait timed out (every thread of the block returns false).
template <typename T, int OP>
__device__ bool transfer(Channel& h, const int* from, int nfrom, const T* own, T* dst, const int* to, int nto,
                         long long n) {
    CB_SHARED const T* in[2];
    CB_SHARED T* out[3];
    CB_SHARED int ok;
    const CbComm* c = h.c;
    const int nown = dst != nullptr;
    const long long bytes = n * (long long)sizeof(T);
    const bool inline_msg = bytes <= CB_INLINE_BYTES;
    if (cb_tid() == 0) {
        ok = 1;
        if (dst) out[0] = dst;
        for (int k = 0; k < nto; ++k) {
            const int mine = c->out_conn[to[k]];
            out[nown + k] = (T*)fifo_slot(c, to[k], h.lane, c->peer_in_conn[to[k]], h.out_seq[mine], inline_msg);
#ifndef CB_DEVICE  // a slot known free, of 2+ lines written with ordinary stores: claimed while the data is awaited
            const bool known_free = h.out_seq[mine] + 1 <= h.out_freed[mine] + (cb_u64)c->nslots;
            if (known_free && bytes > CB_LINE && bytes < CB_STREAM_BYTES) cb_prefetch_write(out[nown + k], bytes);
#endif
        }
        for (int k = 0; k < nfrom && ok; ++k) {
            const int conn = c->in_conn[from[k]];
            in[k] = (const T*)fifo_slot(c, h.me, h.lane, conn, h.in_seq[conn], inline_msg);
            ok = h.wait(inline_msg ? inline_number(in[k]) : tail_flag(c, h.me, h.lane, conn), h.in_seq[conn] + 1,
                        from[k], 0);
        }
        for (int k = 0; k < nto && ok; ++k) {
            const int mine = c->out_conn[to[k]];
            const cb_u64 seq = h.out_seq[mine];
            if (seq + 1 > h.out_freed[mine] + (cb_u64)c->nslots)  // not known free: ask the head flag
                ok = h.wait(head_flag(c, h.me, h.lane, mine), seq + 1 - c->nslots, to[k], 1, &h.out_freed[mine]);
        }
    }
    cb_sync();
    if (!ok) return false;
    combine_any<T, OP>(in, nfrom, own, out, (dst != nullptr) + nto, dst != nullptr, n, false);
    cb_sync();
    if (cb_tid() == 0) {
        for (int k = 0; k < nto; ++k) {
            const int mine = c->out_conn[to[k]];
            cb_u64* tail = inline_msg ? inline_number(out[nown + k])  // the message's number after its data
                                      : tail_flag(c, to[k], h.lane, c->peer_in_conn[to[k]]);
            cb_store_release(tail, ++h.out_seq[mine]);
        }
        for (int k = 0; k < nfrom; ++k) {
            const int conn = c->in_conn[from[k]];
            cb_store_release(head_flag(c, from[k], h.lane, c->peer_out_conn[from[k]]), ++h.in_seq[conn]);
        }
    }
    ++*h.step;
    return true;
}
