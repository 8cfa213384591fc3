/* checkpoint.c — a training run's state in one file, written atomically, read back bit for bit.
 *
 * The file (native byte order; written and read on the same kind of machine):
 *   "PPCKPT01"                         magic and format version
 *   u32 n, char[n]                     the run's identity: "key=value" words (see config_line)
 *   i32 step, u64 data_batches         optimizer steps applied, batches the data stream gave
 *   f64 loss[step], f64 grad_norm[step]
 *   u32 n_stages                       dp * pipes * stages, in (replica, pipe, stage) order
 *                                      (under --ep a replica's stages hold its experts only)
 *   per stage: u64 nparams, f32 params[nparams], u8 has_opt, f32 m[nparams] v[nparams] if has_opt
 *   u64 state_hash                     FNV-1a 64 of everything from `step` to here
 *   f64 seconds[step]                  step wall times (after the hash: they differ between
 *                                      runs that are otherwise bit-identical)
 *   u64 file_hash                      FNV-1a 64 of every byte before it
 * Written through pp_afile (temporary file, fsync, rename), so a run killed at any moment
 * leaves either the previous checkpoint or the new one.
 *
 * Not here: process transports (each process holds only its rank's stages; a per-rank file
 * and a collective commit would be needed), resharding to another configuration, the data
 * stream's internals (the caller replays it to `data_batches`: the stream is a deterministic
 * function of its seed, and nothing else in training draws random numbers).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"
#include "stage_impl.h"

#define MAGIC "PPCKPT01"

/* The identity a checkpoint must share with the run that loads it. */
static void config_line(const pp_rt_executor *ex, const char *extra, char *buf, size_t n)
{
    const pp_model_cfg *m = &ex->model;
    const pp_sched *s = ex->sched;
    const pp_adamw *a = &ex->adamw;
    int len = snprintf(buf, n,
                       "layers=%d hidden=%d heads=%d ffn=%d vocab=%d max_seq=%d schedule=%s "
                       "ranks=%d microbatches=%d chunks=%d group=%d pipes=%d micro_batch=%d "
                       "seq=%d dp=%d seed=%llu lr=%.9g beta1=%.9g beta2=%.9g eps=%.9g "
                       "weight_decay=%.9g clip=%.9g split=",
                       m->layers, m->hidden, m->heads, m->ffn, m->vocab, m->seq, s->kind, s->ranks,
                       s->microbatches, s->chunks, s->group, s->n_pipes, ex->B, ex->T, ex->dp,
                       (unsigned long long)ex->seed, (double)a->lr, (double)a->beta1,
                       (double)a->beta2, (double)a->eps, (double)a->weight_decay, (double)ex->clip);
    for (int st = 0; st < s->stages_per_pipe && len > 0 && (size_t)len < n; st++) {
        const pp_stage *g = pp_sched_stage(s, 0, st);
        len += snprintf(buf + len, n - (size_t)len, "%s%d-%d", st ? "," : "", g->layer_begin,
                        g->layer_end);
    }
    /* a block other than GPT's is part of the identity (GPT checkpoints keep their line) */
    if ((m->norm || m->mlp || m->pos || m->kv_heads || m->head_dim || m->nobias || m->untied ||
         m->qk_norm) &&
        len > 0 && (size_t)len < n) {
        char block[256];
        len += snprintf(buf + len, n - (size_t)len, " block=%s",
                        pp_model_describe(m, block, sizeof block));
    }
    /* expert parallelism: each replica's stages hold its experts (stage_impl.h's epr), which
     * the file keeps replica by replica, so a checkpoint resumes under its own ep only (runs
     * without it keep their line) */
    if (ex->EP > 1 && len > 0 && (size_t)len < n)
        len += snprintf(buf + len, n - (size_t)len, " ep=%d", ex->EP);
    if (extra && *extra && len > 0 && (size_t)len < n)
        snprintf(buf + len, n - (size_t)len, " %s", extra);
}

