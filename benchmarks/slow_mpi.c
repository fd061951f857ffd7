/* A real slowdown inside the timed call, for testing a regression gate (benchmarks/ab_gate.py).
 *
 * Put in with LD_PRELOAD: it defines MPI_Allreduce, MPI_Allgather and MPI_Reduce_scatter_block, calls
 * the MPI library's own profiling entry (PMPI_*, looked up in the loaded libmpi, which mpi4py opens
 * with local symbols: so this library links against no MPI and is inert in processes that have
 * none, such as mpirun), and then spins COMMBENCH_SLOW (a fraction, e.g. 0.10) of the call's
 * current period without the spin: the time from one call's start to the next's, less the spin
 * between them, as the median of its first LEARN calls with the same count and datatype (which are
 * not stretched) and then an exponential average over about AVERAGE calls that ignores gaps (a
 * period over 4x the average: the rank slept between two turns). Ranks that call in step share one
 * period, so each adds the same spin to every iteration and the collective takes (1 + fraction) times
 * as long; a fraction of each rank's own call time would not (a rank arriving last sees short calls,
 * and a call includes the wait for the others' spins), nor would a period learned once (this VM's
 * cores flip between a fast and a 2-4x slower state for seconds at a time). Every call does the same
 * bookkeeping whatever the fraction, so a side given COMMBENCH_SLOW=0 differs from a slowed side only
 * by the spin: a calibrated busy loop (no clock reads), accurate to a few ns from 5 ns up.
 *
 * Build: cc -O2 -shared -fPIC $(mpicc -showme:compile) slow_mpi.c -o libslow_mpi.so -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <mpi.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define SLOTS 4096 /* (call, count, datatype) signatures remembered, open addressing */
#define LEARN 16   /* periods of a signature whose median starts its average */
#define AVERAGE 16 /* the exponential average's reach, in calls */

typedef struct {
    int used, call, count, seen;
    MPI_Datatype type;
    double natural, spun; /* the average period less the spin (ns); the last spin (ns) */
    uint64_t last_start, period[LEARN];
} Signature;

static double fraction = -1.0;
static double loops_per_ns = 0.0;
static Signature table[SLOTS];

static inline uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void spin(uint64_t loops) {
    for (volatile uint64_t i = 0; i < loops; i++) {
    }
}

static void setup(void) {
    const char *text = getenv("COMMBENCH_SLOW");
    fraction = text ? atof(text) : 0.0;
    uint64_t best = UINT64_MAX; /* the fastest of a few timed runs of a known loop count */
    for (int k = 0; k < 20; k++) {
        uint64_t t0 = now_ns();
        spin(200000);
        uint64_t t = now_ns() - t0;
        if (t < best) best = t;
    }
    loops_per_ns = best ? 200000.0 / (double)best : 1.0;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static Signature *signature(int call, int count, MPI_Datatype type) {
    uint64_t h = ((uint64_t)count * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)(uintptr_t)type * 0xC2B2AE3D27D4EB4Full) ^
                 (uint64_t)call;
    for (uint64_t i = 0; i < SLOTS; i++) {
        Signature *s = &table[(h + i) % SLOTS];
        if (!s->used) {
            *s = (Signature){1, call, count, 0, type, 0.0, 0.0, 0, {0}};
            return s;
        }
        if (s->call == call && s->count == count && s->type == type) return s;
    }
    return NULL; /* the table is full: calls of new signatures are not stretched */
}

static void stretch(int call, int count, MPI_Datatype type, uint64_t start) {
    Signature *s = signature(call, count, type);
    if (!s) return;
    double period = s->last_start ? (double)(start - s->last_start) - s->spun : 0.0;
    s->last_start = start;
    s->spun = 0.0;
    if (period <= 0) return;
    if (s->seen < LEARN) {
        s->period[s->seen++] = (uint64_t)period;
        if (s->seen == LEARN) {
            qsort(s->period, LEARN, sizeof s->period[0], by_value);
            s->natural = (double)s->period[LEARN / 2];
        }
        return;
    }
    /* A gap only lengthens a period, so only long ones are ignored: a learned period too long (its first calls
     * time-sliced against the other side's ranks) comes down again instead of spinning each call for it (one
     * learned at milliseconds stretched a 64 B point past its 120 s timeout, in 2 of 5 runs of an ab test). */
    if (period < 4 * s->natural) s->natural += (period - s->natural) / AVERAGE;
    if (fraction > 0) {
        s->spun = fraction * s->natural;
        spin((uint64_t)(s->spun * loops_per_ns));
    }
}

static int find_libmpi(struct dl_phdr_info *info, size_t size, void *found) {
    (void)size;
    const char *base = strrchr(info->dlpi_name, '/');
    if (base && strncmp(base + 1, "libmpi.so", 9) == 0) {
        *(void **)found = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        return *(void **)found != NULL;
    }
    return 0;
}

static void *pmpi(const char *name) {
    static void *lib;
    if (!lib) dl_iterate_phdr(find_libmpi, &lib);
    void *fn = lib ? dlsym(lib, name) : NULL;
    if (!fn) fn = dlsym(RTLD_DEFAULT, name);
    if (!fn) abort(); /* no MPI loaded: nothing to stretch */
    return fn;
}

#define REAL(name, type) static type real; if (!real) real = (type)pmpi(name); if (fraction < 0) setup()

typedef int (*allreduce_t)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*allgather_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
typedef int (*reduce_scatter_t)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

int MPI_Allreduce(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    REAL("PMPI_Allreduce", allreduce_t);
    uint64_t t0 = now_ns();
    int rc = real(send, recv, count, type, op, comm);
    stretch(0, count, type, t0);
    return rc;
}

int MPI_Allgather(const void *send, int scount, MPI_Datatype stype, void *recv, int rcount, MPI_Datatype rtype,
                  MPI_Comm comm) {
    REAL("PMPI_Allgather", allgather_t);
    uint64_t t0 = now_ns();
    int rc = real(send, scount, stype, recv, rcount, rtype, comm);
    stretch(1, rcount, rtype, t0);
    return rc;
}

int MPI_Reduce_scatter_block(const void *send, void *recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    REAL("PMPI_Reduce_scatter_block", reduce_scatter_t);
    uint64_t t0 = now_ns();
    int rc = real(send, recv, count, type, op, comm);
    stretch(2, count, type, t0);
    return rc;
}
