/* test_runtime_exec_mem.c — the executor holds no byte its backends do not count.
 *
 * Per rank, after training steps, the backend's figures must equal what the schedule and the
 * stages imply: weights and gradients = the parameters of the stages on the rank, optimizer
 * state = twice that, activations at peak = the token buffers plus the largest sum of saved
 * micro-batch slots along the rank's action order (a forward adds one slot, its backward
 * frees it: the order is fixed, so the peak is exact, not timing-dependent), nothing left in
 * communication buffers after a step. And the process heap grows by the backends' total and
 * only a little bookkeeping besides (glibc mallinfo2 over all arenas), so no tensor-sized
 * buffer lives outside the accounting. Transient buffers freed within a step are not visible
 * to the heap check; their categories are checked through the peaks above. The arena every
 * step's buffers are carved from (the memory plan's, held from creation) is what the backend
 * reports as reserved.
 */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "pp_rt_sizes.h"
#include "sched_split.h"

#include "pp_test_ok.h"

enum { B = 2, T = 16 };

static int llama; /* a test sets it: the Llama block instead of GPT's (each test its process);
                     2: Qwen3's (Llama's with the per-head q/k RMSNorm, head_dim 16, so q is
                     64 wide for hidden 32) */
static int vocab; /* a test sets it: this vocabulary instead of 128 (0: 128) */
static int cp_ranks; /* a test sets it: context parallelism (0: none) */

static pp_model_cfg model_of(void);
static pp_model_cfg model(void)
{
    pp_model_cfg m = model_of();
    if (vocab)
        m.vocab = vocab;
    return m;
}

static pp_model_cfg model_of(void)
{
    if (llama == 2) {
        llama = 1;
        pp_model_cfg m = model_of();
        llama = 2;
        m.qk_norm = 1, m.head_dim = 16, m.rope_scaling = PP_ROPE_NONE, m.rope_scaling_name[0] = 0;
        return m;
    }
    if (llama) /* RMSNorm, SwiGLU, rotary (Llama 3 scaling), 2 KV heads for 4, untied head */
        return (pp_model_cfg){.layers = 8, .hidden = 32, .heads = 4, .ffn = 48, .vocab = 128,
                              .seq = T, .kv_heads = 2, .norm = PP_NORM_RMSNORM,
                              .mlp = PP_MLP_SWIGLU, .pos = PP_POS_ROPE, .rope_theta = 500000,
                              .rope_scaling = PP_ROPE_LLAMA3, .rope_scaling_name = "llama3",
                              .rope_factor = 8, .rope_low_freq = 1, .rope_high_freq = 4,
                              .rope_orig_max = 16, .nobias = PP_NOBIAS_ALL, .untied = 1};
    return (pp_model_cfg){.layers = 8, .hidden = 32, .heads = 2, .ffn = 64, .vocab = 128, .seq = T};
}

typedef struct {
    pp_sched *s;
    pp_rt_executor *ex;
    int dp;
} setup;

/* An executor for the schedule u->s (which drop destroys); tp: tensor-parallel size, seqpar:
 * sequence parallelism. */
static void make_sched(setup *u, int dp, int backend, int tp, int seqpar)
{
    pp_model_cfg m = model();
    pp_rt_exec_params ep = {.model = &m,
                            .sched = u->s,
                            .micro_batch = B,
                            .seq = T,
                            .dp = dp,
                            .seed = 5,
                            .clip = 1.0f,
                            .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f},
                            .backend = backend,
                            .tp = tp,
                            .sequence_parallel = seqpar,
                            .cp = cp_ranks};
    OK(pp_rt_executor_create(&ep, &u->ex));
    u->dp = dp;
}

/* first, last: a first/last-stage split of the 8 layers (0: even) */
static void make_split_sp(setup *u, const char *kind, int D, int N, int v, int dp, int backend,
                          int first, int last, int tp, int seqpar)
{
    pp_sched_params sp = {.ranks = D,
                          .microbatches = N,
                          .chunks = v,
                          .layers = model().layers,
                          .first_layers = first,
                          .last_layers = last};
    OK(pp_sched_generate(kind, &sp, &u->s));
    make_sched(u, dp, backend, tp, seqpar);
}

static void make_split(setup *u, const char *kind, int D, int N, int v, int dp, int backend,
                       int first, int last, int tp)
{
    make_split_sp(u, kind, D, N, v, dp, backend, first, last, tp, 0);
}

