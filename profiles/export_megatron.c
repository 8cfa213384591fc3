/* export_megatron.c — the chosen configuration as a Megatron-LM launch script: the environment
 * Megatron's validate_args demands, torchrun over the profile's nodes, and pretrain_gpt.py's
 * flags (layout, batch, the whole model, precision and memory options) on one line, the
 * user's own flags (data, tokenizer, optimizer) appended from the script's arguments.
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
 * the mixture-of-experts flags (megatron_moe: --num-experts, --moe-router-topk,
 * --moe-ffn-hidden-size, --moe-shared-expert-intermediate-size, --moe-layer-freq,
 * --moe-router-*, --moe-aux-loss-coeff, --moe-token-dispatcher-type alltoall,
 * --moe-grouped-gemm, --expert-model-parallel-size) and --qk-layernorm;
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
 * its virtual stages), so a split they cannot say (pptune's uneven or first/last split of an
 * interleaved schedule, an even split that does not divide: pp_export_megatron_split_says) is
 * said with --pipeline-model-parallel-layout instead: every virtual stage in data-flow order, E the
 * embedding, t*n its transformer layers, L the loss (Megatron-Core's PipelineParallelLayerLayout;
 * it derives the virtual pipeline size from the stage count). */
static pp_status megatron_layout(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    int layers[PP_EXPORT_MAX_STAGES], S;
    PP_TRY(pp_export_stage_layers(p, layers, &S));
    fprintf(fp, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", c->t, c->p);
    if (!pp_export_megatron_split_says(p)) {
        size_t n = (size_t)S * 16 + 8;
        char *layout = malloc(n);
        if (!layout)
            return PP_ERR(PP_ERR_NOMEM, "%s: no memory for the layout", p->name);
        pp_status st = pp_export_layout(p, layout, n);
        if (st == PP_OK) /* quoted: | and * are the shell's */
            fprintf(fp, " --pipeline-model-parallel-layout '%s'", layout);
        free(layout);
        PP_TRY(st);
    } else if (pp_export_virtual(c)) {
        fprintf(fp, " --num-layers-per-virtual-pipeline-stage %d", layers[0]);
    } else if (!pp_export_split_even(c)) {
        fprintf(fp, " --decoder-first-pipeline-num-layers %d --decoder-last-pipeline-num-layers %d",
                layers[0], layers[S - 1]);
    }
    if (pp_export_virtual(c))
        fprintf(fp, " --microbatch-group-size-per-virtual-pipeline-stage %d", c->G);
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
    if ((long long)m->head_dim * m->heads != m->hidden) /* 64-bit: two profile fields */
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
    if (m->norm_eps > 0) { /* else the profile did not record it: Megatron's default */
        char eps[40];
        fprintf(fp, " --norm-epsilon %s", pp_export_float(m->norm_eps, eps, sizeof eps));
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

/* The mixture-of-experts flags (Megatron-Core's TransformerConfig fields, parsed through
 * arguments.py's ArgumentGroupFactory): the experts, top-k, expert and shared-expert widths,
 * the layer pattern, the router (Megatron's default softmax is taken over the top-k logits,
 * which equals a softmax over all experts renormalised over the top k: Mixtral's and Qwen3's
 * norm_topk_prob; without the renormalisation the softmax comes first,
 * --moe-router-pre-softmax; moe_utils.topk_softmax_with_capacity), the auxiliary loss, the
 * alltoall dispatcher and grouped GEMMs pptune's time model assumes, and ep. */
static pp_status megatron_moe(const pp_profile *p, FILE *fp)
{
    const struct pp_profile_model *m = &p->model;
    const pp_config *c = &p->chosen.config;
    if (m->qk_norm)
        fprintf(fp, " --qk-layernorm");
    if (m->moe.experts <= 0)
        return PP_OK;
    const char *score;
    int pre, list;
    PP_TRY(pp_export_moe_router(p, "Megatron-LM", &score, &pre));
    fprintf(fp, " --num-experts %d --moe-router-topk %d --moe-ffn-hidden-size %d",
            m->moe.experts, m->moe.top_k, m->moe.ffn);
    if (m->moe.shared_ffn > 0)
        fprintf(fp, " --moe-shared-expert-intermediate-size %d", m->moe.shared_ffn);
    char freq[4096];
    pp_export_moe_layer_freq(p, freq, sizeof freq, &list);
    fprintf(fp, list ? " --moe-layer-freq '%s'" : " --moe-layer-freq %s", freq); /* ( [ * are
                                                                                    the shell's */
    if (strcmp(score, "softmax") != 0)
        fprintf(fp, " --moe-router-score-function %s", score);
    if (pre)
        fprintf(fp, " --moe-router-pre-softmax");
    char coef[40];
    fprintf(fp, " --moe-router-load-balancing-type %s --moe-aux-loss-coeff %s",
            m->moe.aux_coef > 0 ? "aux_loss" : "none",
            pp_export_float(m->moe.aux_coef, coef, sizeof coef));
    fprintf(fp, " --moe-token-dispatcher-type alltoall --moe-grouped-gemm");
    if (c->ep > 1)
        fprintf(fp, " --expert-model-parallel-size %d", c->ep);
    return PP_OK;
}

/* pretrain_gpt.py's flags on one line. Upstream Megatron-LM and the BitPipe fork: the rows in
 * export.c let only the schedules each runs reach here, so a fork-only schedule adds the fork's
 * flag. */
static pp_status megatron_flags(const pp_profile *p, FILE *out)
{
    const pp_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
    pp_status st = megatron_layout(p, out);
    fprintf(out, " --micro-batch-size %d --global-batch-size %d", c->b, p->global_batch);
    if (st == PP_OK)
        st = megatron_model(p, out);
    if (st == PP_OK)
        st = megatron_moe(p, out);
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
    return st;
}

/* validate_args (megatron/training/arguments.py) stops a run with tensor (or context)
 * parallelism on GPUs before Blackwell unless CUDA_DEVICE_MAX_CONNECTIONS is 1: one hardware
 * queue per device keeps the tensor-parallel communication kernels in launch order, which the
 * overlap of communication with compute relies on (Blackwell and later: not needed, and
 * harmless). */
static int megatron_one_connection(const pp_config *c)
{
    return c->t > 1 || c->cp > 1; /* validate_args: "tensor model parallelism or context parallelism" */
}

/* The script: a header saying how to run it, the environment, and torchrun with the flags. The
 * rendezvous comes from the environment torchrun users set on each node (NODE_RANK,
 * MASTER_ADDR, MASTER_PORT), so the same script runs on every node. */
static void megatron_script(const pp_profile *p, const char *flags, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    int devices, nodes;
    pp_export_nodes(p, &devices, &nodes);
    fprintf(fp, "#!/usr/bin/env bash\n");
    fprintf(fp, "# Megatron-LM launch from pptune profile ");
    pp_export_provenance(p, fp);
    fprintf(fp, "# Run it on each of the %d node(s) from a Megatron-LM checkout, with your data, "
                "tokenizer and optimizer flags after it:\n"
                "#   NODE_RANK=<0..%d> MASTER_ADDR=<node 0's address> bash THIS_FILE "
                "--data-path ... --tokenizer-type ... --lr ...\n",
            nodes, nodes - 1);
    fprintf(fp, "set -euo pipefail\n");
    if (megatron_one_connection(c))
        fprintf(fp, "# validate_args: tensor and context parallelism need it on GPUs before Blackwell\n"
                    "export CUDA_DEVICE_MAX_CONNECTIONS=1\n");
    fprintf(fp, "exec torchrun --nnodes %d --nproc-per-node %d --node-rank \"${NODE_RANK:-0}\" "
                "\\\n  --master-addr \"${MASTER_ADDR:-localhost}\" "
                "--master-port \"${MASTER_PORT:-6000}\" \\\n",
            nodes, devices);
    fprintf(fp, "  pretrain_gpt.py \\\n  %s \\\n  \"$@\"\n", flags);
}

pp_status pp_export_megatron(const pp_profile *p, FILE *fp)
{
    /* built in memory and written only when every part could be said */
    char *line = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&line, &len);
    if (!out)
        return PP_ERR(PP_ERR_NOMEM, "could not build the Megatron-LM flags");
    pp_status st = megatron_flags(p, out);
    fclose(out);
    if (st == PP_OK)
        megatron_script(p, line[0] == ' ' ? line + 1 : line, fp);
    free(line);
    return st;
}
