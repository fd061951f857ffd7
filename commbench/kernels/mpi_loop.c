/* The timed batch of a native MPI point, in C (commbench/kernels/mpi_loop.py builds it with the MPI's
 * own mpicc and calls it through ctypes); and native_han's communicator (cb_han_dup, at the end).
 *
 * The loop is harness.measure's Python loop without Python: one clock read per batch of `batch`
 * back-to-back calls, `samples` batches, each sample the batch's seconds (the caller divides by
 * the batch, takes the maximum over ranks and the statistics). CLOCK_MONOTONIC is the clock of
 * Python's time.perf_counter, so both loops read the same clock. With `delay` > 0 (--inject-delay)
 * each call is preceded by that many seconds of busy waiting, counted in the batch's seconds, and
 * `late` (when not NULL) gets each batch's seconds spun (the rank's time outside the calls).
 *
 * One entry per mpi4py function a collective declares (Collective.native["mpi"]), named
 * cb_time_<function>; a collective without one here keeps the Python loop. Handles arrive as
 * Fortran integers (mpi4py's py2f), valid in every MPI; `count` is the smaller of the harness'
 * send and recv buffers (Alltoall: n blocks of count / n); in place (`in_place`), `whole` is the
 * harness' one buffer and each call passes MPI_IN_PLACE where MPI takes it (the rooted ones: at the
 * root), as commbench/backends/mpi.py's conventions do; `root` for the rooted collectives; `v`, the
 * uneven all-to-all's four arrays of counts and displacements (NULL for the others).
 */
#include <mpi.h>
#include <string.h>
#include <time.h>

typedef struct {
    const void *send;
    void *recv;
    void *whole;  /* in place: the one buffer (else NULL) */
    int count;
    MPI_Datatype type;
    MPI_Op op;
    MPI_Comm comm;
    int root, rank, size;
    const int *v;  /* Alltoallv: send counts, send displacements, receive counts, receive displacements (size each) */
} Args;

#define IN_PLACE (a->whole != NULL)

typedef int (*Call)(const Args *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double spin(double seconds) {
    const double start = now(), end = start + seconds;
    double t;
    while ((t = now()) < end) {
    }
    return t - start;
}

static int loop(Call call, const Args *a, long long samples, long long batch, double delay, double *out,
                double *late) {
    Call volatile fn = call;  /* called through the pointer: the empty call (the floor) is not optimised away */
    double t = now();
    for (long long s = 0; s < samples; s++) {
        double spun = 0.0;
        for (long long b = 0; b < batch; b++) {
            if (delay > 0.0) spun += spin(delay);
            int rc = fn(a);
            if (rc != MPI_SUCCESS) return rc;
        }
        double u = now();
        out[s] = u - t;
        if (late) late[s] = spun;
        t = u;
    }
    return MPI_SUCCESS;
}

static int allreduce(const Args *a) {
    if (IN_PLACE) return MPI_Allreduce(MPI_IN_PLACE, a->whole, a->count, a->type, a->op, a->comm);
    return MPI_Allreduce(a->send, a->recv, a->count, a->type, a->op, a->comm);
}

static int allgather(const Args *a) {
    if (IN_PLACE) return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a->whole, a->count, a->type, a->comm);
    return MPI_Allgather(a->send, a->count, a->type, a->recv, a->count, a->type, a->comm);
}

static int reduce_scatter_block(const Args *a) {
    if (IN_PLACE) return MPI_Reduce_scatter_block(MPI_IN_PLACE, a->whole, a->count, a->type, a->op, a->comm);
    return MPI_Reduce_scatter_block(a->send, a->recv, a->count, a->type, a->op, a->comm);
}

static int bcast(const Args *a) {
    return MPI_Bcast(IN_PLACE ? a->whole : a->recv, a->count, a->type, a->root, a->comm);
}

static int reduce(const Args *a) {
    if (!IN_PLACE) return MPI_Reduce(a->send, a->recv, a->count, a->type, a->op, a->root, a->comm);
    if (a->rank == a->root) return MPI_Reduce(MPI_IN_PLACE, a->whole, a->count, a->type, a->op, a->root, a->comm);
    return MPI_Reduce(a->whole, NULL, a->count, a->type, a->op, a->root, a->comm);
}

static int alltoall(const Args *a) {
    const int block = a->count / a->size;
    if (IN_PLACE) return MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a->whole, block, a->type, a->comm);
    return MPI_Alltoall(a->send, block, a->type, a->recv, block, a->type, a->comm);
}

static int alltoallv(const Args *a) {
    const int n = a->size;
    return MPI_Alltoallv(a->send, a->v, a->v + n, a->type, a->recv, a->v + 2 * n, a->v + 3 * n, a->type, a->comm);
}

static int gather(const Args *a) {
    if (!IN_PLACE) return MPI_Gather(a->send, a->count, a->type, a->recv, a->count, a->type, a->root, a->comm);
    if (a->rank == a->root)
        return MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a->whole, a->count, a->type, a->root, a->comm);
    return MPI_Gather(a->send, a->count, a->type, NULL, 0, a->type, a->root, a->comm);
}

