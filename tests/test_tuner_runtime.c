/* test_tuner_runtime.c — the tuner's memory model of the bundled runtime against the runtime
 * itself: for tiny models on the CPU backend, the predicted peak bytes of every rank are within
 * 3 % of the peak pprun measures, for every schedule (D = 2: a core per rank on this machine;
 * larger runs are checked within the band the OS's scheduling leaves, see check_b). Also: the tuner's copies of the runtime's
 * model presets agree with the runtime's. Runs the built pprun. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_rt.h"
#include "pp_test_run.h"
#include "pp_tune.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

Test(tuner_runtime, runtime_presets_agree_with_the_runtime)
{
    /* one model table: every tuner preset that names a runtime model is the runtime's row,
     * sizes and block alike (pp_tune_model_cfg gives back the row's description); the
     * runtime's CI-sized models, the GPT-3 family and Llama 3 are among them */
    int n, runnable = 0;
    const char *const *names = pp_tune_model_names(&n);
    for (int i = 0; i < n; i++) {
        pp_tune_model m;
        cr_assert_eq(pp_tune_model_preset(names[i], &m), PP_OK);
        if (!m.pprun)
            continue;
        runnable++;
        pp_model_cfg rt, back;
        cr_assert_eq(pp_model_preset(names[i], &rt), PP_OK, "%s", pp_err_msg());
        cr_assert(rt.layers == m.layers && rt.hidden == m.hidden && rt.heads == m.heads &&
                      pp_model_kv(&rt) == m.kv_heads && rt.ffn == m.ffn &&
                      rt.vocab == m.vocab && rt.seq == m.seq,
                  "%s differs from runtime/plan/model.c", names[i]);
        pp_tune_model_cfg(&m, &back);
        char a[256], b[256];
        cr_assert_str_eq(pp_model_describe(&back, a, sizeof a), pp_model_describe(&rt, b, sizeof b),
                         "%s: the tuner's record loses the block", names[i]);
        cr_assert(m.gated_mlp == (rt.mlp == PP_MLP_SWIGLU) &&
                      m.learned_pos == (rt.pos == PP_POS_LEARNED) && m.tied_embed == !rt.untied,
                  "%s: the tuner's block traits are not the runtime's", names[i]);
    }
    cr_assert_eq(runnable, 14,
                 "tiny, small, tiny-llama, the 8 GPT-3 shapes and the 3 Llama 3 shapes run on "
                 "pprun, found %d",
                 runnable);
    pp_tune_model bert;
    cr_assert_eq(pp_tune_model_preset("bert-large", &bert), PP_OK);
    cr_assert(!bert.pprun, "BERT's block is not the runtime's");
    cr_assert(strstr(bert.pprun_why, "planned by pptune but not run by pprun"), "%s",
              bert.pprun_why);
}

/* Runs pprun and returns its per-rank peak totals (replica 0) in peak[]. */
static void measure(const char *model, int seq, const pp_config *c, double *peak)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             PPRUN " --model %s --schedule %s --ranks %d --microbatches %d "
                   "--micro-batch-size %d --dp %d --seq %d --steps 2 --json --quiet%s%s",
             model, c->schedule, c->p, c->N, c->b, c->d, seq, c->uneven ? " --uneven" : "",
             !strcmp(c->schedule, "interleaved") ? " --chunks 2" : "");
    pp_test_run_result run = pp_test_run("%s", cmd);
    json_error_t e;
    json_t *root = json_loads(run.out, 0, &e);
    cr_assert(root && run.code == 0, "%s: exit %d, %s %s", cmd, run.code, root ? "" : e.text,
              run.err);
    pp_test_run_done(&run);
    json_t *ranks = json_object_get(root, "ranks");
    cr_assert(json_is_array(ranks));
    for (size_t i = 0; i < json_array_size(ranks); i++) {
        json_t *r = json_array_get(ranks, i);
        int g = (int)json_integer_value(json_object_get(r, "rank"));
        if (g < c->p)
            peak[g] = (double)json_integer_value(
                json_object_get(json_object_get(r, "peak_bytes"), "total"));
    }
    json_decref(root);
}

