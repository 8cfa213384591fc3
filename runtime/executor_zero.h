/* executor_zero.h — what the sharded optimizer (executor_zero.c, ZeRO-1) and gradient
 * sharding (executor_zero2.c, ZeRO-2) share: a group is a run of the rank's tensors packed
 * in order and cut into dp equal shards of c = ceil(total / dp) floats (padded to dp c);
 * replica k owns shard k. Its shard's gradient, m and v sit at `at` in the replica's shard
 * floats (ZeRO-1: one group, the rank's whole gradient; ZeRO-2: one per stage, and one per
 * tied embedding so that the first and the last stage's shards hold the same elements).
 */
#ifndef PP_EXECUTOR_ZERO_H
#define PP_EXECUTOR_ZERO_H

#include "executor.h"

typedef struct {
    pp_rt_stage *st;
    int tensor, counted; /* counted: in the global norm (each layer once) */
    pp_rt_tensor *t;
    size_t off; /* its first float in the group's pack */
} pp_zseg;

typedef struct {
    pp_zseg *v;
    int n;
    size_t total, c, at;
} pp_zgroup;

/* Floats of one shard of n over dp replicas. */
static inline size_t pp_ex_shard_len(size_t n, int dp)
{
    return (n + (size_t)dp - 1) / (size_t)dp;
}

/* Appends tensor j of stage (pipe, st) to g (its counted flag as executor_sync.c counts). */
pp_status pp_ex_zgroup_add(pp_zgroup *g, rank_state *rs, pp_rt_stage *st, int pipe, int j);

/* ZeRO-1's one group (the rank's tensors in (pipe, stage, tensor) order; sets rs->zero_c);
 * ZeRO-2's groups (made on first use). *g: g->v malloc'ed / rs-owned. */
pp_status pp_ex_zero1_group(pp_rt_executor *ex, rank_state *rs, pp_zgroup *g);
pp_status pp_ex_z2_groups(pp_rt_executor *ex, rank_state *rs, const pp_zgroup **g, int *n);

/* The replica's part [lo, hi) of group g's pack, and its pieces: fn(segment, its first element
 * in the shard, the piece's first element in the tensor, length) for each tensor overlapping
 * [lo, hi). */
void pp_ex_zero_range(const rank_state *rs, const pp_zgroup *g, size_t *lo, size_t *hi);
typedef pp_status (*pp_zpiece_fn)(void *ctx, const pp_zseg *s, size_t in_shard,
                                  size_t in_tensor, size_t len);
pp_status pp_ex_zero_pieces(const pp_zgroup *g, size_t lo, size_t hi, pp_zpiece_fn fn, void *ctx);

enum { Z_GRADS, Z_PARAMS };
/* Copies the group's gradients or parameters into buf (pack) or back (!pack). */
pp_status pp_ex_zcopy(pp_backend *be, const pp_zgroup *g, float *buf, int what, int pack);

/* After the parameters' all-gather: the backend's copies of the group's tensors (CUDA's bf16
 * weights) rewritten from them, as the unsharded AdamW writes them. */
pp_status pp_ex_zwritten(pp_backend *be, const pp_zgroup *g);

/* The step's end over the replica's shards (shards: the gradient shards, each group's at
 * `at`): the global norm (all-reduced over every rank), then with ex->update AdamW on each
 * group's shard, its m and v made on the first step (2 rs->zero_c floats, PP_MEM_OPTIM). */
pp_status pp_ex_zero_norm_step(pp_rt_executor *ex, rank_state *rs, const pp_zgroup *g, int n,
                               const float *shards);
#endif
