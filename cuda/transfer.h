// The channel and the primitive (cuda/collectives.cu): a channel's lanes, the wait, the hand-offs every
// schedule's flags go through (the two protocols', nowhere else touched) and transfer(), which receives,
// combines and sends one chunk, through the FIFOs or direct: the ring's and the tree's schedules are made of it.
#pragma once

#include "comm.h"
#include "combine.h"
#include "error_record.h"

// --- the channel and its hand-offs ---------------------------------------------------------------
// Two protocols, as NCCL's. Simple: a connection's messages are counted (in_seq / out_seq); the sender
// delivers by releasing the receiver's tail flag at its count, the receiver consumes by releasing the
// sender's head flag at its own. LL: a line of CB_INLINE_BYTES of data carries a number in its last
// word, released after the data, which the reader waits on (no tail flag: one line crosses between the
// ranks, not a flag and then the data). transfer() speaks simple, or LL for a message of one line; one-shot
// speaks LL (oneshot.h); the ring's push all-gather runs simple's flags the other way round (ring.h).
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

    // simple, receiving: until `from` has delivered `messages` more (its tail flag here; LL, one message in
    // `line`: the number there); then, per message, consume
    __device__ __forceinline__ bool await_delivered(int from, cb_u64 messages, int what, const void* line = nullptr) {
        const int conn = c->in_conn[from];
        return wait(line ? inline_number(line) : tail_flag(c, me, lane, conn), in_seq[conn] + messages, from, what);
    }
    __device__ __forceinline__ void consume(int from) {  // (its head flag there)
        cb_store_release(head_flag(c, from, lane, c->peer_out_conn[from]), ++in_seq[c->in_conn[from]]);
    }
    // simple, sending: deliver `messages` to `to` (its tail flag there); until `to` has consumed up to `value`
    // (the head flag here, the value seen kept in out_freed)
    __device__ __forceinline__ void deliver(int to, cb_u64 messages = 1) {
        const int mine = c->out_conn[to];
        cb_store_release(tail_flag(c, to, lane, c->peer_in_conn[to]), out_seq[mine] += messages);
    }
    __device__ __forceinline__ bool await_consumed(int to, cb_u64 value, int what) {
        const int mine = c->out_conn[to];
        return wait(head_flag(c, me, lane, mine), value, to, what, &out_freed[mine]);
    }
    // LL: a line's number, released after its data (post_line); until it reaches `number`
    __device__ bool await_line(const void* line, cb_u64 number, int from) {
        return wait(inline_number(line), number, from, 0);
    }
};
__device__ __forceinline__ void post_line(void* line, cb_u64 number) { cb_store_release(inline_number(line), number); }

// --- the primitive -------------------------------------------------------------------------------
// How a transfer's messages travel. FIFO: in the receiver's FIFO slots (simple; LL for one of at most
// CB_INLINE_BYTES, in its slot's line). DIRECT: read by the receiver straight out of the sender's
// buffers, so a message is simple's flags only, and the data the caller's `peer[]`: the pointers it reads
// from each of from[] (the schedule's order keeps what it reads unchanged until the read: ring.h). A
// direct transfer reads at most one message and writes at most its own output (dst): the message, or
// with none the own input, copied, or the message combined with the own input.
enum { FIFO, DIRECT };