static void check_b(const char *model, const char *kind, int D, int N, int uneven, int dp, int b)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset(model, &m), PP_OK);
    pp_config c = {.p = D, .v = 1, .b = b, .d = dp, .t = 1, .N = N, .uneven = uneven};
    c.schedule = kind;
    if (!strcmp(kind, "interleaved") || !strcmp(kind, "bitpipe"))
        c.v = 2;
    if (!strcmp(kind, "interleaved"))
        c.G = D;
    pp_sched_params sp;
    pp_tune_sched_params(&m, &c, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate(kind, &sp, &s), PP_OK, "%s", pp_err_msg());
    pp_tune_rank_mem mem[8];
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    o.precision = PP_PREC_FP32;
    cr_assert_eq(pp_tune_memory(&m, &c, s, &o, mem), PP_OK, "%s", pp_err_msg());
    double peak[8] = {0};
    measure(model, m.seq, &c, peak); /* at the model's full length, as trials run */
    /* The transport's copy of a sent message lives on the sender until the receiver has taken
     * it; with every rank thread on its own core the simulated timeline predicts when. With
     * more rank threads than cores the OS decides who runs, and the copies a sender holds at
     * its peak vary from run to run: there the measured peak must lie between the prediction
     * (-3 %) and the prediction plus a copy of every message the rank sends. */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int own_core = D * dp <= cores;
    double io = 4.0 * b * m.seq * m.hidden;
    for (int r = 0; r < D; r++) {
        double err = (mem[r].total - peak[r]) / peak[r];
        int sends = 0;
        for (int i = 0; i < s->n_ops[r]; i++)
            sends += s->ops[r][i].op == PP_OP_SEND_F || s->ops[r][i].op == PP_OP_SEND_B;
        int ok = own_core ? fabs(err) <= 0.03
                          : err <= 0.03 && peak[r] <= mem[r].total + sends * io;
        cr_assert(ok,
                  "%s %s D=%d N=%d b=%d %s dp=%d rank %d (%s): predicted %.0f B, measured %.0f B "
                  "(%.2f %%; %d sends of %.0f B)",
                  model, kind, D, N, b, uneven ? "uneven" : "even", dp, r,
                  own_core ? "a core per rank" : "more ranks than cores", mem[r].total, peak[r],
                  100 * err, sends, io);
    }
    pp_sched_destroy(s);
}

static void check(const char *model, const char *kind, int D, int N, int uneven, int dp)
{
    check_b(model, kind, D, N, uneven, dp, 1);
}

Test(tuner_runtime, predicted_peak_within_3_percent_small_model_and_micro_batch_2)
{
    check_b("small", "1f1b", 2, 4, 0, 1, 2);
    check_b("small", "gpipe", 4, 4, 1, 1, 2); /* uneven: 1 + 2 + 2 + 1 layers */
    check_b("small", "chimera", 2, 4, 0, 2, 2);
}

Test(tuner_runtime, predicted_peak_within_3_percent_gpipe_1f1b)
{
    const char *kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++) {
        check("tiny", kinds[k], 2, 2, 0, 1);
        check("tiny", kinds[k], 2, 4, 0, 2);
        check("tiny", kinds[k], 4, 8, 0, 1);
        check("tiny", kinds[k], 3, 6, 1, 1); /* uneven: 1 + 2 + 1 layers */
    }
}

Test(tuner_runtime, predicted_peak_within_3_percent_interleaved)
{
    check("tiny", "interleaved", 2, 2, 0, 1);
    check("tiny", "interleaved", 2, 4, 0, 1);
    check("tiny", "interleaved", 2, 4, 0, 2);
}

Test(tuner_runtime, predicted_peak_within_3_percent_bidirectional)
{
    check("tiny", "chimera", 2, 2, 0, 1);
    check("tiny", "chimera", 4, 8, 0, 1);
    check("tiny", "chimera", 2, 4, 0, 2);
    check("tiny", "bitpipe", 2, 2, 0, 1);
    check("tiny", "bitpipe", 2, 4, 0, 1);
    check("tiny", "bitpipe", 2, 4, 0, 2);
}

/* The tiny model into *m and the schedule of configuration c (the caller destroys it). */
static pp_sched *tiny_sched(pp_tune_model *m, const pp_config *c)
{
    cr_assert_eq(pp_tune_model_preset("tiny", m), PP_OK);
    pp_sched_params sp;
    pp_tune_sched_params(m, c, &sp);
    pp_sched *s;
    cr_assert_eq(pp_sched_generate(c->schedule, &sp, &s), PP_OK, "%s", pp_err_msg());
    return s;
}

/* The GPU trials' fit check plans sequence parallelism as the trial runs it: with the option
 * the tuner's CUDA model of the runtime is the runtime's own plan of an SP run, byte for byte,
 * and holds fewer activation bytes than the same configuration without it. */
