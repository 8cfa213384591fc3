/* test_tuner_axes.c — the searched settings (recomputation, sequence parallelism, sharding,
 * context parallelism): each one's time effect in the cost model, NCCL's latency terms of the
 * data-parallel collectives, the rules, and what the search picks: recomputation where memory
 * is tight and none where it is roomy, context parallelism on a long sequence, sharding where
 * replicas are many, and a default search at least as fast as the same search with any one
 * setting forced. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "axes.h"
#include "pp_tune.h"

static pp_tune_model preset(const char *name)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset(name, &m), PP_OK, "%s", pp_err_msg());
    return m;
}

static pp_tune_hw cluster(const char *name, int nodes)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset(name, nodes, &hw), PP_OK, "%s", pp_err_msg());
    return hw;
}

/* The cost table's B of every stage for c on schedule s (1F1B, p ranks). */
static void stage_b(const pp_tune_model *m, const pp_tune_hw *hw, const pp_config *c,
                    double *b)
{
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate(c->schedule, &sp, &s), PP_OK, "%s", pp_err_msg());
    pp_cost cost;
    pp_tune_step_extra extra = {0};
    cr_assert_eq(pp_tune_costs(m, hw, c, &o, s, NULL, &cost, &extra), PP_OK, "%s",
                 pp_err_msg());
    for (int k = 0; k < s->stages_per_pipe; k++)
        b[k] = cost.b[k];
    pp_cost_fini(&cost);
    pp_sched_destroy(s);
}

/* Recomputation's time: each recomputing layer's B gains the forward again (full) or the
 * attention core (selective); block k: only min(k, the stage's layers) of them. */
Test(tuner_axes, recompute_adds_the_forward_to_each_recomputed_layers_backward)
{
    pp_tune_model m = preset("gpt-1.3b"); /* 24 layers: 6 per stage on 4 ranks */
    pp_tune_hw hw = cluster("dgx-h100", 1);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 4, .v = 1, .b = 1, .d = 2, .t = 1, .N = 8, .cp = 1};
    double none[4], full[4], k2[4], sel[4];
    stage_b(&m, &hw, &c, none);
    c.recompute = PP_RECOMPUTE_FULL;
    stage_b(&m, &hw, &c, full);
    pp_tune_op_times ot;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    cr_assert_gt(ot.recompute, 0.0);
    c.recompute_layers = 2;
    stage_b(&m, &hw, &c, k2);
    c.recompute = PP_RECOMPUTE_SELECTIVE, c.recompute_layers = 0;
    stage_b(&m, &hw, &c, sel);
    pp_tune_op_times ots;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ots);
    for (int k = 0; k < 4; k++) {
        cr_expect_float_eq(full[k] - none[k], 6 * ot.recompute, 1e-12, "stage %d", k);
        cr_expect_float_eq(k2[k] - none[k], 2 * ot.recompute, 1e-12, "stage %d", k);
        cr_expect_float_eq(sel[k] - none[k], 6 * ots.recompute, 1e-12, "stage %d", k);
    }
    cr_expect_lt(ots.recompute, ot.recompute / 4, "selective redoes the attention core only");
}

/* Sequence parallelism: the backward's extra all-gather of each sequence-parallel input (one
 * all-reduce's bytes) against 1/t of the element-wise work. */
Test(tuner_axes, sequence_parallelism_adds_the_backward_gather_and_splits_element_wise_work)
{
    pp_tune_model m = preset("gpt-13b");
    pp_tune_hw hw = cluster("dgx-h100", 1);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 1, .v = 1, .b = 1, .d = 1, .t = 8, .N = 1, .cp = 1};
    pp_tune_op_times off, on, on_nofx;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &off);
    c.sequence_parallel = 1;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &on);
    o.without = PP_TUNE_FX_SEQ_PAR;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &on_nofx);
    cr_expect_float_eq(on_nofx.layer_b, off.layer_b, 1e-15, "the effect switched off");
    cr_expect_lt(on.layer_f, off.layer_f, "element-wise work on 1/t of the tokens");
    /* backward: + one all-reduce's time, - 2 x the forward's element-wise saving */
    double saved_f = off.layer_f - on.layer_f;
    cr_expect_float_eq(on.layer_b - off.layer_b, off.tp_allreduce - 2 * saved_f, 1e-9);
}

