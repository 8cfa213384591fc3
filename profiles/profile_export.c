/* profile_export.c — the chosen configuration as the launch options of a training framework.
 *
 * Megatron-LM: flag names as in megatron/training/arguments.py (2025):
 * --tensor-model-parallel-size, --pipeline-model-parallel-size,
 * --num-layers-per-virtual-pipeline-stage, --microbatch-group-size-per-virtual-pipeline-stage
 * (dest microbatch_group_size_per_vp_stage), --micro-batch-size, --global-batch-size,
 * --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split (the Llama 3
 * split: embedding and loss each count as a layer, so the first and last stage hold one layer
 * fewer), --sequence-parallel, --use-distributed-optimizer, --recompute-*; and
 * --enable-bitpipe-schedule of the BitPipe fork (github.com/wuhouming/BitPipe, Megatron 23.08).
 * NeMo (export_nemo.c), torchtitan (export_torchtitan.c). pprun: runtime/pprun's options.
 *
 * What a target cannot express is refused with the reason rather than approximated, with one
 * deliberate exception: a GPipe profile exports to Megatron's 1F1B schedule, which has the same
 * step time (same bubble, Narayanan et al. 2021) and holds fewer activations, so it fits
 * wherever the GPipe configuration fitted.
 */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

pp_status pp_profile_export_format_parse(const char *s, pp_profile_export_format *out)
{
    if (s && !strcmp(s, "megatron"))
        *out = PP_PROFILE_EXPORT_MEGATRON;
    else if (s && !strcmp(s, "nemo"))
        *out = PP_PROFILE_EXPORT_NEMO;
    else if (s && !strcmp(s, "nemo2"))
        *out = PP_PROFILE_EXPORT_NEMO2;
    else if (s && !strcmp(s, "torchtitan"))
        *out = PP_PROFILE_EXPORT_TORCHTITAN;
    else if (s && !strcmp(s, "pprun"))
        *out = PP_PROFILE_EXPORT_PPRUN;
    else
        return PP_ERR(PP_ERR_INVALID, "export format \"%s\": expected megatron, nemo, nemo2, torchtitan or pprun",
                      s ? s : "");
    return PP_OK;
}

const pp_sched_desc *pp_export_desc(const pp_profile_config *c)
{
    return pp_sched_lookup(c->schedule);
}

int pp_export_virtual(const pp_profile_config *c)
{
    return pp_export_desc(c)->chunks == 0 && c->v > 1;
}

void pp_export_nodes(const pp_profile *p, int *devices, int *nodes)
{
    const pp_profile_config *c = &p->chosen.config;
    long gpus = (long)c->p * c->t * c->d; /* the reader bounded it by the cluster's */
    int per_node = p->cluster.gpus_per_node;
    *devices = gpus < per_node ? (int)gpus : per_node;
    *nodes = (int)((gpus + *devices - 1) / *devices);
}

char *pp_export_runner_up_hint(const pp_profile *p, pp_sched_megatron at_most, char *buf,
                               size_t n)
{
    snprintf(buf, n, "%s", "");
    for (int i = 0; i < p->n_runners_up; i++) {
        const pp_profile_candidate *r = &p->runners_up[i];
        const pp_sched_desc *d = pp_export_desc(&r->config);
        if (!r->fits || d->megatron > at_most)
            continue;
        char text[160];
        double slower = p->chosen.step_time_s > 0
                            ? 100 * (r->step_time_s / p->chosen.step_time_s - 1)
                            : 0;
        snprintf(buf, n,
                 "; the profile's fastest configuration it runs is runner-up #%d, %s (predicted "
                 "%.4g s per step, %.1f %% slower: export it with --runner-up %d)",
                 i + 1, pp_profile_config_str(&r->config, text, sizeof text), r->step_time_s,
                 slower, i + 1);
        break;
    }
    return buf;
}

static void megatron_recompute(const pp_profile *p, FILE *fp)
{
    if (!strcmp(p->options.recompute, "selective"))
        fprintf(fp, " --recompute-granularity selective");
    else if (!strcmp(p->options.recompute, "full"))
        /* pptune's full recomputation model keeps one layer's input per layer (Korthikanti
         * 2022): Megatron's uniform method with one layer per checkpoint. */
        fprintf(fp, " --recompute-granularity full --recompute-method uniform "
                    "--recompute-num-layers 1");
}

pp_status pp_export_need_shape(const pp_profile *p, const char *target)
{
    if (p->model.has_shape)
        return PP_OK;
    return PP_ERR(PP_ERR_UNSUPPORTED,
                  "%s: profile version %d.%d does not record the model's norm, biases, "
                  "positions and head width (model.norm, model.linear_bias, model.position, "
                  "model.head_dim: profile 1.1), which %s needs to build the same model; "
                  "re-run the search with this pptune to write them",
                  p->name, p->version_major, p->version_minor, target);
}

int pp_export_split_even(const pp_profile_config *c)
{
    return !c->uneven && !c->first_layers && !c->last_layers;
}

