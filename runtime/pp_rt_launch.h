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

/* Where this process sits in a job started by a launcher, read from the environment (no MPI
 * call): Open MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE, else Slurm's
 * SLURM_PROCID / SLURM_STEP_NUM_TASKS (or SLURM_NTASKS) / SLURM_LOCALID, else PMI_RANK /
 * PMI_SIZE (MPICH, Intel MPI). Without any: rank 0 of 1, launcher "none". */
typedef struct {
    int rank, size;       /* this process in the job */
    int local_rank;       /* among the job's processes on this node; -1 when not given */
    const char *launcher; /* "openmpi", "slurm", "pmi" or "none" (a static string) */
} pp_launch_info;

/* Fills *out (its launcher string is static). Returns PP_OK; PP_ERR_INVALID when a variable
 * is not a number or the rank is outside 0..size-1 (the
 * message names the variable and its value). */
pp_status pp_launch_detect(pp_launch_info *out);
/* Sets *local_rank to this process's rank among those of the job on its host: the launcher's local rank when it
 * gives one, else computed over MPI (host names gathered with MPI_Allgather; the rank is the
 * count of lower world ranks on the same host). For cudaSetDevice(local_rank). The MPI path
 * needs MPI initialised. Returns PP_OK; PP_ERR_UNSUPPORTED on the MPI path without MPI. */
pp_status pp_launch_local_rank(const pp_launch_info *li, int *local_rank);

#ifdef __cplusplus
}
#endif
#endif
