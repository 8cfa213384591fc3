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
 * Under MPI each process holds its own rank's stages: process 0 gathers them and writes this
 * same file, and on loading reads and verifies it and sends each process its stages
 * (checkpoint_dist.c); the file does not say which transport wrote it.
 *
 * Not here: resharding to another configuration, the data stream's internals (the caller
 * replays it to `data_batches`: the stream is a deterministic function of its seed, and
 * nothing else in training draws random numbers).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "checkpoint.h"
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

static size_t largest_stage(const pp_rt_executor *ex)
{
    size_t big = 1;
    for (size_t i = 0; i < (size_t)ex->dp * ex->TP * ex->P * ex->S; i++)
        if (ex->stages[i]->nparams > big)
            big = ex->stages[i]->nparams;
    return big;
}

void pp_ckpt_stage_at(const pp_rt_executor *ex, size_t i, int *k, int *tpr, int *pipe, int *s)
{
    *s = (int)(i % (size_t)ex->S), i /= (size_t)ex->S;
    *pipe = (int)(i % (size_t)ex->P), i /= (size_t)ex->P;
    *tpr = (int)(i % (size_t)ex->TP), *k = (int)(i / (size_t)ex->TP);
}

/* Every rank in this process: stage i's state read into host (3 nparams floats). A sharded
 * m and v are gathered from the replicas' shards (executor_zero_ckpt.c: the file is the
 * unsharded run's). */
typedef struct {
    pp_rt_executor *ex;
    float *host;
} local_src;

static pp_status read_local(void *ctx, uint32_t i, pp_ckpt_stage *out)
{
    local_src *c = ctx;
    pp_rt_executor *ex = c->ex;
    const pp_rt_stage *s = ex->stages[i];
    pp_backend *be = s->be;
    size_t bytes = s->nparams * sizeof(float);
    float *opt = c->host + s->nparams;
    *out = (pp_ckpt_stage){.np = s->nparams, .params = c->host, .opt = opt};
    out->has_opt = ex->shard == PP_RT_SHARD_NONE ? s->opt != NULL : pp_ex_zero_has_state(ex);
    PP_TRY(be->ops->download(be->ctx, c->host, s->params, bytes));
    if (!out->has_opt)
        return PP_OK;
    if (ex->shard == PP_RT_SHARD_NONE)
        return be->ops->download(be->ctx, opt, s->opt, 2 * bytes);
    int k, tpr, pipe, st;
    pp_ckpt_stage_at(ex, i, &k, &tpr, &pipe, &st);
    return pp_ex_zero_state_get(ex, tpr, pipe, st, opt);
}

static pp_status write_stages(writer *w, pp_rt_executor *ex, pp_ckpt_src_fn src, void *ctx)
{
    uint32_t n_stages = (uint32_t)((size_t)ex->dp * ex->TP * ex->P * ex->S);
    put(w, &n_stages, sizeof n_stages);
    for (uint32_t i = 0; i < n_stages; i++) {
        pp_ckpt_stage v;
        PP_TRY(src(ctx, i, &v));
        put(w, &v.np, sizeof v.np);
        put(w, v.params, v.np * sizeof(float));
        put(w, &v.has_opt, 1);
        if (v.has_opt)
            put(w, v.opt, 2 * v.np * sizeof(float));
    }
    return PP_OK;
}

static pp_status write_all(writer *w, pp_rt_executor *ex, pp_rt_ckpt *ck, pp_ckpt_src_fn src,
                           void *ctx)
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
    PP_TRY(write_stages(w, ex, src, ctx));
    w->hashing_state = 0;
    put(w, &w->state_hash, sizeof w->state_hash);
    if (step > 0)
        put(w, ck->seconds, (size_t)step * sizeof(double));
    uint64_t fh = w->file_hash;
    put(w, &fh, sizeof fh);
    return PP_OK;
}

