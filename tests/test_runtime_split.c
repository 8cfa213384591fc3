/* test_runtime_split.c — split backward on one stage (zero-bubble schedules' I and W): I gives
 * B's input gradient bit for bit and leaves the linears' and the head's weight gradients to W;
 * I then W accumulates what B does; what I holds for W is counted (pp_rt_size_wheld_bytes) and
 * freed by W; the misuses are refused. The executor running I and W actions is tested in
 * test_runtime_exec_split.c. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "test_runtime_exec_equiv.h"

#define CHECK(expr)                                                                                \
    do {                                                                                           \
        pp_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, PP_OK, "%s failed: %s", #expr, pp_err_msg());                            \
    } while (0)

enum { B = 2, T = 8, K = 3 }; /* K micro-batches in flight */

static pp_model_cfg model(void)
{
    return (pp_model_cfg){.layers = 3, .hidden = 16, .heads = 2, .ffn = 32, .vocab = 64, .seq = T};
}

typedef struct {
    pp_model_cfg m;
    pp_backend *be_fused, *be_split;
    pp_rt_stage *fused, *split; /* the same stage twice: B on one, I + W on the other */
    int embed, head;
    size_t N, C;
    int32_t *tok, *tgt;
    float *x, *dy, *dx_fused, *dx_split; /* K micro-batches each */
    float *out;                          /* a forward's output (not compared) */
} pair;

static void pair_init(pair *p, int l0, int l1, int embed, int head)
{
    memset(p, 0, sizeof *p);
    p->m = model();
    p->embed = embed, p->head = head;
    p->N = (size_t)B * T, p->C = (size_t)p->m.hidden;
    pp_rt_stage_params sp = {.model = &p->m,
                             .layer_begin = l0,
                             .layer_end = l1,
                             .has_embed = embed,
                             .has_head = head,
                             .micro_batch = B,
                             .seq = T,
                             .seed = 7};
    CHECK(pp_backend_cpu_create(&p->be_fused));
    CHECK(pp_backend_cpu_create(&p->be_split));
    CHECK(pp_rt_stage_create(p->be_fused, &sp, &p->fused));
    CHECK(pp_rt_stage_create(p->be_split, &sp, &p->split));
    size_t nc = K * p->N * p->C;
    p->tok = calloc(K * p->N, sizeof *p->tok);
    p->tgt = calloc(K * p->N, sizeof *p->tgt);
    p->x = calloc(nc, sizeof *p->x);
    p->dy = calloc(nc, sizeof *p->dy);
    p->dx_fused = calloc(nc, sizeof *p->dx_fused);
    p->dx_split = calloc(nc, sizeof *p->dx_split);
    p->out = calloc(p->N * p->C, sizeof *p->out);
    cr_assert(p->out && p->tok && p->tgt && p->x && p->dy && p->dx_fused && p->dx_split);
    for (size_t i = 0; i < K * p->N; i++) {
        p->tok[i] = (int32_t)((i * 7 + 3) % (size_t)p->m.vocab);
        p->tgt[i] = (int32_t)((i * 11 + 5) % (size_t)p->m.vocab);
    }
    for (size_t i = 0; i < nc; i++) {
        p->x[i] = sinf(0.37f * (float)i);
        p->dy[i] = 1e-2f * cosf(0.11f * (float)i);
    }
}

static void pair_fini(pair *p)
{
    pp_rt_stage_destroy(p->fused);
    pp_rt_stage_destroy(p->split);
    pp_backend_destroy(p->be_fused);
    pp_backend_destroy(p->be_split);
    free(p->tok), free(p->tgt), free(p->x), free(p->dy), free(p->dx_fused), free(p->dx_split);
    free(p->out);
}

static void forward(pair *p, pp_rt_stage *st, int k)
{
    size_t at = (size_t)k * p->N, atc = at * p->C;
    float loss;
    CHECK(pp_rt_stage_forward(st, k, p->embed ? p->tok + at : NULL, p->embed ? NULL : p->x + atc,
                              p->head ? p->tgt + at : NULL, p->head ? NULL : p->out,
                              p->head ? &loss : NULL));
}

