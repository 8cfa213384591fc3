/* export_nemo2.c — the chosen configuration and the whole model for NeMo 2.0 (--format nemo2),
 * what NeMo's documentation now points to: Python for nemo.collections.llm — a GPTConfig
 * (Megatron-Core TransformerConfig field names), a nemo.lightning.MegatronStrategy with the
 * layout (the micro-batch group, the first/last stage counts, and where those cannot say the
 * split, Megatron-Core's pipeline_model_parallel_layout, which MegatronStrategy passes on) and
 * the trainer. The vocabulary is padded here as Megatron pads it (to a multiple of
 * make_vocab_size_divisible_by x t): GPTConfig.configure_model takes a given vocab_size as it
 * is, and the vocabulary-parallel embedding needs a multiple of t. Names are checked against
 * tests/fixtures/nemo/keys.txt, recorded from NeMo's source.
 *
 * Not here: data, tokenizer and optimizer hyper-parameters (the user's); the schedules NeMo
 * runs (Megatron-Core's) are its row's in export.c.
 */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

static const char *py(int b)
{
    return b ? "True" : "False";
}

static pp_status nemo2_model(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    const struct pp_profile_model *m = &p->model;
    fprintf(fp, "model_config = llm.GPTConfig(\n");
    fprintf(fp, "    num_layers=%d,\n    hidden_size=%d,\n    ffn_hidden_size=%d,\n", m->layers,
            m->hidden, m->ffn);
    fprintf(fp, "    num_attention_heads=%d,\n    num_query_groups=%d,\n    kv_channels=%d,\n",
            m->heads, m->kv_heads, m->head_dim);
    fprintf(fp, "    seq_length=%d,\n", m->seq);
    fprintf(fp, "    normalization=\"%s\",\n", m->norm_bias ? "LayerNorm" : "RMSNorm");
    fprintf(fp, "    gated_linear_unit=%s,\n    activation_func=%s,\n", py(m->gated_mlp),
            m->gated_mlp ? "F.silu" : "F.gelu");
    fprintf(fp, "    add_bias_linear=%s,\n    add_qkv_bias=%s,\n", py(m->linear_bias),
            py(m->linear_bias || m->qkv_bias));
    fprintf(fp, "    position_embedding_type=\"%s\",\n", m->learned_pos ? "learned_absolute" : "rope");
    if (!m->learned_pos)
        fprintf(fp, "    rotary_base=%.0f,\n", m->rope_theta);
    fprintf(fp, "    share_embeddings_and_output_weights=%s,\n", py(m->tied_embeddings));
    /* padded as Megatron pads with --make-vocab-size-divisible-by 1 (its vocab_size_with_padding):
     * a multiple of 1 x t */
    long padded = ((long)m->vocab + c->t - 1) / c->t * c->t;
    fprintf(fp, "    vocab_size=%ld,  # pptune's %d padded to a multiple of t = %d, as Megatron "
                "pads\n    make_vocab_size_divisible_by=1,\n",
            padded, m->vocab, c->t);
    if (m->norm_eps > 0) { /* else not recorded: GPTConfig's default */
        char eps[40];
        fprintf(fp, "    layernorm_epsilon=%s,\n", pp_export_float(m->norm_eps, eps, sizeof eps));
    }
    if (m->qk_norm)
        fprintf(fp, "    qk_layernorm=True,\n");
    if (m->moe.experts > 0) { /* TransformerConfig's MoE fields, as the Megatron-LM export */
        const char *score;
        int pre, list;
        PP_TRY(pp_export_moe_router(p, "NeMo 2", &score, &pre));
        char freq[4096], coef[40];
        pp_export_moe_layer_freq(p, freq, sizeof freq, &list);
        fprintf(fp, "    num_moe_experts=%d,\n    moe_router_topk=%d,\n    moe_ffn_hidden_size=%d,\n",
                m->moe.experts, m->moe.top_k, m->moe.ffn);
        if (m->moe.shared_ffn > 0)
            fprintf(fp, "    moe_shared_expert_intermediate_size=%d,\n", m->moe.shared_ffn);
        fprintf(fp, "    moe_layer_freq=%s,\n    moe_router_score_function=\"%s\",\n"
                    "    moe_router_pre_softmax=%s,\n",
                freq, score, py(pre));
        fprintf(fp, "    moe_router_load_balancing_type=\"%s\",\n    moe_aux_loss_coeff=%s,\n"
                    "    moe_token_dispatcher_type=\"alltoall\",\n    moe_grouped_gemm=True,\n",
                m->moe.aux_coef > 0 ? "aux_loss" : "none",
                pp_export_float(m->moe.aux_coef, coef, sizeof coef));
    }
    fprintf(fp, "    bf16=%s,\n", py(p->options.bf16));
    if (c->recompute != PP_RECOMPUTE_NONE)
        fprintf(fp, "    recompute_granularity=\"%s\",\n", pp_recompute_name(c->recompute));
    if (c->recompute == PP_RECOMPUTE_FULL) {
        const char *method;
        int k;
        pp_export_recompute_method(c, &method, &k);
        fprintf(fp, "    recompute_method=\"%s\",\n    recompute_num_layers=%d,\n", method, k);
    }
    fprintf(fp, ")\n");
    if (m->rope_scaling) {
        fprintf(fp, "# rope scaling ");
        pp_fput_quoted(fp, m->rope_scaling);
        fprintf(fp, ": GPTConfig has none; Llama 3.1's is "
                    "nemo.collections.llm.gpt.model.llama.Llama31Config (scale_factor; llm "
                    "exports its sized forms, llm.Llama31Config8B / 70B / 405B), which takes the "
                    "same fields\n");
    }
    return PP_OK;
}

