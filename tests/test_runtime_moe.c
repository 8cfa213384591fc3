/* test_runtime_moe.c — the mixture-of-experts block (runtime/stage_moe.c).
 *
 * The block's MLP against a straightforward reference written here in double (per token: the
 * router's softmax, its top-k with ties to the lowest index, the renormalised weights, each
 * chosen expert's SwiGLU MLP, the shared experts, the load-balancing loss); its backward
 * against central differences of that reference (L = sum(out R) + aux); a wrong dispatch index
 * and a wrong combine weight planted once each and seen to fail the comparison; the aux loss
 * on a hand-computed case; dropless routing (every token at its k distinct experts, the
 * experts' rows summing to N k) and the tie rule; then whole runs (Mixtral's block and
 * Qwen3-MoE's, with its per-head q/k norm): every schedule with dp 2 trains as one unpipelined
 * rank (fp32 tolerance below), expert parallelism as ep 1, and every rank's measured peaks
 * equal the memory plan to the byte.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "pp_test_ok.h"
#include "pp_test_run.h"
#include "pprun_json.h"
#include "rt_train.h"
#include "stage_impl.h" /* pp_stage_moe_*, the slot's views */

enum { B = 2, T = 4, NT = B * T, C = 8, E = 4, K = 2, FE = 6, FS = 4 };

static pp_model_cfg moe_model(int layers, int seq, int shared, double aux)
{
    pp_model_cfg m = {.layers = layers, .hidden = C, .heads = 2, .ffn = 12, .vocab = 64,
                      .seq = seq, .kv_heads = 1, .norm = PP_NORM_RMSNORM, .norm_eps = 1e-5,
                      .mlp = PP_MLP_SWIGLU, .pos = PP_POS_ROPE, .rope_theta = 10000,
                      .nobias = PP_NOBIAS_ALL, .untied = 1};
    m.moe = (pp_moe_cfg){.experts = E, .top_k = K, .ffn = FE, .shared = shared ? 1 : 0,
                         .shared_ffn = shared ? FS : 0, .norm_topk = 1, .aux_coef = aux};
    return m;
}

/* Qwen3-MoE's block (modeling_qwen3_moe.py): moe_model's with the per-head q/k RMSNorm,
 * heads of head_dim 8 where hidden / heads is 4, and the top-k weights as the softmax gives
 * them (norm_topk_prob false, transformers' default; Mixtral always renormalises). */
static pp_model_cfg qwen3_moe_model(int layers, int seq, int shared, double aux)
{
    pp_model_cfg m = moe_model(layers, seq, shared, aux);
    m.qk_norm = 1;
    m.head_dim = 8;
    m.moe.norm_topk = 0;
    return m;
}

/* The models a whole-run test trains: Mixtral's block and Qwen3-MoE's. */
static pp_model_cfg (*const run_models[])(int, int, int, double) = {moe_model, qwen3_moe_model};
static const char *const run_model_names[] = {"mixtral", "qwen3-moe"};

/* One MoE block with its buffers: the slot's views, a random ln2, the workspaces. */
typedef struct {
    pp_backend *be;
    pp_rt_stage *st;
    pp_model_cfg m;
    void *slot;
    pp_layer_acts a;
    float *out, *xg, *dln, *dbig, *mws, *R;
} blk;

static float urand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) & 0xffffff) / 16777216.0f * 2.0f - 1.0f;
}

static void blk_open(blk *b, int shared, double aux)
{
    b->m = moe_model(1, T, shared, aux);
    OK(pp_backend_cpu_create(&b->be));
    pp_rt_stage_params p = {.model = &b->m, .layer_begin = 0, .layer_end = 1, .micro_batch = B,
                            .seq = T, .seed = 11};
    OK(pp_rt_stage_create(b->be, &p, &b->st));
    b->slot = calloc(b->st->slot_bytes, 1);
    pp_stage_layer_acts(b->st, b->slot, 0, NULL, &b->a);
    pp_rt_dims d = b->st->d;
    b->out = calloc(NT * C, 4);
    b->dln = calloc(NT * C, 4);
    b->R = calloc(NT * C, 4);
    b->xg = calloc(pp_rt_size_moe_fwd_ws_floats(&d, NT), 4);
    b->mws = calloc(pp_rt_size_moe_bwd_ws_floats(&d, NT), 4);
    b->dbig = calloc(NT * (d.fc + 1), 4);
    uint64_t s = 5;
    for (int i = 0; i < NT * C; i++)
        b->a.ln2[i] = urand(&s), b->R[i] = urand(&s);
    /* larger router weights than the 0.02 init, so the scores differ well beyond fp32 noise */
    pp_rt_tensor *r = pp_rt_stage_tensor(b->st, "h0.moe.router.w");
    for (size_t i = 0; i < r->n; i++)
        r->data[i] = urand(&s);
    int n;
    pp_rt_tensor *ts = pp_rt_stage_tensors(b->st, &n);
    for (int i = 0; i < n; i++) /* and the experts' of order 1 */
        if (strstr(ts[i].name, "mlp.") || strstr(ts[i].name, "experts"))
            for (size_t j = 0; j < ts[i].n; j++)
                ts[i].data[j] = 0.5f * urand(&s);
}

