// The ring's schedules (cuda/collectives.cu, Algorithms): all-reduce and all-gather through the FIFOs or
// direct, reduce-scatter; each a sequence of transfers.
#pragma once

#include "slices.h"
#include "transfer.h"

// Ring all-reduce reading the left neighbour's buffers in place, where every rank's buffers are in
// reach at `reach` bytes per rank: the ring's steps with no FIFO between them, so at 2 ranks a rank
// reads 3 and writes 2 blocks' worth where the FIFOs take 4 and 4 (16 MB: 40 MB of memory traffic a
// rank, not 64). In each round of n blocks, step 0 says the own input can be read; reduce step s (1
// .. n-1) waits for the left's step s-1, adds the left's block q = r-1-s (its input at s = 1, else
// the partial sum it wrote into its output) to the own input's and writes the sum into the own
// output, block r complete at s = n-1; gather step t (1 .. n-1) copies block r-t, complete, out of
// the left's output. Each step is a direct transfer: its message is "block q can be read from me",
// flags only (as the direct all-gather's). Gather step t overwrites what the right read at its
// reduce step t (a partial sum, or in place the input) without asking: every step of a rank follows
// the left's step before it, so step n-1+t follows the right's step t (n-1 ranks back round the
// ring). Every block is a step on every rank, even an empty one, so the counts agree. Output the
// right reads next is streamed past the caches (cb_stream_line), as is all of the node's outputs
// where they are too large for them (cached_bytes). Before it returns a rank waits until its right
// neighbour has read all it needs from its buffers.
template <typename T, int OP>
__device__ bool ring_all_reduce_direct(Channel& h, const T* send, T* recv, long long count, int channels,
                                       long long reach) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks, r = h.me, left = (r + n - 1) % n, right = (r + 1) % n;
    const int out = c->out_conn[right];
    const T* left_send = (const T*)((const char*)send + (long long)(left - r) * reach);
    const T* left_recv = (const T*)((const char*)recv + (long long)(left - r) * reach);
    const long long chunk = c->direct_slots * c->slot_bytes / sizeof(T), A = CbAlign<T>::value;
    const long long lo = part_at(count, h.ch, channels, A), hi = part_at(count, h.ch + 1, channels, A);
    const bool huge = n * count * (long long)sizeof(T) > c->cached_bytes;
    const int from[1] = {left}, to[1] = {right};
    CB_SHARED int ok;
    if (cb_tid() == 0) cb_fence_system();  // the input, written before this launch (see the direct all-gather)
    for (long long base = lo; base < hi; base += n * chunk) {
        const long long len = n * chunk < hi - base ? n * chunk : hi - base;
        for (int s = 0; s < 2 * n - 1; ++s) {  // step 0 only delivers
            const bool gather = s >= n;
            const int t = s - n + 1;  // the gather step
            const int q = gather ? (r - t + n) % n : (r - 1 - s + 2 * n) % n;
            const long long off = base + part_at(len, q, n, A), m = base + part_at(len, q + 1, n, A) - off;
            const T* src = (gather || s > 1 ? left_recv : left_send) + off;
            const bool local = s == 2 * n - 2 && !huge;  // the last gather step: nobody reads it next
            if (!transfer<T, OP>(h, from, s > 0, &src, gather || s == 0 ? nullptr : send + off,
                                 s > 0 ? recv + off : nullptr, to, s < 2 * n - 2, m, local))
                return false;
        }
    }
    if (cb_tid() == 0) ok = h.await_consumed(right, h.out_seq[out], 2);
    cb_sync();
    return ok;
}

// Ring all-reduce, one round of n blocks: position r sends block r-1 first, reduces what
// arrives and passes it on until it holds block r reduced, then the reduced blocks go round.
// Direct (above) where the call says so (reach: the stride between the ranks' buffers).
template <typename T, int OP>
__device__ bool ring_all_reduce(Channel* lanes, const T* send, T* recv, long long count, int channels,
                                long long reach) {
    Channel& h = lanes[0];
    if (reach) return ring_all_reduce_direct<T, OP>(h, send, recv, count, channels, reach);
    const int n = h.c->nranks, r = h.me;
    const int left[1] = {(r + n - 1) % n}, right[1] = {(r + 1) % n};
    const long long chunk = h.c->slot_bytes / sizeof(T);
    const long long A = CbAlign<T>::value;
    const long long lo = part_at(count, h.ch, channels, A), hi = part_at(count, h.ch + 1, channels, A);
    for (long long base = lo; base < hi; base += n * chunk) {
        const long long len = n * chunk < hi - base ? n * chunk : hi - base;
#define CB_BLOCK(q) const long long off = base + part_at(len, (q), n, A), m = base + part_at(len, (q) + 1, n, A) - off; \
                    if (m == 0) continue;
        for (int s = 0; s < n - 1; ++s) {  // reduce-scatter: step 0 sends, the others receive, reduce, send
            CB_BLOCK((r - 1 - s + 2 * n) % n)
            if (!transfer<T, OP>(h, left, s > 0, send + off, nullptr, right, 1, m)) return false;
        }
        for (int s = 0; s < n; ++s) {  // block r completes; then each block goes round once
            CB_BLOCK((r - s + n) % n)
            if (!transfer<T, OP>(h, left, 1, s == 0 ? send + off : nullptr, recv + off, right, s < n - 1, m))
                return false;
        }
#undef CB_BLOCK
    }
    return true;
}

