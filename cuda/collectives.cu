// Ring and tree collectives as kernels: every rank of a node runs one persistent kernel per call
// that does every step itself (commbench/kernels/node.py launches it; algorithms ring_kernel and
// tree_kernel). One source, two targets (cuda/portable.h): on a GPU each channel is a thread
// block and the shared regions are cudaMalloc'd buffers opened by CUDA IPC; on the host each
// channel is a thread and the regions live in one /dev/shm segment every rank maps.
//
// Memory. Every rank owns a region that every rank of the node maps:
//   [tail flags: MAX_LANES x MAX_CONNS lines][head flags: likewise][one-shot lines][skew][FIFO slots]
//   [their lines]
// A lane is one channel's set of connections for one tree (CB_TREES lanes per channel: channel ch
// owns lanes CB_TREES*ch + t; the ring uses the first). A connection is an ordered pair of ranks
// (sender s, receiver r) per lane: r's FIFO for s (nslots slots of slot_bytes in r's region, each
// with a line for a small message: fifo_slot), r's tail flag for s (the number of the last larger
// message s has delivered, written by s; a small one carries its own) and s's head flag for r
// (messages r has consumed, written by r). Each rank keeps how many messages it sent and received
// on each connection (in_seq / out_seq, across calls, with out_freed: the head it last read), so a
// flag is a sequence number: back-to-back calls need no reset and no barrier.
//
// The primitive (NCCL's simple protocol): transfer() waits until the messages it reads have
// arrived (acquire the tail) and the slots it writes are free (acquire the head), combines up to
// two received chunks with the rank's own input, writes the result to its output and/or the
// receivers' FIFOs, then publishes (release the receivers' tails and the senders' heads). A
// sender keeps the head it last read (out_freed) and reads the flag again only when the slots
// that value frees run out: while the receiver keeps up, a line it keeps writing crosses between
// cores at most once per nslots messages, not once per message (host, 2 ranks: 5-15 % off small
// calls' latency). A message of at most CB_INLINE_BYTES travels with its number: the data in its
// slot's line, the number (released after it) in the line's last word, which the receiver waits
// on instead of the tail flag, so one line crosses between the ranks, not a flag and then the data
// (NCCL's LL protocol does this per 8 bytes; 2 ranks, 8-64 B all-reduce: 0.65-0.80 of the time).
// Every algorithm below is a schedule of transfers over chunks of at most one slot (a direct
// call, which reads its neighbour's buffers in place, hands off flags only, every CB_DIRECT_SLOTS
// slots' worth); channels take contiguous slices of the buffer. A wait that reaches the timeout
// records who waited for whom at which step (CbComm.error) and ends the kernel: the caller
// raises, nothing hangs.
//
// Algorithms (n ranks, N bytes per rank; ring in rank order; elements of one chunk per step):
//   ring all-reduce       reduce-scatter then all-gather of n blocks per round of n chunks:
//                         2(n-1) steps, 2(n-1)/n·N bytes sent per rank; direct (the ranks'
//                         buffers in reach), each step reads its block straight out of the left
//                         neighbour's input or output
//   ring reduce-scatter   n-1 steps (rank r ends with block r reduced), (n-1)/n·N bytes sent
//   ring all-gather       n-1 steps, (n-1)·N bytes sent (N = one rank's block here); direct
//                         (the ranks' buffers in reach), each block copied once, straight out of
//                         the left neighbour's buffers, or, where the node's outputs are too large
//                         for the caches, pushed into the left neighbour's output (the own block
//                         read once for both outputs)
//   tree all-reduce       a double binary tree: every channel's slice in two halves (a slice of
//                         CB_TREE_SPLIT_BYTES or more, or of two small messages), half t
//                         reduced up binary tree t and broadcast down it (the trees of
//                         dbtree.py: the leaves of one are the inner ranks of the other),
//                         pipelined over chunks (the broadcast of chunk k runs LAG chunks
//                         behind its reduction, except at the root, which sends a chunk down
//                         as it reduces it). 2·depth steps of latency; in the tree where a rank
//                         is inner it receives and sends up to 3 copies of its half, where it
//                         is a leaf one (2 ranks move what a ring moves).
//   one-shot              (small calls, either kernel: commbench/kernels/abi.py's schedule)
//                         every rank sends each peer what it needs at once, in lines that carry
//                         the call's number, and reduces or places what arrives in rank order:
//                         one hand-off of latency, no flag; all-reduce sends (n-1)·N bytes per
//                         rank, reduce-scatter and all-gather (n-1)/n·N (N: the larger buffer),
//                         in lines of 56 bytes of data (64/56 of that crosses).
//                         Host only so far (on a GPU it is slower than the ring from 1 KB: kernel_abi.py).
// Entry points, dtype in float32 float64 float16 bfloat16 int32 int64 int8 uint8, op in sum prod
// min max (avg: sum, then the caller divides):
//   cb_ring_all_reduce_<dtype>_<op>, cb_ring_reduce_scatter_<dtype>_<op>, cb_tree_all_reduce_<dtype>_<op>,
//   cb_ring_all_gather (bytes), and cb_oneshot_ likewise for the three collectives (one channel; a
//   message larger than a one-shot one, CB_ONESHOT_BYTES, runs the ring's schedule)
//   (const CbComm* comms, const void* send, void* recv, long long count, long long stride, int channels,
//    int direct)
// count: elements of the all-reduce buffer, of one rank's block for the others (bytes for
// all-gather); stride: where every rank's buffers are in this rank's reach, rank q's send and recv
// at this rank's + (q - rank)·stride bytes (an in-place send: inside recv; a launch of gridDim.y
// ranks on one GPU, rank y's at send/recv + y·stride; the harness' buffers in the node's shared
// memory on the host), else 0; direct: all-gather and the ring all-reduce read their neighbour's
// buffers there (1) or go through the FIFOs (0). The host's CbCall has the stride only: direct where it is not 0.
// Host only: cb_host_call (the launch).

