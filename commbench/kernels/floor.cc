/* What this machine can physically do, measured on two of its cores (commbench/kernels/floor.py):
 * the floors every point's efficiency is read against.
 *
 *   cb_floor_handoff     one-way hand-off of a flag between two cores: thread A releases a sequence
 *                        number in its own cache line, B acquires it and answers in another line; a
 *                        round trip is two hand-offs.
 *   cb_floor_exchange    the smallest 2-rank exchange-and-add: each thread writes its 8-byte value
 *                        and releases a sequence number in the same line (one line crosses, as the
 *                        kernels' small messages do), acquires the peer's, and adds: what an 8-byte
 *                        all-reduce between two ranks cannot beat.
 *   cb_floor_copy        one core's copy rate: the better of memcpy and a copy streamed past the caches
 *                        in the widest stores the build has (32 bytes with AVX, else 16), as the kernels
 *                        stream (cb_stream_line in cuda/portable.h), of `bytes` (pass more than the caches
 *                        hold). On the 2-core EPYC VM memcpy copied 64 MiB at 5.7-6.2 GB/s, streamed in
 *                        32-byte stores 7.9-11.6: memcpy alone would put the kernels' copies above the floor.
 *
 * Each returns what the machine does at its best (this VM's cores flip between states for seconds at a
 * time), or -1 where a thread cannot be pinned to its core, -2 where the two threads keep taking turns
 * (one core for both, or other work holding the cores: steady_per_iteration). The copy rate is the best
 * of `batches` batches. The hand-off and the exchange wait for the peer's line in each of PACES ways, a
 * tight loop of loads and a clock read every 16 or every 64 looks (64: the kernels' own wait,
 * CB_SPINS_BETWEEN_CLOCKS in cuda/portable.h), `batches` batches each, the ways interleaved so that all
 * meet the same states; each way's figure is the median of its batches (the best of five batches of the
 * 16-look wait once read 0.021 us, half what the others read: one batch is no floor), and the best way's
 * is returned.
 * Fewer loads on a line let its writer claim it sooner: on the 2-core VM while the cores share a cache
 * (these loops, 200,000 iterations a batch, the best of five, twelve probes), the exchange read
 * 0.051-0.056 us waiting tightly, 0.045-0.057 every 64 looks, 0.042-0.054 every 16; the hand-off
 * 0.052-0.055, 0.043-0.054 and 0.035-0.049.
 * cpu_a / cpu_b: the cores the two threads are pinned to (-1: not pinned). Built by the host's C++
 * compiler as the kernels' host build is (commbench.kernels.native_build). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#if defined(__AVX__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    alignas(64) volatile uint64_t ping[8];
    alignas(64) volatile uint64_t pong[8];
    alignas(64) volatile uint64_t ready;  /* the threads that are running on their cores */
    alignas(64) volatile uint64_t exchange[2][2][8];  /* the exchange's lines: [iteration's parity][side] */
} Lines;

typedef struct {
    Lines* lines;
    int cpu;
    int side;
    int pace;  /* wait_for's */
    long long iters;
    double sum;  /* exchange: what the adds came to (kept, so they are not optimised away) */
    double seconds;  /* side 0: the iterations' time, from the moment both threads run on their cores */
} Arg;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int pin_failed = 0;  /* a thread could not be pinned to its core: the figures would mean nothing */

static void pin(int cpu) {
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) __atomic_store_n(&pin_failed, 1, __ATOMIC_RELAXED);
}

/* looks at the flag between two clock reads, per way of waiting (0: none, a tight loop) */
static const int PACES[] = {0, 16, 64};
enum { NPACES = sizeof(PACES) / sizeof(PACES[0]) };

static void wait_for(volatile uint64_t* word, uint64_t value, int pace = 0) {
    int looks = 0;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) < value) {
        if (!pace || ++looks < pace) continue;
        looks = 0;
        struct timespec ts;  /* (an outside call that writes memory: made, though its reading is unused) */
        clock_gettime(CLOCK_MONOTONIC, &ts);
    }
}

/* Pinned, and both threads running: the clock starts here, so a batch times its iterations, never
 * how long a thread took to be created or to be given its core. */
static double start_together(Arg* a) {
    pin(a->cpu);
    __atomic_add_fetch(&a->lines->ready, 1, __ATOMIC_ACQ_REL);
    wait_for(&a->lines->ready, 2);
    return now_s();
}