// Ring reduce-scatter: the reduce-scatter half of the all-reduce on blocks of `count` elements,
// rank r's input block q at send + q*count, its output block (r) at recv.
template <typename T, int OP>
__device__ bool ring_reduce_scatter(Channel* lanes, const T* send, T* recv, long long count, int channels,
                                    long long) {
    Channel& h = lanes[0];
    const int n = h.c->nranks, r = h.me;
    const int left[1] = {(r + n - 1) % n}, right[1] = {(r + 1) % n};
    const long long chunk = h.c->slot_bytes / sizeof(T), A = CbAlign<T>::value;
    const long long lo = part_at(count, h.ch, channels, A), hi = part_at(count, h.ch + 1, channels, A);
    for (long long off = lo; off < hi; off += chunk) {
        const long long m = chunk < hi - off ? chunk : hi - off;
        for (int s = 0; s < n; ++s) {
            const int q = (r - 1 - s + 2 * n) % n;  // the last step's block is r
            if (!transfer<T, OP>(h, left, s > 0, send + q * count + off, s == n - 1 ? recv + off : nullptr, right,
                                 s < n - 1, m))
                return false;
        }
    }
    return true;
}

// Ring all-gather reading the left neighbour's buffers in place, where every rank's buffers are in
// reach at `reach` bytes per rank: one copy per block, not two through a FIFO. Step 0 puts the own
// block in place, step 1 copies the left's own block out of its input (in place: its output), step
// s > 1 block r-s out of the left's output once the left holds it. Each step is a direct transfer:
// its message is "this chunk of block q can be read from me", flags only, no slot. Blocks the right
// neighbour reads from this rank's output are streamed past the caches (the other core reads them
// from memory, not out of this one's cache: see cb_stream_line; where the node's outputs are too
// large for the caches, cached_bytes, the all-gather pushes instead: below). Before it returns a
// rank waits until its right neighbour has read all it needs from its buffers, so the caller may
// reuse them.
__device__ bool ring_all_gather_direct(Channel& h, const unsigned char* send, unsigned char* recv, long long count,
                                       int channels, long long reach) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks, r = h.me, left = (r + n - 1) % n, right = (r + 1) % n;
    const int out = c->out_conn[right];
    const unsigned char* left_recv = recv + (long long)(left - r) * reach;
    const unsigned char* left_own = send == recv + r * count ? left_recv + left * count  // in place
                                                             : send + (long long)(left - r) * reach;
    const long long chunk = c->direct_slots * c->slot_bytes;
    const long long lo = part_at(count, h.ch, channels, 16), hi = part_at(count, h.ch + 1, channels, 16);
    const int from[1] = {left}, to[1] = {right};
    CB_SHARED int ok;
    // The blocks the neighbour reads at step 1 were written before this launch (the input, or the
    // own block in place), not by this block: one system-scope fence makes them visible before the
    // first release publishes them (the releases after it cover what this block writes itself).
    if (cb_tid() == 0) cb_fence_system();
    for (long long off = lo; off < hi; off += chunk) {
        const long long m = chunk < hi - off ? chunk : hi - off;
        for (int s = 0; s < n; ++s) {  // step 0: the own block into place (unless it is there, in place)
            const int q = (r - s + n) % n;
            const unsigned char* src = (s == 0 ? send : s == 1 ? left_own : left_recv + q * count) + off;
            unsigned char* dst = recv + q * count + off;
            if (!transfer<unsigned char, SUM>(h, from, s > 0, &src, s == 0 ? src : nullptr,
                                              dst != src ? dst : nullptr, to, s < n - 1, m, s == 0 || s == n - 1))
                return false;
        }
    }
    if (cb_tid() == 0) ok = h.await_consumed(right, h.out_seq[out], 2);
    cb_sync();
    return ok;
}