// One transfer of n elements: from[] the ranks whose next message is read (0-2), own the rank's
// input (or null), dst the rank's output (or null), to[] the ranks the result is sent to (0-2).
// DIRECT: peer[] as above; dst written through the caches where `local` (else streamed: the right
// neighbour reads it next). False if a wait timed out (every thread of the block returns false).
// The two overloads below are the schedules' calls: the mode is what they pass.
template <typename T, int OP, int MODE>
__device__ __forceinline__ bool transfer_as(Channel& h, const int* from, int nfrom, const T* const* peer, const T* own,
                                            T* dst, const int* to, int nto, long long n, bool local) {
    CB_SHARED const T* in[2];
    CB_SHARED T* out[3];
    CB_SHARED int ok;
    const CbComm* c = h.c;
    const int nown = dst != nullptr;
    const long long bytes = n * (long long)sizeof(T);
    const bool inline_msg = MODE == FIFO && bytes <= CB_INLINE_BYTES;
    if (cb_tid() == 0) {
        ok = 1;
        if (dst) out[0] = dst;
        if (MODE == DIRECT) in[0] = nfrom ? peer[0] : own;
        for (int k = 0; MODE == FIFO && k < nto; ++k) {
            const int mine = c->out_conn[to[k]];
            out[nown + k] = (T*)fifo_slot(c, to[k], h.lane, c->peer_in_conn[to[k]], h.out_seq[mine], inline_msg);
#ifndef CB_DEVICE  // a slot known free, of 2+ lines written with ordinary stores: claimed while the data is awaited
            const bool known_free = h.out_seq[mine] + 1 <= h.out_freed[mine] + (cb_u64)c->nslots;
            if (known_free && bytes > CB_LINE && bytes < CB_STREAM_BYTES) cb_prefetch_write(out[nown + k], bytes);
#endif
        }
        for (int k = 0; k < nfrom && ok; ++k) {
            if (MODE == DIRECT) {
                ok = h.await_delivered(from[k], 1, 0);
                continue;
            }
            const int conn = c->in_conn[from[k]];
            in[k] = (const T*)fifo_slot(c, h.me, h.lane, conn, h.in_seq[conn], inline_msg);
            ok = h.await_delivered(from[k], 1, 0, inline_msg ? in[k] : nullptr);
        }
        for (int k = 0; MODE == FIFO && k < nto && ok; ++k) {
            const int mine = c->out_conn[to[k]];
            const cb_u64 seq = h.out_seq[mine];
            if (seq + 1 > h.out_freed[mine] + (cb_u64)c->nslots)  // not known free: ask the head flag
                ok = h.await_consumed(to[k], seq + 1 - c->nslots, 1);
        }
    }
    cb_sync();
    if (!ok) return false;
    if (MODE == FIFO)
        combine_any<T, OP>(in, nfrom, own, out, nown + nto, nown, n, false);
    else if (dst && nfrom && own)  // (each case its own call: known to the compiler in the schedule's loop)
        combine_elements<T, OP, 1, true, 1>(in, own, out, local, n, true);
    else if (dst && in[0])
        combine_elements<T, OP, 1, false, 1>(in, nullptr, out, local, n, true);
    cb_sync();
    if (cb_tid() == 0) {
        for (int k = 0; k < nto; ++k) {
            if (inline_msg) post_line(out[nown + k], ++h.out_seq[c->out_conn[to[k]]]);  // the number after its data
            else h.deliver(to[k]);
        }
        for (int k = 0; k < nfrom; ++k) h.consume(from[k]);
    }
    ++*h.step;
    return true;
}

// Through the FIFOs (on the host a call of its own, shared by the schedule's steps).
template <typename T, int OP>
__device__ bool transfer(Channel& h, const int* from, int nfrom, const T* own, T* dst, const int* to, int nto,
                         long long n) {
    return transfer_as<T, OP, FIFO>(h, from, nfrom, nullptr, own, dst, to, nto, n, true);
}
// Direct: peer[k], what from[k]'s message lets this rank read in place (inlined into its schedule, whose
// steps are short, and its combination known there; a call costs a small direct all-gather on the host).
template <typename T, int OP>
__device__ __forceinline__ bool transfer(Channel& h, const int* from, int nfrom, const T* const* peer, const T* own,
                                         T* dst, const int* to, int nto, long long n, bool local) {
    return transfer_as<T, OP, DIRECT>(h, from, nfrom, peer, own, dst, to, nto, n, local);
}
