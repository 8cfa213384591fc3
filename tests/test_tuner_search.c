/* test_tuner_search.c — the time model's FLOPs and collectives, predictions' sanity, and the
 * search: a known-better candidate wins on constructed clusters, pruning keeps its reasons, and
 * the lower-bound skipping does not change the leaderboard. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "pp_tune.h"

Test(tuner_time, gpt13b_flops_follow_narayanan)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK);
    double B = 1024, s = 2048, L = 40, h = 5120, V = 50257;
    double expect = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * L * h));
    double got = pp_tune_model_flops(&m, B);
    cr_assert(fabs(got / expect - 1) < 1e-12, "%g vs %g", got, expect);
    /* ~ 1.72e17 FLOP for one 2M-token step of GPT-3 13B (6 x 12.85e9 x 2.1e6 plus attention) */
    cr_assert(got > 1.6e17 && got < 1.8e17, "%g", got);
}

Test(tuner_time, ring_allreduce_is_2_n_minus_1_over_n)
{
    cr_assert_float_eq(pp_tune_ring_allreduce(8e9, 8, 1e11, 0), 2.0 * 7 / 8 * 8e9 / 1e11, 1e-12);
    cr_assert_float_eq(pp_tune_ring_allreduce(1e6, 4, 1e9, 1e-5), 1.5e-3 + 6e-5, 1e-12);
    cr_assert_float_eq(pp_tune_ring_allreduce(1e6, 1, 1e9, 1e-5), 0.0, 1e-15);
}

Test(tuner_time, preset_cluster_is_summarised_with_its_efficiency)
{
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 32, &hw), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(hw.nodes, 32);
    cr_assert_eq(hw.gpus_per_node, 8);
    cr_assert_float_eq(hw.gemm_flops, 0.8 * 989e12, 1e6);
    cr_assert(hw.inter_bw < hw.intra_bw);
    cr_assert(strstr(hw.note, "0.8"), "%s", hw.note);
}

Test(tuner_time, prediction_is_sane_for_the_nemo_recipe)
{
    /* NeMo's gpt-13b recipe: t = 2, p = 4, b = 2, global batch 256 (on 32 GPUs: d = 4). */
    pp_tune_model m;
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK);
    cr_assert_eq(pp_tune_hw_preset("dgx-h100", 4, &hw), PP_OK);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 4, .v = 1, .b = 2, .d = 4, .t = 2, .N = 32};
    pp_tune_prediction p;
    pp_tune_rank_mem mem[4];
    cr_assert_eq(pp_tune_predict(&m, &hw, &c, &o, &p, mem), PP_OK, "%s", pp_err_msg());
    cr_assert(p.mfu > 0.2 && p.mfu < 0.8, "MFU %.3f", p.mfu);
    cr_assert(p.step_time > p.pipeline_time);
    /* bubble of 1F1B at least its textbook (D-1)/N */
    cr_assert(p.bubble_ideal >= 3.0 / 32 - 1e-9, "%f", p.bubble_ideal);
    cr_assert(p.fits);
    /* rank 0 holds the most in-flight activations in 1F1B: D of them */
    cr_assert_float_eq(mem[0].peak_units, 4.0, 1e-12);
    cr_assert_float_eq(mem[3].peak_units, 1.0, 1e-12);
}

static pp_tune_hw box(double link_bw, double mem_bytes)
{
    pp_tune_hw hw = {.name = "box", .source = "test", .nodes = 1, .gpus_per_node = 8,
                     .mem_bytes = mem_bytes, .peak_flops = 1e15, .gemm_flops = 8e14,
                     .mem_bw = 3e12, .intra_bw = link_bw, .inter_bw = link_bw};
    return hw;
}

static pp_tune_result *run(const pp_tune_model *m, const pp_tune_hw *hw, int keep,
                           const char *schedules)
{
    pp_tune_search_params sp = {.model = m, .hw = hw, .global_batch = 64, .allow_tp = 1,
                                .keep = keep, .schedules = schedules};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    return r;
}

Test(tuner_search, slow_links_make_the_deepest_pipeline_win)
{
    /* 1 MB/s links: a data-parallel all-reduce of 1.3 B gradients or t's per-layer all-reduces
     * cost far more than p2p activations; the known-better candidate is p = 8, d = t = 1. */
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(1e6, 1e12);
    pp_tune_result *r = run(&m, &hw, 5, NULL);
    cr_assert(r->n_best > 0);
    cr_assert_eq(r->best[0].cfg.p, 8, "winner %s p=%d", r->best[0].cfg.schedule, r->best[0].cfg.p);
    cr_assert_eq(r->best[0].cfg.t, 1);
    cr_assert_eq(r->best[0].cfg.d, 1);
    pp_tune_result_destroy(r);
}

