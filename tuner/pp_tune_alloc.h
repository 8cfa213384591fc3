/* pp_tune_alloc.h — the allocation trials run in: a Slurm job or an Open MPI host file, and the
 * launcher's words before pprun (alloc.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_ALLOC_H
#define PP_TUNE_ALLOC_H

#include <stddef.h>

#include "pp_profile.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The allocation trials run in (alloc.c) ------------------------------------------------- */
/* Where trials may run beyond this process: a Slurm allocation (job steps with srun) or an
 * Open MPI host list (mpirun --hostfile). launcher "" = none: trials run pprun as one child
 * with every rank a thread. Plain value, filled by pp_tune_alloc_detect. */
typedef struct {
    char launcher[16];   /* "srun", "mpirun" or "" */
    char nodes[256];     /* as the launcher names them: "n[1-4]", or the host file's hosts */
    char hostfile[PP_PROFILE_PPRUN_ARG_LEN]; /* mpirun: the Open MPI host file */
    char job[32];        /* srun: SLURM_JOB_ID */
    int n_nodes;         /* nodes of the allocation */
    int slots;           /* ranks the allocation holds (tasks or host-file slots, all nodes) */
    /* srun: nodes lost during the search, a comma list; later steps --exclude them (n_nodes
     * and slots no longer count them); sized to fit one launcher word */
    char lost[PP_PROFILE_PPRUN_ARG_LEN - 10];
} pp_tune_alloc;

/* hostfile != NULL: an Open MPI host file ("host [slots=N]" lines, # comments); else a Slurm
 * allocation from SLURM_JOB_ID, SLURM_JOB_NODELIST, SLURM_JOB_NUM_NODES and SLURM_NTASKS (or
 * SLURM_JOB_CPUS_PER_NODE); else launcher "". PP_ERR_IO / PP_ERR_INVALID naming the file, line
 * or variable when they are unreadable. */
pp_status pp_tune_alloc_detect(const char *hostfile, pp_tune_alloc *out);

/* The launcher's words before pprun for a trial of `ranks` processes with a time limit:
 * srun --nodes n --ntasks R [--ntasks-per-node R/n] --kill-on-bad-exit=1 --time M --mpi=pmix,
 * or mpirun --hostfile F -np R. Writes into store[0..max), argv pointing at them; returns the
 * count (0 for launcher ""), -1 when ranks exceed a.slots. nodes_used: the nodes it spreads on. */
int pp_tune_alloc_argv(const pp_tune_alloc *a, int ranks, double timeout_s, int max,
                       char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv, int *nodes_used);
/* The same for one process on every node of the allocation (probes: alloc_probe.c). */
int pp_tune_alloc_argv_per_node(const pp_tune_alloc *a, double timeout_s, int max,
                                char store[][PP_PROFILE_PPRUN_ARG_LEN], char **argv);
/* The node a failed step's launcher said was lost ("srun: error: Node failure on n2" in msg)
 * into node (n bytes); returns 1, or 0 when msg names none. */
int pp_tune_alloc_lost_node(const char *msg, char *node, size_t n);
/* Takes node out of the allocation for the steps that follow (srun --exclude; one node's share
 * of slots less). Returns 1, or 0 when it was already out, is the last node, or the launcher is
 * not srun. */
int pp_tune_alloc_lose(pp_tune_alloc *a, const char *node);

#ifdef __cplusplus
}
#endif
#endif
