/* export_nemo.c — the chosen configuration and the whole model for NeMo.
 *
 * NeMo 1 (--format nemo): overrides of examples/nlp/language_modeling/conf/megatron_gpt_config
 * .yaml (trainer.*, model.*), key names as that file and NeMo's megatron_gpt_model.py read them.
 * NeMo 2.0 (--format nemo2), what NeMo's documentation now points to: Python for
 * nemo.collections.llm — a GPTConfig (Megatron-Core TransformerConfig field names), a
 * nemo.lightning.MegatronStrategy with the layout (including the micro-batch group and the
 * uneven first/last stage that NeMo 1's YAML cannot say) and the trainer. Names are checked
 * against tests/fixtures/nemo/keys.txt, recorded from NeMo's source.
 *
 * Not here: data, tokenizer and optimizer hyper-parameters (the user's); schedules only a fork
 * of Megatron runs, or none does, are refused with the reason.
 */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

static pp_status nemo_schedule(const pp_profile *p)
{
    const pp_profile_config *c = &p->chosen.config;
    const pp_sched_desc *d = pp_export_desc(c);
    char names[128], hint[320];
    if (d->megatron == PP_SCHED_MEGATRON_UPSTREAM)
        return PP_OK;
    return PP_ERR(PP_ERR_UNSUPPORTED,
                  "%s: NeMo runs Megatron-Core's schedules, which have no %s schedule%s; %sre-run "
                  "the search with --schedules %s",
                  p->name, d->title,
                  pp_export_runner_up_hint(p, PP_SCHED_MEGATRON_UPSTREAM, hint, sizeof hint),
                  d->megatron == PP_SCHED_MEGATRON_FORK ? "use --format megatron --target "
                                                          "bitpipe-fork for its fork, or "
                                                        : "",
                  pp_sched_names(PP_SCHED_MEGATRON_UPSTREAM, ",", names, sizeof names));
}

static const char *yes(int b)
{
    return b ? "true" : "false";
}

static void nemo1_model(const pp_profile *p, FILE *fp)
{
    const struct pp_profile_model *m = &p->model;
    fprintf(fp, "  encoder_seq_length: %d\n  max_position_embeddings: %d\n", m->seq, m->seq);
    fprintf(fp, "  num_layers: %d\n  hidden_size: %d\n  ffn_hidden_size: %d\n", m->layers,
            m->hidden, m->ffn);
    fprintf(fp, "  num_attention_heads: %d\n", m->heads);
    if (m->kv_heads != m->heads)
        fprintf(fp, "  num_query_groups: %d\n", m->kv_heads);
    else
        fprintf(fp, "  num_query_groups: null\n");
    fprintf(fp, "  kv_channels: %d\n", m->head_dim);
    fprintf(fp, "  normalization: %s\n", m->norm_bias ? "layernorm" : "rmsnorm");
    fprintf(fp, "  activation: %s\n", m->gated_mlp ? "fast-swiglu" : "gelu");
    fprintf(fp, "  bias: %s\n", yes(m->linear_bias));
    if (m->qkv_bias)
        fprintf(fp, "  qkv_bias: true\n");
    fprintf(fp, "  position_embedding_type: %s\n", m->learned_pos ? "learned_absolute" : "rope");
    if (!m->learned_pos)
        fprintf(fp, "  rotary_base: %.0f\n", m->rope_theta);
    if (m->rope_scaling && !strcmp(m->rope_scaling, "llama3"))
        fprintf(fp, "  scale_positional_embedding: true # Llama 3.1 rope scaling\n");
    else if (m->rope_scaling)
        fprintf(fp, "  # rope scaling \"%s\": megatron_gpt_config has no key for it\n",
                m->rope_scaling);
    fprintf(fp, "  share_embeddings_and_output_weights: %s\n", yes(m->tied_embeddings));
    fprintf(fp, "  make_vocab_size_divisible_by: 1 # the tokenizer's vocabulary: pptune counted %d\n",
            m->vocab);
}

pp_status pp_export_nemo(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    PP_TRY(nemo_schedule(p));
    PP_TRY(pp_export_need_shape(p, "a NeMo model configuration"));
    int devices, nodes;
    pp_export_nodes(p, &devices, &nodes);
    fprintf(fp, "# NeMo megatron_gpt_config.yaml overrides from pptune profile %s\n", p->name);
    fprintf(fp, "# cluster %s x%d (%s), model %s, %s schedule\n", p->cluster.name, p->cluster.nodes,
            p->cluster.fingerprint, p->model.name, c->schedule);
    fprintf(fp, "trainer:\n  devices: %d\n  num_nodes: %d\n  precision: %s\n", devices, nodes,
            p->options.bf16 ? "bf16" : "32");
    fprintf(fp, "model:\n  mcore_gpt: true\n");
    fprintf(fp, "  micro_batch_size: %d\n  global_batch_size: %d\n", c->b, p->global_batch);
    fprintf(fp, "  tensor_model_parallel_size: %d\n  pipeline_model_parallel_size: %d\n", c->t,
            c->p);
    if (pp_export_virtual(c))
        fprintf(fp, "  virtual_pipeline_model_parallel_size: %d\n", c->v);
    else
        fprintf(fp, "  virtual_pipeline_model_parallel_size: null\n");
    if (pp_export_virtual(c) && c->G != c->p)
        fprintf(fp,
                "  # micro-batch group %d: megatron_gpt_config has no key for it (Megatron-Core "
                "ModelParallelConfig.microbatch_group_size_per_vp_stage); without it NeMo "
                "uses %d; --format nemo2 says it\n",
                c->G, c->p);
    nemo1_model(p, fp);
    fprintf(fp, "  megatron_amp_O2: %s\n", yes(p->options.bf16));
    fprintf(fp, "  sequence_parallel: %s\n", yes(p->options.sequence_parallel && c->t > 1));
    if (!strcmp(p->options.recompute, "none"))
        fprintf(fp, "  activations_checkpoint_granularity: null\n");
    else if (!strcmp(p->options.recompute, "selective"))
        fprintf(fp, "  activations_checkpoint_granularity: selective\n");
    else
        fprintf(fp, "  activations_checkpoint_granularity: full\n"
                    "  activations_checkpoint_method: uniform\n"
                    "  activations_checkpoint_num_layers: 1\n");
    if (!pp_export_split_even(c)) {
        int first, last;
        PP_TRY(pp_export_edge_layers(p, &first, &last));
        fprintf(fp,
                "  # uneven split: first stage %d layers, last %d; megatron_gpt_config has no key "
                "for it; --format nemo2 says it\n",
                first, last);
    }
    if (p->options.distributed_optimizer)
        fprintf(fp, "  optim:\n    name: distributed_fused_adam\n");
    return PP_OK;
}