pp_status pp_export_stage_layers(const pp_profile *p, int *layers, int *stages)
{
    const pp_profile_config *c = &p->chosen.config;
    /* one pipe: its p x v stages (interleaved, V-shaped); two pipes: p per pipe */
    int S = c->p * (pp_export_desc(c)->pipes == 1 ? c->v : 1);
    int begin[PP_EXPORT_MAX_STAGES + 1];
    if (S < 1 || S > PP_EXPORT_MAX_STAGES)
        return PP_ERR(PP_ERR_INVALID, "%s: %d pipeline stages: expected 1..%d", p->name, S,
                      PP_EXPORT_MAX_STAGES);
    pp_sched_split split = {.uneven = c->uneven, .first = c->first_layers, .last = c->last_layers};
    PP_TRY(pp_sched_split_layers(p->model.layers, S, &split, begin));
    for (int k = 0; k < S; k++)
        layers[k] = begin[k + 1] - begin[k];
    *stages = S;
    return PP_OK;
}

pp_status pp_export_edge_layers(const pp_profile *p, int *first, int *last)
{
    int layers[PP_EXPORT_MAX_STAGES];
    int S;
    PP_TRY(pp_export_stage_layers(p, layers, &S));
    *first = layers[0];
    *last = layers[S - 1];
    return PP_OK;
}

/* Megatron-LM's layout: TP, PP, virtual pipeline and its group, the split. Megatron's
 * --decoder-first/last-pipeline-num-layers count a pipeline *rank's* layers (split evenly over
 * its virtual stages), so a split of virtual stages (pptune's uneven or first/last split of an
 * interleaved schedule, or an even split that does not divide) is said with
 * --pipeline-model-parallel-layout instead: every virtual stage in data-flow order, E the
 * embedding, t*n its transformer layers, L the loss (Megatron-Core's PipelineParallelLayerLayout;
 * it derives the virtual pipeline size from the stage count). */
