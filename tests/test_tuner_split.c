/* test_tuner_split.c — the tuner's side of split backward (the zero-bubble family, issue 19):
 * the time model's I / W costs (I + W = the fused B, collectives in I, W local), the memory
 * model's held-for-W bytes, the family in the search, the leaderboard, --explain and the
 * exports. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "pp_tune.h"

static pp_tune_model preset_model(const char *name)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset(name, &m), PP_OK, "%s", pp_err_msg());
    return m;
}

static void near(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-12 * fabs(want) + 1e-300, "%s: %.17g != %.17g", what, got,
              want);
}

/* I + W = B for the layer, the embedding and the head under every option that changes the
 * backward: tensor parallelism with and without sequence parallelism, full and selective
 * recompute, unfused attention, fp32. */
Test(tuner_split, input_and_weight_gradients_add_up_to_the_fused_backward)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-a100-80g", 4, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_model m = preset_model("gpt-13b");
    for (int variant = 0; variant < 6; variant++) {
        pp_tune_opts o;
        pp_tune_opts_default(&o);
        pp_config c = {.schedule = "1f1b", .p = 4, .v = 1, .b = 2, .d = 1, .t = 4, .N = 8};
        if (variant == 1)
            c.sequence_parallel = 1;
        if (variant == 2)
            c.recompute = PP_RECOMPUTE_FULL;
        if (variant == 3) {
            c.recompute = PP_RECOMPUTE_SELECTIVE;
            o.flash_attention = 0;
        }
        if (variant == 4)
            c.t = 1, o.precision = PP_PREC_FP32;
        if (variant == 5)
            o.without = (1u << PP_TUNE_FX_COUNT) - 1;
        pp_tune_op_times ot;
        pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
        cr_expect_gt(ot.layer_i, 0, "variant %d", variant);
        cr_expect_gt(ot.layer_w, 0, "variant %d", variant);
        near(ot.layer_i + ot.layer_w, ot.layer_b, "layer");
        near(ot.embed_i + ot.embed_w, ot.embed_b, "embedding");
        near(ot.head_i + ot.head_w, ot.head_b, "head");
        cr_expect_eq(ot.embed_i, 0.0, "token ids have no input gradient");
    }
}

/* The simulator's cost table: for every stage of a split-backward schedule I + W = B, with the
 * stage-boundary work (the gather of the incoming gradient's TP shares, the blocking send to the
 * previous stage across nodes) in I, and gradient accumulation in W. */
Test(tuner_split, cost_table_gives_every_stage_i_and_w_that_add_up_to_b)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 4, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_model m = preset_model("gpt-13b");
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    o.grad_accum = PP_TUNE_GRAD_ACCUM_MAIN;
    /* t = 4, p = 8: two pipeline ranks per node, so half the boundaries cross nodes */
    pp_config c = {.schedule = "zbv", .p = 8, .v = 2, .b = 1, .d = 1, .t = 4, .N = 16};
    pp_sched_params sp;
    pp_tune_sched_params(&m, &c, &sp);
    sp.layers = 32, m.layers = 32;
    pp_sched *s;
    cr_assert_eq(pp_sched_generate(c.schedule, &sp, &s), PP_OK, "%s", pp_err_msg());
    pp_cost cost;
    pp_tune_step_extra extra = {0};
    cr_assert_eq(pp_tune_costs(&m, &hw, &c, &o, s, NULL, &cost, &extra), PP_OK, "%s",
                 pp_err_msg());
    cr_assert(cost.i && cost.w);
    for (int k = 0; k < s->stages_per_pipe; k++) {
        near(cost.i[k] + cost.w[k], cost.b[k], "stage");
        cr_expect_gt(cost.w[k], 0);
        cr_expect_gt(cost.i[k], cost.w[k], "stage %d: I has the collectives", k);
    }
    pp_cost_fini(&cost);
    /* the V's turn (stages p - 1 and p on the last rank) is a hand-over on one rank: no
     * transfer, so no gather of TP shares there, where the stage before it has one */
    o.without = PP_TUNE_FX_P2P_BLOCKING; /* the sends' time stays on the links */
    cr_assert_eq(pp_tune_costs(&m, &hw, &c, &o, s, NULL, &cost, &extra), PP_OK, "%s",
                 pp_err_msg());
    pp_tune_op_times ot;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    cr_assert_gt(ot.p2p_gather, 0);
    cr_assert_eq(pp_sched_rank_of(s, 0, 7), pp_sched_rank_of(s, 0, 8));
    near(cost.f[8], 2 * ot.layer_f, "forward after the turn");
    near(cost.f[7], 2 * ot.layer_f + ot.p2p_gather, "forward after a transfer");
    near(cost.i[7], 2 * ot.layer_i, "input gradient before the turn");
    near(cost.i[6], 2 * ot.layer_i + ot.p2p_gather, "input gradient before a transfer");
    pp_cost_fini(&cost);
    pp_sched_destroy(s);
}

