/* test_runtime_recompute.c — activation recomputation (pp_rt_exec_params.recompute: selective,
 * full, full on the first k blocks of each stage).
 *
 * The recomputed forward runs the same kernels on the same inputs as the forward did, so a
 * run with recomputation must train bit for bit like one without: the same loss and gradient
 * norm every step and the same parameters after it, for 1F1B, interleaved and a split backward
 * (zb-h1, whose W takes what I copied of the recomputation), with dp 2 and with t = 2 under
 * sequence parallelism. A recomputation that read another block's or an earlier micro-batch's
 * activations (a stale workspace) would change the gradients. The memory plan lists the smaller
 * slots and the recompute workspace and equals the measured peaks to the byte.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "pp_rt_sizes.h"
#include "rt_train.h"

enum { B = 2, T = 16, STEPS = 2 };

/* llama: 0 GPT's block, 1 Llama's, 2 Qwen3's (Llama's with the per-head q/k RMSNorm, head_dim
 * 16 for hidden 32 / 4 heads) */
static pp_model_cfg model(int llama)
{
    if (llama == 2) {
        pp_model_cfg m = model(1);
        m.qk_norm = 1, m.head_dim = 16;
        return m;
    }
    if (llama) /* RMSNorm, SwiGLU, rotary, 2 KV heads for 4, untied head */
        return (pp_model_cfg){.layers = 8, .hidden = 32, .heads = 4, .ffn = 48, .vocab = 128,
                              .seq = T, .kv_heads = 2, .norm = PP_NORM_RMSNORM,
                              .mlp = PP_MLP_SWIGLU, .pos = PP_POS_ROPE, .rope_theta = 500000,
                              .nobias = PP_NOBIAS_ALL, .untied = 1};
    return (pp_model_cfg){.layers = 8, .hidden = 32, .heads = 2, .ffn = 64, .vocab = 128, .seq = T};
}

typedef struct {
    const char *kind;
    int D, N, v, dp, tp, sp, llama, backend;
} run_cfg;

typedef rt_train run;

static void start(run *u, const run_cfg *c, int rc, int k)
{
    pp_model_cfg m = model(c->llama);
    pp_rt_exec_params ep = {.model = &m,
                            .micro_batch = B,
                            .seq = T,
                            .dp = c->dp,
                            .seed = 7,
                            .clip = 1.0f,
                            .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f},
                            .backend = c->backend,
                            .tp = c->tp,
                            .sequence_parallel = c->sp,
                            .recompute = rc,
                            .recompute_layers = k};
    rt_train_run(u, c->kind, c->D, c->N, c->v, ep, STEPS, 1, 3);
}

static void stop(run *u)
{
    rt_train_stop(u);
}

/* Every parameter of every stage of every rank of a and b: the same bits (CPU backends). */
static void expect_same_params(run *a, run *b, const run_cfg *c, const char *what)
{
    const pp_sched *s = a->s;
    int tp = c->tp > 1 ? c->tp : 1;
    for (int k = 0; k < c->dp; k++)
        for (int r = 0; r < tp; r++)
            for (int p = 0; p < s->n_pipes; p++)
                for (int st = 0; st < s->stages_per_pipe; st++) {
                    int na, nb;
                    pp_rt_tensor *ta =
                        pp_rt_stage_tensors(pp_rt_executor_stage_tp(a->ex, k, r, p, st), &na);
                    pp_rt_tensor *tb =
                        pp_rt_stage_tensors(pp_rt_executor_stage_tp(b->ex, k, r, p, st), &nb);
                    cr_assert_eq(na, nb);
                    for (int j = 0; j < na; j++)
                        cr_assert(!memcmp(ta[j].data, tb[j].data, ta[j].n * sizeof(float)),
                                  "%s: replica %d tensor rank %d pipe %d stage %d: %s differs "
                                  "from the run without recomputation",
                                  what, k, r, p, st, ta[j].name);
                }
}

static const char *const modes[] = {"none", "selective", "full"};

/* Each recomputation of c against c without it: losses, norms and parameters bit for bit, and
 * a rank's planned activations smaller. */
static void check_same_training(const run_cfg *c)
{
    run base;
    start(&base, c, PP_RT_RC_NONE, 0);
    static const int rcs[][2] = {{PP_RT_RC_SELECTIVE, 0}, {PP_RT_RC_FULL, 0}, {PP_RT_RC_FULL, 1}};
    for (size_t i = 0; i < sizeof rcs / sizeof rcs[0]; i++) {
        run u;
        start(&u, c, rcs[i][0], rcs[i][1]);
        char what[128];
        snprintf(what, sizeof what, "%s D=%d v=%d dp=%d t=%d%s%s, recompute %s k=%d", c->kind,
                 c->D, c->v, c->dp, c->tp, c->sp ? " SP" : "", c->llama == 2 ? " qwen3" : c->llama ? " llama" : "",
                 modes[rcs[i][0]], rcs[i][1]);
        for (int k = 0; k < STEPS; k++) {
            cr_assert(u.loss[k] == base.loss[k], "%s: step %d loss %.17g, without %.17g", what,
                      k + 1, u.loss[k], base.loss[k]);
            cr_assert(u.norm[k] == base.norm[k], "%s: step %d grad norm %.17g, without %.17g",
                      what, k + 1, u.norm[k], base.norm[k]);
        }
        expect_same_params(&u, &base, c, what);
        const pp_rt_plan_rank *pu = pp_rt_executor_plan(u.ex, 0);
        const pp_rt_plan_rank *pb = pp_rt_executor_plan(base.ex, 0);
        cr_assert_lt(pu->peak[PP_MEM_ACTS], pb->peak[PP_MEM_ACTS], "%s: acts %zu, without %zu",
                     what, pu->peak[PP_MEM_ACTS], pb->peak[PP_MEM_ACTS]);
        stop(&u);
    }
    stop(&base);
}