static void make_on(setup *u, const char *kind, int D, int N, int v, int dp, int backend)
{
    make_split(u, kind, D, N, v, dp, backend, 0, 0, 1);
}

static void make(setup *u, const char *kind, int D, int N, int v, int dp)
{
    make_on(u, kind, D, N, v, dp, PP_RT_BACKEND_CPU);
}

/* The schedules both accounting tests run (every generator family, with and without dp). */
static const struct {
    const char *kind;
    int D, N, v, dp;
} cases[] = {{"1f1b", 4, 8, 0, 1},    {"gpipe", 2, 4, 0, 2},    {"interleaved", 2, 4, 2, 1},
             {"chimera", 4, 4, 0, 1}, {"bitpipe", 2, 4, 0, 2},  {"zb-h1", 4, 8, 0, 1},
             {"zbv", 2, 4, 0, 2},     {"dualpipev", 4, 8, 0, 1}};

static void steps(setup *u, int n)
{
    int rows = pp_rt_executor_batch_rows(u->ex);
    pp_rt_data *d;
    OK(pp_rt_data_synthetic(model().vocab, 3, &d));
    int32_t *batch = calloc((size_t)rows * (T + 1), sizeof *batch);
    for (int i = 0; i < n; i++) {
        OK(pp_rt_data_next(d, rows, T, batch));
        pp_rt_step_result r;
        OK(pp_rt_executor_step(u->ex, batch, 1, &r));
    }
    free(batch);
    pp_rt_data_destroy(d);
}

static void drop(setup *u)
{
    pp_rt_executor_destroy(u->ex);
    pp_sched_destroy(u->s);
}

static size_t stage_param_bytes(pp_rt_stage *st)
{
    int n;
    pp_rt_tensor *t = pp_rt_stage_tensors(st, &n);
    size_t b = 0;
    for (int i = 0; i < n; i++)
        b += t[i].n * sizeof(float);
    return b;
}

static void check_categories(setup *u, const char *what)
{
    const pp_sched *s = u->s;
    int D = s->ranks, S = s->stages_per_pipe;
    size_t tok_bytes = (size_t)s->microbatches * B * T * sizeof(int32_t);
    for (int g = 0; g < D * u->dp; g++) {
        int r = g % D, k = g / D;
        size_t w = 0, acts_base = 0;
        int first = 0, last = 0;
        for (int p = 0; p < s->n_pipes; p++)
            for (int st = 0; st < S; st++)
                if (pp_sched_stage(s, p, st)->rank == r)
                    w += stage_param_bytes(pp_rt_executor_stage(u->ex, k, p, st));
        for (int p = 0; p < s->n_pipes; p++) {
            first |= pp_sched_stage(s, p, 0)->rank == r;
            last |= pp_sched_stage(s, p, S - 1)->rank == r;
        }
        acts_base = (first + last) * tok_bytes;
        /* the peak of saved slots along the rank's action order (split backward: the slot
         * stays until W, and I adds what it holds for W) */
        size_t live = 0, peak = 0;
        for (int i = 0; i < s->n_ops[r]; i++) {
            const pp_action *a = &s->ops[r][i];
            if (!pp_op_is_compute(a->op))
                continue;
            pp_rt_stage *sa = pp_rt_executor_stage(u->ex, k, a->pipe, a->stage);
            size_t b = pp_rt_stage_act_bytes(sa), h = pp_rt_stage_held_bytes(sa);
            live = a->op == PP_OP_F   ? live + b
                   : a->op == PP_OP_I ? live + h
                   : a->op == PP_OP_W ? live - b - h
                                      : live - b;
            peak = live > peak ? live : peak;
        }
        pp_mem_stats m;
        pp_backend_mem_stats(pp_rt_executor_backend(u->ex, g), &m);
        cr_assert_eq(m.current[PP_MEM_WEIGHTS], w, "%s rank %d: weights %zu, stages hold %zu", what,
                     g, m.current[PP_MEM_WEIGHTS], w);
        cr_assert_eq(m.peak[PP_MEM_WEIGHTS], w, "%s rank %d", what, g);
        cr_assert_eq(m.peak[PP_MEM_GRADS], w, "%s rank %d: grads %zu", what, g,
                     m.peak[PP_MEM_GRADS]);
        cr_assert_eq(m.peak[PP_MEM_OPTIM], 2 * w, "%s rank %d: optim %zu", what, g,
                     m.peak[PP_MEM_OPTIM]);
        cr_assert_eq(m.peak[PP_MEM_ACTS], acts_base + peak,
                     "%s rank %d: activation peak %zu, the schedule implies %zu + %zu", what, g,
                     m.peak[PP_MEM_ACTS], acts_base, peak);
        cr_assert_eq(m.current[PP_MEM_ACTS], acts_base, "%s rank %d: %zu activation bytes left",
                     what, g, m.current[PP_MEM_ACTS] - acts_base);
        cr_assert_eq(m.current[PP_MEM_COMM], 0, "%s rank %d: %zu comm bytes left", what, g,
                     m.current[PP_MEM_COMM]);
        /* every rank of these schedules talks to another (hops, REDUCE or dp), so its
         * communication buffers must show up */
        cr_assert_gt(m.peak[PP_MEM_COMM], 0, "%s rank %d: no communication buffer counted", what,
                     g);
        /* the executor's own memory plan: every category whose bytes the program order fixes
         * equals it to the byte (communication also depends on when the in-process transport's
         * copies are taken: see plan_equals_measured_when_staged) */
        const pp_rt_plan_rank *pl = pp_rt_executor_plan(u->ex, g);
        cr_assert(pl, "%s rank %d: no plan", what, g);
        const pp_mem_category fixed[] = {PP_MEM_WEIGHTS, PP_MEM_GRADS, PP_MEM_OPTIM, PP_MEM_ACTS,
                                         PP_MEM_WORKSPACE};
        for (size_t c = 0; c < sizeof fixed / sizeof fixed[0]; c++)
            cr_assert_eq(m.peak[fixed[c]], pl->peak[fixed[c]],
                         "%s rank %d: %s peak %zu, the plan says %zu", what, g,
                         pp_mem_category_name(fixed[c]), m.peak[fixed[c]], pl->peak[fixed[c]]);
        size_t sum_peaks = 0;
        for (int c = 0; c < PP_MEM__COUNT; c++)
            sum_peaks += m.peak[c];
        cr_assert(m.peak_total <= sum_peaks && m.peak_total >= m.current_total, "%s rank %d", what,
                  g);
    }
}

