/* export_nemo.c — the chosen configuration and the whole model for NeMo 1 (--format nemo):
 * overrides of examples/nlp/language_modeling/conf/megatron_gpt_config.yaml (trainer.*,
 * model.*), key names as that file and NeMo's megatron_gpt_model.py read them (checked against
 * tests/fixtures/nemo/keys.txt, recorded from NeMo's source). NeMo 1 builds no virtual pipeline
 * (megatron_gpt_model.py's mcore_model_customize asserts virtual_pipeline_model_parallel_size is
 * None): its row in export.c refuses interleaved profiles with that reason. An uneven split goes
 * in as Megatron-Core's num_layers_in_first/last_pipeline_stage, which NeMo 1 passes to its
 * TransformerConfig; the rest must divide evenly over the middle stages (its
 * build_transformer_config checks it), which the schedules' split of one chunk per rank always
 * does (pp_sched_split_layers refuses any other).
 *
 * Not here: data, tokenizer and optimizer hyper-parameters (the user's); the schedules NeMo
 * runs (Megatron-Core's) are its row's in export.c.
 */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

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
    else if (m->rope_scaling) {
        fprintf(fp, "  # rope scaling ");
        pp_fput_quoted(fp, m->rope_scaling);
        fprintf(fp, ": megatron_gpt_config has no key for it\n");
    }
    if (m->norm_eps > 0) { /* else not recorded: NeMo's default */
        char eps[40];
        fprintf(fp, "  layernorm_epsilon: %s\n", pp_export_float(m->norm_eps, eps, sizeof eps));
    }
    fprintf(fp, "  share_embeddings_and_output_weights: %s\n", yes(m->tied_embeddings));
    fprintf(fp, "  make_vocab_size_divisible_by: 1 # the tokenizer's vocabulary: pptune counted %d\n",
            m->vocab);
}

pp_status pp_export_nemo(const pp_profile *p, FILE *fp)
{
    const pp_config *c = &p->chosen.config;
    PP_TRY(pp_export_no_zero2(p, "NeMo 1's megatron_gpt_config"));
    PP_TRY(pp_export_no_moe(p, "NeMo 1's megatron_gpt_config export",
                            "is not written for it (its YAML's MoE keys are not in pptune's "
                            "checked key set)"));
    int devices, nodes, first, last;
    pp_export_nodes(p, &devices, &nodes);
    PP_TRY(pp_export_edge_layers(p, &first, &last));
    fprintf(fp, "# NeMo megatron_gpt_config.yaml overrides from pptune profile ");
    pp_export_provenance(p, fp);
    fprintf(fp, "trainer:\n  devices: %d\n  num_nodes: %d\n  precision: %s\n", devices, nodes,
            p->options.bf16 ? "bf16" : "32");
    fprintf(fp, "model:\n  mcore_gpt: true\n");
    fprintf(fp, "  micro_batch_size: %d\n  global_batch_size: %d\n", c->b, p->global_batch);
    fprintf(fp, "  tensor_model_parallel_size: %d\n  pipeline_model_parallel_size: %d\n", c->t,
            c->p);
    /* an interleaved profile never reaches here (export.c: NeMo 1 runs no virtual pipeline) */
    fprintf(fp, "  virtual_pipeline_model_parallel_size: null\n");
    nemo1_model(p, fp);
    fprintf(fp, "  megatron_amp_O2: %s\n", yes(p->options.bf16));
    fprintf(fp, "  sequence_parallel: %s\n", yes(c->sequence_parallel && c->t > 1));
    if (c->recompute == PP_RECOMPUTE_NONE)
        fprintf(fp, "  activations_checkpoint_granularity: null\n");
    else if (c->recompute == PP_RECOMPUTE_SELECTIVE)
        fprintf(fp, "  activations_checkpoint_granularity: selective\n");
    else {
        const char *method;
        int k;
        pp_export_recompute_method(c, &method, &k);
        fprintf(fp, "  activations_checkpoint_granularity: full\n"
                    "  activations_checkpoint_method: %s\n"
                    "  activations_checkpoint_num_layers: %d\n",
                method, k);
    }
    if (c->cp > 1)
        fprintf(fp, "  context_parallel_size: %d\n", c->cp);
    if (!pp_export_split_even(c))
        fprintf(fp, "  num_layers_in_first_pipeline_stage: %d\n"
                    "  num_layers_in_last_pipeline_stage: %d\n",
                first, last);
    if (c->shard == PP_SHARD_OPTIMIZER)
        fprintf(fp, "  optim:\n    name: distributed_fused_adam\n");
    return PP_OK;
}