/* W is the wgrad GEMMs only: the same in every option that adds work outside the GEMMs
 * (tensor-parallel collectives, recompute, sequence parallelism), which all lands in I. */
Test(tuner_split, collectives_and_recompute_land_in_the_input_gradient)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-a100-80g", 4, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_model m = preset_model("gpt-13b");
    pp_config c = {.schedule = "1f1b", .p = 4, .v = 1, .b = 1, .d = 1, .t = 8, .N = 8};
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_op_times base, full, sp;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &base);
    c.recompute = PP_RECOMPUTE_FULL;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &full);
    c.recompute = PP_RECOMPUTE_NONE;
    c.sequence_parallel = 1;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &sp);
    near(full.layer_w, base.layer_w, "recompute leaves W alone");
    near(sp.layer_w, base.layer_w, "sequence parallelism leaves W alone");
    /* full recompute: a recomputing layer's I (and B) gains the forward, its two all-reduces
     * included (the cost table adds ot.recompute to I and B per recomputed layer) */
    near(full.recompute, base.layer_f, "recompute in I");
    near(full.layer_i, base.layer_i, "layer_i without the recomputation");
    cr_expect_eq(base.recompute, 0.0);
    /* the conjugate all-reduces (2 per layer) are inside I: I exceeds the dgrad share by them */
    cr_expect_gt(base.layer_i - base.layer_w, 2.0 * base.tp_allreduce);
    /* the head's W is its one wgrad GEMM: half of the two GEMMs its fused backward has */
    cr_expect_lt(base.head_w, base.head_i);
}

/* The Zero Bubble paper's M_W: W needs 32 sbh bytes per GPT layer (t = 1, 16-bit), against the
 * 34 sbh (flash attention) Korthikanti's layer keeps from F to B; with t = 8 the TP-split
 * tensors shrink by t and the ones outside (QKV and MLP inputs, the projections' output
 * gradients) do not. */
Test(tuner_split, held_for_w_bytes_are_the_linears_inputs_and_output_gradients)
{
    pp_tune_model m = preset_model("gpt-13b");
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    double sbh = (double)m.seq * 2 * m.hidden;
    pp_config c1 = {.b = 2, .t = 1, .d = 1, .cp = 1}, c8 = {.b = 2, .t = 8, .d = 1, .cp = 1};
    near(pp_tune_act_bytes_per_layer(&m, &c1, &o), 34.0 * sbh, "F to B");
    near(pp_tune_held_for_w_bytes_per_layer(&m, &c1, &o), 32.0 * sbh, "I to W");
    /* t = 8: inputs 2 + 2 + (2 + 8) / 8, output gradients 6 / 8 + 2 + 8 / 8 + 2 */
    near(pp_tune_held_for_w_bytes_per_layer(&m, &c8, &o),
         (4.0 + 10.0 / 8 + 6.0 / 8 + 2 + 1 + 2) * sbh, "t = 8");
    o.precision = PP_PREC_FP32;
    near(pp_tune_held_for_w_bytes_per_layer(&m, &c1, &o), 64.0 * sbh, "fp32 doubles it");
}

/* A middle rank of 1F1B over D = 3 ranks with every backward split into I and W, the W's
 * deferred to the end of its list (N = 4):
 *   F0 F1 I0 F2 I1 F3 I2 I3 W0 W1 W2 W3
 * holds f, 2f, f + h, 2f + h, f + 2h, 2f + 2h, f + 3h, 4h, ... : its peak is 2f + 2h (h < f),
 * where 1F1B's fused B peaks at 2f; W right after each I keeps 1F1B's 2f. */