#include "portable.h"
#include "arith.h"
#include "error_record.h"

#define CB_MAX_RANKS 64
#define CB_MAX_CHANNELS 32
#define CB_TREES 2  // lanes per channel (see Memory)
#define CB_MAX_LANES (CB_MAX_CHANNELS * CB_TREES)
#define CB_MAX_CONNS 8
#define CB_LINE 64
#define CB_INLINE_BYTES (CB_LINE - 8)  // a message this small travels with its number (see transfer)
// A one-shot message (see oneshot_send): up to CB_ONESHOT_LINES lines from each sender, in two places (the
// call's number's parity); the one-shot area sits between the flags and the FIFOs.
#define CB_ONESHOT_LINES 64
#define CB_ONESHOT_OFFSET (2 * CB_MAX_LANES * CB_MAX_CONNS * CB_LINE)
#define CB_FIFO_OFFSET (CB_ONESHOT_OFFSET + CB_MAX_RANKS * 2 * CB_ONESHOT_LINES * CB_LINE)
#define CB_THREADS 512  // per block on the GPU
#define CB_SKEW 256
#define CB_SKEWS 16
// A tree all-reduce's channel slice smaller than this takes one tree (tree ch % 2) whole: halves
// would cost a rank more flag hand-offs than their smaller copies save (host, 2 ranks, single tree
// / halves, paired A/B: 8-128 B 0.73-0.82, 256-512 B 1.4-1.6, 1-64 KB 1.2-1.7); except a slice
// of 64 B or more whose halves are small messages (CB_INLINE_BYTES): one line each beats two lines
// in a row (2 ranks, halves / one tree, paired: 64-96 B 0.64-0.86).
#define CB_TREE_SPLIT_BYTES 256
// Where the node's outputs (every rank's) of a direct call come to more than this, all of them are written
// past the caches (streamed on the host): they do not fit, and an ordinary store first reads the line it writes
// (2 ranks, 64 MB all-gather: kernel / MPI busbw 0.94 -> 1.22; counting the node's outputs, not one rank's,
// 16 MB alternating jobs, new / old kernel time: 2 ranks all-gather 0.74-0.90 (median 0.81, 6 pairs),
// all-reduce 0.84-1.03 (0.89); 4 ranks 0.86-0.91 and 0.84-0.93 (4 pairs)). The all-gather then pushes
// (ring_all_gather_push).
#define CB_CACHED_OUTPUT_BYTES (16ll << 20)

// A direct call's chunk (see ring_all_reduce_direct), in slots: no slot holds it, so it is only how often the
// ranks hand off. Alternating jobs, 4 slots / 1 (host: 256 / 64 KiB), new / old time, median of 4 pairs: 2 ranks
// 2-64 MB 0.92-0.98, 4 ranks on 2 cores all-gather 2 MB 0.92, 64 MB 0.84 (4 of 4 faster), all-reduce 0.84-0.96.
#define CB_DIRECT_SLOTS 4

struct CbComm {  // one rank's view of the node; commbench/kernels/abi.py mirrors it (ctypes)
    long long rank, nranks, nslots, slot_bytes, channels, conns, timeout_ns;
    long long spin_ns;  // a wait spins this long before it backs off (host) or reads the error record (GPU)
    long long nap_ns;  // host: a wait that has lasted this long sleeps between looks instead of yielding (0: never)
    long long* error;  // [6]: code (1: timeout), rank, channel, step, peer, waited for (Channel::wait's what)
    char* region[CB_MAX_RANKS];  // every rank's region, as this process maps it
    int in_conn[CB_MAX_RANKS];  // my connection index for messages from rank p (-1: none)
    int out_conn[CB_MAX_RANKS];  // my connection index for messages to rank p
    int peer_in_conn[CB_MAX_RANKS];  // p's in_conn[me]
    int peer_out_conn[CB_MAX_RANKS];  // p's out_conn[me]
    int tree_parent[CB_TREES];  // per tree, -1 at the root
    int tree_child[CB_TREES][2];  // per tree, -1 where none
    int tree_depth[CB_TREES];  // per tree, 0 at the root
    cb_u64 in_seq[CB_MAX_LANES][CB_MAX_CONNS];
    cb_u64 out_seq[CB_MAX_LANES][CB_MAX_CONNS];
    cb_u64 out_freed[CB_MAX_LANES][CB_MAX_CONNS];  // the receiver's head flag as last read (see transfer)
    cb_u64 oneshot_calls;  // one-shot calls made on this communicator (every rank's count is the same)
};

