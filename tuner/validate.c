/* validate.c — the time model held against published end-to-end measurements.
 *
 * The bundled table is facts with their sources: Megatron-LM's weak-scaling runs on Selene
 * (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
 * Megatron-LM", SC'21, arXiv:2104.04473, Table 1; the table image images/cases_april2021.png of
 * github.com/NVIDIA/Megatron-LM's README). Each row's published step time is its FLOP count over the
 * measured rate: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (the paper's count, recomputed forward
 * included) / (TFLOP/s per GPU x GPUs). The prediction is pptune's own step time for the row's
 * layout, with the constants every other command uses: t = min(8, t.p) inside a node, p = t.p / t
 * across nodes, d the rest; the micro-batch size and the chunks per rank are the run's own,
 * from the scripts that produced Table 1 (Megatron-LM examples/sc21/run_table_1.sh, commits of
 * August 2021: MBS, and --num-layers-per-virtual-pipeline-stage L giving v = layers / (p L);
 * no such flag: v = 1, Megatron's 1F1B; the paper's text says "interleaved" for the whole
 * table, but the 39.1B and 1T scripts do not interleave). A row that does not publish them
 * (micro_batch or chunks 0) gets the (b, v) the model predicts fastest among those that fit
 * (b in 1..16; v = 1 runs 1F1B, v >= 2 Megatron's interleaved schedule). Nothing here is fitted
 * to a row.
 * The runs' software is what Megatron-LM had in 2021: full recompute, no flash attention, no
 * sequence parallelism, no distributed optimizer, and no gradient-accumulation fusion (autograd
 * accumulated the fp16 gradients: opts.grad_accum AUTOGRAD16, see timemodel.c).
 * Known differences between these runs and what is predicted (not modelled, each would make the
 * prediction faster still): the runs were fp16 and all-reduced 16-bit gradients
 * (--accumulate-allreduce-grads-in-fp32 off), pptune times fp32 main gradients; the p = 1 rows
 * used PyTorch DDP (--DDP-impl torch), which overlaps the gradient all-reduce with the
 * backward, pptune starts it after the rank's last backward (as Megatron's local DDP of the
 * other rows does).
 *
 * It does not print: cmd_validate.c does.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_tune.h"

#define MEGATRON_SRC                                                                             \
    "Narayanan et al., SC'21, Table 1 (Megatron-LM README, cases_april2021.png): Selene, "       \
    "DGX A100 80 GB, seq 2048, V 51200, full recompute, end-to-end; micro-batch and chunks "     \
    "per rank from Megatron-LM examples/sc21/run_table_1.sh"

static const pp_tune_published rows[] = {
    {"1.7B", "dgx-a100-80g", 2304, 24, 24, 1, 32, 512, 2048, 51200, 137, MEGATRON_SRC, 16, 1},
    {"3.6B", "dgx-a100-80g", 3072, 32, 30, 2, 64, 512, 2048, 51200, 138, MEGATRON_SRC, 16, 1},
    {"7.5B", "dgx-a100-80g", 4096, 32, 36, 4, 128, 512, 2048, 51200, 142, MEGATRON_SRC, 16, 1},
    {"18.4B", "dgx-a100-80g", 6144, 48, 40, 8, 256, 1024, 2048, 51200, 135, MEGATRON_SRC, 8, 1},
    {"39.1B", "dgx-a100-80g", 8192, 64, 48, 16, 512, 1536, 2048, 51200, 138, MEGATRON_SRC, 4, 1},
    {"76.1B", "dgx-a100-80g", 10240, 80, 60, 32, 1024, 1792, 2048, 51200, 140, MEGATRON_SRC, 2, 3},
    {"145.6B", "dgx-a100-80g", 12288, 96, 80, 64, 1536, 2304, 2048, 51200, 148, MEGATRON_SRC, 2, 2},
    {"310.1B", "dgx-a100-80g", 16384, 128, 96, 128, 1920, 2160, 2048, 51200, 155, MEGATRON_SRC, 1, 2},
    {"529.6B", "dgx-a100-80g", 20480, 128, 105, 280, 2520, 2520, 2048, 51200, 163, MEGATRON_SRC, 1, 3},
    {"1008B", "dgx-a100-80g", 25600, 160, 128, 512, 3072, 3072, 2048, 51200, 163, MEGATRON_SRC, 1, 1},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

const pp_tune_published *pp_tune_published_rows(int *n)
{
    *n = N_ROWS;
    return rows;
}

/* The row's GPT model (GPT-3 shapes: FFN 4h, biases, learned positions, tied embeddings),
 * named "megatron-<row>": a preset name too (pp_tune_published_model), so that `pptune
 * simulate --model megatron-1.7B ...` reproduces a row. */
static pp_status row_model(const pp_tune_published *r, pp_tune_model *m)
{
    PP_TRY(pp_tune_model_preset("gpt-175b", m));
    snprintf(m->name, sizeof m->name, "megatron-%s", r->name);
    snprintf(m->source, sizeof m->source, "%s", r->source);
    m->layers = r->layers, m->hidden = r->hidden, m->heads = m->kv_heads = r->heads;
    m->ffn = 4 * r->hidden, m->vocab = r->vocab, m->seq = r->seq;
    m->global_batch = r->global_batch, m->pprun = 0;
    snprintf(m->pprun_why, sizeof m->pprun_why,
             "pprun has no preset of Megatron-LM's published row %s (its shape is gpt-175b's "
             "block at other sizes)",
             r->name);
    return PP_OK;
}