Test(tuner_search, free_links_and_ample_memory_make_pure_data_parallel_win)
{
    /* Links at 1e18 B/s: no communication cost, so no pipeline bubble is worth having:
     * p = 1, t = 1, d = 8 wins. */
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-125m", &m), PP_OK);
    pp_tune_hw hw = box(1e18, 1e12);
    pp_tune_result *r = run(&m, &hw, 5, NULL);
    cr_assert(r->n_best > 0);
    cr_assert_eq(r->best[0].cfg.p, 1, "winner %s p=%d", r->best[0].cfg.schedule, r->best[0].cfg.p);
    cr_assert_eq(r->best[0].cfg.d, 8);
    for (int i = 0; i < r->n_best; i++) {
        cr_assert(r->best[i].mfu > 0 && r->best[i].mfu <= 1.0);
        cr_assert(r->best[i].step_time > 0);
        if (i)
            cr_assert(r->best[i].step_time >= r->best[i - 1].step_time);
    }
    pp_tune_result_destroy(r);
}

static int has_reason(const pp_tune_result *r, int stage, const char *needle)
{
    char text[200];
    for (long i = 0; i < r->n_rejects; i++)
        if (r->rejects[i].stage == stage &&
            strstr(pp_tune_reject_reason(&r->rejects[i], text, sizeof text), needle))
            return 1;
    return 0;
}

Test(tuner_search, pruned_candidates_keep_their_reasons)
{
    /* 4 GB devices: gpt-1.3b at 18 B/param (23.7 GB) cannot sit on one or two ranks. */
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(4.5e11, 4e9);
    pp_tune_result *r = run(&m, &hw, 5, NULL);
    cr_assert(has_reason(r, 1, "does not fit"));
    cr_assert(has_reason(r, 0, "do not split evenly"), "24 layers over 3 x 8 ... stages");
    cr_assert(has_reason(r, 0, "needs the micro-batches to be a multiple of the ranks (N mod D = 0)"));
    cr_assert(has_reason(r, 0, "uneven split"));
    for (int i = 0; i < r->n_best; i++) {
        cr_assert(r->best[i].fits);
        cr_assert(r->best[i].cfg.p * r->best[i].cfg.t >= 4, "p t = %d x %d cannot fit",
                  r->best[i].cfg.p, r->best[i].cfg.t);
    }
    cr_assert_eq(r->seen, r->n_rejects + r->n_best, "every candidate is ranked or has a reason");
    pp_tune_result_destroy(r);
}

Test(tuner_search, lower_bound_skipping_keeps_the_exact_leaderboard)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(2e10, 8e10);
    pp_tune_result *small = run(&m, &hw, 3, NULL);
    pp_tune_result *all = run(&m, &hw, 100000, NULL);
    cr_assert(small->bounded > 0, "the bound skipped nothing: the test shows nothing");
    cr_assert_eq(all->bounded, 0);
    cr_assert_eq(small->n_best, 3);
    for (int i = 0; i < 3; i++) {
        cr_assert_float_eq(small->best[i].step_time, all->best[i].step_time, 1e-15);
        cr_assert(pp_config_equal(&small->best[i].cfg, &all->best[i].cfg));
    }
    pp_tune_result_destroy(small);
    pp_tune_result_destroy(all);
}

/* The search simulates the candidates that share a schedule (the settings of a layout, layouts
 * of other b, t, cp) in one pass (search.c, pp_sim_run_lanes): each entry's figures are still,
 * to the bit, those of its configuration predicted alone (what `pptune simulate` prints). */