__device__ __forceinline__ cb_u64* tail_flag(const CbComm* c, int owner, int lane, int conn) {
    return (cb_u64*)(c->region[owner] + (lane * CB_MAX_CONNS + conn) * CB_LINE);
}
__device__ __forceinline__ cb_u64* head_flag(const CbComm* c, int owner, int lane, int conn) {
    return (cb_u64*)(c->region[owner] + (CB_MAX_LANES + lane) * CB_MAX_CONNS * CB_LINE + conn * CB_LINE);
}
// Each region's FIFOs start CB_SKEW bytes further than the previous rank's, so that a step reading
// its own FIFO and writing its neighbour's never accesses two addresses 4 KiB apart at once (the
// CPU would take the load for a read of the store: "4K aliasing", measured 3x slower on the host).
// Message `seq`'s slot: where its data starts; for a small message (inline: at most CB_INLINE_BYTES,
// its number in the line's last word, see transfer) its slot's line, after all the FIFOs' slots
// (where they end depends on nslots: it must not change once a CbComm has made a call).
__device__ __forceinline__ char* fifo_slot(const CbComm* c, int owner, int lane, int conn, cb_u64 seq, bool small) {
    char* fifos = c->region[owner] + CB_FIFO_OFFSET + (owner % CB_SKEWS) * CB_SKEW;
    const long long slots = c->conns * c->channels * CB_TREES * c->nslots;
    const long long slot = (conn * c->channels * CB_TREES + lane) * c->nslots + (long long)(seq % (cb_u64)c->nslots);
    return fifos + (small ? slots * c->slot_bytes + slot * CB_LINE : slot * c->slot_bytes);
}
__device__ __forceinline__ cb_u64* inline_number(const void* slot) {  // a small message's number
    return (cb_u64*)((const char*)slot + CB_INLINE_BYTES);
}

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

// --- the schedules --------------------------------------------------------------------------------
__device__ __forceinline__ long long part(long long count, long long i, long long parts) {
    return count / parts * i + count % parts * i / parts;  // i*count/parts without overflow
}
// Where part i of [0, count) starts when the parts are cut on multiples of `align` elements (one
// 16-byte vector: CbAlign<T>): part()'s cut rounded up, so no part is larger than part()'s largest
// by more than align - 1 elements and none exceeds a slot where part()'s do not (every cut of a
// round of n·chunk is then a multiple of chunk, itself a multiple of align); i == parts: count.
// Every channel's slice, ring block and tree half of a large call starts on a 16-byte boundary
// of the buffer, so none runs element by element on a GPU (whose 16-byte path needs every pointer
// aligned: a slice 8 bytes off did). Cuts whose parts would be under CB_ALIGN_MIN_BYTES stay
// part()'s: small calls keep their even halves and their message counts.
#define CB_ALIGN_MIN_BYTES 256
__device__ __forceinline__ long long part_at(long long count, long long i, long long parts, long long align) {
    if (i >= parts) return count;
    const long long cut = part(count, i, parts);
    if (count < parts * align * (CB_ALIGN_MIN_BYTES / 16)) return cut;
    const long long up = (cut + align - 1) / align * align;
    return up < count ? up : count;
}
template <typename T>
struct CbAlign { enum { value = sizeof(T) >= 16 ? 1 : 16 / sizeof(T) }; };  // elements per 16 bytes

