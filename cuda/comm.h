// The node's shared memory as one rank sees it (cuda/collectives.cu, Memory): the sizes, struct CbComm
// (commbench/kernels/abi.py mirrors it) and where a connection's flags and FIFO slots lie.
#pragma once

#include "portable.h"

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

struct CbComm {  // one rank's view of the node; commbench/kernels/abi.py mirrors it (ctypes)
    long long rank, nranks, nslots, slot_bytes, channels, conns, timeout_ns;
    long long spin_ns;  // a wait spins this long before it backs off (host) or reads the error record (GPU)
    long long nap_ns;  // host: a wait that has lasted this long sleeps between looks instead of yielding (0: never)
    // the constants below are commbench/kernels/abi.py's (TUNABLES: each a COMMBENCH_KERNEL_* variable overrides)
    long long cached_bytes;  // a direct call whose node outputs (every rank's) exceed this writes past the caches
    long long direct_slots;  // a direct call's chunk, in slots (how often ranks that read in place hand off)
    long long tree_split_bytes;  // a tree all-reduce's channel slice this large or larger is split between the trees
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
    cb_u64 out_freed[CB_MAX_LANES][CB_MAX_CONNS];  // the receiver's head flag as last read (Channel::await_consumed)
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