Test(tuner_split, memory_model_holds_what_w_needs_between_i_and_w)
{
    pp_tune_model m = preset_model("gpt-13b"); /* 40 layers: 13 or 14 per stage */
    m.layers = 39;
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 3, .v = 1, .b = 1, .d = 1, .t = 1, .N = 4};
    pp_sched *s[3];
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(pp_sched_create("custom", 3, 4, 1, 1, 39, NULL, &s[k]), PP_OK, "%s",
                     pp_err_msg());
        for (int st = 0; st < 3; st++)
            pp_sched_stage(s[k], 0, st)->rank = st;
    }
    const int fused[][2] = {{PP_OP_F, 0}, {PP_OP_F, 1}, {PP_OP_B, 0}, {PP_OP_F, 2},
                            {PP_OP_B, 1}, {PP_OP_F, 3}, {PP_OP_B, 2}, {PP_OP_B, 3}};
    for (int i = 0; i < 8; i++) {
        int op = fused[i][0], mb = fused[i][1];
        cr_assert_eq(pp_sched_push(s[0], 1, op, 0, 1, mb), PP_OK);
        cr_assert_eq(pp_sched_push(s[1], 1, op == PP_OP_B ? PP_OP_I : op, 0, 1, mb), PP_OK);
        cr_assert_eq(pp_sched_push(s[2], 1, op == PP_OP_B ? PP_OP_I : op, 0, 1, mb), PP_OK);
        if (op == PP_OP_B)
            cr_assert_eq(pp_sched_push(s[2], 1, PP_OP_W, 0, 1, mb), PP_OK);
    }
    for (int mb = 0; mb < 4; mb++)
        cr_assert_eq(pp_sched_push(s[1], 1, PP_OP_W, 0, 1, mb), PP_OK);
    double f = 13 * pp_tune_act_bytes_per_layer(&m, &c, &o);
    double h = 13 * pp_tune_held_for_w_bytes_per_layer(&m, &c, &o);
    pp_tune_rank_mem mem[3][3];
    for (int k = 0; k < 3; k++)
        cr_assert_eq(pp_tune_memory(&m, &c, s[k], &o, mem[k]), PP_OK, "%s", pp_err_msg());
    near(mem[0][1].acts, 2 * f, "fused 1F1B");
    near(mem[1][1].acts, 2 * f + 2 * h, "W deferred to the end");
    near(mem[2][1].acts, 2 * f, "W right after its I");
    cr_expect_eq(mem[1][1].peak_units, 4.0, "in flight until W: four micro-batches");
    for (int k = 0; k < 3; k++)
        pp_sched_destroy(s[k]);
}

/* ---- the family in the search ------------------------------------------------------------ */
static int is_split(const pp_config *c)
{
    const pp_sched_desc *d = pp_sched_lookup(c->schedule);
    cr_assert(d, "%s", c->schedule);
    return d->split_backward;
}

/* The whole default search (every schedule of the registry, no --schedules list). */
static pp_tune_result *search_all(const pp_tune_model *m, const pp_tune_hw *hw, int gb)
{
    pp_tune_search_params sp = {.model = m, .hw = hw, .global_batch = gb, .keep = 10};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_gt(r->n_best, 0);
    return r;
}

/* The fastest fitting candidate of the schedules without (split = 0) or with (1) split
 * backward, from the per-schedule bests; plain: only the one-pipe, one-chunk schedules. */
static const pp_tune_prediction *family_best(const pp_tune_result *r, int split, int plain)
{
    const pp_tune_prediction *b = NULL;
    for (int i = 0; i < r->n_sched_best; i++) {
        const pp_tune_prediction *p = &r->sched_best[i].pred;
        const pp_sched_desc *d = pp_sched_lookup(p->cfg.schedule);
        if (plain && (d->pipes != 1 || d->chunks != 1))
            continue;
        if (is_split(&p->cfg) == split && (!b || p->step_time < b->step_time))
            b = p;
    }
    cr_assert(b, "no %s schedule fits", split ? "split-backward" : "fused-backward");
    return b;
}

/* A constructed cluster where the bubble dominates: gpt-13b on eight H100s, one per node, so
 * that every stage boundary crosses InfiniBand (12.5 GB/s per GPU), and a global batch of 8:
 * the model needs p = 8 to fit without tensor parallelism (none: one GPU per node), which
 * leaves N = 8 micro-batches for 8 stages. 1F1B idles about as long as it computes, interleaving
 * pays v times the slow transfers; a zero-bubble schedule fills the bubble with W and wins. */