// Ring all-reduce reading the left neighbour's buffers in place, where every rank's buffers are in
// reach at `reach` bytes per rank: the ring's steps with no FIFO between them, so at 2 ranks a rank
// reads 3 and writes 2 blocks' worth where the FIFOs take 4 and 4 (16 MB: 40 MB of memory traffic
// a rank, not 64). In each round of n blocks, step 0 says the own input can be read; reduce step
// s (1 .. n-1) waits for the left's step s-1, adds the left's block q = r-1-s (its input at s = 1,
// else the partial sum it wrote into its output) to the own input's and writes the sum into the
// own output, block r complete at s = n-1; gather step t (1 .. n-1) copies block r-t, complete,
// out of the left's output. A message is "block q can be read from me", flags only (as the direct
// all-gather's). Gather step t overwrites what the right read at its reduce step t (a partial sum,
// or in place the input) without asking: every step of a rank follows the left's step before it,
// so step n-1+t follows the right's step t (n-1 ranks back round the ring). Every block is a step
// on every rank, even an empty one, so the counts agree. Output the right reads next is streamed
// past the caches (cb_stream_line), as is all of the node's outputs where they are too large for
// them (CB_CACHED_OUTPUT_BYTES). Before it returns a rank waits until its right neighbour has read
// all it needs from its buffers.
template <typename T, int OP>
__device__ bool ring_all_reduce_direct(Channel& h, const T* send, T* recv, long long count, int channels,
                                       long long reach) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks, r = h.me, left = (r + n - 1) % n, right = (r + 1) % n;
    const int in = c->in_conn[left], out = c->out_conn[right];
    const T* left_send = (const T*)((const char*)send + (long long)(left - r) * reach);
    const T* left_recv = (const T*)((const char*)recv + (long long)(left - r) * reach);
    const long long chunk = CB_DIRECT_SLOTS * c->slot_bytes / sizeof(T), A = CbAlign<T>::value;
    const long long lo = part_at(count, h.ch, channels, A), hi = part_at(count, h.ch + 1, channels, A);
    const bool huge = n * count * (long long)sizeof(T) > CB_CACHED_OUTPUT_BYTES;
    CB_SHARED int ok;
    if (cb_tid() == 0) cb_fence_system();  // the input, written before this launch (see the direct all-gather)
    for (long long base = lo; base < hi; base += n * chunk) {
        const long long len = n * chunk < hi - base ? n * chunk : hi - base;
        for (int s = 0; s < 2 * n - 1; ++s) {
            const bool gather = s >= n;
            const int t = s - n + 1;  // the gather step
            const int q = gather ? (r - t + n) % n : (r - 1 - s + 2 * n) % n;
            const long long off = base + part_at(len, q, n, A), m = base + part_at(len, q + 1, n, A) - off;
            if (s > 0) {
                if (cb_tid() == 0) ok = h.wait(tail_flag(c, r, h.lane, in), h.in_seq[in] + 1, left, 0);
                cb_sync();
                if (!ok) return false;
                const T* src = (gather || s > 1 ? left_recv : left_send) + off;
                T* dst = recv + off;
                const bool local = s == 2 * n - 2 && !huge;  // the last gather step: nobody reads it next
                combine_any<T, OP>(&src, 1, gather ? nullptr : send + off, &dst, 1, local, m, true);
                cb_sync();
            }
            if (cb_tid() == 0) {
                if (s > 0) cb_store_release(head_flag(c, left, h.lane, c->peer_out_conn[left]), ++h.in_seq[in]);
                if (s < 2 * n - 2)
                    cb_store_release(tail_flag(c, right, h.lane, c->peer_in_conn[right]), ++h.out_seq[out]);
            }
            ++*h.step;
        }
    }
    if (cb_tid() == 0)
        ok = h.wait(head_flag(c, r, h.lane, out), h.out_seq[out], right, 2, &h.out_freed[out]);
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

// Ring all-gather reading the left neighbour's buffers in place, where every rank's buffers are
// in reach at `reach` bytes per rank: one copy per block, not two through a FIFO. Step 0 puts the
// own block in place, step 1 copies the left's own block out of its input (in place: its output),
// step s > 1 block r-s out of the left's output once the left holds it. A message is "this chunk
// of block q can be read from me": flags only, no slot. Blocks the right neighbour reads from this
// rank's output are streamed past the caches (the other core reads them from memory, not out of
// this one's cache: see cb_stream_line; where the node's outputs are too large for the caches,
// CB_CACHED_OUTPUT_BYTES, the all-gather pushes instead: below). Before it returns a rank waits until
// its right neighbour has read all it needs from its buffers, so the caller may reuse them.
__device__ bool ring_all_gather_direct(Channel& h, const unsigned char* send, unsigned char* recv, long long count,
                                       int channels, long long reach) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks, r = h.me, left = (r + n - 1) % n, right = (r + 1) % n;
    const int in = c->in_conn[left], out = c->out_conn[right];
    const unsigned char* left_recv = recv + (long long)(left - r) * reach;
    const unsigned char* left_own = send == recv + r * count ? left_recv + left * count  // in place
                                                             : send + (long long)(left - r) * reach;
    const long long chunk = CB_DIRECT_SLOTS * c->slot_bytes;
    const long long lo = part_at(count, h.ch, channels, 16), hi = part_at(count, h.ch + 1, channels, 16);
    CB_SHARED int ok;
    // The blocks the neighbour reads at step 1 were written before this launch (the input, or the
    // own block in place), not by this block: one system-scope fence makes them visible before the
    // first release publishes them (the releases after it cover what this block writes itself).
    if (cb_tid() == 0) cb_fence_system();
    for (long long off = lo; off < hi; off += chunk) {
        const long long m = chunk < hi - off ? chunk : hi - off;
        for (int s = 0; s < n; ++s) {
            const int q = (r - s + n) % n;
            const unsigned char* src = (s == 0 ? send : s == 1 ? left_own : left_recv + q * count) + off;
            unsigned char* dst = recv + q * count + off;
            if (s > 0) {
                if (cb_tid() == 0) ok = h.wait(tail_flag(c, r, h.lane, in), h.in_seq[in] + 1, left, 0);
                cb_sync();
                if (!ok) return false;
            }
            if (dst != src)  // not local (streamed) where the right neighbour reads it
                combine_any<unsigned char, SUM>(&src, 1, nullptr, &dst, 1, s == 0 || s == n - 1, m, true);
            cb_sync();
            if (cb_tid() == 0) {
                if (s > 0) cb_store_release(head_flag(c, left, h.lane, c->peer_out_conn[left]), ++h.in_seq[in]);
                if (s < n - 1) cb_store_release(tail_flag(c, right, h.lane, c->peer_in_conn[right]), ++h.out_seq[out]);
            }
            ++*h.step;
        }
    }
    if (cb_tid() == 0)
        ok = h.wait(head_flag(c, r, h.lane, out), h.out_seq[out], right, 2, &h.out_freed[out]);
    cb_sync();
    return ok;
}