Test(tuner_search, shared_passes_give_each_candidate_its_own_prediction)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(2e10, 4e10);
    hw.nodes = 2;
    pp_tune_result *r = run(&m, &hw, 300, NULL);
    cr_assert_eq(r->n_best, 300);
    int shared = 0; /* entries whose schedule an earlier entry has (one pass ran both) */
    for (int i = 0; i < r->n_best; i++) {
        const pp_tune_prediction *e = &r->best[i];
        pp_tune_prediction alone;
        pp_tune_rank_mem mem[64];
        cr_assert(e->cfg.p <= 64);
        cr_assert_eq(pp_tune_predict(&m, &hw, &e->cfg, &r->opts, &alone, mem), PP_OK, "%s",
                     pp_err_msg());
        char cb[160];
        pp_config_str(&e->cfg, cb, sizeof cb);
        cr_expect(alone.step_time == e->step_time && alone.peak_mem == e->peak_mem &&
                      alone.bubble_total == e->bubble_total && alone.mfu == e->mfu,
                  "%s: %.17g s, %.17g B in the search, %.17g s, %.17g B alone", cb, e->step_time,
                  e->peak_mem, alone.step_time, alone.peak_mem);
        for (int j = 0; j < i; j++) {
            const pp_config *a = &r->best[j].cfg, *b = &e->cfg;
            cr_expect(!pp_config_equal(a, b), "%s is on the leaderboard twice", cb);
            shared += !strcmp(a->schedule, b->schedule) && a->p == b->p && a->N == b->N &&
                      a->v == b->v && a->G == b->G && a->uneven == b->uneven &&
                      a->first_layers == b->first_layers && a->last_layers == b->last_layers;
        }
    }
    cr_assert(shared > 0, "no two entries share a schedule: the test shows nothing");
    pp_tune_result_destroy(r);
}

Test(tuner_search, schedule_filter_is_respected)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(4.5e11, 8e10);
    pp_tune_result *r = run(&m, &hw, 10, "chimera,bitpipe");
    for (int i = 0; i < r->n_best; i++)
        cr_assert(!strcmp(r->best[i].cfg.schedule, "chimera") ||
                  !strcmp(r->best[i].cfg.schedule, "bitpipe"), "%s", r->best[i].cfg.schedule);
    pp_tune_result_destroy(r);
}

Test(tuner_time, gemm_rate_follows_the_measured_sweep_by_shape)
{
    pp_tune_hw hw = {.gemm_flops = 100e9, .peak_flops = 120e9, .n_gemm = 2,
                     .gemm_mnk = {1e6, 1e9}, .gemm_rate = {10e9, 100e9}};
    cr_assert_float_eq(pp_tune_hw_gemm_rate(&hw, 10, 10, 10), 10e9, 1.0, "below: the smallest");
    cr_assert_float_eq(pp_tune_hw_gemm_rate(&hw, 1000, 1000, 1000), 100e9, 1.0);
    /* halfway in log(m n k): 1e7.5 */
    double mid = pp_tune_hw_gemm_rate(&hw, pow(10, 3.5), 1000, 10);
    cr_assert_float_eq(mid, 55e9, 1e3, "%g", mid);
    hw.gemm_rate[1] = 200e9; /* above the peak: clamped */
    cr_assert_float_eq(pp_tune_hw_gemm_rate(&hw, 1e4, 1e4, 1e4), 120e9, 1.0);
    hw.n_gemm = 0;
    cr_assert_float_eq(pp_tune_hw_gemm_rate(&hw, 1, 1, 1), 100e9, 1.0, "no sweep: one rate");
}

/* issue 18, finding 6: a global batch of 100000 took 45 s and 6.8 GB (work linear in N); now
 * candidates above the budget are predicted from the steady state of bounded prefixes */
Test(tuner_search, candidates_with_too_many_micro_batches_are_predicted_from_bounded_prefixes)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(4.5e11, 8e10);
    pp_tune_search_params sp = {.model = &m, .hw = &hw, .global_batch = 100000, .allow_tp = 1,
                                .keep = 3, .max_b = 1};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert_gt(r->n_best, 0);
    for (int i = 0; i < r->n_best; i++) {
        cr_expect_gt(r->best[i].cfg.N, PP_TUNE_MAX_MICROBATCHES, "b = 1: N = 100000 / d");
        cr_expect_leq(r->best[i].sched->microbatches, PP_TUNE_MAX_MICROBATCHES);
    }
    cr_expect(!has_reason(r, 0, "the search simulates at most"));
    pp_tune_result_destroy(r);
    sp.global_batch = 64, sp.max_b = 128; /* more than the global batch */
    cr_expect_eq(pp_tune_search(&sp, &r), PP_ERR_INVALID);
    cr_expect(strstr(pp_err_text(), "max_b"), "%s", pp_err_text());
}

