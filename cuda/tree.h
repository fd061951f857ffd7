// The double binary tree's all-reduce (cuda/collectives.cu, Algorithms), a sequence of transfers.
#pragma once

#include "slices.h"
#include "transfer.h"

// Tree all-reduce, a double binary tree: the channel's slice in two halves, half t on tree t and
// lane t (but see tree_split_bytes). Iteration k reduces chunk k of each half up its tree
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
        if (bytes >= c->tree_split_bytes)  // halves on a 16-byte boundary
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