Test(runtime_exec_mem, categories_match_the_schedule)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setup u;
        make(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp);
        steps(&u, 2);
        check_categories(&u, cases[i].kind);
        drop(&u);
    }
}

/* Ranks whose tensors go through host staging copies (as a CUDA backend's do), on CPU
 * backends: the transport's copies stay outside the accounting, so every byte is placed by
 * program order and the plan computed at creation equals every measured peak to the byte. */
/* Rank g's measured peaks (every category and the total) against the executor's plan: equal
 * to the byte. */
static void expect_rank_equals_plan(setup *u, int g, const char *what)
{
    pp_mem_stats got;
    pp_backend_mem_stats(pp_rt_executor_backend(u->ex, g), &got);
    const pp_rt_plan_rank *pl = pp_rt_executor_plan(u->ex, g);
    for (int c = 0; c < PP_MEM__COUNT; c++)
        cr_assert_eq(got.peak[c], pl->peak[c], "%s rank %d: %s peak %zu, plan %zu", what, g,
                     pp_mem_category_name((pp_mem_category)c), got.peak[c], pl->peak[c]);
    cr_assert_eq(got.peak_total, pl->peak_total, "%s rank %d", what, g);
}

/* Steps u twice, holds every rank's measured peaks to its plan, and drops u. */
static void check_plan_of(setup *u, const char *what)
{
    cr_assert(pp_rt_executor_plan_is_exact(u->ex), "%s: a staged plan is exact", what);
    steps(u, 2);
    for (int g = 0; g < pp_rt_executor_ranks(u->ex); g++)
        expect_rank_equals_plan(u, g, what);
    drop(u);
}

static void check_staged_plan(const char *kind, int D, int N, int v, int dp, int first, int last)
{
    setup u;
    make_split(&u, kind, D, N, v, dp, PP_RT_BACKEND_CPU_STAGED, first, last, 1);
    char what[64];
    snprintf(what, sizeof what, "%s %d/%d", kind, first, last);
    check_plan_of(&u, what);
}

Test(runtime_exec_mem, plan_equals_measured_when_staged)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_staged_plan(cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp, 0, 0);
}