// Ring all-gather writing into the left neighbour's output, for a direct call whose node outputs are
// too large for the caches (CB_CACHED_OUTPUT_BYTES): a rank reads its own block once and writes it
// into its own output and its left neighbour's, then passes on, leftwards, each block its right
// neighbour writes into its output: n-1 block reads a rank, not the n of reading from the left (2
// ranks, 64 MB: 32 MB read and 64 MB written a rank, not 64 and 64; a C loop of the two ways: 0.69x
// the time). On entry a rank tells its right neighbour that its output may be written (the tail flag,
// all of the call's messages at once); "block q of this chunk is in your output" goes left (the head
// flag). A rank sends and receives as many messages each way as the version above (n-1 a chunk), so
// the flags agree whatever call comes next. A rank returns once every block is in its output: nobody
// reads its buffers.
__device__ bool ring_all_gather_push(Channel& h, const unsigned char* send, unsigned char* recv, long long count,
                                     int channels, long long reach) {
    const CbComm* c = h.c;
    const int n = (int)c->nranks, r = h.me, left = (r + n - 1) % n, right = (r + 1) % n;
    const int in = c->in_conn[left], out = c->out_conn[right];
    unsigned char* left_recv = recv + (long long)(left - r) * reach;
    const long long chunk = CB_DIRECT_SLOTS * c->slot_bytes;
    const long long lo = part_at(count, h.ch, channels, 16), hi = part_at(count, h.ch + 1, channels, 16);
    const cb_u64 messages = (cb_u64)(n - 1) * (cb_u64)((hi - lo + chunk - 1) / chunk);
    cb_u64 heard = 0;  // thread 0's: the right's messages awaited so far
    CB_SHARED int ok;
    if (cb_tid() == 0) {
        cb_fence_system();  // the own output and input, used before this launch
        ok = 1, heard = h.out_seq[out];
        if (messages) {  // my output may be written; then wait until the left's may
            cb_store_release(tail_flag(c, right, h.lane, c->peer_in_conn[right]), h.out_seq[out] += messages);
            ok = h.wait(tail_flag(c, r, h.lane, in), h.in_seq[in] + messages, left, 3);
        }
    }
    cb_sync();
    if (!ok) return false;
    for (long long off = lo; off < hi; off += chunk) {
        const long long m = chunk < hi - off ? chunk : hi - off;
        for (int s = 0; s < n; ++s) {
            const int q = (r + s) % n;  // the block this step passes on: own first, then the right's
            if (s > 0) {  // the right's step s-1 wrote block q into my output
                if (cb_tid() == 0) ok = h.wait(head_flag(c, r, h.lane, out), ++heard, right, 0, &h.out_freed[out]);
                cb_sync();
                if (!ok) return false;
            }
            if (s < n - 1) {
                const unsigned char* src = (s == 0 ? send : recv + q * count) + off;
                unsigned char* dst[2] = {left_recv + q * count + off, recv + q * count + off};
                combine_any<unsigned char, SUM>(&src, 1, nullptr, dst, s == 0 && dst[1] != src ? 2 : 1, 0, m, true);
                cb_sync();
                if (cb_tid() == 0)
                    cb_store_release(head_flag(c, left, h.lane, c->peer_out_conn[left]), ++h.in_seq[in]);
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
    if (reach && h.c->nranks * h.c->nranks * count > CB_CACHED_OUTPUT_BYTES)  // (one rank never gets here)
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

// Tree all-reduce, a double binary tree: the channel's slice in two halves, half t on tree t and
// lane t (but see CB_TREE_SPLIT_BYTES). Iteration k reduces chunk k of each half up its tree
// (children's sums + own, to the parent; the root keeps the result and sends it to its children
// in the same transfer), then passes chunk k - LAG of each half on down (from the parent
// to the children). Within a phase a rank takes its two trees in order of its depth in them,
// deeper first going up, shallower first coming down (a tie, which dbtree's trees never give, in a
// fixed order). Give every transfer the key (iteration, phase, -depth going up / depth coming
// down): each rank runs its transfers in increasing key order, and every wait is for another
// rank's transfer of a smaller key (a child's going up, a parent's coming down, and a free slot an
// earlier iteration's, as LAG < nslots), so no wait cycle, no deadlock, with any FIFO of two or
// more slots.
template <typename T, int OP>
__device__ bool tree_all_reduce(Channel* lanes, const T* send, T* recv, long long count, int channels, long long) {
    const CbComm* c = lanes[0].c;
    const int ch = lanes[0].ch;
    const long long chunk = c->slot_bytes / sizeof(T), lag = c->nslots / 2, A = CbAlign<T>::value;
    const long long lo = part_at(count, ch, channels, A), hi = part_at(count, ch + 1, channels, A);
    int parent[CB_TREES], children[CB_TREES][2], nchild[CB_TREES];
    long long from[CB_TREES], to[CB_TREES], chunks[CB_TREES], most = 0;
    for (int t = 0; t < CB_TREES; ++t) {
        parent[t] = c->tree_parent[t];
        nchild[t] = 0;
        for (int k = 0; k < 2; ++k)
            if (c->tree_child[t][k] >= 0) children[t][nchild[t]++] = c->tree_child[t][k];
        const long long bytes = (hi - lo) * (long long)sizeof(T), half = (hi - lo + 1) / 2 * (long long)sizeof(T);
        if (bytes >= CB_TREE_SPLIT_BYTES)  // halves on a 16-byte boundary
            from[t] = lo + part_at(hi - lo, t, CB_TREES, A), to[t] = lo + part_at(hi - lo, t + 1, CB_TREES, A);
        else if (bytes >= CB_LINE && half <= CB_INLINE_BYTES)  // two small messages (CB_INLINE_BYTES)
            from[t] = lo + part(hi - lo, t, CB_TREES), to[t] = lo + part(hi - lo, t + 1, CB_TREES);
        else  // small: one tree takes it all
            from[t] = lo, to[t] = t == ch % CB_TREES ? hi : lo;
        chunks[t] = (to[t] - from[t] + chunk - 1) / chunk;
        most = chunks[t] > most ? chunks[t] : most;
    }
    const int deeper = c->tree_depth[1] > c->tree_depth[0];  // the tree to go up first
    for (long long k = 0; k < most + lag; ++k) {
        for (int i = 0; i < CB_TREES; ++i) {  // up; the root holds the result and sends it down at once
            const int t = i ? 1 - deeper : deeper;
            if (k >= chunks[t]) continue;
            const long long off = from[t] + k * chunk, m = chunk < to[t] - off ? chunk : to[t] - off;
            if (!(parent[t] >= 0 ? transfer<T, OP>(lanes[t], children[t], nchild[t], send + off, nullptr, &parent[t], 1, m)
                                 : transfer<T, OP>(lanes[t], children[t], nchild[t], send + off, recv + off, children[t],
                                                   nchild[t], m)))
                return false;
        }
        for (int i = 0; i < CB_TREES; ++i) {  // down
            const int t = i ? deeper : 1 - deeper;
            if (k < lag || k - lag >= chunks[t] || parent[t] < 0) continue;
            const long long off = from[t] + (k - lag) * chunk, m = chunk < to[t] - off ? chunk : to[t] - off;
            if (!transfer<T, OP>(lanes[t], &parent[t], 1, nullptr, recv + off, children[t], nchild[t], m)) return false;
        }
    }
    return true;
}

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
        cb_store_release(inline_number(line), call);
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
                ok = h.wait(inline_number(oneshot_line(c, h.me, q, call, l)), call, q, 0);
#else
            ok = h.wait(inline_number(oneshot_line(c, h.me, q, call, lines - 1)), call, q, 0);
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

// --- entry points ------------------------------------------------------------------------------------
// One block (channel) of one rank: load its lanes' counters, run the schedule, store them back (run_lanes).
// A one-shot call (ONESHOT: its message no larger than CB_ONESHOT_BYTES) keeps its own number and touches no
// lane: it runs with none loaded. (2 ranks, 8 B all-reduce, host, paired in alternating rounds: 3 % off the
// call; the thread-local read of the channel, a call into the C library in a shared object, skipped at one
// channel: 5 %. run_lanes is a call of its own on the host: inlined, the compiler set up the lanes before the
// one-shot test, and the 8 B calls took 1.04x their time, commbench ab, the host build's functions aligned.)
template <typename T, int OP, int LANES, bool (*SCHEDULE)(Channel*, const T*, T*, long long, int, long long)>
CB_HOST_NOINLINE __device__ void run_lanes(CbComm* c, const T* s, T* d, long long count, long long stride, int channels,
                                           int direct) {
    const int ch = channels == 1 ? 0 : cb_channel(), conns = (int)c->conns;  // one: no thread-local read (host)
    CB_SHARED cb_u64 in_seq[LANES][CB_MAX_CONNS], out_seq[LANES][CB_MAX_CONNS], out_freed[LANES][CB_MAX_CONNS];
    for (int i = cb_tid(); i < LANES * conns; i += cb_nthreads()) {
        const int t = i / conns, k = i % conns, lane = ch * CB_TREES + t;
        in_seq[t][k] = c->in_seq[lane][k], out_seq[t][k] = c->out_seq[lane][k], out_freed[t][k] = c->out_freed[lane][k];
    }
    cb_sync();
    long long step = 0;
    Channel lanes[LANES];
    for (int t = 0; t < LANES; ++t)
        lanes[t] = Channel{c, (int)c->rank, ch, ch * CB_TREES + t, in_seq[t], out_seq[t], out_freed[t], &step};
    if (c->nranks == 1) {
        if (s != d) {
            const long long lo = part_at(count, ch, channels, CbAlign<T>::value);
            const long long hi = part_at(count, ch + 1, channels, CbAlign<T>::value);
            for (long long i = lo + cb_tid(); i < hi; i += cb_nthreads()) d[i] = s[i];
        }
    } else {
        SCHEDULE(lanes, s, d, count, channels, direct ? stride : 0);
    }
    cb_sync();
    for (int i = cb_tid(); i < LANES * conns; i += cb_nthreads()) {
        const int t = i / conns, k = i % conns, lane = ch * CB_TREES + t;
        c->in_seq[lane][k] = in_seq[t][k], c->out_seq[lane][k] = out_seq[t][k], c->out_freed[lane][k] = out_freed[t][k];
    }
}

template <typename T, int OP, int LANES, bool (*SCHEDULE)(Channel*, const T*, T*, long long, int, long long),
          bool ONESHOT = false>
__device__ __forceinline__ void run_channel(const CbComm* comms, const void* send, void* recv, long long count,
                                            long long stride, int channels, int direct) {
    const long long y = cb_launch_rank();
    CbComm* c = (CbComm*)comms + y;
    const T* s = (const T*)((const char*)send + y * stride);  // this rank's buffers
    T* d = (T*)((char*)recv + y * stride);
    if (ONESHOT && c->nranks > 1 && count * (long long)sizeof(T) <= CB_ONESHOT_BYTES) {
        const int ch = channels == 1 ? 0 : cb_channel();
        long long step = 0;
        Channel h{c, (int)c->rank, ch, ch * CB_TREES, nullptr, nullptr, nullptr, &step};
        SCHEDULE(&h, s, d, count, channels, direct ? stride : 0);
        return;
    }
    run_lanes<T, OP, LANES, SCHEDULE>(c, s, d, count, stride, channels, direct);
}

#define CB_ARGS \
    const CbComm *comms, const void *send, void *recv, long long count, long long stride, int channels, int direct
#define CB_ENTRIES_OP(NAME, T, OPNAME, OP)                                                              \
    extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_ring_all_reduce_##NAME##_##OPNAME(CB_ARGS) {                          \
        run_channel<T, OP, 1, ring_all_reduce<T, OP>>(comms, send, recv, count, stride, channels, direct);         \
    }                                                                                                   \
    extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_ring_reduce_scatter_##NAME##_##OPNAME(CB_ARGS) {                      \
        run_channel<T, OP, 1, ring_reduce_scatter<T, OP>>(comms, send, recv, count, stride, channels, direct);     \
    }                                                                                                   \
    extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_tree_all_reduce_##NAME##_##OPNAME(CB_ARGS) {                          \
        run_channel<T, OP, CB_TREES, tree_all_reduce<T, OP>>(comms, send, recv, count, stride, channels, direct);  \
    }                                                                                                   \
    extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_oneshot_all_reduce_##NAME##_##OPNAME(CB_ARGS) {                       \
        run_channel<T, OP, 1, oneshot_all_reduce<T, OP>, true>(comms, send, recv, count, stride, channels, direct); \
    }                                                                                                   \
    extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_oneshot_reduce_scatter_##NAME##_##OPNAME(CB_ARGS) {                   \
        run_channel<T, OP, 1, oneshot_reduce_scatter<T, OP>, true>(comms, send, recv, count, stride, channels,        \
                                                                   direct);                                     \
    }
