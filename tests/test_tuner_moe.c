/* test_tuner_moe.c — mixture-of-experts in the tuner (issue 28): expert parallelism's rules,
 * each memory term of a MoE layer, the all-to-all's time and the overlap of DualPipeV's paired
 * F and B that hides it, what the search picks (ep > 1 where it wins, ep = 1 where replicating
 * the experts is cheaper, DualPipeV where the overlap decides), and the done-when searches of
 * Mixtral 8x7B and Qwen3-30B-A3B on 16 nodes through the program. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "axes.h"
#include "pp_tune.h"

/* Llama 3 8B's block with every MLP an 8-expert top-2 MoE of width ffn / 4 (a small
 * Mixtral-shaped model: 32 layers, h 4096). */
static pp_tune_model moe_model(void)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("llama3-8b", &m), PP_OK, "%s", pp_err_msg());
    m.block.moe = (pp_moe_cfg){.experts = 8, .top_k = 2, .ffn = m.ffn / 4, .norm_topk = 1,
                               .aux_coef = 0.01};
    snprintf(m.name, sizeof m.name, "moe-test");
    return m;
}

static pp_tune_hw cluster(int nodes)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", nodes, &hw), PP_OK, "%s", pp_err_msg());
    return hw;
}

static pp_tune_prediction predict(const pp_tune_model *m, const pp_tune_hw *hw,
                                  const pp_config *c, const pp_tune_opts *o,
                                  pp_tune_rank_mem *mem)
{
    pp_tune_prediction p;
    cr_assert_eq(pp_tune_predict(m, hw, c, o, &p, mem), PP_OK, "%s", pp_err_msg());
    return p;
}

Test(tuner_moe, rules_of_expert_parallelism)
{
    pp_tune_model m = moe_model(), dense;
    cr_assert_eq(pp_tune_model_preset("llama3-8b", &dense), PP_OK);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 4, .t = 1, .N = 8, .cp = 1,
                   .ep = 4};
    char why[200];
    cr_expect_null(pp_tune_axes_rule(&m, &c, why, sizeof why), "%s", why);
    cr_expect_not_null(pp_tune_axes_rule(&dense, &c, why, sizeof why), "ep on a dense model");
    cr_expect(strstr(why, "mixture-of-experts"), "%s", why);
    c.ep = 3, c.d = 6; /* 8 experts */
    cr_expect_not_null(pp_tune_axes_rule(&m, &c, why, sizeof why));
    cr_expect(strstr(why, "divide the 8 routed experts"), "%s", why);
    c.ep = 8, c.d = 4; /* d x cp = 4 */
    cr_expect_not_null(pp_tune_axes_rule(&m, &c, why, sizeof why));
    cr_expect(strstr(why, "d x cp"), "%s", why);
    c.cp = 2; /* d x cp = 8: expert ranks carved out of the context-parallel ones too */
    cr_expect_null(pp_tune_axes_rule(&m, &c, why, sizeof why), "%s", why);
    /* the profile's rule (the configuration type's row) says the same of d x cp */
    const pp_config_axis *a = pp_config_axis_find("ep");
    cr_assert_not_null(a);
    c.cp = 1;
    cr_expect_not_null(a->rule(&c));
    c.d = 8;
    cr_expect_null(a->rule(&c));
}

/* Each activation term of a MoE layer against its formula (memory.c): T tokens, k = top_k,
 * f the imbalance, bf16. */
Test(tuner_moe, each_activation_term_is_its_formula)
{
    pp_tune_model m = moe_model();
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    o.moe_imbalance = 1.5;
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 4, .t = 2, .N = 8, .cp = 2,
                   .ep = 4, .sequence_parallel = 1};
    pp_tune_moe_acts a;
    pp_tune_moe_acts_of(&m, &c, &o, &a);
    double T = m.seq / 2.0 * 2, h = m.hidden, k = 2, f = 1.5, fe = m.ffn / 4.0;
    cr_expect_float_eq(a.dispatch, f * k * T / 2 * h * 2, 1e-9);
    cr_expect_float_eq(a.experts, f * 3 * k * T * fe / 2 * 2, 1e-9); /* SwiGLU: gate, up, product */
    cr_expect_float_eq(a.combine, f * k * T / 2 * h * 2, 1e-9);
    cr_expect_float_eq(a.router, 2 * T / 2 * 8 * 4, 1e-9);
    cr_expect_float_eq(a.shared, 0, 1e-9);
    cr_expect_float_eq(a.a2a, 2 * f * k * T / 2 * h * 2, 1e-9);
    cr_expect_float_eq(a.total, a.dispatch + a.experts + a.combine + a.router, 1e-9);
    m.block.moe.shared = 1, m.block.moe.shared_ffn = 1024;
    pp_tune_moe_acts_of(&m, &c, &o, &a);
    cr_expect_float_eq(a.shared, 3 * T * 1024 / 2 * 2, 1e-9);
}

/* A rank's memory under ep: the routed experts' weights are experts/ep of them; their
 * gradients and Adam state under ZeRO-1 are sharded over d x cp / ep; the activations of a MoE
 * layer replace the dense MLP's with the experts' terms; the all-to-all buffers sit in comm. */
