/* launch.c — the runtime's host-local rank: the launcher's, else one computed over MPI (which
 * GPU a process drives). The launcher's environment itself is read once, for every module,
 * by pp_launch_detect (common/launch.c).
 *
 * Not here: starting processes, MPI itself (transport_mpi.c; the local-rank fallback over MPI
 * lives there so this file needs no MPI header), hosts files or rendezvous of our own.
 */
#include "transport.h"

pp_status pp_launch_local_rank(const pp_launch_info *li, int *local_rank)
{
    *local_rank = li->local_rank;
    if (li->local_rank >= 0)
        return PP_OK;
    PP_TRY(pp_mpi_host_local_rank(local_rank));
    return PP_OK;
}