Test(runtime_recompute, one_f_one_b_trains_as_without)
{
    check_same_training(&(run_cfg){"1f1b", 2, 4, 0, 1, 1, 0, 0, PP_RT_BACKEND_CPU});
}

Test(runtime_recompute, interleaved_dp2_trains_as_without)
{
    check_same_training(&(run_cfg){"interleaved", 2, 4, 2, 2, 1, 0, 0, PP_RT_BACKEND_CPU});
}

/* split backward: W takes the recomputed inputs I copied for it */
Test(runtime_recompute, zb_h1_trains_as_without)
{
    check_same_training(&(run_cfg){"zb-h1", 2, 4, 0, 1, 1, 0, 0, PP_RT_BACKEND_CPU});
}

/* t = 2 with sequence parallelism: a fully recomputed block keeps its N/t rows and reruns the
 * forward's all-gathers and reduce-scatters on every tensor rank */
Test(runtime_recompute, tp2_sequence_parallel_trains_as_without)
{
    check_same_training(&(run_cfg){"1f1b", 2, 4, 0, 1, 2, 1, 0, PP_RT_BACKEND_CPU});
    check_same_training(&(run_cfg){"zb-h1", 2, 4, 0, 1, 2, 1, 0, PP_RT_BACKEND_CPU});
}

/* The Llama block: the rotation is applied once (the kept q, k are rotated already) */
Test(runtime_recompute, llama_interleaved_tp2_sp_trains_as_without)
{
    check_same_training(&(run_cfg){"interleaved", 2, 4, 2, 1, 2, 1, 1, PP_RT_BACKEND_CPU});
}

/* Qwen3's block: full recomputation reruns the q/k norm (its saved input and rstd are the
 * recomputed block's); selective keeps the normalised, rotated q, k */
Test(runtime_recompute, qwen3_interleaved_tp2_sp_trains_as_without)
{
    check_same_training(&(run_cfg){"interleaved", 2, 4, 2, 1, 2, 1, 2, PP_RT_BACKEND_CPU});
    check_same_training(&(run_cfg){"zb-h1", 2, 4, 0, 1, 1, 0, 2, PP_RT_BACKEND_CPU});
}

/* The plan (smaller slots, the recompute workspace in forward and backward, what I holds for
 * W) equals every rank's measured peaks to the byte (the staged CPU backend: exact). */
static void check_plan(const run_cfg *c, int rc, int k)
{
    run u;
    start(&u, c, rc, k);
    char what[96];
    snprintf(what, sizeof what, "%s t=%d%s recompute %s k=%d", c->kind, c->tp, c->sp ? " SP" : "",
             modes[rc], k);
    rt_train_expect_plan(&u, what);
    stop(&u);
}

Test(runtime_recompute, plan_equals_measured)
{
    static const run_cfg cs[] = {
        {"1f1b", 2, 4, 0, 1, 1, 0, 0, PP_RT_BACKEND_CPU_STAGED},
        {"interleaved", 2, 4, 2, 2, 1, 0, 0, PP_RT_BACKEND_CPU_STAGED},
        {"zb-h1", 2, 4, 0, 1, 1, 0, 1, PP_RT_BACKEND_CPU_STAGED},
        {"zb-h1", 2, 4, 0, 1, 2, 1, 0, PP_RT_BACKEND_CPU_STAGED},
        {"1f1b", 2, 4, 0, 1, 2, 1, 1, PP_RT_BACKEND_CPU_STAGED},
        {"zb-h1", 2, 4, 0, 1, 2, 1, 2, PP_RT_BACKEND_CPU_STAGED},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        check_plan(&cs[i], PP_RT_RC_SELECTIVE, 0);
        check_plan(&cs[i], PP_RT_RC_FULL, 0);
        check_plan(&cs[i], PP_RT_RC_FULL, 3);
    }
}

/* Full recomputation keeps only a block's input: under sequence parallelism its 1/t shard
 * (Megatron's), so a slot of 4 fully recomputed blocks without a first or last stage's extras
 * is 4 x (N/t) x C floats. */
Test(runtime_recompute, full_keeps_the_sequence_shard_of_the_input)
{
    pp_model_cfg m = model(0);
    pp_rt_dims d = pp_rt_dims_of(&m, 2, 2);
    d.rc = PP_RT_RC_FULL;
    cr_assert_eq(pp_rt_size_act_slot_bytes(&d, B, T, 4, 0, 0), 4 * (B * T / 2) * 32 * 4);
    d.rc_k = 1; /* the first block recomputed, three kept whole */
    cr_assert_eq(pp_rt_size_act_slot_bytes(&d, B, T, 4, 0, 0),
                 ((B * T / 2) * 32 + 3 * pp_rt_size_act_layer_floats(&d, B, T)) * 4);
}

Test(runtime_recompute, refuses_what_it_does_not_run)
{
    pp_model_cfg m = model(0);
    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = m.layers};
    pp_sched *s;
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_exec_params ep = {.model = &m, .sched = s, .micro_batch = B, .seq = T, .dp = 1,
                            .recompute = PP_RT_RC_SELECTIVE, .recompute_layers = 2};
    pp_rt_executor *ex = NULL;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "recompute layers: 2"), "%s", pp_err_text());
    ep.recompute = 3, ep.recompute_layers = 0;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "mode 3"), "%s", pp_err_text());
    pp_sched_destroy(s);
}