static void blk_close(blk *b)
{
    free(b->out), free(b->dln), free(b->R), free(b->xg), free(b->mws), free(b->dbig);
    free(b->slot);
    pp_rt_stage_destroy(b->st);
    pp_backend_destroy(b->be);
}

static const float *W(blk *b, const char *name)
{
    char nm[64];
    snprintf(nm, sizeof nm, "h0.%s", name);
    return pp_rt_stage_tensor(b->st, nm)->data;
}

/* SwiGLU MLP of width F: y (C) += scale * W2 (silu(W1g x) * W1u x), W1 (2F, C), W2 (C, F). */
static void ref_mlp(const float *w1, const float *w2, int F, const double *x, double scale,
                    double *y)
{
    double act[16];
    for (int f = 0; f < F; f++) {
        double g = 0, u = 0;
        for (int c = 0; c < C; c++)
            g += w1[f * C + c] * x[c], u += w1[(F + f) * C + c] * x[c];
        act[f] = g / (1.0 + exp(-g)) * u;
    }
    for (int c = 0; c < C; c++) {
        double acc = 0;
        for (int f = 0; f < F; f++)
            acc += w2[c * F + f] * act[f];
        y[c] += scale * acc;
    }
}

/* The reference MoE MLP of x (NT, C) into y (NT, C); returns sum(y R) + aux, its aux in *aux. */
static double ref_moe(blk *b, const double *x, double *y, double *aux_out)
{
    const float *wr = W(b, "moe.router.w"), *w1 = W(b, "moe.experts.fc.w");
    const float *w2 = W(b, "moe.experts.proj.w");
    double P[E] = {0}, cnt[E] = {0}, L = 0;
    for (int n = 0; n < NT; n++) {
        const double *xn = x + n * C;
        double *yn = y + n * C, s[E], mx = -1e300, sum = 0;
        for (int e = 0; e < E; e++) {
            s[e] = 0;
            for (int c = 0; c < C; c++)
                s[e] += wr[e * C + c] * xn[c];
            mx = s[e] > mx ? s[e] : mx;
        }
        for (int e = 0; e < E; e++)
            sum += (s[e] = exp(s[e] - mx));
        int idx[K];
        double w[K], ws = 0;
        for (int e = 0; e < E; e++)
            s[e] /= sum, P[e] += s[e] / NT;
        for (int j = 0; j < K; j++) { /* the largest not taken; ties: the lowest index */
            idx[j] = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++)
                    taken |= idx[i] == e;
                if (!taken && (idx[j] < 0 || s[e] > s[idx[j]]))
                    idx[j] = e;
            }
            w[j] = s[idx[j]], ws += w[j], cnt[idx[j]] += 1;
        }
        memset(yn, 0, C * sizeof *yn);
        for (int j = 0; j < K; j++)
            ref_mlp(w1 + (size_t)idx[j] * 2 * FE * C, w2 + (size_t)idx[j] * C * FE, FE, xn,
                    w[j] / ws, yn);
        if (b->m.moe.shared)
            ref_mlp(W(b, "mlp.fc.w"), W(b, "mlp.proj.w"), FS, xn, 1.0, yn);
        for (int c = 0; c < C; c++)
            L += yn[c] * b->R[n * C + c];
    }
    double aux = 0;
    for (int e = 0; e < E; e++)
        aux += cnt[e] / NT * P[e];
    *aux_out = b->m.moe.aux_coef * E * aux;
    return L + *aux_out;
}

static double ref_of_ln2(blk *b, double *aux)
{
    double x[NT * C], y[NT * C];
    for (int i = 0; i < NT * C; i++)
        x[i] = b->a.ln2[i];
    return ref_moe(b, x, y, aux);
}