Test(tuner_moe, expert_weights_state_activations_and_buffers_per_rank)
{
    pp_tune_model m = moe_model();
    pp_tune_hw hw = cluster(4);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_params pc;
    pp_tune_model_params(&m, &pc);
    cr_assert_eq(pc.moe_layers, 32);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 16, .t = 1, .N = 8,
                   .cp = 1, .ep = 1, .shard = PP_SHARD_OPTIMIZER};
    pp_tune_rank_mem m1[2], m4[2];
    predict(&m, &hw, &c, &o, m1);
    c.ep = 4;
    predict(&m, &hw, &c, &o, m4);
    double routed = 16 * 8 * pc.expert; /* rank 0: 16 MoE layers x 8 experts */
    cr_expect_float_eq(m1[0].expert_params, routed, 1e-6);
    cr_expect_float_eq(m4[0].expert_params, routed / 4, 1e-6);
    cr_expect_float_eq(m1[0].weights - m4[0].weights, 2.0 * routed * 3 / 4, 1e-3 * routed);
    /* fp32 main gradients unsharded under ZeRO-1: 4 bytes per parameter held */
    cr_expect_float_eq(m1[0].grads - m4[0].grads, 4.0 * routed * 3 / 4, 1e-3 * routed);
    /* Adam's 12 bytes over the expert-data-parallel group: d / ep = 4 ranks, not 16 */
    double dense = m4[0].params - m4[0].expert_params;
    cr_expect_float_eq(m4[0].optim, dense * 12 / 16 + routed / 4 * 12 / 4, 1e-3 * routed);
    /* activations and buffers do not depend on ep (each rank routes its own tokens) */
    cr_expect_float_eq(m1[0].acts, m4[0].acts, 1e-6 * m1[0].acts);
    pp_tune_moe_acts a;
    pp_tune_moe_acts_of(&m, &c, &o, &a);
    pp_tune_model dense_m = m;
    dense_m.block.moe.experts = 0;
    pp_tune_rank_mem md[2];
    c.ep = 1;
    predict(&dense_m, &hw, &c, &o, md);
    cr_expect_float_eq(m1[0].comm - md[0].comm, a.a2a, 1e-6 * a.a2a);
    /* per layer: the MoE layer keeps the dense one's less the ffn-wide SwiGLU tensors (3 s b
     * ffn x 2 bytes), plus the experts' terms */
    double dl = pp_tune_act_bytes_per_layer(&dense_m, &c, &o);
    double mlp = 3.0 * m.seq * c.b * m.ffn * 2;
    double in_flight = m1[0].peak_units; /* micro-batches x 16 layers */
    cr_expect_float_eq(m1[0].acts - md[0].acts, in_flight * 16 * (a.total - mlp),
                       1e-6 * m1[0].acts, "dense layer %g", dl);
    /* the layer rule: the first 8 layers dense leave rank 0 with 8 MoE layers' experts */
    m.block.moe.first_dense = 8;
    predict(&m, &hw, &c, &o, m1);
    cr_expect_float_eq(m1[0].expert_params, routed / 2, 1e-6);
    cr_expect_float_eq(m1[1].expert_params, routed, 1e-6);
}

/* The all-to-all: 4 per MoE layer and micro-batch inside F and B; its bytes top_k tokens' hidden
 * states x (ep - 1) / ep x the imbalance; NVLink while t cp ep fit a node, the NIC beyond. */
Test(tuner_moe, all_to_all_time_and_where_it_runs)
{
    pp_tune_model m = moe_model();
    pp_tune_hw hw = cluster(4);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 1, .v = 1, .b = 1, .d = 32, .t = 1, .N = 8, .cp = 1,
                   .ep = 1};
    cr_expect_float_eq(pp_tune_moe_a2a_time(&m, &hw, &c, &o), 0, 1e-12, "ep 1: none");
    c.ep = 8;
    double bytes = 1.25 * m.seq * 2 * m.hidden * 2.0 * 7 / 8;
    double intra = pp_tune_moe_a2a_time(&m, &hw, &c, &o);
    cr_expect_float_eq(intra, bytes / hw.intra_bw + 7 * hw.intra_lat, 1e-12);
    c.t = 2; /* 16 ranks: across nodes */
    c.d = 16;
    double inter = pp_tune_moe_a2a_time(&m, &hw, &c, &o);
    cr_expect_gt(inter, 3 * intra, "across nodes %g vs %g", inter, intra);
    pp_tune_op_times ot;
    c.t = 1, c.d = 32;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    cr_expect_float_eq(ot.moe_a2a_f, 2 * intra, 1e-12);
    cr_expect_float_eq(ot.moe_a2a_b, 2 * intra, 1e-12);
    /* top-2 of experts a quarter as wide at imbalance 1.25: 0.625 of the dense MLP's GEMMs */
    cr_expect_lt(ot.moe_f - ot.moe_a2a_f, ot.layer_f, "%g vs dense %g", ot.moe_f - ot.moe_a2a_f,
                 ot.layer_f);
    o.moe_imbalance = 2.5; /* the busiest rank: 1.25 of the dense MLP's GEMMs */
    cr_expect_float_eq(pp_tune_moe_a2a_time(&m, &hw, &c, &o) - 7 * hw.intra_lat,
                       2 * (intra - 7 * hw.intra_lat), 1e-9);
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    cr_expect_gt(ot.moe_f - ot.moe_a2a_f, ot.layer_f, "%g vs dense %g", ot.moe_f - ot.moe_a2a_f,
                 ot.layer_f);
}

