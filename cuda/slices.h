// How a call's elements are cut into channels' slices, ring blocks and tree halves (cuda/collectives.cu).
#pragma once

#include "portable.h"

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