/* The largest |out - reference| of the block's forward (out from zero). */
static double fwd_error(blk *b, double *aux_got, double *aux_ref)
{
    memset(b->out, 0, NT * C * 4);
    b->st->aux_loss = 0;
    OK(pp_stage_moe_fwd(b->st, 0, &b->a, b->out, b->xg));
    double x[NT * C], y[NT * C], err = 0;
    for (int i = 0; i < NT * C; i++)
        x[i] = b->a.ln2[i];
    ref_moe(b, x, y, aux_ref);
    for (int i = 0; i < NT * C; i++)
        err = fmax(err, fabs(b->out[i] - y[i]));
    *aux_got = b->st->aux_loss;
    return err;
}

static const double FWD_TOL = 1e-5; /* fp32 against double on values of order 1 */

static void check_forward(int shared)
{
    blk b;
    blk_open(&b, shared, 0.05);
    double ag, ar;
    double err = fwd_error(&b, &ag, &ar);
    cr_assert_lt(err, FWD_TOL, "shared %d: |out - reference| %g", shared, err);
    cr_assert_lt(fabs(ag - ar), 1e-6, "aux loss %.9g, reference %.9g", ag, ar);
    cr_assert_gt(ar, 0.0);
    blk_close(&b);
}

Test(runtime_moe, forward_matches_reference)
{
    check_forward(0);
    check_forward(1);
}

/* The comparison catches a wrong dispatch index and a wrong combine weight. */
Test(runtime_moe, planted_dispatch_and_combine_faults_fail)
{
    static const int faults[] = {PP_MOE_FAULT_INDEX, PP_MOE_FAULT_WEIGHT};
    for (int f = 0; f < 2; f++) {
        blk b;
        blk_open(&b, 0, 0.0);
        pp_stage_moe_fault = faults[f];
        double ag, ar, err = fwd_error(&b, &ag, &ar);
        pp_stage_moe_fault = PP_MOE_FAULT_NONE;
        cr_assert_gt(err, 100 * FWD_TOL, "fault %d went unseen: error %g", faults[f], err);
        blk_close(&b);
    }
}

/* d/dv of the reference's L at v = *p, by central differences in double. */
static double central(blk *b, float *p)
{
    float v = *p;
    const float h = 1e-2f;
    double aux;
    *p = v + h;
    double lp = ref_of_ln2(b, &aux);
    *p = v - h;
    double lm = ref_of_ln2(b, &aux);
    *p = v;
    return (lp - lm) / (2.0 * h);
}

/* Backward against central differences of the reference: d(ln2), the router's, the experts'
 * and the shared experts' weight gradients (through the renormalised weights and the aux
 * loss). fp32 analytic against a double difference quotient with h = 1e-2 (its error
 * O(h^2) on curvature of order 1): within 2e-3 absolute plus 1e-2 relative. */
static void check_backward(int shared)
{
    blk b;
    blk_open(&b, shared, 0.3);
    double ag, ar;
    fwd_error(&b, &ag, &ar);
    pp_rt_stage_zero_grad(b.st);
    OK(pp_stage_moe_bwd(b.st, 0, &b.a, b.R, b.dln, b.dbig, b.mws, 1.0f));
    for (int i = 0; i < NT * C; i += 3) {
        double fd = central(&b, &b.a.ln2[i]);
        cr_assert_leq(fabs(b.dln[i] - fd), 2e-3 + 1e-2 * fabs(fd), "d ln2[%d] %.6g, differences %.6g",
                      i, b.dln[i], fd);
    }
    const char *names[] = {"moe.router.w", "moe.experts.fc.w", "moe.experts.proj.w", "mlp.fc.w",
                           "mlp.proj.w"};
    for (int t = 0; t < (shared ? 5 : 3); t++) {
        char nm[64];
        snprintf(nm, sizeof nm, "h0.%s", names[t]);
        pp_rt_tensor *tt = pp_rt_stage_tensor(b.st, nm);
        double gsum = 0;
        for (size_t i = 0; i < tt->n; i += 5) {
            double fd = central(&b, &tt->data[i]);
            gsum += fabs(fd);
            cr_assert_leq(fabs(tt->grad[i] - fd), 2e-3 + 1e-2 * fabs(fd),
                          "%s[%zu]: gradient %.6g, differences %.6g", nm, i, tt->grad[i], fd);
        }
        cr_assert_gt(gsum, 1e-3, "%s: no gradient to compare", nm);
    }
    blk_close(&b);
}

Test(runtime_moe, backward_matches_differences)
{
    check_backward(0);
    check_backward(1);
}

/* Hand case: N = 2 tokens, E = 2, coefficient 0.1. Scores (0.7, 0.3) and (0.4, 0.6), top-1:
 * expert 0 then 1, f = (1/2, 1/2), P = (0.55, 0.45): aux = 0.1 * 2 * (0.5 * 0.55 + 0.5 *
 * 0.45) = 0.1 exactly in the formula; with top-2 both tokens count at both experts:
 * f = (1, 1), aux = 0.1 * 2 * (0.55 + 0.45) = 0.2. */
