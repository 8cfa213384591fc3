/* pp_rt_launch.h — where this process sits in a job started by a launcher (Open MPI, Slurm,
 * PMI).
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_LAUNCH_H
#define PP_RT_LAUNCH_H

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pp_launch_info and pp_launch_detect (the launcher's environment) are in pp_common.h. */
/* Sets *local_rank to this process's rank among those of the job on its host: the launcher's local rank when it
 * gives one, else computed over MPI (host names gathered with MPI_Allgather; the rank is the
 * count of lower world ranks on the same host). For cudaSetDevice(local_rank). The MPI path
 * needs MPI initialised. Returns PP_OK; PP_ERR_UNSUPPORTED on the MPI path without MPI. */
pp_status pp_launch_local_rank(const pp_launch_info *li, int *local_rank);
/* Sets *local_size to the number of the job's processes on this host (1 without a launch):
 * the launcher's variable when it gives one (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS), else
 * computed over MPI like the local rank. */
pp_status pp_launch_local_size(const pp_launch_info *li, int *local_size);

#ifdef __cplusplus
}
#endif
#endif