static pp_status nemo2_strategy(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    fprintf(fp, "strategy = nl.MegatronStrategy(\n");
    fprintf(fp, "    tensor_model_parallel_size=%d,\n    pipeline_model_parallel_size=%d,\n", c->t,
            c->p);
    if (pp_export_virtual(c))
        fprintf(fp, "    virtual_pipeline_model_parallel_size=%d,\n"
                    "    microbatch_group_size_per_vp_stage=%d,\n",
                c->v, c->G);
    else
        fprintf(fp, "    virtual_pipeline_model_parallel_size=None,\n");
    if (!pp_export_megatron_split_says(p)) {
        /* GPTConfig.configure_model's chunk-count assert is skipped for a layout */
        int layers[PP_EXPORT_MAX_STAGES], S;
        PP_TRY(pp_export_stage_layers(p, layers, &S));
        size_t n = (size_t)S * 16 + 8;
        char *layout = malloc(n);
        if (!layout)
            return PP_ERR(PP_ERR_NOMEM, "%s: no memory for the layout", p->name);
        pp_status st = pp_export_layout(p, layout, n);
        if (st == PP_OK)
            fprintf(fp, "    pipeline_model_parallel_layout=\"%s\",\n", layout);
        free(layout);
        PP_TRY(st);
    } else if (!pp_export_split_even(c)) {
        int first, last;
        PP_TRY(pp_export_edge_layers(p, &first, &last));
        fprintf(fp, "    num_layers_in_first_pipeline_stage=%d,\n"
                    "    num_layers_in_last_pipeline_stage=%d,\n",
                first, last);
    }
    fprintf(fp, "    sequence_parallel=%s,\n", py(c->sequence_parallel && c->t > 1));
    if (c->cp > 1)
        fprintf(fp, "    context_parallel_size=%d,\n", c->cp);
    if (c->ep > 1)
        fprintf(fp, "    expert_model_parallel_size=%d,\n", c->ep);
    if (c->p > 1)
        fprintf(fp, "    pipeline_dtype=%s,\n", p->options.bf16 ? "torch.bfloat16" : "torch.float32");
    fprintf(fp, ")\n");
    return PP_OK;
}

pp_status pp_export_nemo2(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    PP_TRY(pp_export_no_zero2(p, "NeMo 2's MegatronStrategy (the keys of "
                                 "tests/fixtures/nemo/keys.txt)"));
    int devices, nodes;
    pp_export_nodes(p, &devices, &nodes);
    /* built in memory: nothing is printed when a part cannot be said */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return PP_ERR(PP_ERR_NOMEM, "could not build the NeMo 2.0 configuration");
    fprintf(out, "# NeMo 2.0 (nemo.collections.llm) from pptune profile ");
    pp_export_provenance(p, out);
    fprintf(out, "import torch\nimport torch.nn.functional as F\nfrom megatron.core.optimizer "
                 "import OptimizerConfig\nfrom nemo import lightning as nl\nfrom "
                 "nemo.collections import llm\n\n");
    pp_status st = nemo2_model(p, out);
    if (st == PP_OK)
        st = nemo2_strategy(p, out);
    fprintf(out, "trainer = nl.Trainer(\n    num_nodes=%d,\n    devices=%d,\n    strategy=strategy,\n",
            nodes, devices);
    if (p->options.bf16)
        fprintf(out, "    plugins=nl.MegatronMixedPrecision(precision=\"bf16-mixed\"),\n");
    fprintf(out, ")\n");
    fprintf(out, "data = llm.PreTrainingDataModule(paths=..., seq_length=%d, micro_batch_size=%d, "
                 "global_batch_size=%d, tokenizer=...)  # your data and tokenizer\n",
            p->model.seq, c->b, p->global_batch);
    fprintf(out, "optim = nl.MegatronOptimizerModule(config=OptimizerConfig(optimizer=\"adam\", "
                 "bf16=%s, use_distributed_optimizer=%s))  # lr etc.: yours\n",
            py(p->options.bf16), py(c->shard == PP_SHARD_OPTIMIZER));
    fprintf(out, "# llm.pretrain(model=llm.GPTModel(model_config), data=data, trainer=trainer, "
                 "optim=optim)\n");
    fclose(out);
    if (st == PP_OK)
        fputs(text, fp);
    free(text);
    return st;
}