/* issue 20: the plan follows first/last-stage splits of the 8 layers (every schedule) */
Test(runtime_exec_mem, plan_follows_first_last_stage_splits)
{
    check_staged_plan("1f1b", 4, 8, 0, 1, 3, 1);        /* 3 + 2 + 2 + 1 */
    check_staged_plan("gpipe", 2, 4, 0, 2, 5, 3);       /* 5 + 3 */
    check_staged_plan("interleaved", 2, 4, 2, 1, 1, 3); /* virtual stages 1 + 2 + 2 + 3 */
    check_staged_plan("chimera", 4, 4, 0, 1, 1, 1);     /* 1 + 3 + 3 + 1 in both pipes */
    check_staged_plan("bitpipe", 2, 4, 0, 2, 3, 1);     /* 3 + 2 + 2 + 1 in both pipes */
}

/* The same with every stage split over 2 tensor-parallel ranks (the model's 2 heads and FFN
 * 64 split; qkv, fc and the projections' weights are halves, the rest whole): the plan, which
 * sizes a rank's shards with pp_rt_sizes.h's t, equals every rank's measured peaks to the
 * byte, and a tensor rank holds fewer parameter bytes than the unsplit rank. */
Test(runtime_exec_mem, plan_equals_measured_with_tensor_parallelism)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setup u, one;
        make_split(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                   PP_RT_BACKEND_CPU_STAGED, 0, 0, 2);
        make_on(&one, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                PP_RT_BACKEND_CPU_STAGED);
        cr_assert_eq(pp_rt_executor_ranks(u.ex), 2 * pp_rt_executor_ranks(one.ex));
        steps(&u, 2);
        char what[64];
        snprintf(what, sizeof what, "%s t=2", cases[i].kind);
        for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
            expect_rank_equals_plan(&u, g, what);
            const pp_rt_plan_rank *pl = pp_rt_executor_plan(u.ex, g);
            /* rank g = tp + 2 * (pp + D * dp) splits rank g / 2 of the unsplit run */
            const pp_rt_plan_rank *p1 = pp_rt_executor_plan(one.ex, g / 2);
            cr_assert_lt(pl->params, p1->params, "%s rank %d", cases[i].kind, g);
        }
        drop(&one);
        drop(&u);
    }
}

/* Split backward (I, W): a slot stays from F to W and each I adds what it holds for W
 * (pp_rt_size_wheld_bytes); the plan equals the measured peaks to the byte, with W right after
 * its I and with every W at the end (where the activations of all N micro-batches and their
 * held gradients peak together), with dp 2 and with t = 2 (with and without sequence
 * parallelism). The hand count of
 * check_categories agrees too. */
static void check_split_plan(const char *kind, int D, int N, int v, int dp, int where, int tp,
                             int seqpar)
{
    char what[96];
    snprintf(what, sizeof what, "%s D=%d N=%d dp=%d t=%d%s split, W %s", kind, D, N, dp, tp,
             seqpar ? " SP" : "", where == SPLIT_W_AT_END ? "at the end" : "after its I");
    setup u = {.s = sched_split_gen(kind, D, N, v, model().layers, where)};
    make_sched(&u, dp, PP_RT_BACKEND_CPU_STAGED, tp, seqpar);
    check_plan_of(&u, what);
    if (tp > 1)
        return;
    u.s = sched_split_gen(kind, D, N, v, model().layers, where);
    make_sched(&u, dp, PP_RT_BACKEND_CPU, 1, 0);
    steps(&u, 2);
    check_categories(&u, what);
    drop(&u);
}

Test(runtime_exec_mem, plan_equals_measured_for_split_backward)
{
    check_split_plan("1f1b", 4, 8, 0, 1, SPLIT_W_AFTER_I, 1, 0);
    check_split_plan("1f1b", 4, 8, 0, 1, SPLIT_W_AT_END, 1, 0);
    check_split_plan("gpipe", 2, 4, 0, 2, SPLIT_W_AT_END, 1, 0);
    check_split_plan("interleaved", 2, 4, 2, 1, SPLIT_W_AT_END, 1, 0);
    check_split_plan("1f1b", 2, 4, 0, 1, SPLIT_W_AT_END, 2, 0);
    /* with sequence parallelism I also keeps the all-gathered LayerNorm outputs */
    check_split_plan("1f1b", 2, 4, 0, 1, SPLIT_W_AT_END, 2, 1);
}