/* Sharding's collectives (NCCL latency off: the bandwidth terms): none all-reduces fp32
 * gradients (2 (n-1)/n x 4 B); optimizer reduce-scatters them and all-gathers 16-bit weights
 * ((n-1)/n x 6 B); gradients all-gathers only at the end and reduce-scatters each
 * micro-batch's gradients in its backward; over d x cp ranks. */
Test(tuner_axes, sharding_replaces_the_allreduce_by_reduce_scatter_and_all_gather)
{
    pp_tune_hw hw = cluster("dgx-h100", 4);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    o.without = PP_TUNE_FX_DP_LATENCY;
    pp_config c = {.schedule = "1f1b", .p = 1, .v = 1, .b = 1, .d = 32, .t = 1, .N = 4, .cp = 1};
    double P = 1e9, bw = 8 * hw.inter_bw * 0.9, frac = 31.0 / 32;
    cr_expect_float_eq(pp_tune_dp_sync_time(&hw, &c, &o, P), 2 * frac * P * 4 / bw, 1e-9);
    c.shard = PP_SHARD_OPTIMIZER;
    cr_expect_float_eq(pp_tune_dp_sync_time(&hw, &c, &o, P), frac * P * 6 / bw, 1e-9);
    cr_expect_float_eq(pp_tune_grad_shard_time(&hw, &c, &o, P), 0.0, 1e-15);
    c.shard = PP_SHARD_GRADIENTS;
    cr_expect_float_eq(pp_tune_dp_sync_time(&hw, &c, &o, P), frac * P * 2 / bw, 1e-9);
    cr_expect_float_eq(pp_tune_grad_shard_time(&hw, &c, &o, P), frac * P * 4 / bw, 1e-9);
    /* context parallelism: 2 cp ranks per replica hold the same weights: 32 ranks, as d = 32 */
    c.d = 16, c.cp = 2;
    cr_expect_float_eq(pp_tune_grad_shard_time(&hw, &c, &o, P), frac * P * 4 / bw, 1e-9);
    c.d = 8, c.cp = 2; /* 16 ranks */
    cr_expect_float_eq(pp_tune_grad_shard_time(&hw, &c, &o, P), 15.0 / 16 * P * 4 / bw, 1e-9);
    c.d = 16;
    /* the optimizer step on 1/(d cp) of the parameters */
    double whole = pp_tune_optimizer_time(&hw, &(pp_config){.d = 16, .cp = 2}, &o, P);
    cr_expect_float_eq(pp_tune_optimizer_time(&hw, &c, &o, P), whole / 32, 1e-15);

    /* the cost table: ZeRO-2's B carries the stage's reduce-scatter each micro-batch */
    pp_tune_model m = preset("gpt-1.3b");
    pp_config z = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 16, .t = 1, .N = 4, .cp = 1};
    double b0[2], b2[2];
    stage_b(&m, &hw, &z, b0);
    z.shard = PP_SHARD_GRADIENTS;
    stage_b(&m, &hw, &z, b2);
    cr_expect_gt(b2[0], b0[0]);
    cr_expect_gt(b2[1], b0[1]);
}

/* NCCL's latencies (src/graph/tuning.cc): a 1024-node all-reduce takes the tree's
 * 2 log2(1024) x 50 us = 1 ms, where the ring would pay 2 x 1023 x 9.6 us x 1.9; a
 * reduce-scatter is a ring: 8.4 + 1023 x 9.6 us; one per model chunk. */
Test(tuner_axes, dp_collectives_pay_ncclss_ring_or_tree_latency)
{
    pp_tune_hw hw = cluster("dgx-h100", 1024);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 1, .v = 1, .b = 1, .d = 1024, .t = 8, .N = 1,
                   .cp = 1};
    double P = 1e9;
    double with = pp_tune_dp_sync_time(&hw, &c, &o, P);
    o.without = PP_TUNE_FX_DP_LATENCY;
    double bare = pp_tune_dp_sync_time(&hw, &c, &o, P);
    cr_expect_float_eq(with - bare, 2.0 * log2(1024.0) * 50e-6, 1e-12, "%g", with - bare);
    o.without = 0;
    c.shard = PP_SHARD_OPTIMIZER;
    with = pp_tune_dp_sync_time(&hw, &c, &o, P);
    o.without = PP_TUNE_FX_DP_LATENCY;
    bare = pp_tune_dp_sync_time(&hw, &c, &o, P);
    cr_expect_float_eq(with - bare, 2 * (8.4e-6 + 1023 * 9.6e-6), 1e-12);
    /* inside one node: NVLink hops only */
    pp_tune_hw one = cluster("dgx-h100", 1);
    pp_config in = {.schedule = "1f1b", .p = 1, .v = 2, .b = 1, .d = 8, .t = 1, .N = 1, .cp = 1};
    o.without = 0;
    double a = pp_tune_dp_sync_time(&one, &in, &o, P);
    o.without = PP_TUNE_FX_DP_LATENCY;
    double b = pp_tune_dp_sync_time(&one, &in, &o, P);
    cr_expect_float_eq(a - b, 2 * (8.4e-6 + 14 * 3.4e-6), 1e-12, "two chunks' all-reduces");
}

