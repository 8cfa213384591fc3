/* launch.c — the runtime's host-local rank: the launcher's, else one computed over MPI (which
 * GPU a process drives). The launcher's environment itself is read once, for every module,
 * by pp_launch_detect (common/launch.c).
 *
 * Not here: starting processes, MPI itself (transport_mpi.c; the local-rank fallback over MPI
 * lives there so this file needs no MPI header), hosts files or rendezvous of our own.
 */
#include <stdlib.h>

#include "transport.h"

pp_status pp_launch_local_rank(const pp_launch_info *li, int *local_rank)
{
    *local_rank = li->local_rank;
    if (li->local_rank >= 0)
        return PP_OK;
    PP_TRY(pp_mpi_host_local_rank(local_rank));
    return PP_OK;
}

/* The launchers' own count of this node's processes: Open MPI, MPICH/Hydra (MPI_LOCALNRANKS);
 * else over MPI. */
pp_status pp_launch_local_size(const pp_launch_info *li, int *local_size)
{
    *local_size = 1;
    if (li->size <= 1)
        return PP_OK;
    static const char *const VARS[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", NULL};
    for (int i = 0; VARS[i]; i++) {
        const char *v = getenv(VARS[i]);
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && *v && !*end && n >= 1 && n <= li->size) {
            *local_size = (int)n;
            return PP_OK;
        }
    }
    PP_TRY(pp_mpi_host_local(NULL, local_size));
    return PP_OK;
}
