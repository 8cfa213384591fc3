/* export_megatron.c — the chosen configuration as Megatron-LM's command-line flags.
 *
 * Flag names as in megatron/training/arguments.py (2025):
 * --tensor-model-parallel-size, --pipeline-model-parallel-size,
 * --num-layers-per-virtual-pipeline-stage, --microbatch-group-size-per-virtual-pipeline-stage
 * (dest microbatch_group_size_per_vp_stage), --micro-batch-size, --global-batch-size,
 * --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split (the Llama 3
 * split: embedding and loss each count as a layer, so the first and last stage hold one layer
 * fewer), --sequence-parallel, --use-distributed-optimizer (shard "optimizer"),
 * --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads (shard "gradients":
 * Megatron-FSDP's ZeRO-2, parameters not sharded), --context-parallel-size,
 * --recompute-granularity / --recompute-method (uniform, or block for the first k layers of
 * each stage) / --recompute-num-layers; and
 * --enable-bitpipe-schedule of the BitPipe fork (github.com/wuhouming/BitPipe, Megatron 23.08).
 * Which schedules it runs is its rows' answer in export.c (the registry's megatron field).
 *
 * What Megatron-LM cannot express is refused with the reason rather than approximated, with one
 * deliberate exception: a GPipe profile exports to Megatron's 1F1B schedule, which has the same
 * step time (same bubble, Narayanan et al. 2021) and holds fewer activations, so it fits
 * wherever the GPipe configuration fitted.
 */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

static void megatron_recompute(const pp_config *c, FILE *fp)
{
    if (c->recompute == PP_RECOMPUTE_SELECTIVE)
        fprintf(fp, " --recompute-granularity selective");
    else if (c->recompute == PP_RECOMPUTE_FULL) {
        /* pptune's full recomputation keeps one layer's input per recomputed layer
         * (Korthikanti 2022): uniform with one layer per checkpoint, or block k */
        const char *method;
        int k;
        pp_export_recompute_method(c, &method, &k);
        fprintf(fp, " --recompute-granularity full --recompute-method %s "
                    "--recompute-num-layers %d",
                method, k);
    }
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
    const pp_config *c = &p->chosen.config;
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

/* Upstream Megatron-LM and the BitPipe fork: the rows in export.c let only the schedules each
 * runs reach here, so a fork-only schedule adds the fork's flag. */
pp_status pp_export_megatron(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
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
    if (c->sequence_parallel && c->t > 1)
        fprintf(out, " --sequence-parallel");
    if (c->shard == PP_SHARD_OPTIMIZER)
        fprintf(out, " --use-distributed-optimizer");
    else if (c->shard == PP_SHARD_GRADIENTS)
        fprintf(out, " --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads");
    if (c->cp > 1)
        fprintf(out, " --context-parallel-size %d", c->cp);
    megatron_recompute(c, out);
    if (d->megatron == PP_SCHED_MEGATRON_FORK)
        fprintf(out, " %s", d->megatron_flag);
    fclose(out);
    if (st == PP_OK)
        fprintf(fp, "%s\n", line);
    free(line);
    return st;
}