Test(runtime_moe, aux_loss_hand_case)
{
    struct pp_rt_stage st = {.B = 1, .T = 2};
    st.d.E = 2;
    st.cfg.moe.aux_coef = 0.1;
    float score[4] = {0.7f, 0.3f, 0.4f, 0.6f};
    int32_t off1[3] = {0, 1, 2}, off2[3] = {0, 2, 4};
    pp_layer_acts a = {.mscore = score, .moff = off1};
    cr_assert_float_eq(pp_stage_moe_aux(&st, &a), 0.1f, 1e-7f);
    a.moff = off2;
    cr_assert_float_eq(pp_stage_moe_aux(&st, &a), 0.2f, 1e-7f);
}

/* Dropless: every token at K distinct experts, every assignment at one sorted row, the
 * experts' rows summing to N K. Ties: a zero router gives every expert the same score, and
 * every token the experts 0 .. K-1. */
Test(runtime_moe, dropless_and_ties_to_the_lowest_index)
{
    blk b;
    blk_open(&b, 0, 0.0);
    double ag, ar;
    fwd_error(&b, &ag, &ar);
    cr_assert_eq(b.a.moff[0], 0);
    cr_assert_eq(b.a.moff[E], NT * K, "rows %d, expected N K = %d", b.a.moff[E], NT * K);
    int seen[NT * K] = {0};
    for (int r = 0; r < NT * K; r++) {
        int i = b.a.morder[r];
        cr_assert(i >= 0 && i < NT * K && !seen[i]++);
        cr_assert_eq(b.a.mpos[i], r);
        int e = b.a.midx[i];
        cr_assert(r >= b.a.moff[e] && r < b.a.moff[e + 1], "row %d outside expert %d's", r, e);
    }
    for (int n = 0; n < NT; n++)
        cr_assert_neq(b.a.midx[n * K], b.a.midx[n * K + 1]);
    pp_rt_tensor *r = pp_rt_stage_tensor(b.st, "h0.moe.router.w");
    memset(r->data, 0, r->n * 4);
    fwd_error(&b, &ag, &ar);
    for (int n = 0; n < NT; n++)
        for (int j = 0; j < K; j++)
            cr_assert_eq(b.a.midx[n * K + j], j, "token %d slot %d: expert %d", n, j,
                         b.a.midx[n * K + j]);
    blk_close(&b);
}

/* ---- whole runs ---- */

enum { RL = 4, RT = 8, STEPS = 2 };

static void start_rc(rt_train *u, const char *kind, int D, int N, int v, int dp, int ep_,
                     int backend, const pp_model_cfg *m, int recompute)
{
    pp_rt_exec_params ep = {.model = m, .micro_batch = 2, .seq = RT, .dp = dp, .seed = 7,
                            .ep = ep_, .recompute = recompute,
                            .clip = 1.0f,
                            .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                                      .weight_decay = 0.1f},
                            .backend = backend};
    rt_train_run(u, kind, D, N, v, ep, STEPS, 1, 3);
}

static void start_ep(rt_train *u, const char *kind, int D, int N, int v, int dp, int ep_,
                     int backend, const pp_model_cfg *m)
{
    start_rc(u, kind, D, N, v, dp, ep_, backend, m, PP_RT_RC_NONE);
}

static void start(rt_train *u, const char *kind, int D, int N, int v, int dp, int backend,
                  const pp_model_cfg *m)
{
    start_ep(u, kind, D, N, v, dp, 1, backend, m);
}

/* Every parameter of u (dp replicas, its schedule's stages) within tol of the one-rank run
 * ref, by name. */
static void expect_params_near(rt_train *u, rt_train *ref, const char *what, double tol)
{
    const pp_sched *s = u->s;
    for (int p = 0; p < s->n_pipes; p++)
        for (int si = 0; si < s->stages_per_pipe; si++) {
            int n;
            pp_rt_tensor *ts = pp_rt_stage_tensors(pp_rt_executor_stage(u->ex, 0, p, si), &n);
            for (int j = 0; j < n; j++) {
                pp_rt_tensor *rt = pp_rt_stage_tensor(pp_rt_executor_stage(ref->ex, 0, 0, 0),
                                                      ts[j].name);
                cr_assert(rt, "%s: %s not in the reference", what, ts[j].name);
                for (size_t i = 0; i < ts[j].n; i++)
                    cr_assert_leq(fabs(ts[j].data[i] - rt->data[i]), tol,
                                  "%s: %s[%zu] %.9g, one rank %.9g", what, ts[j].name, i,
                                  ts[j].data[i], rt->data[i]);
            }
        }
}