/* Deferring every W holds more than 1F1B does: the plan grows by the held-for-W bytes of the
 * slots it keeps (a plan that ignored them, or a stage that freed them early, would not). */
Test(runtime_exec_mem, deferred_w_holds_more_than_fused)
{
    setup f, d;
    make_split(&f, "1f1b", 2, 4, 0, 1, PP_RT_BACKEND_CPU_STAGED, 0, 0, 1);
    d.s = sched_split_gen("1f1b", 2, 4, 0, model().layers, SPLIT_W_AT_END);
    make_sched(&d, 1, PP_RT_BACKEND_CPU_STAGED, 1, 0);
    /* rank 0 (stage 0, layers 0..3): fused 1F1B keeps 2 slots at most; deferred W keeps all
     * 4 slots and, after the last I, the 4 held-for-W buffers */
    pp_rt_stage *st = pp_rt_executor_stage(d.ex, 0, 0, 0);
    size_t slot = pp_rt_stage_act_bytes(st), held = pp_rt_stage_held_bytes(st);
    const pp_rt_plan_rank *pf = pp_rt_executor_plan(f.ex, 0), *pd = pp_rt_executor_plan(d.ex, 0);
    size_t tok = 4 * (size_t)B * T * sizeof(int32_t);
    cr_assert_eq(pf->peak[PP_MEM_ACTS], tok + 2 * slot, "fused %zu", pf->peak[PP_MEM_ACTS]);
    cr_assert_eq(pd->peak[PP_MEM_ACTS], tok + 4 * (slot + held), "deferred %zu, expected %zu",
                 pd->peak[PP_MEM_ACTS], tok + 4 * (slot + held));
    check_plan_of(&d, "1f1b split, W at the end");
    drop(&f);
}

/* The same with sequence parallelism (t = 2, with the uneven first/last splits of
 * plan_follows_first_last_stage_splits, so stages of different sizes meet): the plan sizes
 * the slots of the rank's T/2 tokens, the all-gathered final LayerNorm, the forward and
 * backward workspaces and the halved messages (pp_rt_sizes.h) and equals every rank's measured
 * peaks to the byte; a rank saves fewer activation bytes than without sequence parallelism. */
Test(runtime_exec_mem, plan_equals_measured_with_sequence_parallelism)
{
    static const int split[][2] = {{3, 1}, {5, 3}, {1, 3}, {1, 1}, {3, 1}}; /* as cases */
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) {
        setup u, tp;
        int first = split[i][0], last = split[i][1];
        make_split_sp(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                      PP_RT_BACKEND_CPU_STAGED, first, last, 2, 1);
        make_split(&tp, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                   PP_RT_BACKEND_CPU_STAGED, first, last, 2);
        steps(&u, 2);
        char what[64];
        snprintf(what, sizeof what, "%s t=2 SP", cases[i].kind);
        for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
            expect_rank_equals_plan(&u, g, what);
            const pp_rt_plan_rank *pl = pp_rt_executor_plan(u.ex, g);
            cr_assert_gt(pl->peak[PP_MEM_WORKSPACE], 0, "%s rank %d", cases[i].kind, g);
            const pp_rt_plan_rank *p2 = pp_rt_executor_plan(tp.ex, g);
            cr_assert_lt(pl->peak[PP_MEM_ACTS], p2->peak[PP_MEM_ACTS], "%s rank %d",
                         cases[i].kind, g);
        }
        drop(&tp);
        drop(&u);
    }
}

/* Context parallelism (cp = 2, and cp = 4 where 2 cp divides the 16 tokens; GPT and the Llama
 * block; with t = 2 and sequence parallelism once): the plan sizes the slots of the rank's
 * T / cp tokens (their attention probabilities over the whole sequence's keys), the ring's
 * K/V block, online-softmax statistics and block scratch in the forward, its K/V and dK/dV
 * blocks and rowsum(dy y) in the backward (pp_rt_sizes.h), and the messages of T / cp tokens,
 * and equals every rank's measured peaks to the byte; a rank saves fewer activation bytes than
 * without context parallelism. */
