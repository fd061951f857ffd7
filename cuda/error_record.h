// The error record of cuda/collectives.cu's calls, a primitive of its own (tests/rank/
// test_kernel_error_record.py races writers on it with this header alone).
#pragma once
#include "portable.h"

// The error record, CbComm.error[ERROR_WORDS]: code (1: a wait timed out), rank, channel, step, peer,
// what it waited for. One record per CbComm (per launch of every rank on one GPU): the first wait
// that times out claims it (code ~0 while its details are written), writes the details, then
// releases code 1 after them; any later one leaves it alone. Every other wait polls the code (an
// acquire, system scope: never a stale cached copy) and gives up as soon as it is set, so one
// timeout ends the whole call promptly and the record names the rank and step that timed out first.
#define CB_ERROR_TIMEOUT 1
__device__ __forceinline__ void record_error(long long* error, long long rank, long long ch, long long step,
                                             long long peer, long long what) {
    if (cb_compare_swap((cb_u64*)error, 0, ~0ull) != 0) return;  // someone else's record
    error[1] = rank, error[2] = ch, error[3] = step, error[4] = peer, error[5] = what;
    cb_store_release((cb_u64*)error, CB_ERROR_TIMEOUT);
}