/* Every schedule (1F1B, interleaved, ZB-V, GPipe, ZB-H1, DualPipeV, Chimera and BitPipe with
 * their two pipes) over 2 ranks with dp 2 trains as one rank of 8 micro-batches, for
 * Mixtral's block and Qwen3-MoE's: losses within 1e-5 relative, parameters after 2 AdamW
 * steps within 1e-5 (fp32 sums in another order: dp's all-reduce, the pipeline's micro-batch
 * grouping). */
Test(runtime_moe, schedules_with_dp_train_as_one_rank)
{
    for (int mi = 0; mi < 2; mi++) {
        pp_model_cfg m = run_models[mi](RL, RT, 0, 0.02);
        OK(pp_model_check_runnable(&m));
        rt_train ref;
        start(&ref, "1f1b", 1, 8, 0, 1, PP_RT_BACKEND_CPU, &m);
        static const struct {
            const char *kind;
            int v;
        } runs[] = {{"1f1b", 0},      {"interleaved", 2}, {"zbv", 0},     {"gpipe", 0},
                    {"zb-h1", 0},     {"dualpipev", 0},   {"chimera", 0}, {"bitpipe", 0}};
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            rt_train u;
            char what[64];
            snprintf(what, sizeof what, "%s %s", run_model_names[mi], runs[i].kind);
            start(&u, runs[i].kind, 2, 4, runs[i].v, 2, PP_RT_BACKEND_CPU, &m);
            for (int k = 0; k < STEPS; k++)
                cr_assert_leq(fabs(u.loss[k] - ref.loss[k]), 1e-5 * fabs(ref.loss[k]),
                              "%s: step %d loss %.9g, one rank %.9g", what, k + 1, u.loss[k],
                              ref.loss[k]);
            expect_params_near(&u, &ref, what, 1e-5);
            rt_train_stop(&u);
        }
        rt_train_stop(&ref);
    }
}

/* Every parameter of every replica of u (expert parallelism over ep) within tol of the run
 * ref without it: a replica's expert tensors are rows [k % ep, ..) of ref's. */
static void expect_ep_params_near(rt_train *u, rt_train *ref, int dp, int ep, const char *what,
                                  double tol)
{
    const pp_sched *s = u->s;
    for (int k = 0; k < dp; k++)
        for (int p = 0; p < s->n_pipes; p++)
            for (int si = 0; si < s->stages_per_pipe; si++) {
                int n, nr;
                pp_rt_tensor *ts = pp_rt_stage_tensors(pp_rt_executor_stage(u->ex, k, p, si), &n);
                pp_rt_tensor *rs =
                    pp_rt_stage_tensors(pp_rt_executor_stage(ref->ex, k, p, si), &nr);
                cr_assert_eq(n, nr);
                for (int j = 0; j < n; j++) {
                    int ex = pp_rt_tensor_is_expert(ts[j].name);
                    size_t off = ex ? (size_t)(k % ep) * ts[j].n : 0;
                    cr_assert_eq(ts[j].n * (ex ? (size_t)ep : 1), rs[j].n, "%s: %s", what,
                                 ts[j].name);
                    for (size_t i = 0; i < ts[j].n; i++)
                        cr_assert_leq(fabs(ts[j].data[i] - rs[j].data[off + i]), tol,
                                      "%s: replica %d %s[%zu] %.9g, ep 1 %.9g", what, k,
                                      ts[j].name, i, ts[j].data[i], rs[j].data[off + i]);
                }
            }
}

/* ep 2 and 4 of dp 4 train as ep 1 (every replica every expert) under 1F1B, interleaved and
 * ZB-V: losses within 1e-6 relative and parameters after 2 AdamW steps within 1e-6 (the same
 * arithmetic per row; the expert GEMMs take the rows of more ranks at once, and the norm sums
 * its parts in another order: fp32 rounding, measured below 1e-7 here). */