/* B of micro-batch k on the fused stage, I on the split one; their input gradients. */
static void backward(pair *p, int k, int split)
{
    size_t atc = (size_t)k * p->N * p->C;
    const float *dy = p->head ? NULL : p->dy + atc;
    if (split) {
        float *dx = p->embed ? NULL : p->dx_split + atc;
        CHECK(pp_rt_stage_backward_input(p->split, k, dy, dx, 1.0f / K));
    } else {
        float *dx = p->embed ? NULL : p->dx_fused + atc;
        CHECK(pp_rt_stage_backward(p->fused, k, dy, dx, 1.0f / K));
    }
}

static int is_deferred(const char *name)
{
    return strstr(name, "attn.") || strstr(name, "mlp.") || strcmp(name, "wte.head") == 0;
}

/* Runs K forwards on both, B on one and I on the other, checks what I left undone, then W in
 * `order` (0: the micro-batches' order, 1: reversed), and compares every gradient: bitwise
 * when `exact`, else to 1e-6 of the tensor's largest entry. */
static void run_pair(int l0, int l1, int embed, int head, int order, int exact)
{
    pair p;
    pair_init(&p, l0, l1, embed, head);
    for (int k = 0; k < K; k++) {
        forward(&p, p.fused, k);
        forward(&p, p.split, k);
    }
    for (int k = 0; k < K; k++) {
        backward(&p, k, 0);
        backward(&p, k, 1);
    }
    if (!embed)
        cr_assert(memcmp(p.dx_fused, p.dx_split, K * p.N * p.C * sizeof(float)) == 0,
                  "I's input gradient differs from B's");
    int n;
    pp_rt_tensor *ts = pp_rt_stage_tensors(p.split, &n);
    for (int i = 0; i < n; i++) {
        int nonzero = 0;
        for (size_t j = 0; j < ts[i].n && !nonzero; j++)
            nonzero = ts[i].grad[j] != 0.0f;
        /* after the I's: only what I computes (LayerNorms, the embedding) is nonzero */
        if (is_deferred(ts[i].name))
            cr_assert(!nonzero, "%s: I accumulated a weight gradient W should", ts[i].name);
        else if (strstr(ts[i].name, ".g") || strcmp(ts[i].name, "wpe") == 0)
            cr_assert(nonzero, "%s: I left its gradient at zero", ts[i].name);
    }
    for (int j = 0; j < K; j++)
        CHECK(pp_rt_stage_backward_weight(p.split, order ? K - 1 - j : j));
    pp_rt_tensor *tf = pp_rt_stage_tensors(p.fused, &n);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(tf[i].name, ts[i].name);
        if (exact)
            cr_assert(memcmp(tf[i].grad, ts[i].grad, tf[i].n * sizeof(float)) == 0,
                      "%s: I + W differs from B", tf[i].name);
        else
            cr_assert(exec_max_rel_diff(ts[i].grad, tf[i].grad, tf[i].n) <= 1e-6,
                      "%s: I + W differs from B by %g", tf[i].name,
                      exec_max_rel_diff(ts[i].grad, tf[i].grad, tf[i].n));
    }
    pair_fini(&p);
}

Test(runtime_split, middle_stage_i_then_w_equals_b_bitwise)
{
    run_pair(1, 3, 0, 0, 0, 1);
}

Test(runtime_split, last_stage_with_head_equals_b_bitwise)
{
    run_pair(1, 3, 0, 1, 0, 1);
}

/* The tied embedding's gradient gets the embedding's part in I and the head's in W: the sum
 * is B's in another order, so equal to rounding. W in reverse order likewise. */