/* Context parallelism: the ring's transfers hide behind attention on NVLink for a long
 * sequence; on a slow link what they add is (cp - 1) x (transfer - step compute). */
Test(tuner_axes, context_parallel_ring_hides_behind_attention_or_adds_what_does_not)
{
    pp_tune_model m = preset("llama3-8b");
    m.seq = 32768;
    pp_tune_hw hw = cluster("dgx-h100", 1);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 1, .v = 1, .b = 1, .d = 1, .t = 2, .N = 1, .cp = 4};
    pp_tune_op_times ot, one;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    cr_expect_float_eq(ot.cp_ring_f, 0.0, 1e-15, "hidden on NVLink: %g", ot.cp_ring_f);
    pp_config c1 = c;
    c1.cp = 1;
    pp_tune_op_times_compute(&m, &hw, &c1, &o, &one);
    cr_expect_lt(ot.layer_f, one.layer_f / 3, "a quarter of the tokens per rank");
    hw.intra_bw = 1e9; /* 1 GB/s: the transfers cannot hide */
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    double kvd = 8.0 * 128, step = 2.0 * 32768 / 4 * kvd / 2 * 2 / 1e9 + hw.intra_lat;
    cr_expect_gt(ot.cp_ring_f, 0.0);
    cr_expect_lt(ot.cp_ring_f, 3 * step + 1e-12);
    cr_expect_gt(ot.cp_ring_f, 3 * step * 0.5);
}

Test(tuner_axes, rules_name_what_a_setting_needs)
{
    pp_tune_model m = preset("llama3-8b");
    char why[200];
    pp_config c = {.t = 1, .cp = 1, .sequence_parallel = 1};
    cr_assert_not_null(pp_tune_axes_rule(&m, &c, why, sizeof why));
    cr_expect(strstr(why, "sequence parallelism needs t > 1"), "%s", why);
    c = (pp_config){.t = 2, .cp = 3};
    cr_assert_not_null(pp_tune_axes_rule(&m, &c, why, sizeof why));
    cr_expect(strstr(why, "cp = 3 must divide the sequence"), "%s", why);
    c = (pp_config){.t = 2, .cp = 1, .recompute = PP_RECOMPUTE_SELECTIVE, .recompute_layers = 2};
    cr_assert_not_null(pp_tune_axes_rule(&m, &c, why, sizeof why));
    cr_expect(strstr(why, "needs recompute full"), "%s", why);
    c = (pp_config){.t = 2, .cp = 4, .sequence_parallel = 1, .recompute = PP_RECOMPUTE_FULL};
    cr_expect_null(pp_tune_axes_rule(&m, &c, why, sizeof why));
}

/* ---- what the search picks ---------------------------------------------------------------- */
static pp_tune_result *search(const pp_tune_model *m, const pp_tune_hw *hw, pp_tune_force f,
                              int keep)
{
    pp_tune_search_params sp = {.model = m, .hw = hw, .allow_tp = 1, .keep = keep, .force = f};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    return r;
}

static pp_tune_force searched(void)
{
    pp_tune_force f;
    pp_tune_force_init(&f);
    return f;
}

/* gpt-1.3b on one node of 8: with 80 GB devices nothing needs recomputing; at 12 GB the
 * fastest that fits recomputes (the other savings are searched too and do not suffice), and
 * it is faster than the same search with recomputation forced off, which fits nothing or a
 * slower layout. */