static const char *py(int b)
{
    return b ? "True" : "False";
}

static void nemo2_model(const pp_profile *p, FILE *fp)
{
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
    fprintf(fp, "    vocab_size=%d,\n    make_vocab_size_divisible_by=1,\n", m->vocab);
    fprintf(fp, "    bf16=%s,\n", py(p->options.bf16));
    if (strcmp(p->options.recompute, "none") != 0)
        fprintf(fp, "    recompute_granularity=\"%s\",\n", p->options.recompute);
    if (!strcmp(p->options.recompute, "full"))
        fprintf(fp, "    recompute_method=\"uniform\",\n    recompute_num_layers=1,\n");
    fprintf(fp, ")\n");
    if (m->rope_scaling)
        fprintf(fp, "# rope scaling \"%s\": GPTConfig has none; Llama 3.1's is llm.Llama31Config "
                    "(scale_factor), which takes the same fields\n",
                m->rope_scaling);
}

static pp_status nemo2_strategy(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    fprintf(fp, "strategy = nl.MegatronStrategy(\n");
    fprintf(fp, "    tensor_model_parallel_size=%d,\n    pipeline_model_parallel_size=%d,\n", c->t,
            c->p);
    if (pp_export_virtual(c))
        fprintf(fp, "    virtual_pipeline_model_parallel_size=%d,\n"
                    "    microbatch_group_size_per_vp_stage=%d,\n",
                c->v, c->G);
    else
        fprintf(fp, "    virtual_pipeline_model_parallel_size=None,\n");
    if (!pp_export_split_even(c) && pp_export_virtual(c)) {
        /* Megatron-Core's first/last counts are a pipeline rank's layers, split evenly over
         * its virtual stages: a split of virtual stages is not theirs to say */
        int first, last;
        PP_TRY(pp_export_edge_layers(p, &first, &last));
        fprintf(fp, "    # split of virtual stages (first %d layers, last %d): "
                    "num_layers_in_first/last_pipeline_stage count a pipeline rank's layers, so "
                    "they cannot say it; Megatron-LM's --pipeline-model-parallel-layout can "
                    "(pptune export --format megatron)\n",
                first, last);
    } else if (!pp_export_split_even(c)) {
        int first, last;
        PP_TRY(pp_export_edge_layers(p, &first, &last));
        fprintf(fp, "    num_layers_in_first_pipeline_stage=%d,\n"
                    "    num_layers_in_last_pipeline_stage=%d,\n",
                first, last);
    }
    fprintf(fp, "    sequence_parallel=%s,\n", py(p->options.sequence_parallel && c->t > 1));
    if (c->p > 1)
        fprintf(fp, "    pipeline_dtype=%s,\n", p->options.bf16 ? "torch.bfloat16" : "torch.float32");
    fprintf(fp, ")\n");
    return PP_OK;
}

pp_status pp_export_nemo2(const pp_profile *p, FILE *fp)
{
    const pp_profile_config *c = &p->chosen.config;
    PP_TRY(nemo_schedule(p));
    PP_TRY(pp_export_need_shape(p, "a NeMo 2.0 model configuration"));
    int devices, nodes;
    pp_export_nodes(p, &devices, &nodes);
    /* built in memory: nothing is printed when a part cannot be said */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out)
        return PP_ERR(PP_ERR_NOMEM, "could not build the NeMo 2.0 configuration");
    fprintf(out, "# NeMo 2.0 (nemo.collections.llm) from pptune profile %s\n", p->name);
    fprintf(out, "# cluster %s x%d (%s), model %s, %s schedule\n", p->cluster.name,
            p->cluster.nodes, p->cluster.fingerprint, p->model.name, c->schedule);
    fprintf(out, "import torch\nimport torch.nn.functional as F\nfrom megatron.core.optimizer "
                 "import OptimizerConfig\nfrom nemo import lightning as nl\nfrom "
                 "nemo.collections import llm\n\n");
    nemo2_model(p, out);
    pp_status st = nemo2_strategy(p, out);
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
            py(p->options.bf16), py(p->options.distributed_optimizer));
    fprintf(out, "# llm.pretrain(model=llm.GPTModel(model_config), data=data, trainer=trainer, "
                 "optim=optim)\n");
    fclose(out);
    if (st == PP_OK)
        fputs(text, fp);
    free(text);
    return st;
}