Test(runtime_split, whole_model_any_w_order_equals_b)
{
    run_pair(0, 3, 1, 1, 0, 0);
    run_pair(0, 3, 1, 1, 1, 0);
    run_pair(0, 3, 0, 0, 1, 0);
}

/* What I keeps for W, counted by hand: each block's four linear output gradients, fc proj and
 * proj (N C), fc (N F), qkv (N 3C); the head's dlogits stay in the slot. */
Test(runtime_split, held_for_w_is_counted_and_freed)
{
    pair p;
    pair_init(&p, 0, 3, 1, 1);
    size_t N = p.N, C = p.C, F = (size_t)p.m.ffn;
    size_t held = 3 * N * (2 * C + F + 3 * C) * 4;
    cr_assert_eq(pp_rt_stage_held_bytes(p.split), held, "held %zu, by hand %zu",
                 pp_rt_stage_held_bytes(p.split), held);
    size_t act = pp_rt_stage_act_bytes(p.split);
    pp_mem_stats ms;
    for (int k = 0; k < K; k++)
        forward(&p, p.split, k);
    for (int k = 0; k < K; k++)
        backward(&p, k, 1);
    pp_backend_mem_stats(p.be_split, &ms);
    cr_assert_eq(ms.current[PP_MEM_ACTS], K * (act + held), "after the I's %zu, expected %zu",
                 ms.current[PP_MEM_ACTS], K * (act + held));
    cr_assert_eq(ms.current[PP_MEM_WORKSPACE], 0);
    CHECK(pp_rt_stage_backward_weight(p.split, 1));
    pp_backend_mem_stats(p.be_split, &ms);
    cr_assert_eq(ms.current[PP_MEM_ACTS], (K - 1) * (act + held));
    CHECK(pp_rt_stage_backward_weight(p.split, 0));
    CHECK(pp_rt_stage_backward_weight(p.split, 2));
    pp_backend_mem_stats(p.be_split, &ms);
    cr_assert_eq(ms.current[PP_MEM_ACTS], 0);
    /* a stage destroyed between an I and its W frees what the I held */
    forward(&p, p.split, 0);
    backward(&p, 0, 1);
    pp_rt_stage_destroy(p.split);
    p.split = NULL;
    pp_backend_mem_stats(p.be_split, &ms);
    cr_assert_eq(ms.current_total, 0, "destroy left %zu bytes", ms.current_total);
    pair_fini(&p);
}

Test(runtime_split, misuse_is_refused_with_the_reason)
{
    pair p;
    pair_init(&p, 1, 3, 0, 0);
    float *dx = p.dx_split;
    cr_assert_eq(pp_rt_stage_backward_weight(p.split, 0), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "holds no forward"), "%s", pp_err_msg());
    forward(&p, p.split, 0);
    cr_assert_eq(pp_rt_stage_backward_weight(p.split, 0), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "(I) has not run"), "%s", pp_err_msg());
    cr_assert_eq(pp_rt_stage_backward_input(p.split, 0, NULL, dx, 1.0f), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "gradient of the output"), "%s", pp_err_msg());
    CHECK(pp_rt_stage_backward_input(p.split, 0, p.dy, dx, 1.0f));
    cr_assert_eq(pp_rt_stage_backward_input(p.split, 0, p.dy, dx, 1.0f), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "(I) ran already"), "%s", pp_err_msg());
    cr_assert_eq(pp_rt_stage_backward(p.split, 0, p.dy, dx, 1.0f), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "(I) ran already"), "%s", pp_err_msg());
    cr_assert_eq(pp_rt_stage_forward(p.split, 0, NULL, p.x, NULL, p.out, NULL),
                 PP_ERR_INVALID); /* the slot is still taken until W */
    cr_assert(strstr(pp_err_msg(), "already holds a forward"), "%s", pp_err_msg());
    CHECK(pp_rt_stage_backward_weight(p.split, 0));
    cr_assert_eq(pp_rt_stage_backward_weight(p.split, 0), PP_ERR_INVALID);
    pair_fini(&p);
}
