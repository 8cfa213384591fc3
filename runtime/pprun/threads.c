/* threads.c — how many BLAS threads each rank of this process runs: --threads, else
 * OPENBLAS_NUM_THREADS (the user's or the launcher's choice), else this process's share of the
 * cores it may run on: the CPUs of its affinity mask / the ranks it runs (ranks as threads:
 * D x tp x dp, tensor ranks included; as processes: 1, the node's cores shared among its local
 * processes).
 *
 * The runtime's own CPU kernels run on as many threads per rank (the CPU backend's pool), or
 * --kernel-threads; they never run beside the rank's GEMMs. Not here: pinning threads to cores.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pp_rt_launch.h"
#include "pprun.h"

/* CPUs this process may run on (its affinity mask: taskset, cgroups' cpusets, Slurm's binding),
 * else the online ones. */
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

int pprun_choose_threads(const pprun_opts *o, pp_transport *tp, pprun_record *rec)
{
    int n = o->threads, from_env = env_threads();
    const char *from = "--threads";
    if (!n && from_env)
        n = from_env, from = "OPENBLAS_NUM_THREADS";
    if (!n) {
        /* ranks as threads: D x tp x cp x dp */
        int here = o->cfg.p * o->cfg.t * o->cfg.cp * o->cfg.d;
        if (tp) {
            /* one rank per process; the node's CPUs are shared by its local processes unless
             * the launcher bound each to its own (then the mask is already this one's share) */
            pp_launch_info li;
            int local = 1;
            if (pp_launch_detect(&li) == PP_OK && pp_launch_local_size(&li, &local) != PP_OK)
                local = 1;
            here = local;
        }
        int cpus = usable_cpus();
        n = cpus / (here > 0 ? here : 1);
        if (n < 1)
            n = 1;
        from = tp ? "cores / local processes" : "cores / ranks";
    }
    int host = pp_backend_row_of(o->backend)->host_threads, k = o->kernel_threads;
    rec->threads = host ? pp_backend_cpu_set_threads(n) : 0;
    /* the kernels take the count asked for (OpenBLAS may report fewer: its build's limit) */
    rec->kernel_threads = host ? pp_backend_cpu_set_kernel_threads(k ? k : n) : 0;
    rec->threads_from = from;
    return -1;
}