static int scatter(const Args *a) {
    if (!IN_PLACE) return MPI_Scatter(a->send, a->count, a->type, a->recv, a->count, a->type, a->root, a->comm);
    if (a->rank == a->root)
        return MPI_Scatter(a->whole, a->count, a->type, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, a->root, a->comm);
    return MPI_Scatter(NULL, 0, a->type, a->recv, a->count, a->type, a->root, a->comm);
}

static int sendrecv(const Args *a) {  /* to rank r+1, from rank r-1 */
    const int right = (a->rank + 1) % a->size, left = (a->rank + a->size - 1) % a->size;
    if (IN_PLACE)
        return MPI_Sendrecv_replace(a->whole, a->count, a->type, right, 0, left, 0, a->comm, MPI_STATUS_IGNORE);
    return MPI_Sendrecv(a->send, a->count, a->type, right, 0, a->recv, a->count, a->type, left, 0, a->comm,
                        MPI_STATUS_IGNORE);
}

static int nothing(const Args *a) {
    (void)a;
    return MPI_SUCCESS;
}

static int timed(Call call, const void *send, void *recv, void *whole, int count, MPI_Fint type, MPI_Fint op,
                 MPI_Fint comm, int root, const int *v, long long samples, long long batch, double delay,
                 double *out, double *late) {
    Args a = {send, recv, whole, count, MPI_Type_f2c(type), MPI_Op_f2c(op), MPI_Comm_f2c(comm), root, 0, 1, v};
    MPI_Comm_rank(a.comm, &a.rank);
    MPI_Comm_size(a.comm, &a.size);
    return loop(call, &a, samples, batch, delay, out, late);
}

#define ENTRY(function, call)                                                                                    \
    int cb_time_##function(const void *send, void *recv, void *whole, int count, MPI_Fint type, MPI_Fint op,      \
                           MPI_Fint comm, int root, const int *v, long long samples, long long batch,            \
                           double delay, double *out, double *late) {                                            \
        return timed(call, send, recv, whole, count, type, op, comm, root, v, samples, batch, delay, out, late); \
    }

ENTRY(Allreduce, allreduce)
ENTRY(Allgather, allgather)
ENTRY(Reduce_scatter_block, reduce_scatter_block)
ENTRY(Bcast, bcast)
ENTRY(Reduce, reduce)
ENTRY(Alltoall, alltoall)
ENTRY(Alltoallv, alltoallv)
ENTRY(Gather, gather)
ENTRY(Scatter, scatter)
ENTRY(Sendrecv, sendrecv)

/* The loop around an empty call: what the loop itself adds per call (run.json's harness floor). */
int cb_time_floor(long long samples, long long batch, double *out) {
    Args a;
    memset(&a, 0, sizeof a);
    return loop(nothing, &a, samples, batch, 0.0, out, NULL);
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

/* A duplicate of `comm` on which Open MPI runs its hierarchical collectives, coll/han (native_han,
 * commbench/rank/han.py): coll components are chosen when a communicator is made, so coll_han_priority
 * is raised to `priority` through MPI_T for the MPI_Comm_dup, then put back. Collective: the ranks agree
 * first that every one of them set it, and make the duplicate only then. MPI_T starts at the thread level
 * MPI runs at (Open MPI takes MPI_T_init_thread's level as the process's). MPI_SUCCESS with the duplicate
 * in *dup; -1 where this MPI has no coll_han_priority (not Open MPI, or no coll/han); -2 where another rank
 * could not set it; else the MPI_T call's code (Open MPI before 5.0.7: the variable is read-only). */
int cb_han_dup(MPI_Fint comm, int priority, MPI_Fint *dup) {
    int level, provided, index, count, before, rc, held = 0, set = 0, all = 0;
    MPI_T_cvar_handle handle;
    MPI_Comm c = MPI_Comm_f2c(comm), out;
    MPI_Query_thread(&level);
    rc = MPI_T_init_thread(level, &provided);
    if (rc != MPI_SUCCESS) return rc;
    if (MPI_T_cvar_get_index("coll_han_priority", &index) != MPI_SUCCESS) {
        rc = -1;
    } else {
        rc = MPI_T_cvar_handle_alloc(index, NULL, &handle, &count);
        held = rc == MPI_SUCCESS;
        if (held) rc = MPI_T_cvar_read(handle, &before);
        if (rc == MPI_SUCCESS) rc = MPI_T_cvar_write(handle, &priority);
        set = rc == MPI_SUCCESS;
    }
    MPI_Allreduce(&set, &all, 1, MPI_INT, MPI_MIN, c);  /* every rank set it, or no rank makes the duplicate */
    if (all) {
        rc = MPI_Comm_dup(c, &out);
        if (rc == MPI_SUCCESS) *dup = MPI_Comm_c2f(out);
    } else if (set) {
        rc = -2;
    }
    if (set) MPI_T_cvar_write(handle, &before);
    if (held) MPI_T_cvar_handle_free(&handle);
    MPI_T_finalize();
    return rc;
}