static void* handoff_side(void* p) {
    Arg* a = (Arg*)p;
    const double start = start_together(a);
    for (long long i = 1; i <= a->iters; ++i) {
        if (a->side == 0) {
            __atomic_store_n(&a->lines->ping[7], (uint64_t)i, __ATOMIC_RELEASE);
            wait_for(&a->lines->pong[7], (uint64_t)i, a->pace);
        } else {
            wait_for(&a->lines->ping[7], (uint64_t)i, a->pace);
            __atomic_store_n(&a->lines->pong[7], (uint64_t)i, __ATOMIC_RELEASE);
        }
    }
    a->seconds = now_s() - start;  /* side 0 ends with the peer's last answer */
    return NULL;
}

static void* exchange_side(void* p) {
    Arg* a = (Arg*)p;
    const double start = start_together(a);
    /* Two lines a side, by the iteration's parity: a side writes iteration i + 2 only after the peer's i + 1
     * came, which the peer sent after reading i. In one line a side overwrote its value before the peer read
     * it (98 % of the adds read the peer's next value, in the same time: 2 threads, 200,000 iterations). */
    double value = 1.0 + a->side, sum = 0;
    for (long long i = 1; i <= a->iters; ++i) {
        volatile uint64_t *mine = a->lines->exchange[i & 1][a->side], *theirs = a->lines->exchange[i & 1][1 - a->side];
        double v = value + (double)i;
        memcpy((void*)mine, &v, sizeof v);
        __atomic_store_n(&mine[7], (uint64_t)i, __ATOMIC_RELEASE);
        wait_for(&theirs[7], (uint64_t)i, a->pace);
        double peer;
        memcpy(&peer, (const void*)theirs, sizeof peer);
        sum += v + peer;
    }
    a->sum = sum;
    a->seconds = now_s() - start;
    return NULL;
}

/* seconds of one batch of `iters` iterations, both threads running `side_fn` (timed by side 0, from the
 * moment both run), waiting with wait_for's pace; side 0's sum in *sum where asked */
static double batch(void* (*side_fn)(void*), int cpu_a, int cpu_b, long long iters, int pace = 0, double* sum = NULL) {
    Lines* lines = (Lines*)aligned_alloc(64, sizeof(Lines));
    memset(lines, 0, sizeof(Lines));
    Arg a = {lines, cpu_a, 0, pace, iters, 0, 0}, b = {lines, cpu_b, 1, pace, iters, 0, 0};
    pthread_t ta, tb;  /* both sides in threads of their own: the caller's thread is never pinned */
    pthread_create(&tb, NULL, side_fn, &b);
    pthread_create(&ta, NULL, side_fn, &a);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    free(lines);
    if (sum) *sum = a.sum;
    return a.seconds;
}

static int by_value(const void* x, const void* y) {
    const double a = *(const double*)x, b = *(const double*)y;
    return (a > b) - (a < b);
}

/* Seconds per iteration: the best over PACES of the median of that way's `batches` batches; -1 where a
 * thread could not be pinned, -2 where short first batches show the two threads taking turns (20 us an
 * iteration or more: time slices, not cache lines; the full batches would take minutes): one core for
 * both, or other work on the cores. One slow short batch is not enough: a moment's other work (a
 * neighbour VM, a process ending) stalls it too, so it is tried TURN_TRIES times, TURN_PAUSE_MS apart,
 * and -2 only where every try was slow (about a second). */
enum { TURN_ITERS = 8, TURN_TRIES = 10, TURN_PAUSE_MS = 100, MOST_BATCHES = 64 };

static double steady_per_iteration(void* (*side_fn)(void*), int cpu_a, int cpu_b, long long iters, int batches) {
    pin_failed = 0;
    int slow = 0;
    while (slow < TURN_TRIES) {
        const double first = batch(side_fn, cpu_a, cpu_b, TURN_ITERS) / TURN_ITERS;
        if (pin_failed) return -1;
        if (first <= 20e-6) break;
        if (++slow < TURN_TRIES) {
            const struct timespec pause = {0, TURN_PAUSE_MS * 1000000L};
            nanosleep(&pause, NULL);
        }
    }
    if (slow == TURN_TRIES) return -2;
    if (batches < 1) batches = 1;
    if (batches > MOST_BATCHES) batches = MOST_BATCHES;
    double t[NPACES][MOST_BATCHES];
    for (int k = 0; k < batches; ++k)
        for (int w = 0; w < NPACES; ++w) t[w][k] = batch(side_fn, cpu_a, cpu_b, iters, PACES[w]) / iters;
    double best = 1e30;
    for (int w = 0; w < NPACES; ++w) {
        qsort(t[w], (size_t)batches, sizeof(double), by_value);
        const double median = batches % 2 ? t[w][batches / 2] : (t[w][batches / 2 - 1] + t[w][batches / 2]) / 2;
        if (median < best) best = median;
    }
    return best;
}