static void check_cp_plan(const char *kind, int D, int N, int v, int dp, int tp, int cp)
{
    setup u, one;
    cp_ranks = cp;
    make_split_sp(&u, kind, D, N, v, dp, PP_RT_BACKEND_CPU_STAGED, 0, 0, tp, tp > 1);
    cp_ranks = 0;
    make_split_sp(&one, kind, D, N, v, dp, PP_RT_BACKEND_CPU_STAGED, 0, 0, tp, tp > 1);
    cr_assert_eq(pp_rt_executor_ranks(u.ex), cp * pp_rt_executor_ranks(one.ex));
    steps(&u, 2);
    char what[96];
    snprintf(what, sizeof what, "%s%s t=%d cp=%d", llama ? "llama " : "", kind, tp, cp);
    for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
        expect_rank_equals_plan(&u, g, what);
        const pp_rt_plan_rank *pl = pp_rt_executor_plan(u.ex, g);
        cr_assert_gt(pl->peak[PP_MEM_WORKSPACE], 0, "%s rank %d", what, g);
        const pp_rt_plan_rank *p1 = pp_rt_executor_plan(one.ex, 0);
        cr_assert_lt(pl->peak[PP_MEM_ACTS], p1->peak[PP_MEM_ACTS], "%s rank %d", what, g);
    }
    drop(&one);
    drop(&u);
}

Test(runtime_exec_mem, plan_equals_measured_with_context_parallelism)
{
    check_cp_plan("1f1b", 4, 8, 0, 1, 1, 2);
    check_cp_plan("gpipe", 2, 4, 0, 2, 1, 4);
    check_cp_plan("interleaved", 2, 4, 2, 1, 1, 2);
    check_cp_plan("zbv", 2, 4, 0, 2, 1, 2);
    check_cp_plan("1f1b", 2, 4, 0, 1, 2, 2); /* t = 2, sequence parallelism */
}

Test(runtime_exec_mem, llama_plan_equals_measured_with_context_parallelism)
{
    llama = 1;
    check_cp_plan("1f1b", 2, 4, 0, 1, 1, 2);
    check_cp_plan("zbv", 2, 4, 0, 1, 2, 4); /* t = 2 with SP: 16 / 4 tokens split by 2 */
}

/* The default unstaged CPU backend counts the in-process transport's message copies
 * (PP_MEM_COMM): the ring's sends are held until the end of their ring step (runtime/
 * stage_cp.c, pp_transport_send_held), one K/V block per forward step, one per recomputation's
 * ring step and two per backward step, and the plan counts them there. With one pipeline rank
 * (no pipeline messages, whose copies' release depends on the receiver's timing) every rank's
 * measured peaks, the copies included, equal the plan to the byte; without the ring's copies
 * the plan would be 1 or 2 blocks low. */
static void check_unstaged_cp_plan(const char *kind, int N, int dp, int cp, int rc)
{
    setup u;
    cp_ranks = cp;
    pp_sched_params sp = {.ranks = 1, .microbatches = N, .layers = model().layers};
    OK(pp_sched_generate(kind, &sp, &u.s));
    pp_model_cfg m = model();
    pp_rt_exec_params ep = {.model = &m, .sched = u.s, .micro_batch = B, .seq = T, .dp = dp,
                            .seed = 5, .clip = 1.0f,
                            .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f},
                            .backend = PP_RT_BACKEND_CPU, .cp = cp, .recompute = rc};
    OK(pp_rt_executor_create(&ep, &u.ex));
    u.dp = dp;
    cp_ranks = 0;
    steps(&u, 2);
    char what[96];
    snprintf(what, sizeof what, "unstaged %s%s dp=%d cp=%d recompute %d", llama ? "llama " : "",
             kind, dp, cp, rc);
    for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
        expect_rank_equals_plan(&u, g, what);
        cr_assert_gt(pp_rt_executor_plan(u.ex, g)->peak[PP_MEM_COMM], 0, "%s rank %d", what, g);
    }
    drop(&u);
}

Test(runtime_exec_mem, unstaged_plan_counts_the_ring_copies)
{
    check_unstaged_cp_plan("gpipe", 4, 1, 2, PP_RT_RC_NONE);
    check_unstaged_cp_plan("1f1b", 2, 2, 4, PP_RT_RC_NONE);
    check_unstaged_cp_plan("1f1b", 2, 1, 2, PP_RT_RC_SELECTIVE);
    llama = 1;
    check_unstaged_cp_plan("gpipe", 2, 1, 2, PP_RT_RC_FULL);
    llama = 0;
}

/* With 3 kernel threads each of the two beyond the first holds its own attention scratch
 * (cpu_attention.c's parts: T x T floats, a ring block L x L under context parallelism), which
 * the backend reserves at the plan's figure and counts (PP_MEM_WORKSPACE): the plan, 2 x that
 * above the one-thread plan's workspace, equals the measured peaks to the byte. */