pp_status pp_tune_published_model(const char *name, pp_tune_model *m)
{
    for (int i = 0; i < N_ROWS; i++) {
        char want[64];
        snprintf(want, sizeof want, "megatron-%s", rows[i].name);
        if (!strcmp(name, want))
            return row_model(&rows[i], m);
    }
    return PP_ERR(PP_ERR_NOTFOUND, "no published row named \"%s\"", name);
}

char *pp_tune_check_simulate_line(const pp_tune_check *c, char *buf, size_t n)
{
    const pp_config *k = &c->cfg;
    char g[16] = "";
    if (k->G > 0)
        snprintf(g, sizeof g, " -G %d", k->G);
    snprintf(buf, n,
             "pptune simulate --model megatron-%s --cluster %s --nodes %d --schedule %s -p %d "
             "-v %d%s -b %d -t %d --recompute %s --no-flash-attention --grad-accum autograd16",
             c->row->name, c->row->cluster, c->row->gpus / 8, k->schedule, k->p, k->v, g, k->b,
             k->t, pp_recompute_name(k->recompute));
    return buf;
}

double pp_tune_published_step(const pp_tune_published *r)
{
    double B = r->global_batch, s = r->seq, l = r->layers, h = r->hidden, V = r->vocab;
    double F = 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
    return F / (r->tflops_per_gpu * 1e12 * r->gpus);
}

/* Megatron's interleaved schedule: the single-pipe row whose chunks are tunable. */
static const char *interleaved_kind(void)
{
    int n;
    const pp_sched_desc *d = pp_sched_generators(&n);
    for (int i = 0; i < n; i++)
        if (d[i].pipes == 1 && d[i].chunks == 0)
            return d[i].name;
    return NULL;
}

/* The row's published (b, v), or where it publishes none the fastest predicted (b, v) of its
 * layout that fits; *found 0 when none does. */
static pp_status best_config(const pp_tune_model *m, const pp_tune_hw *hw, const pp_tune_opts *o,
                             const pp_tune_published *r, pp_tune_check *out, int *found)
{
    int t = r->model_parallel < 8 ? r->model_parallel : 8, p = r->model_parallel / t;
    int d = r->gpus / r->model_parallel;
    const char *inter = interleaved_kind();
    *found = 0;
    for (int b = 1; b <= 16; b *= 2) { /* 1..16: the published rows run 1 to 16 */
        if (r->micro_batch && b != r->micro_batch)
            continue;
        if (r->global_batch % (b * d))
            continue;
        int N = r->global_batch / (b * d);
        for (int v = 1; v <= 8; v++) {
            if (r->chunks && v != r->chunks)
                continue;
            if (m->layers % (p * v) || (v > 1 && (p < 2 || !inter)))
                continue;
            pp_config c;
            pp_config_defaults(&c);
            c.p = p, c.v = v, c.b = b, c.d = d, c.t = t, c.N = N;
            c.recompute = PP_RECOMPUTE_FULL; /* as the runs did (every layer) */
            c.schedule = v > 1 ? inter : PP_SCHED_DEFAULT;
            pp_tune_prediction pr;
            if (pp_tune_predict(m, hw, &c, o, &pr, NULL) != PP_OK) {
                pp_err_clear(); /* a layout the schedule's rules refuse is not a candidate */
                continue;
            }
            if (!pr.fits || (*found && pr.step_time >= out->predicted_step))
                continue;
            *found = 1;
            out->cfg = pr.cfg;
            out->predicted_step = pr.step_time;
        }
    }
    return PP_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

pp_status pp_tune_validate(unsigned without, pp_tune_validation *out)
{
    memset(out, 0, sizeof *out);
    double errs[PP_TUNE_VALIDATE_MAX];
    for (int i = 0; i < N_ROWS && i < PP_TUNE_VALIDATE_MAX; i++) {
        const pp_tune_published *r = &rows[i];
        pp_tune_model m;
        pp_tune_hw hw;
        PP_TRY(row_model(r, &m));
        PP_TRY(pp_tune_hw_preset(r->cluster, r->gpus / 8, &hw));
        pp_tune_opts o;
        pp_tune_opts_default(&o);
        o.flash_attention = 0; /* 2021: no flash attention, no sequence parallelism, no
                                  distributed optimizer (best_config: full recompute) */
        o.grad_accum = PP_TUNE_GRAD_ACCUM_AUTOGRAD16; /* and no gradient-accumulation fusion */
        o.without = without;
        pp_tune_check *c = &out->rows[out->n];
        c->row = r;
        c->published_step = pp_tune_published_step(r);
        int found;
        PP_TRY(best_config(&m, &hw, &o, r, c, &found));
        if (!found)
            return PP_ERR(PP_ERR_INVALID,
                          "validate: no layout of row %s (t.p = %d, %d GPUs) fits in memory",
                          r->name, r->model_parallel, r->gpus);
        c->error = c->predicted_step / c->published_step - 1.0;
        errs[out->n++] = fabs(c->error);
        if (fabs(c->error) > out->max_abs)
            out->max_abs = fabs(c->error);
        if (i == 0)
            snprintf(out->hw_note, sizeof out->hw_note, "%s", hw.note);
    }
    qsort(errs, (size_t)out->n, sizeof errs[0], cmp_double);
    out->median_abs = out->n % 2 ? errs[out->n / 2]
                                 : 0.5 * (errs[out->n / 2 - 1] + errs[out->n / 2]);
    return PP_OK;
}