Test(tuner_split, zero_bubble_wins_where_the_bubble_dominates)
{
    pp_tune_model m = preset_model("gpt-13b");
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 8, &hw), PP_OK, "%s", pp_err_msg());
    hw.gpus_per_node = 1;
    hw.inter_bw = 12.5e9;
    pp_tune_result *r = search_all(&m, &hw, 8);
    const pp_tune_prediction *win = &r->best[0], *fused = family_best(r, 0, 0);
    const pp_tune_prediction *plain = family_best(r, 0, 1); /* 1F1B's shape */
    char cb[160];
    cr_expect(is_split(&win->cfg), "#1 is %s", pp_config_str(&win->cfg, cb, sizeof cb));
    cr_expect_eq(win->cfg.p, 8);
    cr_expect_eq(win->cfg.N, 8);
    cr_expect_lt(win->step_time, 0.9 * fused->step_time, "%s %.4g s",
                 pp_config_str(&fused->cfg, cb, sizeof cb), fused->step_time);
    cr_expect_gt(plain->bubble_ideal, 1.5 * win->bubble_ideal, "bubble %.3f vs %.3f",
                 plain->bubble_ideal, win->bubble_ideal);
    pp_tune_result_destroy(r);
}

/* And one where it does not: the same model on one DGX H100 node with a global batch of 64.
 * Memory is tight: 1F1B fits at p = 4 (d = 2) with a 9/11/11/9 split, where rank 1 holds 3
 * micro-batches; ZB-H1 holds 4 on every rank (its W passes wait), so at p = 4 it does not fit
 * and the zero-bubble family's best is p = 8 with half the data parallelism, slower. */
Test(tuner_split, zero_bubble_loses_where_its_held_micro_batches_do_not_fit)
{
    pp_tune_model m = preset_model("gpt-13b");
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 1, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_result *r = search_all(&m, &hw, 64);
    const pp_tune_prediction *win = &r->best[0], *split = family_best(r, 1, 0);
    char cb[160];
    cr_expect(!is_split(&win->cfg), "#1 is %s", pp_config_str(&win->cfg, cb, sizeof cb));
    cr_expect_eq(win->cfg.p, 4);
    cr_expect_gt(split->cfg.p, 4);
    cr_expect_gt(split->step_time, win->step_time);
    /* the winner's layout under a split-backward schedule was refused for its memory */
    int refused = 0;
    for (long i = 0; i < r->n_rejects; i++) {
        const pp_tune_reject *j = &r->rejects[i];
        if (pp_sched_lookup(j->cfg.schedule) && is_split(&j->cfg) && j->cfg.p == 4 &&
            j->cfg.v == 1 && j->cfg.b == 1 && j->cfg.first_layers == win->cfg.first_layers &&
            j->cfg.last_layers == win->cfg.last_layers && j->stage == 1)
            refused |= strstr(j->reason, "does not fit") != NULL;
    }
    cr_expect(refused, "no memory reason for the split-backward twin of #1");
    pp_tune_result_destroy(r);
}

/* On one pipeline rank every split-backward schedule is 1F1B with B cut in two: the same step,
 * the data-parallel all-reduce starting after the rank's last W (its gradients are whole only
 * then), not after its last F. */
Test(tuner_split, one_rank_split_backward_is_1f1b_and_syncs_after_its_last_w)
{
    pp_tune_model m = preset_model("gpt-1.3b");
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 1, &hw), PP_OK, "%s", pp_err_msg());
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    int n;
    const pp_sched_desc *kinds = pp_sched_generators(&n);
    pp_config fused = {.schedule = PP_SCHED_DEFAULT, .p = 1, .v = 1, .b = 2, .d = 8, .t = 1,
                       .N = 4};
    pp_tune_prediction ref;
    cr_assert_eq(pp_tune_predict(&m, &hw, &fused, &o, &ref, NULL), PP_OK, "%s", pp_err_msg());
    int tried = 0;
    for (int k = 0; k < n; k++) {
        if (!kinds[k].split_backward || kinds[k].chunks != 1)
            continue;
        pp_config c = fused;
        c.schedule = kinds[k].name;
        pp_tune_prediction p;
        cr_assert_eq(pp_tune_predict(&m, &hw, &c, &o, &p, NULL), PP_OK, "%s", pp_err_msg());
        near(p.step_time, ref.step_time, kinds[k].name);
        cr_expect_gt(p.step_time - p.pipeline_time, 0.5 * (ref.step_time - ref.pipeline_time),
                     "%s: the DP sync overlaps its own W passes", kinds[k].name);
        tried++;
    }
    cr_expect_gt(tried, 0, "no one-chunk split-backward schedule in the registry");
}
