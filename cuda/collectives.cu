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
// The flags are touched in one place, the channel's hand-offs (transfer.h: simple's deliver,
// consume and their waits; LL's line numbers), and the paths are modes of the one primitive or
// protocols over those hand-offs: transfer() through the FIFOs (simple, or LL for one line), or
// DIRECT, where a call reads its neighbour's buffers in place and a message is simple's flags
// alone (every direct_slots slots' worth); the push all-gather runs simple's flags against the
// data's direction; one-shot is LL in an area of its own (oneshot.h). The ring's and the tree's
// schedules are transfers over chunks of at most one slot (a direct call's: direct_slots slots);
// channels take contiguous slices of the buffer. A wait that reaches the timeout records who waited for whom at which step
// (CbComm.error) and ends the kernel: the caller raises, nothing hangs.
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
//                         tree_split_bytes or more, or of two small messages), half t
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
//
// Files, as NCCL's src/device/ (each header the part its comment names, inlined into one text for the
// compilers by commbench/kernels/reducers.py's cuda_source): comm.h (the memory, CbComm), combine.h (the
// data path), transfer.h (the primitive), slices.h (channels' slices), ring.h, tree.h and oneshot.h (the
// schedules), this file (the entry points), host_launch.h (the host's launch).

#include "portable.h"
#include "arith.h"
#include "error_record.h"
#include "comm.h"
#include "combine.h"
#include "transfer.h"
#include "slices.h"
#include "ring.h"
#include "tree.h"
#include "oneshot.h"

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

#ifndef CB_DEVICE  // --- the host launch ------------------------------------------------------------------
#include "host_launch.h"
#endif