static void check_threads_plan(const char *kind, int D, int N, int cp)
{
    setup one, u;
    cp_ranks = cp;
    pp_backend_cpu_set_kernel_threads(1);
    make_split(&one, kind, D, N, 0, 1, PP_RT_BACKEND_CPU_STAGED, 0, 0, 1);
    pp_backend_cpu_set_kernel_threads(3);
    make_split(&u, kind, D, N, 0, 1, PP_RT_BACKEND_CPU_STAGED, 0, 0, 1);
    pp_backend_cpu_set_kernel_threads(1);
    cp_ranks = 0;
    char what[64];
    snprintf(what, sizeof what, "%s cp=%d, 3 kernel threads", kind, cp);
    size_t t = (size_t)T / (size_t)(cp > 1 ? cp : 1);
    size_t per = cp > 1 ? (t / 2) * (t / 2) * 4 : t * t * 4;
    for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++)
        cr_assert_eq(pp_rt_executor_plan(u.ex, g)->peak[PP_MEM_WORKSPACE],
                     pp_rt_executor_plan(one.ex, g)->peak[PP_MEM_WORKSPACE] + 2 * per, "%s rank %d",
                     what, g);
    drop(&one);
    check_plan_of(&u, what);
}

Test(runtime_exec_mem, kernel_threads_scratch_is_planned)
{
    check_threads_plan("1f1b", 2, 4, 0);
    check_threads_plan("1f1b", 2, 4, 2);
    llama = 1;
    check_threads_plan("zbv", 2, 4, 2);
}

static size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

Test(runtime_exec_mem, heap_growth_is_what_the_backends_count)
{
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer replaces malloc and does not feed glibc's mallinfo2 (it reads 0) */
    cr_skip_test("heap accounting needs glibc's allocator; this build uses AddressSanitizer's");
#endif
    /* warm-up: OpenBLAS and glibc's per-thread arenas set themselves up on first use */
    setup w;
    make(&w, "1f1b", 4, 4, 0, 1);
    steps(&w, 1);
    drop(&w);

    size_t before = heap_in_use();
    setup u;
    make(&u, "1f1b", 4, 4, 0, 1);
    steps(&u, 2);
    size_t after = heap_in_use();
    size_t counted = 0;
    for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
        pp_mem_stats m;
        pp_backend_mem_stats(pp_rt_executor_backend(u.ex, g), &m);
        /* what is live, and the arena the step's buffers are carved from (held between
         * steps: executor_arena.c) */
        counted += m.current_total + m.reserved;
    }
    long diff = (long)after - (long)before;
    /* Allowed beyond the counted bytes: descriptors, the schedule's copy, slot tables, spans
     * (a few KB) and allocator rounding (64-byte alignment, page-rounded large blocks). */
    long slack = 64 * 1024 + (long)counted / 20;
    cr_log_info("heap grew by %ld bytes, backends count %zu", diff, counted);
    cr_assert(diff >= (long)counted - slack && diff <= (long)counted + slack,
              "the heap grew by %ld bytes; the backends count %zu", diff, counted);
    drop(&u);
}

/* The Llama block: the plan equals the measured peaks to the byte for every schedule, with
 * t = 2 (KV heads split), with sequence parallelism and with split backward; the hand count
 * of the categories agrees. */
static void check_block_plans(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_staged_plan(cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp, 0, 0);
        setup u;
        make_split(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                   PP_RT_BACKEND_CPU_STAGED, 0, 0, 2);
        check_plan_of(&u, cases[i].kind);
        make_split_sp(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                      PP_RT_BACKEND_CPU_STAGED, 0, 0, 2, 1);
        check_plan_of(&u, cases[i].kind);
        make(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp);
        steps(&u, 2);
        check_categories(&u, cases[i].kind);
        drop(&u);
    }
    check_split_plan("1f1b", 4, 8, 0, 1, SPLIT_W_AT_END, 1, 0);
    check_split_plan("1f1b", 2, 4, 0, 1, SPLIT_W_AT_END, 2, 1);
}

Test(runtime_exec_mem, llama_plan_equals_measured)
{
    llama = 1;
    check_block_plans();
}

/* Qwen3's block the same way: the q/k norms' weights, their saved inputs and rstd, the
 * attention output's gradient wider than hidden, the norms' partial gradients at t = 2. */