pp_status pp_ckpt_write(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck,
                        pp_ckpt_src_fn src, void *ctx)
{
    pp_afile af;
    PP_TRY(pp_afile_open(&af, path));
    writer w = {.fp = af.fp, .file_hash = PP_FNV1A_BASIS, .state_hash = PP_FNV1A_BASIS};
    pp_status st = write_all(&w, ex, ck, src, ctx);
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

pp_status pp_rt_checkpoint_save(pp_rt_executor *ex, const char *path, pp_rt_ckpt *ck)
{
    if (ck->step != ex->steps_done)
        return PP_ERR(PP_ERR_INVALID, "checkpoint: step %d given, the executor has applied %d",
                      ck->step, ex->steps_done);
    if (ex->self >= 0)
        return pp_ckpt_save_dist(ex, path, ck);
    local_src c = {ex, malloc(3 * largest_stage(ex) * sizeof(float))};
    if (!c.host)
        return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for a bounce buffer");
    pp_status st = pp_ckpt_write(ex, path, ck, read_local, &c);
    free(c.host);
    return st;
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

pp_status pp_ckpt_apply(pp_rt_executor *ex, uint32_t i, const pp_ckpt_stage *v)
{
    pp_rt_stage *s = ex->stages[i];
    pp_backend *be = s->be;
    size_t bytes = s->nparams * sizeof(float);
    if (v->np != s->nparams)
        return PP_ERR(PP_ERR_INVALID,
                      "checkpoint: stage %u holds %llu parameters, this run's "
                      "%zu",
                      i, (unsigned long long)v->np, s->nparams);
    PP_TRY(be->ops->upload(be->ctx, s->params, v->params, bytes));
    if (s->grads) /* else outside the stage (gradient sharding) */
        PP_TRY(be->ops->zero(be->ctx, s->grads, bytes));
    if (v->has_opt && ex->shard != PP_RT_SHARD_NONE) { /* the replica's slice of it */
        int k, tpr, pipe, st;
        pp_ckpt_stage_at(ex, i, &k, &tpr, &pipe, &st);
        float *host = malloc(2 * bytes);
        if (!host)
            return PP_ERR(PP_ERR_NOMEM, "checkpoint: no host memory for a stage's state");
        memcpy(host, v->opt, 2 * bytes); /* the mapped file need not be float-aligned */
        pp_status e = pp_ex_zero_state_put(ex, k, tpr, pipe, st, host);
        free(host);
        return e;
    }
    if (v->has_opt && !s->opt) {
        /* the same allocation AdamW's first step makes, so memory is counted alike */
        s->opt = pp_backend_alloc(be, 2 * bytes, PP_MEM_OPTIM);
        if (!s->opt)
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    }
    if (v->has_opt)
        PP_TRY(be->ops->upload(be->ctx, s->opt, v->opt, 2 * bytes));
    return PP_OK;
}

/* Reads one stage and hands it to sink (NULL: only read). A stage of this process is checked
 * against the run's before anything moves. */
static pp_status load_stage(reader *r, pp_rt_executor *ex, uint32_t i, pp_ckpt_sink_fn sink,
                            void *ctx)
{
    const pp_rt_stage *s = ex ? ex->stages[i] : NULL;
    pp_ckpt_stage v = {0};
    PP_TRY(take(r, &v.np, sizeof v.np, "a stage"));
    if (s && v.np != s->nparams)
        return PP_ERR(PP_ERR_INVALID,
                      "checkpoint %s: stage %u holds %llu parameters, this run's "
                      "%zu",
                      r->path, i, (unsigned long long)v.np, s->nparams);
    if (v.np > (r->len - r->off) / sizeof(float))
        return PP_ERR(PP_ERR_PARSE, "checkpoint %s: ends inside the parameters (truncated or not "
                                    "a checkpoint)",
                      r->path);
    size_t bytes = (size_t)v.np * sizeof(float);
    v.params = r->p + r->off;
    PP_TRY(take(r, NULL, bytes, "the parameters"));
    PP_TRY(take(r, &v.has_opt, 1, "a stage"));
    v.opt = r->p + r->off;
    if (v.has_opt)
        PP_TRY(take(r, NULL, 2 * bytes, "the optimizer state"));
    return sink ? sink(ctx, i, &v) : PP_OK;
}

static pp_status read_body(reader *r, pp_rt_executor *ex, int cap, pp_rt_ckpt *ck,
                           pp_ckpt_sink_fn sink, void *ctx)
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
        PP_TRY(load_stage(r, ex, i, sink, ctx));
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

static pp_status apply_sink(void *ctx, uint32_t i, const pp_ckpt_stage *v)
{
    return pp_ckpt_apply(ctx, i, v);
}

pp_status pp_ckpt_read(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck,
                       const pp_ckpt_reader *how)
{
    char *data = NULL, *cfg = NULL;
    size_t len;
    /* a checkpoint holds every parameter and optimizer moment: no size cap beyond memory, but a
     * regular file (pp_file_read_max refuses devices) */
    pp_status st = pp_file_read_max(path, SIZE_MAX / 2, &data, &len);
    reader r = {.p = (const unsigned char *)data, .len = len, .path = path};
    if (st == PP_OK)
        st = read_header(&r, &cfg);
    if (st == PP_OK && ex) {
        char run[4096];
        config_line(ex, ck->config, run, sizeof run);
        st = compare_config(path, cfg, run);
    }
    /* check the whole file before touching the executor: a bad file leaves it as it was */
    pp_rt_ckpt tmp = *ck;
    if (st == PP_OK) {
        reader dry = r;
        st = read_body(&dry, NULL, 0, &tmp, NULL, NULL);
    }
    if (st == PP_OK && cap > 0 && tmp.step > cap)
        st = PP_ERR(PP_ERR_INVALID, "checkpoint %s is at step %d, past the %d steps of this run",
                    path, tmp.step, cap);
    if (how->verified)
        st = how->verified(how->ctx, st, &tmp);
    if (st == PP_OK)
        st = read_body(&r, ex, cap, ck, ex ? how->sink : NULL, how->ctx);
    free(cfg);
    free(data);
    PP_TRY(st);
    return PP_OK;
}

pp_status pp_rt_checkpoint_load(pp_rt_executor *ex, const char *path, int cap, pp_rt_ckpt *ck)
{
    if (ex && ex->self >= 0)
        return pp_ckpt_load_dist(ex, path, cap, ck);
    pp_ckpt_reader how = {.sink = apply_sink, .ctx = ex};
    return pp_ckpt_read(ex, path, cap, ck, &how);
}
