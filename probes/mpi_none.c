/* mpi_none.c — the across-node probe of a build without MPI: refuses clearly rather than letting
 * every rank describe itself as the whole cluster. mpi_gather.c replaces it where MPI is found. */
#include <string.h>

#include "probe_impl.h"

pp_status pp_mpi_probe(const pp_probe_opts *o,
                       pp_status (*probe_node)(const pp_probe_opts *, pp_cluster **),
                       pp_cluster **out)
{
    (void)o;
    (void)probe_node;
    *out = NULL;
    pp_launch_info li;
    PP_TRY(pp_launch_detect(&li));
    return PP_ERR(PP_ERR_UNSUPPORTED,
                  "started by a launcher with %d ranks, but pptune was built "
                  "without MPI: rebuild with MPI (Debian: libopenmpi-dev) or run one "
                  "`pptune probe` per node without mpirun",
                  li.size);
}

pp_status pp_probe_allreduce(double bytes, int quick, pp_allreduce_timing *out)
{
    (void)bytes;
    (void)quick;
    memset(out, 0, sizeof *out);
    return PP_ERR(PP_ERR_UNSUPPORTED, "the all-reduce probe needs MPI: pptune was built without "
                                      "it (Debian: libopenmpi-dev)");
}