Test(runtime_exec_mem, qwen3_plan_equals_measured)
{
    llama = 2;
    check_block_plans();
}

/* Kernel threads (pprun --kernel-threads 2): in the attention backward each thread beyond the
 * first takes its own dS of one (batch row, KV head), T x T floats. The backend counts it as
 * workspace, reserved at the plan's figure (pp_rt_size_kernel_scratch_host) and held to it, and
 * the plan equals the measured peaks to the byte, GPT and Llama blocks, a few schedules, on the
 * staged CPU backend (every category; the plain one's in-process copies depend on timing: its
 * workspace) (before: the threads' scratch was malloc'd outside both, and the process held more
 * than the plan said). */
static void check_kernel_threads(void)
{
    cr_assert_eq(pp_backend_cpu_set_kernel_threads(2), 2);
    const size_t want = (size_t)T * T * 4; /* one extra thread's dS */
    const int pick[] = {0, 1, 5};          /* 1f1b, gpipe with dp 2, zb-h1 (split backward) */
    for (size_t i = 0; i < sizeof pick / sizeof pick[0]; i++) {
        int c = pick[i];
        for (int staged = 0; staged < 2; staged++) {
            setup u;
            make_on(&u, cases[c].kind, cases[c].D, cases[c].N, cases[c].v, cases[c].dp,
                    staged ? PP_RT_BACKEND_CPU_STAGED : PP_RT_BACKEND_CPU);
            char what[64];
            snprintf(what, sizeof what, "%s%s, 2 kernel threads", cases[c].kind,
                     staged ? " staged" : "");
            for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++)
                cr_assert_eq(pp_rt_executor_plan(u.ex, g)->kernel_scratch, want, "%s", what);
            steps(&u, 2);
            for (int g = 0; staged && g < pp_rt_executor_ranks(u.ex); g++)
                expect_rank_equals_plan(&u, g, what);
            for (int g = 0; !staged && g < pp_rt_executor_ranks(u.ex); g++) {
                pp_mem_stats got;
                pp_backend_mem_stats(pp_rt_executor_backend(u.ex, g), &got);
                size_t plan = pp_rt_executor_plan(u.ex, g)->peak[PP_MEM_WORKSPACE];
                cr_assert_eq(got.peak[PP_MEM_WORKSPACE], plan, "%s rank %d: workspace %zu, "
                             "plan %zu", what, g, got.peak[PP_MEM_WORKSPACE], plan);
            }
            drop(&u);
        }
    }
}

Test(runtime_exec_mem, plan_equals_measured_with_kernel_threads)
{
    check_kernel_threads();
}

Test(runtime_exec_mem, llama_plan_equals_measured_with_kernel_threads)
{
    llama = 1;
    check_kernel_threads();
}

/* The vocabulary split with a vocabulary t does not divide (127 at t = 2: 64 rows per rank, the
 * second's last one padding): every tensor rank holds the same bytes (its 64 rows of wte and
 * of the head, its slice of the probabilities, the loss's statistics in the forward
 * workspace), which the plan counts: it equals every rank's measured peaks to the byte, with
 * and without sequence parallelism, for the GPT block (tied head) and the Llama block
 * (untied). */
static void check_vocab_split(int seqpar)
{
    vocab = 127;
    for (size_t i = 0; i < 3; i++) {
        setup u;
        make_split_sp(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
                      PP_RT_BACKEND_CPU_STAGED, 0, 0, 2, seqpar);
        steps(&u, 2);
        char what[64];
        snprintf(what, sizeof what, "%s t=2 V=127%s", cases[i].kind, seqpar ? " SP" : "");
        for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++)
            expect_rank_equals_plan(&u, g, what);
        for (int q = 0; q < 2; q++) {
            pp_rt_tensor *wte =
                pp_rt_stage_tensor(pp_rt_executor_stage_tp(u.ex, 0, q, 0, 0), "wte");
            cr_assert(wte && wte->n == (size_t)64 * model().hidden, "%s: wte of rank %d", what, q);
        }
        drop(&u);
    }
}

Test(runtime_exec_mem, plan_equals_measured_with_uneven_vocabulary_split)
{
    check_vocab_split(0);
    check_vocab_split(1);
}

Test(runtime_exec_mem, plan_equals_measured_with_uneven_vocabulary_split_llama)
{
    llama = 1;
    check_vocab_split(0);
    check_vocab_split(1);
}