#define CB_ENTRIES(NAME, T)                 \
    CB_ENTRIES_OP(NAME, T, sum, SUM)        \
    CB_ENTRIES_OP(NAME, T, prod, PROD)      \
    CB_ENTRIES_OP(NAME, T, min, MIN)        \
    CB_ENTRIES_OP(NAME, T, max, MAX)

extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_ring_all_gather(CB_ARGS) {
    run_channel<unsigned char, SUM, 1, ring_all_gather>(comms, send, recv, count, stride, channels, direct);
}
extern "C" __global__ void CB_LAUNCH_BOUNDS(CB_THREADS) cb_oneshot_all_gather(CB_ARGS) {
    run_channel<unsigned char, SUM, 1, oneshot_all_gather, true>(comms, send, recv, count, stride, channels, direct);
}

// CB_DTYPE (0-8) compiles one dtype's entry points only (NVRTC at run time: one module per dtype)
#if !defined(CB_DTYPE) || CB_DTYPE == 1
CB_ENTRIES(float32, float)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 2
CB_ENTRIES(float64, double)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 3
CB_ENTRIES(float16, cb_half)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 4
CB_ENTRIES(bfloat16, cb_bfloat16)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 5
CB_ENTRIES(int32, int)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 6
CB_ENTRIES(int64, long long)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 7
CB_ENTRIES(int8, signed char)
#endif
#if !defined(CB_DTYPE) || CB_DTYPE == 8
CB_ENTRIES(uint8, unsigned char)
#endif

