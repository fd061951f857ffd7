/* The timed batch of a native MPI point, in C (commbench/rank/mpi_loop.py builds it with the MPI's
 * own mpicc and calls it through ctypes).
 *
 * The loop is harness.measure's Python loop without Python: one clock read per batch of `batch`
 * back-to-back calls, `samples` batches, each sample the batch's seconds (the caller divides by
 * the batch, takes the maximum over ranks and the statistics). CLOCK_MONOTONIC is the clock of
 * Python's time.perf_counter, so both loops read the same clock.
 *
 * One entry per mpi4py function a collective declares (Collective.native["mpi"]), named
 * cb_time_<function>; a collective without one here keeps the Python loop. Handles arrive as
 * Fortran integers (mpi4py's py2f), valid in every MPI; `send` NULL means MPI_IN_PLACE; `count`
 * is the call's per-rank count: the smaller of the harness' send and recv buffers.
 */
#include <mpi.h>
#include <string.h>
#include <time.h>

typedef struct {
    const void *send;
    void *recv;
    int count;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Comm comm;
} Args;

typedef int (*Call)(const Args *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int loop(Call call, const Args *a, long long samples, long long batch, double *out) {
    Call volatile fn = call;  /* called through the pointer: the empty call (the floor) is not optimised away */
    double t = now();
    for (long long s = 0; s < samples; s++) {
        for (long long b = 0; b < batch; b++) {
            int rc = fn(a);
            if (rc != MPI_SUCCESS) return rc;
        }
        double u = now();
        out[s] = u - t;
        t = u;
    }
    return MPI_SUCCESS;
}

static int allreduce(const Args *a) {
    return MPI_Allreduce(a->send, a->recv, a->count, a->type, a->op, a->comm);
}

static int allgather(const Args *a) {
    return MPI_Allgather(a->send, a->count, a->type, a->recv, a->count, a->type, a->comm);
}

static int reduce_scatter_block(const Args *a) {
    return MPI_Reduce_scatter_block(a->send, a->recv, a->count, a->type, a->op, a->comm);
}

static int nothing(const Args *a) {
    (void)a;
    return MPI_SUCCESS;
}

static int timed(Call call, const void *send, void *recv, int count, MPI_Fint type, MPI_Fint op, MPI_Fint comm,
                 long long samples, long long batch, double *out) {
    Args a = {send ? send : MPI_IN_PLACE, recv, count, MPI_Type_f2c(type), MPI_Op_f2c(op), MPI_Comm_f2c(comm)};
    return loop(call, &a, samples, batch, out);
}

#define ENTRY(function, call)                                                                          \
    int cb_time_##function(const void *send, void *recv, int count, MPI_Fint type, MPI_Fint op,        \
                           MPI_Fint comm, long long samples, long long batch, double *out) {           \
        return timed(call, send, recv, count, type, op, comm, samples, batch, out);                     \
    }

ENTRY(Allreduce, allreduce)
ENTRY(Allgather, allgather)
ENTRY(Reduce_scatter_block, reduce_scatter_block)

/* The loop around an empty call: what the loop itself adds per call (run.json's harness floor). */
int cb_time_floor(long long samples, long long batch, double *out) {
    Args a;
    memset(&a, 0, sizeof a);
    return loop(nothing, &a, samples, batch, out);
}

/* Which MPI this library calls: 1 with its version in `version` when that MPI is initialised (it
 * is then the MPI that mpi4py loaded), 0 when it is another, never-initialised MPI. */
int cb_mpi_identity(char *version, int size) {
    int initialized = 0, length = 0;
    char text[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Initialized(&initialized);
    if (!initialized) return 0;
    MPI_Get_library_version(text, &length);
    strncpy(version, text, (size_t)size - 1);
    version[size - 1] = '\0';
    return 1;
}