Test(runtime_moe, expert_parallel_trains_as_ep1)
{
    static const struct {
        const char *kind;
        int v;
    } runs[] = {{"1f1b", 0}, {"interleaved", 2}, {"zbv", 0}};
    for (int mi = 0; mi < 2; mi++) {
        pp_model_cfg m = run_models[mi](RL, RT, 1, 0.02);
        for (int i = 0; i < 3; i++) {
            rt_train ref;
            start_ep(&ref, runs[i].kind, 2, 4, runs[i].v, 4, 1, PP_RT_BACKEND_CPU, &m);
            for (int ep = 2; ep <= 4; ep *= 2) {
                rt_train u;
                char what[64];
                snprintf(what, sizeof what, "%s %s ep %d", run_model_names[mi], runs[i].kind,
                         ep);
                start_ep(&u, runs[i].kind, 2, 4, runs[i].v, 4, ep, PP_RT_BACKEND_CPU, &m);
                for (int k = 0; k < STEPS; k++)
                    cr_assert_leq(fabs(u.loss[k] - ref.loss[k]), 1e-6 * fabs(ref.loss[k]),
                                  "%s: step %d loss %.9g, ep 1 %.9g", what, k + 1, u.loss[k],
                                  ref.loss[k]);
                expect_ep_params_near(&u, &ref, 4, ep, what, 1e-6);
                rt_train_stop(&u);
            }
            rt_train_stop(&ref);
        }
    }
}

/* A wrong dispatch index makes the ep comparison fail too (planted in one run only). */
Test(runtime_moe, expert_parallel_comparison_catches_a_wrong_dispatch)
{
    pp_model_cfg m = moe_model(RL, RT, 0, 0.02);
    rt_train ref, u;
    start_ep(&ref, "1f1b", 2, 4, 0, 2, 1, PP_RT_BACKEND_CPU, &m);
    pp_stage_moe_fault = PP_MOE_FAULT_INDEX;
    start_ep(&u, "1f1b", 2, 4, 0, 2, 2, PP_RT_BACKEND_CPU, &m);
    pp_stage_moe_fault = PP_MOE_FAULT_NONE;
    /* at the 0.02-std initialisation the experts' outputs barely move the loss; the routers'
     * and experts' updates show it: the largest parameter difference after 2 steps */
    double worst = 0;
    int n, nr;
    pp_rt_tensor *ts = pp_rt_stage_tensors(pp_rt_executor_stage(u.ex, 0, 0, 0), &n);
    pp_rt_tensor *rs = pp_rt_stage_tensors(pp_rt_executor_stage(ref.ex, 0, 0, 0), &nr);
    for (int j = 0; j < n; j++)
        if (!pp_rt_tensor_is_expert(ts[j].name))
            for (size_t i = 0; i < ts[j].n; i++)
                worst = fmax(worst, fabs(ts[j].data[i] - rs[j].data[i]));
    cr_assert_gt(worst, 1e-3, "the planted dispatch went unseen: parameters within %g", worst);
    rt_train_stop(&u);
    rt_train_stop(&ref);
}

/* The plan (the MoE terms of the slot and the workspaces; under ep the most rows an expert
 * rank can take) equals every rank's measured peaks to the byte. */
Test(runtime_moe, plan_equals_measured)
{
    pp_model_cfg m = moe_model(RL, RT, 1, 0.02);
    static const struct {
        const char *kind;
        int v, ep;
    } runs[] = {{"1f1b", 0, 1}, {"interleaved", 2, 1}, {"zbv", 0, 1}, {"1f1b", 0, 2},
                {"zbv", 0, 4}};
    for (int i = 0; i < 5; i++) {
        rt_train u;
        char what[64];
        snprintf(what, sizeof what, "%s ep %d", runs[i].kind, runs[i].ep);
        start_ep(&u, runs[i].kind, 2, 4, runs[i].v, 4, runs[i].ep, PP_RT_BACKEND_CPU_STAGED, &m);
        rt_train_expect_plan(&u, what);
        rt_train_stop(&u);
    }
}

/* Recomputation trains bit for bit as without it, and its plan equals the measured peaks to
 * the byte: selective (the attention's probabilities rerun; the MoE block's activations kept
 * in the slot) and full (each block's forward rerun in its backward from its kept input: the
 * router, the dispatch and combine all-to-alls under ep at the same point of every expert
 * rank's schedule, the experts; the load-balancing loss counted once), under 1F1B, ZB-V (its
 * split backward) and interleaved, ep 1 and 2, both blocks. */
