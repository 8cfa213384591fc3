/* threads.c — how many BLAS threads each rank of this process runs: --threads, else
 * OPENBLAS_NUM_THREADS (the user's or the launcher's choice), else this process's share of the
 * cores it may run on: the CPUs of its affinity mask / the ranks it runs (ranks as threads:
 * D x tp x dp, tensor ranks included; as processes: 1, the node's cores shared among its local
 * processes).
 *
 * The runtime's own CPU kernels run on as many threads per rank (the CPU backend's pool), or
 * --kernel-threads; they never run beside the rank's GEMMs. Not here: pinning threads to cores.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pp_rt_launch.h"
#include "pprun.h"

int pprun_choose_threads(const pprun_opts *o, pp_transport *tp, pprun_record *rec)
{
    int n = o->threads;
    const char *from = "--threads";
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
        n = pp_launch_threads_per_rank(here, &from);
        if (!from)
            from = tp ? "cores / local processes" : "cores / ranks";
    }
    int host = pp_backend_row_of(o->backend)->host_threads, k = o->kernel_threads;
    rec->threads = host ? pp_backend_cpu_set_threads(n) : 0;
    /* the kernels take the count asked for (OpenBLAS may report fewer: its build's limit) */
    rec->kernel_threads = host ? pp_backend_cpu_set_kernel_threads(k ? k : n) : 0;
    rec->threads_from = from;
    return -1;
}