static pp_status supported(const pp_rt_executor *ex)
{
    if (ex->self >= 0)
        return PP_ERR(PP_ERR_UNSUPPORTED, "checkpoints need every rank in this process (the "
                                          "thread transport); not yet under MPI");
    return PP_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct {
    FILE *fp;
    uint64_t file_hash, state_hash;
    int hashing_state;
    int failed;
} writer;

static void put(writer *w, const void *p, size_t n)
{
    if (w->failed || fwrite(p, 1, n, w->fp) != n) {
        w->failed = 1;
        return;
    }
    w->file_hash = pp_fnv1a(w->file_hash, p, n);
    if (w->hashing_state)
        w->state_hash = pp_fnv1a(w->state_hash, p, n);
}

/* Copies n floats of backend memory to the file through a host bounce buffer. */
static pp_status put_device(writer *w, pp_backend *be, const float *src, size_t n, float *host)
{
    PP_TRY(be->ops->download(be->ctx, host, src, n * sizeof(float)));
    put(w, host, n * sizeof(float));
    return PP_OK;
}

static size_t largest_stage(const pp_rt_executor *ex)
{
    size_t big = 1;
    for (size_t i = 0; i < (size_t)ex->dp * ex->TP * ex->P * ex->S; i++)
        if (ex->stages[i]->nparams > big)
            big = ex->stages[i]->nparams;
    return big;
}

/* Stage i of ex->stages ((replica * TP + tpr) * P + pipe) * S + stage: its indices. */
static void stage_at(const pp_rt_executor *ex, size_t i, int *k, int *tpr, int *pipe, int *s)
{
    *s = (int)(i % (size_t)ex->S), i /= (size_t)ex->S;
    *pipe = (int)(i % (size_t)ex->P), i /= (size_t)ex->P;
    *tpr = (int)(i % (size_t)ex->TP), *k = (int)(i / (size_t)ex->TP);
}

/* A stage's m and v: its own, or under sharding gathered from the replicas' shards
 * (executor_zero_ckpt.c: the file is the unsharded run's). */
static pp_status put_opt(writer *w, pp_rt_executor *ex, uint32_t i, float *host)
{
    const pp_rt_stage *s = ex->stages[i];
    if (ex->shard == PP_RT_SHARD_NONE) {
        PP_TRY(put_device(w, s->be, s->opt, s->nparams, host));
        return put_device(w, s->be, s->opt + s->nparams, s->nparams, host);
    }
    int k, tpr, pipe, st;
    stage_at(ex, i, &k, &tpr, &pipe, &st);
    PP_TRY(pp_ex_zero_state_get(ex, tpr, pipe, st, host));
    put(w, host, 2 * s->nparams * sizeof(float));
    return PP_OK;
}

static pp_status write_stages(writer *w, pp_rt_executor *ex)
{
    uint32_t n_stages = (uint32_t)((size_t)ex->dp * ex->TP * ex->P * ex->S);
    put(w, &n_stages, sizeof n_stages);
    float *host = malloc(2 * largest_stage(ex) * sizeof(float));
    if (!host)
        return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for a bounce buffer");
    pp_status st = PP_OK;
    for (uint32_t i = 0; i < n_stages && st == PP_OK; i++) {
        const pp_rt_stage *s = ex->stages[i];
        uint64_t np = s->nparams;
        unsigned char has_opt =
            ex->shard == PP_RT_SHARD_NONE ? s->opt != NULL : pp_ex_zero_has_state(ex);
        put(w, &np, sizeof np);
        st = put_device(w, s->be, s->params, s->nparams, host);
        put(w, &has_opt, 1);
        if (st == PP_OK && has_opt)
            st = put_opt(w, ex, i, host);
    }
    free(host);
    PP_TRY(st);
    return PP_OK;
}

static pp_status write_all(writer *w, pp_rt_executor *ex, pp_rt_ckpt *ck)
{
    char cfg[4096];
    config_line(ex, ck->config, cfg, sizeof cfg);
    uint32_t n = (uint32_t)strlen(cfg);
    int32_t step = ck->step;
    put(w, MAGIC, 8);
    put(w, &n, sizeof n);
    put(w, cfg, n);
    w->hashing_state = 1;
    put(w, &step, sizeof step);
    put(w, &ck->data_batches, sizeof ck->data_batches);
    if (step > 0) {
        put(w, ck->loss, (size_t)step * sizeof(double));
        put(w, ck->grad_norm, (size_t)step * sizeof(double));
    }
    PP_TRY(write_stages(w, ex));
    w->hashing_state = 0;
    put(w, &w->state_hash, sizeof w->state_hash);
    if (step > 0)
        put(w, ck->seconds, (size_t)step * sizeof(double));
    uint64_t fh = w->file_hash;
    put(w, &fh, sizeof fh);
    return PP_OK;
}

pp_status pp_rt_checkpoint_save(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck)
{
    PP_TRY(supported(ex));
    if (ck->step != ex->steps_done)
        return PP_ERR(PP_ERR_INVALID, "checkpoint: step %d given, the executor has applied %d",
                      ck->step, ex->steps_done);
    pp_afile af;
    PP_TRY(pp_afile_open(&af, path));
    writer w = {.fp = af.fp, .file_hash = PP_FNV1A_BASIS, .state_hash = PP_FNV1A_BASIS};
    pp_status st = write_all(&w, ex, ck);
    if (st == PP_OK && w.failed)
        st = PP_ERR(PP_ERR_IO, "checkpoint %s: write failed: %s", path, strerror(errno));
    if (st != PP_OK) {
        pp_afile_abort(&af);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    PP_TRY(pp_afile_commit(&af));
    ck->state_hash = w.state_hash;
    return PP_OK;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct {
    const unsigned char *p;
    size_t len, off;
    const char *path;
} reader;

static pp_status take(reader *r, void *dst, size_t n, const char *what)
{
    if (r->len - r->off < n)
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: ends inside %s (truncated or not a checkpoint)",
                      r->path, what);
    if (dst)
        memcpy(dst, r->p + r->off, n);
    r->off += n;
    return PP_OK;
}

/* The first key=value word that differs between the file's identity and this run's. */
static pp_status compare_config(const char *path, const char *file, const char *run)
{
    if (!strcmp(file, run))
        return PP_OK;
    const char *a = file, *b = run;
    while (*a && *b) {
        size_t la = strcspn(a, " "), lb = strcspn(b, " ");
        if (la != lb || strncmp(a, b, la) != 0)
            return PP_ERR(PP_ERR_INVALID,
                          "checkpoint %s was written by a different run: it has %.*s, this run "
                          "%.*s",
                          path, (int)la, a, (int)lb, b);
        a += la + (a[la] == ' ');
        b += lb + (b[lb] == ' ');
    }
    return PP_ERR(PP_ERR_INVALID,
                  "checkpoint %s was written by a different run: it has \"%s\", "
                  "this run \"%s\"",
                  path, *a ? a : "(nothing more)", *b ? b : "(nothing more)");
}

static pp_status read_header(reader *r, char **cfg)
{
    char magic[8] = {0};
    uint32_t n = 0;
    PP_TRY(take(r, magic, 8, "the header"));
    if (memcmp(magic, MAGIC, 8) != 0)
        return PP_ERR(PP_ERR_PARSE, "%s is not a pprun checkpoint (format " MAGIC ")", r->path);
    uint64_t fh;
    if (r->len < 8 + 8)
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: truncated", r->path);
    memcpy(&fh, r->p + r->len - 8, 8);
    if (pp_fnv1a(PP_FNV1A_BASIS, r->p, r->len - 8) != fh)
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: checksum mismatch (corrupted)", r->path);
    r->len -= 8;
    PP_TRY(take(r, &n, sizeof n, "the header"));
    if (n > r->len - r->off)
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: header length %u too large", r->path, n);
    *cfg = pp_calloc(n + 1, 1);
    if (!*cfg)
        return PP_ERR_NOMEM;
    return take(r, *cfg, n, "the header");
}

static pp_status read_history(reader *r, int cap, pp_rt_ckpt *ck)
{
    int32_t step = 0;
    PP_TRY(take(r, &step, sizeof step, "the step"));
    PP_TRY(take(r, &ck->data_batches, sizeof ck->data_batches, "the data position"));
    if (step < 0 || (size_t)step > (r->len - r->off) / 16)
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: step %d out of range", r->path, (int)step);
    if (cap > 0 && step > cap)
        return PP_ERR(PP_ERR_INVALID, "checkpoint %s is at step %d, past the %d steps of this run",
                      r->path, (int)step, cap);
    ck->step = step;
    size_t bytes = (size_t)step * sizeof(double);
    PP_TRY(take(r, cap > 0 ? ck->loss : NULL, bytes, "the loss history"));
    PP_TRY(take(r, cap > 0 ? ck->grad_norm : NULL, bytes, "the gradient norms"));
    return PP_OK;
}

/* Loads one stage's parameters (and optimizer state) into backend memory: stage i of ex
 * (NULL: only read), whose state goes to its replica's shards under sharding. */
static pp_status load_stage(reader *r, pp_rt_executor *ex, int i)
{
    pp_rt_stage *s = ex ? ex->stages[i] : NULL;
    uint64_t np = 0;
    unsigned char has_opt = 0;
    PP_TRY(take(r, &np, sizeof np, "a stage"));
    if (s && np != s->nparams)
        return PP_ERR(PP_ERR_INVALID,
                      "checkpoint %s: stage %d holds %llu parameters, this run's "
                      "%zu",
                      r->path, i, (unsigned long long)np, s->nparams);
    size_t bytes = (size_t)np * sizeof(float);
    const unsigned char *params = r->p + r->off;
    PP_TRY(take(r, NULL, bytes, "the parameters"));
    PP_TRY(take(r, &has_opt, 1, "a stage"));
    const unsigned char *opt = r->p + r->off;
    if (has_opt)
        PP_TRY(take(r, NULL, 2 * bytes, "the optimizer state"));
    if (!s)
        return PP_OK;
    pp_backend *be = s->be;
    PP_TRY(be->ops->upload(be->ctx, s->params, params, bytes));
    if (s->grads) /* else outside the stage (gradient sharding) */
        PP_TRY(be->ops->zero(be->ctx, s->grads, bytes));
    if (has_opt && ex->shard != PP_RT_SHARD_NONE) { /* the replica's slice of it */
        int k, tpr, pipe, st;
        stage_at(ex, (size_t)i, &k, &tpr, &pipe, &st);
        float *host = malloc(2 * bytes);
        if (!host)
            return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for a stage's state");
        memcpy(host, opt, 2 * bytes); /* the mapped file need not be float-aligned */
        pp_status e = pp_ex_zero_state_put(ex, k, tpr, pipe, st, host);
        free(host);
        return e;
    }
    if (has_opt && !s->opt) {
        /* the same allocation AdamW's first step makes, so memory is counted alike */
        s->opt = pp_backend_alloc(be, 2 * bytes, PP_MEM_OPTIM);
        if (!s->opt)
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    }
    if (has_opt)
        PP_TRY(be->ops->upload(be->ctx, s->opt, opt, 2 * bytes));
    return PP_OK;
}

static pp_status read_body(reader *r, pp_rt_executor *ex, int cap, pp_rt_ckpt *ck)
{
    size_t state_begin = r->off;
    PP_TRY(read_history(r, cap, ck));
    uint32_t n_stages = 0;
    PP_TRY(take(r, &n_stages, sizeof n_stages, "the stage count"));
    size_t want = ex ? (size_t)ex->dp * ex->TP * ex->P * ex->S : n_stages;
    if (n_stages != want)
        return PP_ERR(PP_ERR_INVALID, "checkpoint %s holds %u stages, this run %zu", r->path,
                      n_stages, want);
    for (uint32_t i = 0; i < n_stages; i++)
        PP_TRY(load_stage(r, ex, (int)i));
    uint64_t sh = pp_fnv1a(PP_FNV1A_BASIS, r->p + state_begin, r->off - state_begin);
    PP_TRY(take(r, &ck->state_hash, sizeof ck->state_hash, "the state hash"));
    if (sh != ck->state_hash)
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: state hash mismatch", r->path);
    PP_TRY(
        take(r, cap > 0 ? ck->seconds : NULL, (size_t)ck->step * sizeof(double), "the step times"));
    if (ex)
        ex->steps_done = ck->step;
    return PP_OK;
}

pp_status pp_rt_checkpoint_load(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck)
{
    if (ex)
        PP_TRY(supported(ex));
    char *data = NULL, *cfg = NULL;
    size_t len;
    /* a checkpoint holds every parameter and optimizer moment: no size cap beyond memory, but a
     * regular file (pp_file_read_max refuses devices) */
    PP_TRY(pp_file_read_max(path, SIZE_MAX / 2, &data, &len));
    reader r = {.p = (const unsigned char *)data, .len = len, .path = path};
    pp_status st = read_header(&r, &cfg);
    if (st == PP_OK && ex) {
        char run[4096];
        config_line(ex, ck->config, run, sizeof run);
        st = compare_config(path, cfg, run);
    }
    /* check the whole file before touching the executor: a bad file leaves it as it was */
    if (st == PP_OK) {
        reader dry = r;
        pp_rt_ckpt tmp = *ck;
        st = read_body(&dry, NULL, 0, &tmp);
    }
    if (st == PP_OK)
        st = read_body(&r, ex, cap, ck);
    free(cfg);
    free(data);
    PP_TRY(st);
    return PP_OK;
}