Test(tuner_axes, recompute_where_memory_is_tight_and_none_where_it_is_roomy)
{
    pp_tune_model m = preset("gpt-1.3b");
    m.global_batch = 64;
    pp_tune_hw hw = cluster("dgx-h100", 1);
    pp_tune_result *r = search(&m, &hw, searched(), 3);
    cr_assert_gt(r->n_best, 0);
    cr_expect_eq(r->best[0].cfg.recompute, PP_RECOMPUTE_NONE, "roomy: no recomputation");
    pp_tune_result_destroy(r);

    m.seq = 16384; /* activations 8x: only recomputation fits them */
    hw.mem_bytes = 16e9;
    r = search(&m, &hw, searched(), 3);
    cr_assert_gt(r->n_best, 0, "nothing fits even with recomputation");
    cr_expect_neq(r->best[0].cfg.recompute, PP_RECOMPUTE_NONE, "tight: %s",
                  pp_config_str(&r->best[0].cfg, (char[160]){0}, 160));
    double with = r->best[0].step_time;
    pp_tune_result_destroy(r);
    pp_tune_force none = searched();
    none.recompute = PP_RECOMPUTE_NONE, none.recompute_layers = 0;
    r = search(&m, &hw, none, 3);
    cr_expect(r->n_best == 0 || r->best[0].step_time >= with);
    pp_tune_result_destroy(r);
}

/* Llama 3 8B at 128K tokens a sequence on 8 nodes: the winner splits the sequence. */
Test(tuner_axes, context_parallelism_on_a_long_sequence)
{
    pp_tune_model m = preset("llama3-8b");
    m.seq = 131072, m.global_batch = 16;
    pp_tune_hw hw = cluster("dgx-h100", 8);
    pp_tune_result *r = search(&m, &hw, searched(), 3);
    cr_assert_gt(r->n_best, 0);
    cr_expect_gt(r->best[0].cfg.cp, 1, "%s",
                 pp_config_str(&r->best[0].cfg, (char[160]){0}, 160));
    pp_tune_result_destroy(r);
}

/* gpt-1.3b on 64 nodes: hundreds of replicas, and the winner shards over them. */
Test(tuner_axes, sharding_where_replicas_are_many)
{
    pp_tune_model m = preset("gpt-1.3b");
    pp_tune_hw hw = cluster("dgx-h100", 64);
    pp_tune_result *r = search(&m, &hw, searched(), 3);
    cr_assert_gt(r->n_best, 0);
    cr_expect_gt(r->best[0].cfg.d, 64);
    cr_expect_neq(r->best[0].cfg.shard, PP_SHARD_NONE, "%s",
                  pp_config_str(&r->best[0].cfg, (char[160]){0}, 160));
    pp_tune_result_destroy(r);
}

/* The case: llama3-405b on 2048 nodes, every setting searched, is at least as fast as
 * the same search with any one setting forced to any of its values. */
Test(tuner_axes, llama405b_default_search_beats_every_forced_setting, .timeout = 600)
{
    pp_tune_model m = preset("llama3-405b");
    pp_tune_hw hw = cluster("dgx-h100", 2048);
    pp_tune_result *r = search(&m, &hw, searched(), 1);
    cr_assert_gt(r->n_best, 0);
    double best = r->best[0].step_time;
    pp_tune_result_destroy(r);
    pp_tune_force forced[12];
    int n = 0;
    for (int v = PP_RECOMPUTE_NONE; v <= PP_RECOMPUTE_FULL; v++)
        forced[n] = searched(), forced[n++].recompute = v;
    for (int v = 0; v <= 1; v++)
        forced[n] = searched(), forced[n++].sequence_parallel = v;
    for (int v = PP_SHARD_NONE; v <= PP_SHARD_GRADIENTS; v++)
        forced[n] = searched(), forced[n++].shard = v;
    for (int v = 1; v <= 4; v *= 2)
        forced[n] = searched(), forced[n++].cp = v;
    for (int i = 0; i < n; i++) {
        r = search(&m, &hw, forced[i], 1);
        char flags[160];
        if (r->n_best)
            cr_expect_geq(r->best[0].step_time, best * (1 - 1e-12), "%s: %.6g s < %.6g s",
                          pp_tune_force_flags(&forced[i], flags, sizeof flags),
                          r->best[0].step_time, best);
        pp_tune_result_destroy(r);
    }
}
