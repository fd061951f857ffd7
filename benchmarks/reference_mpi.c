/* The C reference of benchmarks/overhead_mpi.py: MPI collectives timed exactly as commbench times
 * a native point, with no Python anywhere.
 *
 *   mpicc -O2 reference_mpi.c -o reference_mpi
 *   mpirun -n 2 ./reference_mpi all_reduce WARMUP BATCH SAMPLES SIZE...
 *
 * For each size (bytes as nccl-tests counts them: all-gather's is the gathered output,
 * reduce-scatter's the input; float32, sum, out of place): WARMUP calls, a barrier, then SAMPLES
 * batches of BATCH back-to-back calls with one CLOCK_MONOTONIC read per batch, each sample the
 * batch's time / BATCH, the maximum over ranks per sample, the median of the samples. Prints
 * "<collective> <size> <median µs>" per size on rank 0.
 *
 * Built with -DREFERENCE_LIBRARY -shared -fPIC it is a library instead: ref_time() is the same timed
 * loop, for benchmarks/loop_isolation.py to run in one process beside commbench's loop.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef void (*Call)(float *send, float *recv, int count);

static void allreduce(float *send, float *recv, int count) {
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static void allgather(float *send, float *recv, int count) {
    MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD);
}

static void reduce_scatter(float *send, float *recv, int count) {
    MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static Call call_of(const char *coll) {
    return !strcmp(coll, "all_reduce") ? allreduce : !strcmp(coll, "all_gather") ? allgather : reduce_scatter;
}

/* SAMPLES batches of BATCH back-to-back calls, one clock read per batch: t[s] = the batch's seconds / BATCH */
static void time_batches(Call call, float *send, float *recv, int count, int samples, int batch, double *t) {
    double s0 = now();
    for (int s = 0; s < samples; s++) {
        for (int b = 0; b < batch; b++) call(send, recv, count);
        double s1 = now();
        t[s] = (s1 - s0) / batch;
        s0 = s1;
    }
}

#ifdef REFERENCE_LIBRARY
void ref_time(const char *coll, float *send, float *recv, int count, int samples, int batch, double *t) {
    time_batches(call_of(coll), send, recv, count, samples, batch, t);
}
#else
static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Zeroed memory as numpy allocates it (commbench's buffers are numpy arrays): calloc, and from
 * 4 MiB on marked for transparent huge pages (numpy's alloc.c), which on a VM makes large copies
 * several times faster. */
static float *buffer(long elems) {
    size_t bytes = (size_t)(elems > 0 ? elems : 1) * sizeof(float);
    void *p = calloc(bytes, 1);
#ifdef MADV_HUGEPAGE
    if (bytes >= (1u << 22)) {
        unsigned long page = 4096, start = ((unsigned long)p + page - 1) & ~(page - 1);
        if (start < (unsigned long)p + bytes) madvise((void *)start, (unsigned long)p + bytes - start, MADV_HUGEPAGE);
    }
#endif
    return p;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (argc < 6) {
        if (!rank) fprintf(stderr, "usage: %s COLLECTIVE WARMUP BATCH SAMPLES SIZE...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *coll = argv[1];
    Call call = call_of(coll);
    int warmup = atoi(argv[2]), batch = atoi(argv[3]), samples = atoi(argv[4]);
    double *t = malloc(sizeof(double) * samples), *tmax = malloc(sizeof(double) * samples);
    for (int a = 5; a < argc; a++) {
        long size = atol(argv[a]);
        long elems = size / 4;  /* all-reduce: per rank; all-gather: output; reduce-scatter: input */
        int count = (int)(strcmp(coll, "all_reduce") ? elems / n : elems);  /* the call's per-rank count */
        long in = strcmp(coll, "all_gather") ? elems : count, out = strcmp(coll, "reduce_scatter") ? elems : count;
        float *send = buffer(in), *recv = buffer(out);
        for (long i = 0; i < in; i++) send[i] = (float)(rank + 1);
        for (int w = 0; w < warmup; w++) call(send, recv, count);
        MPI_Barrier(MPI_COMM_WORLD);
        time_batches(call, send, recv, count, samples, batch, t);
        MPI_Allreduce(t, tmax, samples, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(tmax, (size_t)samples, sizeof(double), by_value);
        double median = samples % 2 ? tmax[samples / 2] : 0.5 * (tmax[samples / 2 - 1] + tmax[samples / 2]);
        if (!rank) printf("%s %ld %.6f\n", coll, size, median * 1e6);
        free(send);
        free(recv);
    }
    free(t);
    free(tmax);
    MPI_Finalize();
    return 0;
}
#endif