/* DualPipeV pairs one micro-batch's F with another's B: with a slow all-to-all the paired
 * schedule's step hides part of it (the step is shorter than the same configuration with the
 * overlap switched off), while 1F1B, which pairs nothing, is unchanged. */
Test(tuner_moe, dualpipev_pairs_hide_the_all_to_all)
{
    pp_tune_model m = moe_model();
    pp_tune_hw hw = cluster(4);
    hw.intra_bw = hw.inter_bw = 5e9; /* a slow all-to-all */
    pp_tune_opts o, off;
    pp_tune_opts_default(&o);
    off = o;
    off.without = PP_TUNE_FX_MOE_OVERLAP;
    pp_config c = {.schedule = "dualpipev", .p = 4, .v = 2, .b = 1, .d = 8, .t = 1, .N = 16,
                   .cp = 1, .ep = 8};
    double with = predict(&m, &hw, &c, &o, NULL).step_time;
    double without = predict(&m, &hw, &c, &off, NULL).step_time;
    cr_expect_lt(with, 0.95 * without, "dualpipev: %g with the overlap, %g without", with,
                 without);
    c.schedule = "1f1b", c.v = 1;
    cr_expect_float_eq(predict(&m, &hw, &c, &o, NULL).step_time,
                       predict(&m, &hw, &c, &off, NULL).step_time, 1e-12, "1f1b pairs nothing");
}

static pp_tune_result *search(const pp_tune_model *m, const pp_tune_hw *hw, const char *scheds,
                              unsigned without, int ep)
{
    pp_tune_search_params sp = {.model = m, .hw = hw, .allow_tp = 0, .keep = 3,
                                .schedules = scheds, .max_b = 1};
    pp_tune_opts_default(&sp.opts);
    sp.opts.without = without;
    pp_tune_force_init(&sp.force);
    sp.force.recompute = PP_RECOMPUTE_NONE, sp.force.recompute_layers = 0;
    sp.force.shard = PP_SHARD_OPTIMIZER, sp.force.cp = 1, sp.force.sequence_parallel = 0;
    if (ep)
        sp.force.ep = ep;
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_gt(r->n_best, 0, "nothing fits");
    return r;
}

/* On 4 nodes the replicated experts' optimizer step and gradient sync cost more than the
 * all-to-all over NVLink: ep > 1 wins. With a slow all-to-all link, replicating wins. */
Test(tuner_moe, search_picks_ep_where_it_wins_and_replicates_where_cheaper)
{
    pp_tune_model m = moe_model();
    m.global_batch = 128;
    pp_tune_hw hw = cluster(4);
    char buf[200];
    pp_tune_result *r = search(&m, &hw, "1f1b", 0, 0);
    cr_expect_gt(r->best[0].cfg.ep, 1, "%s", pp_config_str(&r->best[0].cfg, buf, sizeof buf));
    pp_tune_result_destroy(r);
    hw.intra_bw = hw.inter_bw = 2e9; /* the all-to-all crawls; memory is ample for replicas */
    r = search(&m, &hw, "1f1b", 0, 0);
    cr_expect_eq(r->best[0].cfg.ep, 1, "%s", pp_config_str(&r->best[0].cfg, buf, sizeof buf));
    pp_tune_result_destroy(r);
}

/* Where the all-to-all is slow and the experts must be spread (--ep 8, as a model whose experts
 * do not fit a rank would need), DualPipeV's overlap decides: modelled, the search picks it
 * over 1F1B and interleaved; switched off (validate's --without moe-overlap), it does not. */
Test(tuner_moe, dualpipev_overlap_decides_the_search)
{
    pp_tune_model m = moe_model();
    m.global_batch = 128;
    pp_tune_hw hw = cluster(4);
    hw.intra_bw = hw.inter_bw = 5e9;
    char buf[200];
    pp_tune_result *r = search(&m, &hw, "1f1b,interleaved,dualpipev", 0, 8);
    cr_expect_str_eq(r->best[0].cfg.schedule, "dualpipev", "%s",
                     pp_config_str(&r->best[0].cfg, buf, sizeof buf));
    pp_tune_result_destroy(r);
    r = search(&m, &hw, "1f1b,interleaved,dualpipev", PP_TUNE_FX_MOE_OVERLAP, 8);
    cr_expect_str_neq(r->best[0].cfg.schedule, "dualpipev", "%s",
                      pp_config_str(&r->best[0].cfg, buf, sizeof buf));
    pp_tune_result_destroy(r);
}