Test(runtime_moe, recomputation_trains_bit_for_bit_as_without)
{
    static const struct {
        const char *kind;
        int v, ep, rc;
    } runs[] = {{"1f1b", 0, 1, PP_RT_RC_SELECTIVE}, {"zbv", 0, 2, PP_RT_RC_SELECTIVE},
                {"1f1b", 0, 2, PP_RT_RC_FULL},      {"zbv", 0, 1, PP_RT_RC_FULL},
                {"zbv", 0, 2, PP_RT_RC_FULL},       {"interleaved", 2, 2, PP_RT_RC_FULL}};
    for (int mi = 0; mi < 2; mi++)
        for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
            pp_model_cfg m = run_models[mi](RL, RT, 1, 0.02);
            rt_train ref, u;
            char what[80];
            snprintf(what, sizeof what, "%s %s ep %d %s", run_model_names[mi], runs[i].kind,
                     runs[i].ep, runs[i].rc == PP_RT_RC_FULL ? "full" : "selective");
            start_rc(&ref, runs[i].kind, 2, 4, runs[i].v, 2, runs[i].ep,
                     PP_RT_BACKEND_CPU_STAGED, &m, PP_RT_RC_NONE);
            start_rc(&u, runs[i].kind, 2, 4, runs[i].v, 2, runs[i].ep, PP_RT_BACKEND_CPU_STAGED,
                     &m, runs[i].rc);
            for (int k = 0; k < STEPS; k++)
                cr_assert_eq(u.loss[k], ref.loss[k], "%s: step %d loss %.9g, without %.9g", what,
                             k + 1, u.loss[k], ref.loss[k]);
            expect_ep_params_near(&u, &ref, 2, 1, what, 0.0);
            rt_train_expect_plan(&u, what);
            rt_train_stop(&u);
            rt_train_stop(&ref);
        }
}

/* What expert parallelism does not run is refused by name. */
Test(runtime_moe, expert_parallel_refusals)
{
    pp_model_cfg m = moe_model(RL, RT, 0, 0.0);
    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = m.layers};
    pp_sched *s;
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_exec_params ep = {.model = &m, .sched = s, .micro_batch = 1, .seq = RT, .dp = 2,
                            .ep = 4};
    pp_rt_executor *ex = NULL;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "must divide"), "%s", pp_err_msg());
    ep.ep = 2, ep.shard = PP_RT_SHARD_OPTIMIZER;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_msg(), "sharding (--shard)"), "%s", pp_err_msg());
    pp_model_cfg dense = m;
    dense.moe.experts = 0;
    ep.model = &dense, ep.shard = 0;
    cr_assert_eq(pp_rt_executor_create(&ep, &ex), PP_ERR_INVALID);
    pp_sched_destroy(s);
}