#ifdef __cplusplus
extern "C" {
#endif

/* seconds of one one-way hand-off (a round trip is two) */
double cb_floor_handoff(int cpu_a, int cpu_b, long long iters, int batches) {
    const double t = steady_per_iteration(handoff_side, cpu_a, cpu_b, iters, batches);
    return t < 0 ? t : t / 2;
}

/* seconds of one 8-byte exchange-and-add between the two cores */
double cb_floor_exchange(int cpu_a, int cpu_b, long long iters, int batches) {
    return steady_per_iteration(exchange_side, cpu_a, cpu_b, iters, batches);
}

/* what side 0's adds came to in one batch of `iters`, less what an exact exchange adds (0: each add read
 * the peer's value of its own iteration); for tests */
double cb_floor_exchange_error(int cpu_a, int cpu_b, long long iters) {
    double sum = 0;
    batch(exchange_side, cpu_a, cpu_b, iters, 0, &sum);
    const double n = (double)iters;
    return sum - (3 * n + n * (n + 1));  /* the sum over i of (1 + i) + (2 + i) */
}

#ifdef __cplusplus
}
#endif

typedef struct {
    int cpu;
    long long bytes;
    int batches;
    double rate;
} CopyArg;

/* bytes (a multiple of 64) from src to dst, past the caches where the build can (else memcpy) */
static void streamed_copy(char* dst, const char* src, long long bytes) {
#if defined(__AVX__)
    for (long long b = 0; b < bytes; b += 32)
        _mm256_stream_si256((__m256i*)(dst + b), _mm256_loadu_si256((const __m256i*)(src + b)));
    _mm_sfence();
#elif defined(__SSE2__)
    for (long long b = 0; b < bytes; b += 16)
        _mm_stream_si128((__m128i*)(dst + b), _mm_loadu_si128((const __m128i*)(src + b)));
    _mm_sfence();
#else
    memcpy(dst, src, (size_t)bytes);
#endif
}

static void* copy_thread(void* p) {
    CopyArg* c = (CopyArg*)p;
    pin(c->cpu);
    const long long bytes = c->bytes;
    char* src = (char*)aligned_alloc(4096, (size_t)bytes);
    char* dst = (char*)aligned_alloc(4096, (size_t)bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return NULL;
    }
    memset(src, 1, (size_t)bytes);
    memset(dst, 2, (size_t)bytes);  /* both touched: no page faults in the timed copies */
    double best = 1e30;
    for (int k = 0; k < 2 * c->batches; ++k) {  /* memcpy and the streamed copy in turn */
        const double start = now_s();
        if (k % 2) {
            streamed_copy(dst, src, bytes / 64 * 64);
            memcpy(dst + bytes / 64 * 64, src + bytes / 64 * 64, (size_t)(bytes % 64));
        } else {
            memcpy(dst, src, (size_t)bytes);
        }
        const double t = now_s() - start;
        if (t < best) best = t;
        src[k % bytes] = dst[(k * 4099) % bytes];  /* keep the copies */
    }
    free(src);
    free(dst);
    c->rate = bytes / best;
    return NULL;
}

#ifdef __cplusplus
extern "C" {
#endif

/* bytes per second one core copies (the better of memcpy and the streamed copy of `bytes`, in a thread pinned to
 * cpu; 0 without the memory) */
double cb_floor_copy(int cpu, long long bytes, int batches) {
    CopyArg c = {cpu, bytes, batches, 0};
    pthread_t t;
    pin_failed = 0;
    pthread_create(&t, NULL, copy_thread, &c);
    pthread_join(t, NULL);
    return pin_failed ? -1 : c.rate;
}

#ifdef __cplusplus
}
#endif