// Ring all-gather writing into the left neighbour's output, for a direct call whose node outputs
// are too large for the caches (cached_bytes): a rank reads its own block once and writes it into
// its own output and its left neighbour's, then passes on, leftwards, each block its right
// neighbour writes into its output: n-1 block reads a rank, not the n of reading from the left (2
// ranks, 64 MB: 32 MB read and 64 MB written a rank, not 64 and 64; a C loop of the two ways: 0.69x
// the time). Simple's hand-offs, run against the data's direction: on entry a rank delivers to its
// right neighbour all of the call's messages at once ("my output may be written"); "block q of this
// chunk is in your output" goes left as a consume, and is awaited from the right as its
// consumption. A rank sends and receives as many messages each way as the version above (n-1 a
// chunk), so the flags agree whatever call comes next. A rank returns once every block is in its
// output: nobody reads its buffers.
__device__ bool ring_all_gather_push(Channel& h, const unsigned char* send, unsigned char* recv, long long count,
                                     int channels, long long reach) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks, r = h.me, left = (r + n - 1) % n, right = (r + 1) % n;
    const int out = c->out_conn[right];
    unsigned char* left_recv = recv + (long long)(left - r) * reach;
    const long long chunk = c->direct_slots * c->slot_bytes;
    const long long lo = part_at(count, h.ch, channels, 16), hi = part_at(count, h.ch + 1, channels, 16);
    const cb_u64 messages = (cb_u64)(n - 1) * (cb_u64)((hi - lo + chunk - 1) / chunk);
    cb_u64 heard = 0;  // thread 0's: the right's messages awaited so far
    CB_SHARED int ok;
    if (cb_tid() == 0) {
        cb_fence_system();  // the own output and input, used before this launch
        ok = 1, heard = h.out_seq[out];
        if (messages) {  // my output may be written; then wait until the left's may
            h.deliver(right, messages);
            ok = h.await_delivered(left, messages, 3);
        }
    }
    cb_sync();
    if (!ok) return false;
    for (long long off = lo; off < hi; off += chunk) {
        const long long m = chunk < hi - off ? chunk : hi - off;
        for (int s = 0; s < n; ++s) {
            const int q = (r + s) % n;  // the block this step passes on: own first, then the right's
            if (s > 0) {  // the right's step s-1 wrote block q into my output
                if (cb_tid() == 0) ok = h.await_consumed(right, ++heard, 0);
                cb_sync();
                if (!ok) return false;
            }
            if (s < n - 1) {
                const unsigned char* src = (s == 0 ? send : recv + q * count) + off;
                unsigned char* dst[2] = {left_recv + q * count + off, recv + q * count + off};
                combine_any<unsigned char, SUM>(&src, 1, nullptr, dst, s == 0 && dst[1] != src ? 2 : 1, 0, m, true);
                cb_sync();
                if (cb_tid() == 0) h.consume(left);
            }
            ++*h.step;
        }
    }
    return true;  // (the last wait read the head at out_seq: every message of mine answered)
}

// Ring all-gather (bytes): rank r's block is send; block q of recv is rank q's. Through the FIFOs,
// or direct (above) where the call says so (reach: the stride between the ranks' buffers).
__device__ bool ring_all_gather(Channel* lanes, const unsigned char* send, unsigned char* recv, long long count,
                                int channels, long long reach) {
    Channel& h = lanes[0];
    if (reach && h.c->nranks * h.c->nranks * count > h.c->cached_bytes)  // (one rank never gets here)
        return ring_all_gather_push(h, send, recv, count, channels, reach);
    if (reach) return ring_all_gather_direct(h, send, recv, count, channels, reach);
    const int n = h.c->nranks, r = h.me;
    const int left[1] = {(r + n - 1) % n}, right[1] = {(r + 1) % n};
    const long long chunk = h.c->slot_bytes;
    const long long lo = part_at(count, h.ch, channels, 16), hi = part_at(count, h.ch + 1, channels, 16);
    for (long long off = lo; off < hi; off += chunk) {
        const long long m = chunk < hi - off ? chunk : hi - off;
        for (int s = 0; s < n; ++s) {
            const int q = (r - s + n) % n;
            unsigned char* dst = recv + q * count + off;
            if (s == 0) {  // own block: into place (unless already there, in place) and to the right
                if (!transfer<unsigned char, SUM>(h, left, 0, send + off, dst == send + off ? nullptr : dst, right,
                                                  n > 1, m))
                    return false;
            } else if (!transfer<unsigned char, SUM>(h, left, 1, nullptr, dst, right, s < n - 1, m)) {
                return false;
            }
        }
    }
    return true;
}