/* issue 18, finding 14: with no candidate at all the ranking sorted NULL (UBSan aborted) */
Test(tuner_search, a_search_without_any_candidate_returns_an_empty_result)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-1.3b", &m), PP_OK);
    pp_tune_hw hw = box(4.5e11, 8e10);
    /* a prime global batch: d = 1, so N = 1048573 / b is odd and Chimera's N mod D = 0 fails
     * for every p (a power-of-two batch no longer leaves none: huge N is predicted) */
    pp_tune_search_params sp = {.model = &m, .hw = &hw, .global_batch = 1048573, .keep = 3,
                                .schedules = "chimera"};
    pp_tune_opts_default(&sp.opts);
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_expect_eq(r->n_best, 0);
    cr_expect_eq(r->seen, r->n_rejects);
    pp_tune_result_destroy(r);
}

/* ---- issue 20: the layer split is searched ---- */
/* A GPT of 8 blocks whose vocabulary makes the final norm, LM head and cross-entropy cost about
 * two blocks (in the time model's own op times, checked below). On two stages the even split
 * 4 + 4 leaves the last stage about 4 + 2 blocks of work against the first one's 4 (plus the
 * embedding, a gather); moving one block off the last stage (5 + 3) balances them, moving two
 * (6 + 2) tips them the other way. Two devices that cannot hold the model on one force p = 2,
 * links are nearly free and t = 1, so the winner must have first = 5, last = 3: the answer by
 * construction, recomputed here from the op times as the split of least stage maximum. */
static pp_tune_model head_heavy_model(int vocab)
{
    return (pp_tune_model){.name = "head-heavy", .source = "test", .layers = 8, .hidden = 1024,
                           .heads = 16, .kv_heads = 16, .ffn = 4096, .vocab = vocab,
                           .seq = 1024, .norm_bias = 1, .linear_bias = 1, .learned_pos = 1,
                           .tied_embed = 1, .global_batch = 32};
}

Test(tuner_search, a_large_vocabulary_makes_the_tuner_pick_a_head_heavy_split)
{
    pp_tune_model m = head_heavy_model(16000);
    pp_tune_hw hw = box(1e18, 3.9e9); /* p = 1 needs 4.2 GB, p = 2 3.1-3.5 GB */
    hw.gpus_per_node = 2;
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 1, .N = 32};
    pp_tune_op_times ot;
    pp_tune_op_times_compute(&m, &hw, &c, &o, &ot);
    double lay = ot.layer_f + ot.layer_b, head = ot.head_f + ot.head_b,
           emb = ot.embed_f + ot.embed_b;
    cr_assert(head / lay > 1.6 && head / lay < 2.4, "the head costs %.2f blocks, not about two",
              head / lay);
    int best_a = 0;
    double best = 1e300;
    for (int a = 1; a < m.layers; a++) { /* the split of least stage maximum */
        double t = fmax(a * lay + emb, (m.layers - a) * lay + head);
        if (t < best)
            best = t, best_a = a;
    }
    cr_assert_eq(best_a, 5, "by construction 5 + 3, the op times say %d", best_a);

    /* 1f1b only: the answer by construction is for one stage per rank (an interleaved split
     * of virtual stages balances the head differently, and may win) */
    pp_tune_search_params sp = {
        .model = &m, .hw = &hw, .global_batch = 32, .keep = 10, .schedules = "1f1b"};
    pp_tune_opts_default(&sp.opts); /* t = 1: the pipeline, not tensor parallelism, is tested */
    pp_tune_result *r = NULL;
    cr_assert_eq(pp_tune_search(&sp, &r), PP_OK, "%s", pp_err_msg());
    cr_assert(r->n_best > 0);
    const pp_config *w = &r->best[0].cfg;
    char cb[160];
    cr_assert(w->p == 2 && w->v == 1 && w->first_layers == 5 && w->last_layers == 3, "winner %s",
              pp_config_str(w, cb, sizeof cb));
    /* and the even split of the same configuration is slower */
    pp_config even = *w;
    even.first_layers = even.last_layers = 0;
    pp_tune_prediction pe;
    pp_tune_rank_mem mem[2];
    cr_assert_eq(pp_tune_predict(&m, &hw, &even, &o, &pe, mem), PP_OK, "%s", pp_err_msg());
    cr_assert(pe.step_time > r->best[0].step_time * 1.05, "even %g s, 5/3 %g s", pe.step_time,
              r->best[0].step_time);
    pp_tune_result_destroy(r);
}
