/* pp_tune_probe.h — probes over the allocation: every node's cluster description and the data-parallel
 * all-reduce of a reduced trial (alloc_probe.c).
 * Part of the tuner's interface (pp_tune.h, the umbrella, says the units and the ownership
 * rules). */
#ifndef PP_TUNE_PROBE_H
#define PP_TUNE_PROBE_H

#include "pp_probe.h"
#include "pp_tune_alloc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Probes over the allocation (alloc_probe.c) ---------------------------------------- */
/* Probes every node of allocation a, one rank per node: `LAUNCHER pptune probe --json
 * --no-probe-nodes [--quick]` (pptune: the program's path), gathered on rank 0 over MPI. *out
 * (pp_cluster_destroy) holds every node, named as the launcher names them; source (n bytes)
 * says how it was probed and names the nodes. PP_ERR_DEVICE when the step fails or is killed
 * at timeout_s (the message has its last line); PP_ERR_PARSE for unreadable output. */
pp_status pp_tune_probe_nodes(const pp_tune_alloc *a, const char *pptune, int quick,
                              double timeout_s, pp_cluster **out, char *source, size_t n);
/* 1 when the nodes of c differ by more than tolerance (0.2: 20 %) in their slowest device's
 * GEMM rate or smallest memory, with msg (n bytes) naming the lowest and highest nodes; else 0.
 * (The tuner plans with the slowest and smallest: pp_tune_hw_from_cluster.) */
int pp_tune_nodes_differ(const pp_cluster *c, double tolerance, char *msg, size_t n);
#define PP_TUNE_NODES_TOLERANCE 0.2      /* nodes differing more than this are warned about */
#define PP_TUNE_PROBE_NODES_TIMEOUT_S 900 /* the probe of every node is killed past it */

/* The data-parallel all-reduce of a reduced trial, timed across the allocation. */
typedef struct {
    int ranks, nodes; /* the group timed: min(d, the allocation's ranks), over that many nodes */
    double bytes;     /* message per rank: the fullest stage's gradient bytes */
    double probed_s;  /* median all-reduce over `ranks` */
    double full_s;    /* at the candidate's d: probed_s x ring(d) / ring(ranks) */
    double run_s;     /* at the d the trial ran (0 for one replica): what its step included */
} pp_tune_dp_probe;
/* 2(n-1)/n: the share of a message each rank moves in a ring all-reduce (0 for n < 2). */
double pp_tune_ring_factor(int n);
/* Times an MPI all-reduce of `bytes` over min(d, a->slots) ranks spread over a's nodes (`LAUNCHER
 * pptune probe --allreduce BYTES --json`) and scales it to d and d_run (ring formula).
 * PP_ERR_UNSUPPORTED when the allocation holds fewer than 2 ranks; PP_ERR_DEVICE when the step
 * fails; PP_ERR_PARSE for unreadable output. */
pp_status pp_tune_dp_allreduce_probe(const pp_tune_alloc *a, const char *pptune, double bytes,
                                     int d, int d_run, double timeout_s, pp_tune_dp_probe *out);

#ifdef __cplusplus
}
#endif
#endif