#ifndef CB_DEVICE
// --- the host launch: channel 0 in the calling thread, the others in a pool of threads ----------------
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

typedef void (*CbEntry)(CB_ARGS);

struct CbCall {  // one bound call (commbench/kernels/host.py builds it once per point)
    CbEntry entry;
    const CbComm* comm;
    const void* send;
    void* recv;
    long long count, channels, stride;  // stride: 0, or the ranks' buffers in reach (run direct)
};

namespace cb_host {
struct Pool {  // never destroyed: its threads live as long as the process
    std::mutex mutex;
    std::condition_variable wake;
    CbCall job{};  // the current call, copied: a worker never reads the caller's CbCall after it returned
    unsigned long long generation = 0;
    std::atomic<int> pending{0};
    int threads = 0;

    void grow(int wanted) {
        std::lock_guard<std::mutex> lock(mutex);
        for (; threads < wanted; ++threads) std::thread(&Pool::serve, this, threads + 1).detach();
    }

    void serve(int my_channel) {
        unsigned long long seen = 0;
        for (;;) {
            CbCall job;
            {
                std::unique_lock<std::mutex> lock(mutex);
                wake.wait(lock, [&] { return generation != seen; });
                seen = generation;
                job = this->job;
            }
            if (my_channel < job.channels) {
                channel = my_channel;
                job.entry(job.comm, job.send, job.recv, job.count, job.stride, (int)job.channels, job.stride != 0);
                pending.fetch_sub(1, std::memory_order_acq_rel);
            }
        }
    }
};
// one pool per communicator, so that ranks sharing a process (tests) each have their own threads
inline Pool* pool(const CbComm* comm) {
    static std::mutex guard;
    static std::unordered_map<const CbComm*, Pool*>* pools = new std::unordered_map<const CbComm*, Pool*>();
    std::lock_guard<std::mutex> lock(guard);
    Pool*& p = (*pools)[comm];
    if (!p) p = new Pool();
    return p;
}
}  // namespace cb_host