static pp_status megatron_layout(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    int layers[PP_EXPORT_MAX_STAGES], S;
    PP_TRY(pp_export_stage_layers(p, layers, &S));
    int even = pp_export_split_even(c) && p->model.layers % S == 0;
    fprintf(fp, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", c->t, c->p);
    if (pp_export_virtual(c)) {
        if (even) {
            fprintf(fp, " --num-layers-per-virtual-pipeline-stage %d", layers[0]);
        } else {
            /* quoted: | and * are the shell's */
            fprintf(fp, " --pipeline-model-parallel-layout 'E");
            for (int k = 0; k < S; k++)
                fprintf(fp, "%st*%d", k ? "|" : "", layers[k]);
            fprintf(fp, "L'");
        }
        fprintf(fp, " --microbatch-group-size-per-virtual-pipeline-stage %d", c->G);
    } else if (!pp_export_split_even(c)) {
        fprintf(fp, " --decoder-first-pipeline-num-layers %d --decoder-last-pipeline-num-layers %d",
                layers[0], layers[S - 1]);
    }
    return PP_OK;
}

/* Megatron-LM's model: sizes, attention, MLP, norm, positions, head, biases, vocabulary. */
static pp_status megatron_model(const pp_profile *p, FILE *fp)
{
    const struct pp_profile_model *m = &p->model;
    fprintf(fp,
            " --num-layers %d --hidden-size %d --num-attention-heads %d --ffn-hidden-size %d "
            "--seq-length %d --max-position-embeddings %d",
            m->layers, m->hidden, m->heads, m->ffn, m->seq, m->seq);
    if (m->kv_heads != m->heads)
        fprintf(fp, " --group-query-attention --num-query-groups %d", m->kv_heads);
    if (m->head_dim * m->heads != m->hidden)
        fprintf(fp, " --kv-channels %d", m->head_dim);
    if (m->gated_mlp)
        fprintf(fp, " --swiglu");
    fprintf(fp, " --normalization %s", m->norm_bias ? "LayerNorm" : "RMSNorm");
    if (m->learned_pos) {
        fprintf(fp, " --position-embedding-type learned_absolute");
    } else {
        if (m->rope_theta != (double)(long)m->rope_theta)
            return PP_ERR(PP_ERR_UNSUPPORTED,
                          "%s: rotary base %g: Megatron-LM's --rotary-base takes an integer",
                          p->name, m->rope_theta);
        fprintf(fp, " --position-embedding-type rope --rotary-base %ld", (long)m->rope_theta);
        if (m->rope_scaling && strcmp(m->rope_scaling, "llama3") != 0)
            return PP_ERR(PP_ERR_UNSUPPORTED,
                          "%s: rope scaling \"%s\": Megatron-LM's --use-rope-scaling is Llama "
                          "3.1's (rope_type llama3) only",
                          p->name, m->rope_scaling);
        if (m->rope_scaling)
            fprintf(fp, " --use-rope-scaling");
    }
    if (!m->tied_embeddings)
        fprintf(fp, " --untie-embeddings-and-output-weights");
    if (!m->linear_bias)
        fprintf(fp, " --disable-bias-linear%s", m->qkv_bias ? " --add-qkv-bias" : "");
    /* the vocabulary as pptune counted it; Megatron still pads it to a multiple of the
     * tensor-parallel size (the tokenizer and data flags are the user's) */
    fprintf(fp, " --vocab-size %d --make-vocab-size-divisible-by 1", m->vocab);
    return PP_OK;
}

static pp_status export_megatron(const pp_profile *p, int bitpipe_fork, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
    char names[128], hint[320];
    if (d->megatron == PP_SCHED_MEGATRON_NONE)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: Megatron-LM has no %s schedule (no upstream flag selects it)%s; re-run "
                      "the search with --schedules %s%s",
                      p->name, d->title,
                      pp_export_runner_up_hint(p, PP_SCHED_MEGATRON_UPSTREAM, hint, sizeof hint),
                      pp_sched_names(PP_SCHED_MEGATRON_FORK, ",", names, sizeof names),
                      d->torch_name ? ", or export it with --format torchtitan (PyTorch "
                                      "pipelining runs it)"
                                    : "");
    if (d->megatron == PP_SCHED_MEGATRON_FORK && !bitpipe_fork)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: upstream Megatron-LM has no %s schedule (only the fork switched on by "
                      "%s runs it)%s; export with --target bitpipe-fork for that fork, or re-run "
                      "the search with --schedules %s",
                      p->name, d->title, d->megatron_flag,
                      pp_export_runner_up_hint(p, PP_SCHED_MEGATRON_UPSTREAM, hint, sizeof hint),
                      pp_sched_names(PP_SCHED_MEGATRON_UPSTREAM, ",", names, sizeof names));
    if (d->megatron != PP_SCHED_MEGATRON_FORK && bitpipe_fork)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: --target bitpipe-fork is for a profile of a schedule only that fork "
                      "runs; this one (%s) runs on upstream Megatron-LM: drop --target",
                      p->name, c->schedule);
    PP_TRY(pp_export_need_shape(p, "a Megatron-LM command"));
    /* one line, so it is built in memory and written only when every part could be said */
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len);
    if (!out)
        return PP_ERR(PP_ERR_NOMEM, "could not build the Megatron-LM flags");
    pp_status st = megatron_layout(p, out);
    fprintf(out, " --micro-batch-size %d --global-batch-size %d", c->b, p->global_batch);
    if (st == PP_OK)
        st = megatron_model(p, out);
    if (p->options.bf16)
        fprintf(out, " --bf16");
    if (p->options.sequence_parallel && c->t > 1)
        fprintf(out, " --sequence-parallel");
    if (p->options.distributed_optimizer)
        fprintf(out, " --use-distributed-optimizer");
    megatron_recompute(p, out);
    if (d->megatron == PP_SCHED_MEGATRON_FORK)
        fprintf(out, " %s", d->megatron_flag);
    fclose(out);
    if (st == PP_OK)
        fprintf(fp, "%s\n", line);
    free(line);
    return st;
}

static pp_status export_pprun(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    /* backend and precision as the profile planned (a GPU cluster: CUDA, bf16 when tuned so) */
    pp_profile_pprun_line line = {
        .model = p->model.name, .config = c, .seq = p->model.seq, .cuda = p->cluster.gpu,
        .precision = p->cluster.gpu && p->options.bf16 ? PP_PREC_BF16 : PP_PREC_FP32,
        .sequence_parallel = p->options.sequence_parallel};
    char args[512];
    fprintf(fp, "%s\n", pp_profile_pprun_args(&line, args, sizeof args));
    return PP_OK;
}

pp_status pp_profile_export(const pp_profile *p, pp_profile_export_format fmt, FILE *fp)
{
    if (!p->has_chosen)
        return PP_ERR(PP_ERR_INVALID,
                      "%s has no chosen configuration (nothing fitted the "
                      "memory): nothing to export",
                      p->name);
    switch (fmt) {
    case PP_PROFILE_EXPORT_MEGATRON:
    case PP_PROFILE_EXPORT_MEGATRON_BITPIPE:
        PP_TRY(export_megatron(p, fmt == PP_PROFILE_EXPORT_MEGATRON_BITPIPE, fp));
        break;
    case PP_PROFILE_EXPORT_NEMO:
        PP_TRY(pp_export_nemo(p, fp));
        break;
    case PP_PROFILE_EXPORT_NEMO2:
        PP_TRY(pp_export_nemo2(p, fp));
        break;
    case PP_PROFILE_EXPORT_TORCHTITAN:
        PP_TRY(pp_export_torchtitan(p, fp));
        break;
    case PP_PROFILE_EXPORT_PPRUN:
        PP_TRY(export_pprun(p, fp));
        break;
    default:
        return PP_ERR(PP_ERR_INVALID, "unknown export format %d", (int)fmt);
    }
    return PP_OK;
}
