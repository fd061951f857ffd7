/* Why ring_kernel's host build writes a peer's FIFO with streaming stores (cuda/portable.h,
 * cb_stream_line): two processes on two cores hand 64 KB chunks through an 8-slot FIFO in shared
 * memory, as ring_kernel's transfer() does (the writer copies a chunk in and releases a sequence
 * number, the reader acquires it, adds the chunk into its own buffer and releases the slot). The
 * writer uses ordinary stores (memcpy) or streaming ones; 16 MB x 20 per run, GB/s per run.
 *
 *   gcc -O2 benchmarks/stream_handoff.c -o /tmp/stream_handoff
 *   end=$((SECONDS+90)); while [ $SECONDS -lt $end ]; do /tmp/stream_handoff 0; /tmp/stream_handoff 1; sleep 0.5; done
 *
 * Measured on this 2-core VM, 136 runs of each interleaved over 90 s: ordinary stores 6-9.5 GB/s
 * in most runs, but 1.7-2.9 GB/s in 25 (in streaks: periods of seconds when the cores'
 * cache-to-cache path is slow) and 3.8-4.4 in 2; streaming stores 4.9-12.3 GB/s in every run.
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOT (64 << 10)
#define NSLOT 8
#define TOTAL (16L << 20)
#define ROUNDS 20
typedef unsigned long long u64;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void stream_copy(void *dst, const void *src, long bytes) {  /* dst 16-byte aligned */
    for (long i = 0; i < bytes / 16; i++) _mm_stream_si128((__m128i *)dst + i, _mm_loadu_si128((const __m128i *)src + i));
    _mm_sfence();
}

int main(int argc, char **argv) {
    const int streaming = argc > 1 && atoi(argv[1]);
    const long chunks = TOTAL / SLOT;
    char *shm = mmap(0, 4096 + NSLOT * SLOT, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) return perror("mmap"), 1;
    u64 *sent = (u64 *)shm, *freed = (u64 *)(shm + 128);  /* sequence numbers, one line each */
    float *slots = (float *)(shm + 4096);
    float *src = aligned_alloc(64, TOTAL), *dst = aligned_alloc(64, TOTAL);
    if (!src || !dst) return perror("aligned_alloc"), 1;
    const pid_t child = fork();
    if (child < 0) return perror("fork"), 1;
    pin(child == 0 ? 1 : 0);
    for (long i = 0; i < TOTAL / 4; i++) src[i] = 1, dst[i] = 0;  /* after fork: each process's own pages */
    const double t0 = now();
    for (u64 seq = 0; seq < (u64)(ROUNDS * chunks); seq++) {
        float *slot = slots + (seq % NSLOT) * (SLOT / 4);
        const long c = seq % chunks;
        if (child != 0) {  /* the writer */
            while (seq >= __atomic_load_n(freed, __ATOMIC_ACQUIRE) + NSLOT) _mm_pause();
            if (streaming) stream_copy(slot, src + c * (SLOT / 4), SLOT);
            else memcpy(slot, src + c * (SLOT / 4), SLOT);
            __atomic_store_n(sent, seq + 1, __ATOMIC_RELEASE);
        } else {  /* the reader */
            while (__atomic_load_n(sent, __ATOMIC_ACQUIRE) <= seq) _mm_pause();
            float *d = dst + c * (SLOT / 4);
            for (long i = 0; i < SLOT / 4; i++) d[i] += slot[i];
            __atomic_store_n(freed, seq + 1, __ATOMIC_RELEASE);
        }
    }
    if (child != 0) {  /* the writer waits for the reader, which has the time */
        wait(NULL);
        return 0;
    }
    printf("%s %.2f GB/s\n", streaming ? "streaming" : "ordinary ", ROUNDS * TOTAL / (now() - t0) / 1e9);
    return 0;
}