// Run one call on this rank; 0, or the error code (details in comm->error).
extern "C" CB_EXPORT int cb_host_call(const CbCall* call) {
    cb_host::Pool* p = call->channels > 1 ? cb_host::pool(call->comm) : nullptr;
    if (p) {
        p->grow((int)call->channels - 1);
        p->pending.store((int)call->channels - 1, std::memory_order_release);
        {
            std::lock_guard<std::mutex> lock(p->mutex);
            p->job = *call;
            ++p->generation;
        }
        p->wake.notify_all();
        cb_host::channel = 0;  // (one channel reads none: a thread-local costs a call into the C library)
    }
    call->entry(call->comm, call->send, call->recv, call->count, call->stride, (int)call->channels,
                call->stride != 0);
    if (p) {
        int spins = 0;
        while (p->pending.load(std::memory_order_acquire) > 0)
            if (++spins > CB_SPINS_BETWEEN_CLOCKS) cb_back_off();
    }
    return (int)call->comm->error[0];
}

// `calls` back-to-back calls, timed in C: the seconds of each of `samples` batches of `batch` calls. With
// `delay_ns` > 0 (--inject-delay) each call is preceded by that long a busy wait, counted in the batch's
// seconds; `late` (when not null) gets each batch's seconds spun (the rank's time outside the calls).
extern "C" CB_EXPORT int cb_host_time(const CbCall* call, long long samples, long long batch, long long delay_ns,
                                      double* seconds, double* late) {
    for (long long s = 0; s < samples; ++s) {
        const long long t0 = cb_now_ns();
        long long spun = 0;
        for (long long b = 0; b < batch; ++b) {
            if (delay_ns > 0) {
                const long long start = cb_now_ns();
                long long t = start;
                while ((t = cb_now_ns()) < start + delay_ns) {
                }
                spun += t - start;
            }
            if (int err = cb_host_call(call)) return err;
        }
        seconds[s] = (cb_now_ns() - t0) * 1e-9;
        if (late) late[s] = spun * 1e-9;
    }
    return 0;
}

extern "C" CB_EXPORT long long cb_comm_bytes() { return sizeof(CbComm); }
extern "C" CB_EXPORT long long cb_fifo_offset() { return CB_FIFO_OFFSET; }
extern "C" CB_EXPORT long long cb_cached_output_bytes() { return CB_CACHED_OUTPUT_BYTES; }  // for tests
#endif