Test(tuner_runtime, the_cuda_model_plans_sequence_parallelism_from_the_configuration)
{
    pp_tune_model m;
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 1, .t = 2, .N = 4};
    pp_sched *s = tiny_sched(&m, &c);
    pp_tune_opts o = {0};
    pp_config with = c;
    with.sequence_parallel = 1;
    pp_tune_rank_mem a[2], b[2];
    cr_assert_eq(pp_tune_memory_runtime_on(&m, &with, s, &o, PP_RT_BACKEND_CUDA, PP_PREC_BF16, a),
                 PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_tune_memory_runtime_on(&m, &c, s, &o, PP_RT_BACKEND_CUDA, PP_PREC_BF16, b),
                 PP_OK, "%s", pp_err_msg());
    pp_model_cfg rm = {.layers = m.layers, .hidden = m.hidden, .heads = m.heads, .ffn = m.ffn,
                       .vocab = m.vocab, .seq = m.seq};
    pp_rt_plan_params pp = {.model = &rm, .sched = s, .micro_batch = c.b, .seq = m.seq, .dp = 1,
                            .backend = PP_RT_BACKEND_CUDA, .precision = PP_PREC_BF16,
                            .tp = 2, .sequence_parallel = 1};
    pp_rt_plan_rank plan[2];
    cr_assert_eq(pp_rt_plan_compute(&pp, plan), PP_OK, "%s", pp_err_msg());
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(a[r].total, (double)plan[r].peak_total, "rank %d: %.0f vs the plan's %zu", r,
                     a[r].total, plan[r].peak_total);
        cr_expect_lt(a[r].acts, b[r].acts, "rank %d: SP holds %.0f activation bytes, without %.0f",
                     r, a[r].acts, b[r].acts);
    }
    pp_sched_destroy(s);
}

/* The runtime's trials plan recomputation and the sharded optimizer from the configuration:
 * the tuner's model of a pprun trial is the runtime's own plan of that run, byte for byte,
 * with fewer activation bytes under recomputation and 1/d of AdamW's state under sharding. */
Test(tuner_runtime, the_runtime_model_plans_recomputation_and_sharding_from_the_configuration)
{
    pp_tune_model m;
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 2, .t = 1, .N = 4};
    pp_sched *s = tiny_sched(&m, &c);
    pp_tune_opts o = {0};
    pp_config with = c;
    with.recompute = PP_RECOMPUTE_FULL, with.shard = PP_SHARD_OPTIMIZER;
    pp_tune_rank_mem a[2], b[2];
    cr_assert_eq(pp_tune_memory_runtime(&m, &with, s, &o, a), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_tune_memory_runtime(&m, &c, s, &o, b), PP_OK, "%s", pp_err_msg());
    pp_model_cfg rm = {.layers = m.layers, .hidden = m.hidden, .heads = m.heads, .ffn = m.ffn,
                       .vocab = m.vocab, .seq = m.seq};
    pp_rt_plan_params pp = {.model = &rm, .sched = s, .micro_batch = c.b, .seq = m.seq, .dp = 2,
                            .backend = PP_RT_BACKEND_CPU,
                            .recompute = PP_RECOMPUTE_FULL, /* the same values */
                            .shard = PP_RT_SHARD_OPTIMIZER};
    pp_rt_plan_rank plan[2];
    cr_assert_eq(pp_rt_plan_compute(&pp, plan), PP_OK, "%s", pp_err_msg());
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(a[r].total, (double)plan[r].peak_total, "rank %d: %.0f vs the plan's %zu", r,
                     a[r].total, plan[r].peak_total);
        cr_expect_lt(a[r].acts, b[r].acts, "rank %d: recomputation holds %.0f activation bytes, "
                     "without %.0f", r, a[r].acts, b[r].acts);
        cr_expect_eq(a[r].optim, 8.0 * ceil(a[r].params / 2), "rank %d: optim %.0f", r, a[r].optim);
    }
    pp_sched_destroy(s);
}

/* ZeRO-2's trials too: the tuner's model of the run is the runtime's plan (the shards, each
 * stage's whole gradient while its backwards run), with 1/d of AdamW's state (ceil per group:
 * a stage, or its tied embedding's copy). */
Test(tuner_runtime, the_runtime_model_plans_gradient_sharding)
{
    pp_tune_model m;
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 2, .t = 1, .N = 4};
    pp_sched *s = tiny_sched(&m, &c);
    pp_tune_opts o = {0};
    c.shard = PP_SHARD_GRADIENTS;
    pp_tune_rank_mem a[2];
    cr_assert_eq(pp_tune_memory_runtime(&m, &c, s, &o, a), PP_OK, "%s", pp_err_msg());
    pp_model_cfg rm = {.layers = m.layers, .hidden = m.hidden, .heads = m.heads, .ffn = m.ffn,
                       .vocab = m.vocab, .seq = m.seq};
    pp_rt_plan_params pp = {.model = &rm, .sched = s, .micro_batch = c.b, .seq = m.seq, .dp = 2,
                            .backend = PP_RT_BACKEND_CPU, .shard = PP_RT_SHARD_GRADIENTS};
    pp_rt_plan_rank plan[2];
    cr_assert_eq(pp_rt_plan_compute(&pp, plan), PP_OK, "%s", pp_err_msg());
    for (int r = 0; r < 2; r++) {
        cr_expect_eq(a[r].total, (double)plan[r].peak_total, "rank %d: %.0f vs the plan's %zu", r,
                     a[r].total, plan[r].peak_total);
        double half = 8.0 * ceil(a[r].params / 2);
        cr_expect(a[r].optim >= half && a[r].optim <= half + 16, "rank %d: optim %.0f", r,
                  a[r].optim);
    }
    pp_sched_destroy(s);
}
