/* pp_rt_checkpoint.h — checkpoints of a run (runtime/checkpoint.c).
 * Part of the runtime's public headers (pp_rt.h includes them all); stands alone.
 */
#ifndef PP_RT_CHECKPOINT_H
#define PP_RT_CHECKPOINT_H

#include <stdint.h>

#include "pp_common.h"
#include "pp_rt_executor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A run's state in one file, written atomically (PATH.tmp.<pid>, fsync, rename: a run killed
 * at any moment leaves the previous checkpoint or the new one): every stage's parameters and
 * AdamW state (m, v) of every replica, the optimizer step, the data position, the per-step
 * history. Loading restores them bit for bit, so the run continues exactly as if it had not
 * stopped. Under a process transport (MPI) every process calls save and load: process 0 gathers
 * the others' stages and writes the file (the same bytes as the thread transport's, up to the
 * step times), and on loading reads it and sends each process its stages and the history; the
 * file names no transport, so either resumes the other's. */
typedef struct {
    const char *config;    /* in: the caller's part of the run's identity ("data=synthetic");
                            * the executor adds its own (model, schedule, B, T, dp, seed,
                            * AdamW, clip); a load compares both and names the first difference */
    int step;              /* optimizer steps applied = history entries */
    uint64_t data_batches; /* batches the data stream has handed out (the caller replays it) */
    double *loss, *grad_norm, *seconds; /* [step] history (caller-owned) */
    uint64_t state_hash; /* out: FNV-1a 64 of step, data position, losses, gradient norms,
                          * parameters and optimizer state (not the step times) */
} pp_rt_ckpt;

/* Writes ex's state and ck's history to path, and sets ck->state_hash (under MPI on process 0
 * only, which writes). Returns PP_OK; PP_ERR_INVALID when ck->step is not the steps the
 * executor has applied; PP_ERR_IO when the file cannot be written (the message names it). */
pp_status pp_rt_checkpoint_save(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck);
/* Restores path into ex (NULL: only reads and verifies the file, filling step, data_batches
 * and state_hash). The history is copied into ck's arrays when cap > 0 (they hold cap
 * entries; a checkpoint past cap steps is PP_ERR_INVALID). PP_ERR_NOTFOUND: no such file;
 * PP_ERR_PARSE: truncated or corrupted; PP_ERR_INVALID: another run's checkpoint. The file is
 * verified whole before ex is touched; under MPI process 0's verdict (its message, which the
 * caller prints on process 0 only) is every process's. Returns PP_OK or one of the errors
 * above. */
pp_status pp_rt_checkpoint_load(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck);

#ifdef __cplusplus
}
#endif
#endif
