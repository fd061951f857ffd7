// The host build's launch (cb_host_call): channel 0 in the calling thread, the others in a pool of
// threads. Included by cuda/collectives.cu after its entry points (CB_ARGS, the cb_* kernels), host only.
#pragma once

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
