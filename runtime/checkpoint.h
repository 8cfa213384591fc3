/* checkpoint.h — private to runtime/: the checkpoint file (checkpoint.c) and its gather and
 * scatter between processes (checkpoint_dist.c). */
#ifndef PP_RT_CHECKPOINT_PRIV_H
#define PP_RT_CHECKPOINT_PRIV_H

#include <stdint.h>

#include "executor.h"

/* One stage's state as the file holds it: np parameters, then (has_opt) m | v, 2 np floats.
 * The pointers need not be float-aligned (a file's bytes, a message's). */
typedef struct {
    uint64_t np;
    const void *params;
    unsigned char has_opt;
    const void *opt;
} pp_ckpt_stage;

/* The writer asks src for stage i's state (valid until the next call), i in file order. */
typedef pp_status (*pp_ckpt_src_fn)(void *ctx, uint32_t i, pp_ckpt_stage *out);
pp_status pp_ckpt_write(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck,
                        pp_ckpt_src_fn src, void *ctx);

/* The reader: verified(ctx, st, head) once the whole file is checked (st: the verdict, head:
 * its step, data_batches and state_hash when PP_OK), returning the verdict to go on with; then
 * sink(ctx, i, stage) for each stage in file order (only with ex). */
typedef pp_status (*pp_ckpt_sink_fn)(void *ctx, uint32_t i, const pp_ckpt_stage *v);
typedef struct {
    pp_status (*verified)(void *ctx, pp_status st, const pp_rt_ckpt *head);
    pp_ckpt_sink_fn sink;
    void *ctx;
} pp_ckpt_reader;
pp_status pp_ckpt_read(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck,
                       const pp_ckpt_reader *how);
/* Restores stage i of this process from v (parameters, gradients zeroed, AdamW state). */
pp_status pp_ckpt_apply(pp_rt_executor *ex, uint32_t i, const pp_ckpt_stage *v);
/* Stage i of ex->stages ((replica * TP + tpr) * P + pipe) * S + stage: its indices. */
void pp_ckpt_stage_at(const pp_rt_executor *ex, size_t i, int *k, int *tpr, int *pipe, int *s);

/* checkpoint_dist.c: save and load under a process transport (ex->self >= 0); every process
 * calls them. */
pp_status pp_ckpt_save_dist(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck);
pp_status pp_ckpt_load_dist(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck);

#endif