/* What the MoE block does not run is refused by name. */
Test(runtime_moe, refuses_what_it_does_not_run)
{
    pp_model_cfg m = moe_model(RL, RT, 0, 0.0);
    m.moe.first_dense = 1;
    cr_assert_eq(pp_model_check_runnable(&m), PP_ERR_UNSUPPORTED);
    cr_assert(strstr(pp_err_msg(), "layer rule"), "%s", pp_err_msg());
    m = qwen3_moe_model(RL, RT, 0, 0.0); /* Qwen3's q/k norm with MoE runs */
    OK(pp_model_check_runnable(&m));
    m = moe_model(RL, RT, 0, 0.0);
    m.kv_heads = 2; /* t = 2 divides them: the MoE block's own refusal */
    OK(pp_model_check_runnable(&m));
    pp_backend *be;
    OK(pp_backend_cpu_create(&be));
    pp_rt_stage *st = NULL;
    pp_rt_stage_params p = {.model = &m, .layer_begin = 0, .layer_end = 1, .micro_batch = 1,
                            .seq = RT, .tp = 2, .tp_rank = 0};
    cr_assert_eq(pp_rt_stage_create(be, &p, &st), PP_ERR_UNSUPPORTED, "%s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), "tensor parallelism"), "%s", pp_err_msg());
    pp_backend_destroy(be);
}

/* ---- pprun ---- */

#define TINY_MIXTRAL "--model-config " PP_FIXTURES_DIR "/hf/tiny-mixtral.json"
#define TINY_QWEN3_MOE "--model-config " PP_FIXTURES_DIR "/hf/tiny-qwen3-moe.json"
#define PPRUN_RUN " --ranks 2 --microbatches 4 --seq 16 --steps 3 --lr 0.01 --seed 5"
#define PPRUN_ARGS TINY_MIXTRAL PPRUN_RUN

/* Every step's loss and gradient norm of runs a and b within tol relative. */
static void expect_same_steps(json_t *a, json_t *b, size_t steps, double tol, const char *what)
{
    json_t *sa = json_object_get(a, "per_step"), *sb = json_object_get(b, "per_step");
    cr_assert_eq(json_array_size(sa), steps, "%s", what);
    cr_assert_eq(json_array_size(sb), steps, "%s", what);
    for (size_t i = 0; i < steps; i++) {
        const char *keys[] = {"loss", "grad_norm"};
        for (int k = 0; k < 2; k++) {
            double x = json_real_value(json_object_get(json_array_get(sa, i), keys[k]));
            double y = json_real_value(json_object_get(json_array_get(sb, i), keys[k]));
            cr_assert_leq(fabs(x - y), tol * fabs(x), "%s, step %zu: %s %.9g and %.9g", what,
                          i + 1, keys[k], x, y);
        }
    }
}

/* The "done when": pprun trains the tiny MoE configs (Mixtral's; Qwen3-MoE's, its q/k
 * norm and head_dim 16 for hidden 32 / 4 heads) with --ep 2 on the CPU as with --ep 1 (dp 2
 * both), and as one unpipelined rank (dp 1, 8 micro-batches): every step's loss and gradient
 * norm within 1e-6 relative (1e-5 against the unpipelined run: dp's sums in another order). */
Test(runtime_moe, pprun_ep2_trains_as_ep1, .timeout = 180)
{
    static const char *const models[] = {TINY_MIXTRAL, TINY_QWEN3_MOE};
    for (int i = 0; i < 2; i++) {
        char args[3][512];
        snprintf(args[0], sizeof args[0], "%s" PPRUN_RUN " --dp 2", models[i]);
        snprintf(args[1], sizeof args[1], "%s" PPRUN_RUN " --dp 2 --ep 2", models[i]);
        snprintf(args[2], sizeof args[2],
                 "%s --ranks 1 --microbatches 8 --seq 16 --steps 3 --lr 0.01 --seed 5", models[i]);
        json_t *a = pp_test_pprun_json(args[0]), *b = pp_test_pprun_json(args[1]),
               *c = pp_test_pprun_json(args[2]);
        expect_same_steps(a, b, 3, 1e-6, models[i]);
        expect_same_steps(a, c, 3, 1e-5, models[i]);
        json_decref(a);
        json_decref(b);
        json_decref(c);
    }
}

/* What pprun does not run with MoE or --ep: exit 2 and a line naming it. */
Test(runtime_moe, pprun_refusals_exit_2, .timeout = 60)
{
    static const struct {
        const char *args, *says;
    } bad[] = {
        {PPRUN_ARGS " --dp 2 --ep 3", "must divide"},
        {PPRUN_ARGS " --dp 2 --ep 2 --tp 2", "--ep"},
        {"--model tiny --dp 2 --ep 2 --steps 1", "mixture-of-experts"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_test_run_result r = pp_test_run(PP_BINARY_DIR "/runtime/pprun %s --quiet", bad[i].args);
        cr_assert_eq(r.code, 2, "pprun %s: exit %d, expected 2: %s", bad[i].args, r.code, r.err);
        cr_assert(strstr(r.err, bad[i].says), "pprun %s: %s", bad[i].args, r.err);
        pp_test_run_done(&r);
    }
}

/* The step's loss carries the load-balancing loss: the same run with coefficient 0 and 0.02
 * differs in its first loss by exactly the reported aux_loss, which near the initialisation's
 * uniform routing (P_e ~ 1/E, sum_e f_e = K) is ~ coef K per MoE layer. */
Test(runtime_moe, step_loss_includes_the_aux_loss)
{
    double loss[2], aux[2];
    for (int i = 0; i < 2; i++) {
        pp_model_cfg m = moe_model(RL, RT, 0, i ? 0.02 : 0.0);
        pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = m.layers};
        pp_sched *s;
        OK(pp_sched_generate("1f1b", &sp, &s));
        pp_rt_exec_params ep = {.model = &m, .sched = s, .micro_batch = 2, .seq = RT, .dp = 2,
                                .ep = 2, .seed = 7};
        pp_rt_executor *ex;
        OK(pp_rt_executor_create(&ep, &ex));
        int rows = pp_rt_executor_batch_rows(ex);
        pp_rt_data *d;
        OK(pp_rt_data_synthetic(m.vocab, 3, &d));
        int32_t *batch = calloc((size_t)rows * (RT + 1), sizeof *batch);
        OK(pp_rt_data_next(d, rows, RT, batch));
        pp_rt_step_result r;
        OK(pp_rt_executor_step(ex, batch, 0, &r));
        loss[i] = r.loss, aux[i] = r.aux_loss;
        free(batch);
        pp_rt_data_destroy(d);
        pp_rt_executor_destroy(ex);
        pp_sched_destroy(s);
    }
    cr_assert_eq(aux[0], 0.0);
    cr_assert_float_eq(loss[1] - loss[0], aux[1], 1e-6, "loss %.9g - %.9g, aux %.9g", loss[1],
                       loss[0], aux[1]);
    double expect = 0.02 * K * RL;
    cr_assert(aux[1] > 0.95 * expect && aux[1] < 1.05 * expect, "aux %.9g, ~%.9g expected",
              aux[1], expect);
}
