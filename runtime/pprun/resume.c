/* resume.c — pprun's checkpoints: --save-every K writes one (atomically, runtime/checkpoint.c)
 * every K steps and after the last; --resume restores the last one and replays the data
 * stream to the batch it had reached, so the run continues exactly where it stopped: killed at
 * any moment, it ends with the same parameters, bit for bit, as a run that never stopped.
 * One run at a time per checkpoint: an flock on CHECKPOINT.lock, held until the process ends
 * (the kernel drops it even on SIGKILL), refuses a second pprun on the same file — say a job
 * requeued while its first instance still runs — instead of letting both write it. Holding it,
 * the temporary files a killed run left (CHECKPOINT.tmp.<pid>...) are removed: the literal name
 * in the checkpoint's folder, only where that pid is dead (pp_afile_clean_stale), never a glob of
 * the path (`--checkpoint '*'` once removed every *.tmp.* file of the folder).
 * Under MPI (each process holds its rank's stages) process 0 alone takes the lock, reads and
 * writes the file (runtime/checkpoint_dist.c gathers and scatters the stages) and prints; every
 * process learns a refusal and exits with the same code (pprun_agree_code), never waiting for
 * a peer that stopped. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "pprun.h"

#define DEFAULT_CHECKPOINT "pprun.ckpt"

static const char *path_of(const pprun_opts *o)
{
    return o->checkpoint ? o->checkpoint : DEFAULT_CHECKPOINT;
}

/* The data part of the run's identity: resuming on other data would not be the same run. */
static void data_id(const pprun_opts *o, char *buf, size_t n)
{
    snprintf(buf, n, "data=%s%s", o->data ? o->data : "synthetic", o->shuffle ? ",shuffle" : "");
}

/* Takes CHECKPOINT.lock for the rest of the process (the descriptor is never closed) and
 * removes stale temporary files. -1 to go on, or the exit code. */
static int lock_checkpoint(const pprun_opts *o)
{
    char lock[4096];
    snprintf(lock, sizeof lock, "%s.lock", path_of(o));
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        fprintf(stderr, "pprun: cannot open %s: %s\n", lock, strerror(errno));
        return 2;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr, "pprun: another pprun is using checkpoint %s (%s is locked)\n", path_of(o),
                lock);
        close(fd);
        return 2;
    }
    pp_afile_clean_stale(path_of(o));
    return -1;
}

typedef struct {
    double *loss, *grad_norm, *seconds;
} history;

static int history_alloc(int n, history *h)
{
    size_t k = n > 0 ? (size_t)n : 1;
    h->loss = calloc(k, sizeof(double));
    h->grad_norm = calloc(k, sizeof(double));
    h->seconds = calloc(k, sizeof(double));
    if (h->loss && h->grad_norm && h->seconds)
        return 1;
    fputs("pprun: out of host memory for the step history\n", stderr);
    return 0;
}

static void history_free(history *h)
{
    free(h->loss);
    free(h->grad_norm);
    free(h->seconds);
}

int pprun_save_if_due(const pprun_opts *o, pp_rt_executor *ex, const pprun_record *rec, int done)
{
    if (!o->save_every || (done % o->save_every != 0 && done != o->steps))
        return -1;
    history h;
    if (!history_alloc(done, &h)) {
        history_free(&h);
        return 1;
    }
    for (int i = 0; i < done; i++) {
        h.loss[i] = rec->steps[i].loss;
        h.grad_norm[i] = rec->steps[i].grad_norm;
        h.seconds[i] = rec->steps[i].seconds;
    }
    char id[1024];
    data_id(o, id, sizeof id);
    pp_rt_ckpt ck = {.config = id,
                     .step = done,
                     .data_batches = (uint64_t)done,
                     .loss = h.loss,
                     .grad_norm = h.grad_norm,
                     .seconds = h.seconds};
    pp_status st = pp_rt_checkpoint_save(ex, path_of(o), &ck);
    history_free(&h);
    if (st != PP_OK) {
        fprintf(stderr, "pprun: checkpoint after step %d: %s\n", done, pp_err_text());
        return st == PP_ERR_UNSUPPORTED ? 2 : 1;
    }
    if (!o->quiet && pp_rt_executor_self(ex) <= 0)
        fprintf(stderr, "pprun: checkpoint %s at step %d (state %016llx)\n", path_of(o), done,
                (unsigned long long)ck.state_hash);
    return -1;
}

/* Restores the checkpoint into ex and rec and replays the data to it; prints on process 0
 * (rank) only. -1 to go on (*first set), or the exit code. */
static int restore(const pprun_opts *o, pp_rt_executor *ex, pp_rt_data *data, int32_t *batch,
                   int seq, pprun_record *rec, int *first, int rank)
{
    history h;
    if (!history_alloc(o->steps, &h)) {
        history_free(&h);
        return 1;
    }
    char id[1024];
    data_id(o, id, sizeof id);
    pp_rt_ckpt ck = {.config = id, .loss = h.loss, .grad_norm = h.grad_norm, .seconds = h.seconds};
    pp_status st = pp_rt_checkpoint_load(ex, path_of(o), o->steps, &ck);
    if (st == PP_ERR_NOTFOUND) {
        if (rank == 0)
            fprintf(stderr, "pprun: --resume: no checkpoint %s yet: starting at step 1\n",
                    path_of(o));
        history_free(&h);
        return -1;
    }
    if (st != PP_OK) {
        if (rank == 0) /* under MPI the others were told process 0's verdict */
            fprintf(stderr, "pprun: --resume: %s\n", pp_err_text());
        history_free(&h);
        return st == PP_ERR_NOMEM || st == PP_ERR_OOM ? 1 : 2;
    }
    for (int i = 0; i < ck.step; i++)
        rec->steps[i] = (pprun_step){h.loss[i], h.grad_norm[i], h.seconds[i]};
    rec->n_steps = ck.step;
    history_free(&h);
    /* the data stream is a function of its seed: draw the batches the first run drew */
    int rows = pp_rt_executor_batch_rows(ex);
    for (uint64_t k = 0; k < ck.data_batches; k++)
        if ((st = pp_rt_data_next(data, rows, seq, batch)) != PP_OK) {
            fprintf(stderr, "pprun: --resume: replaying the data: %s\n", pp_err_text());
            return 2;
        }
    if (!o->quiet && rank == 0)
        fprintf(stderr, "pprun: resumed from %s at step %d (state %016llx)\n", path_of(o), ck.step,
                (unsigned long long)ck.state_hash);
    *first = ck.step;
    return -1;
}

int pprun_resume(const pprun_opts *o, pp_rt_executor *ex, pp_rt_data *data, int32_t *batch, int seq,
                 pprun_record *rec, int *first, pp_transport *tp, int rank)
{
    *first = 0;
    if (!o->save_every && !o->resume)
        return -1;
    int rc = rank == 0 ? lock_checkpoint(o) : -1; /* one lock per run: process 0's */
    if ((rc = pprun_agree_code(tp, rank, rc)) >= 0 || !o->resume)
        return rc;
    rc = restore(o, ex, data, batch, seq, rec, first, rank);
    return pprun_agree_code(tp, rank, rc);
}
