/* launch.c — where this process sits in a job, from the launcher's environment: Open MPI
 * (mpirun), Slurm (srun), or a PMI launcher (MPICH's hydra, Intel MPI); and which ranks share
 * a host, from their host names. The one reading of those variables for pprun, the probes and
 * pptune probe; and the threads a rank takes by default (pprun's, and the tuner's model of a
 * pprun trial). Read before MPI is initialised, so a GPU process can pick its device
 * (cudaSetDevice(local_rank)) first.
 *
 * Not here: starting processes, MPI itself (the callers gather the host names; the runtime's
 * local-rank fallback over MPI is runtime/launch.c), hosts files or rendezvous of our own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_common.h"

/* An optional non-negative integer variable: *out = -1 when unset. */
static pp_status env_int(const char *name, int *out)
{
    *out = -1;
    const char *v = getenv(name);
    if (!v)
        return PP_OK;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < 0 || x > INT_MAX)
        return PP_ERR(PP_ERR_INVALID, "%s=\"%s\": expected a non-negative integer", name, v);
    *out = (int)x;
    return PP_OK;
}

typedef struct {
    const char *launcher, *rank, *size, *size_alt, *local;
} env_names;

/* Slurm: SLURM_STEP_NUM_TASKS is the job step's size (srun); SLURM_NTASKS, the allocation's,
 * is what a batch script sees and only a fallback. */
static const env_names launchers[] = {
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", NULL, "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"pmi", "PMI_RANK", "PMI_SIZE", NULL, "MPI_LOCALRANKID"},
};

static pp_status read_launcher(const env_names *e, pp_launch_info *out)
{
    int rank, size, local;
    PP_TRY(env_int(e->rank, &rank));
    PP_TRY(env_int(e->size, &size));
    if (size < 0 && e->size_alt)
        PP_TRY(env_int(e->size_alt, &size));
    PP_TRY(env_int(e->local, &local));
    if (size < 1)
        return PP_ERR(PP_ERR_INVALID, "%s is set (%d) but not the job's size (%s)", e->rank, rank,
                      e->size);
    if (rank >= size)
        return PP_ERR(PP_ERR_INVALID, "%s=%d is outside 0..%d (the job has %d processes)", e->rank,
                      rank, size - 1, size);
    if (local >= size)
        return PP_ERR(PP_ERR_INVALID, "%s=%d is outside 0..%d", e->local, local, size - 1);
    *out = (pp_launch_info){rank, size, local, e->launcher};
    return PP_OK;
}

pp_status pp_launch_detect(pp_launch_info *out)
{
    *out = (pp_launch_info){0, 1, 0, "none"};
    for (size_t i = 0; i < sizeof launchers / sizeof launchers[0]; i++)
        if (getenv(launchers[i].rank))
            return read_launcher(&launchers[i], out);
    return PP_OK;
}

int pp_launch_hosts(const char *hosts, size_t stride, int n, int *node_of, int *local_rank)
{
    int n_hosts = 0;
    for (int r = 0; r < n; r++) {
        const char *me = hosts + (size_t)r * stride;
        int node = -1, below = 0;
        for (int q = 0; q < r; q++)
            if (!strncmp(hosts + (size_t)q * stride, me, stride)) {
                below++;
                if (node < 0)
                    node = node_of ? node_of[q] : 0;
            }
        if (below == 0)
            node = n_hosts++;
        if (node_of)
            node_of[r] = node;
        if (local_rank)
            local_rank[r] = below;
    }
    return n_hosts;
}

void pp_launch_node_name(char *buf, size_t n)
{
    if (n == 0)
        return;
    const char *slurm = getenv("SLURMD_NODENAME");
    buf[0] = '\0';
    if (slurm && *slurm)
        snprintf(buf, n, "%s", slurm);
    else if (gethostname(buf, n - 1) != 0)
        buf[0] = '\0';
    buf[n - 1] = '\0';
}

/* CPUs this process may run on (its affinity mask), else the online ones. */
static int usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int env_threads(void)
{
    const char *v = getenv("OPENBLAS_NUM_THREADS");
    char *end;
    long n = v && *v ? strtol(v, &end, 10) : 0;
    return n >= 1 && n <= 1024 && !*end ? (int)n : 0;
}

int pp_launch_threads_per_rank(int ranks_here, const char **from)
{
    int n = env_threads();
    if (from)
        *from = n ? "OPENBLAS_NUM_THREADS" : NULL;
    if (!n)
        n = usable_cpus() / (ranks_here > 0 ? ranks_here : 1);
    return n < 1 ? 1 : n;
}
