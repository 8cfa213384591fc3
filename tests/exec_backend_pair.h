/* exec_backend_pair.h — shared by test_runtime_backend.c (runs everywhere) and test_cuda_exec.c
 * (needs a GPU): one executor of a schedule on a chosen backend, a tiny model and the same
 * batches for every backend, and every gradient downloaded to the host for comparison.
 * Header-only (static) so each suite picks it up by including it. White-box: backend.h for the
 * download callback (a CUDA backend's gradients live in device memory).
 */
#ifndef EXEC_BACKEND_PAIR_H
#define EXEC_BACKEND_PAIR_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "pp_rt.h"

#define EBP_OK(expr)                                                                               \
    do {                                                                                           \
        pp_status st_ = (expr);                                                                    \
        cr_assert_eq(st_, PP_OK, "%s failed: %s", #expr, pp_err_msg());                            \
    } while (0)

enum { EBP_B = 2, EBP_T = 8, EBP_LAYERS = 8 };

/* 8 blocks (every schedule with D = 2 splits them evenly, bitpipe's 4 stages too), C = 16,
 * 2 heads, FFN 32, vocabulary 64, sequence 8. */
static inline pp_model_cfg ebp_model(void)
{
    return (pp_model_cfg){
        .layers = EBP_LAYERS, .hidden = 16, .heads = 2, .ffn = 32, .vocab = 64, .seq = 8};
}

/* The schedules of issue 6's equivalence list (D = 2, N = 4). */
static const char *const ebp_kinds[] = {"gpipe", "1f1b", "interleaved", "chimera", "bitpipe"};
enum { EBP_N_KINDS = 5 };

/* An executor of `kind` (D = 2, N = 4) with dp replicas on `backend` / `precision`; returns
 * the executor's status (*out NULL on failure) so a caller can skip on PP_ERR_UNSUPPORTED. */
static inline pp_status ebp_create(const pp_model_cfg *m, const char *kind, int dp, int backend,
                                   int precision, pp_rt_executor **out)
{
    pp_sched_params sp = {.ranks = 2,
                          .microbatches = 4,
                          .chunks = strcmp(kind, "interleaved") == 0 ? 2 : 0,
                          .layers = m->layers};
    pp_sched *s;
    pp_status st = pp_sched_generate(kind, &sp, &s);
    cr_assert_eq(st, PP_OK, "%s: %s", kind, pp_err_msg());
    pp_rt_exec_params ep = {
        .model = m,
        .sched = s,
        .micro_batch = EBP_B,
        .seq = EBP_T,
        .dp = dp,
        .seed = 4321,
        .adamw = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.01f},
        .clip = 1.0f,
        .backend = backend,
        .precision = precision};
    st = pp_rt_executor_create(&ep, out);
    pp_sched_destroy(s);
    return st;
}

/* `steps` batches of the executor's rows from one synthetic stream (seed 77): every backend
 * sees the same tokens. */
static inline int32_t *ebp_batches(pp_rt_executor *ex, const pp_model_cfg *m, int steps)
{
    int rows = pp_rt_executor_batch_rows(ex);
    size_t per = (size_t)rows * (EBP_T + 1);
    int32_t *b = calloc(per * (size_t)steps, sizeof *b);
    cr_assert(b);
    pp_rt_data *d;
    EBP_OK(pp_rt_data_synthetic(m->vocab, 77, &d));
    for (int i = 0; i < steps; i++)
        EBP_OK(pp_rt_data_next(d, rows, EBP_T, b + per * (size_t)i));
    pp_rt_data_destroy(d);
    return b;
}

/* Every stage's every gradient (or parameter, params = 1) of every replica, downloaded into
 * one host vector in (replica, pipe, stage, tensor) order; *n its length. */
static inline float *ebp_download(pp_rt_executor *ex, int dp, int params, size_t *n)
{
    const pp_sched *s = pp_rt_executor_sched(ex);
    size_t cap = 1024, len = 0;
    float *v = malloc(cap * sizeof *v);
    cr_assert(v);
    for (int k = 0; k < dp; k++)
        for (int p = 0; p < s->n_pipes; p++)
            for (int st = 0; st < s->stages_per_pipe; st++) {
                pp_rt_stage *stage = pp_rt_executor_stage(ex, k, p, st);
                pp_backend *be =
                    pp_rt_executor_backend(ex, k * s->ranks + pp_sched_stage(s, p, st)->rank);
                int nt;
                pp_rt_tensor *t = pp_rt_stage_tensors(stage, &nt);
                for (int j = 0; j < nt; j++) {
                    while (len + t[j].n > cap) {
                        v = realloc(v, (cap *= 2) * sizeof *v);
                        cr_assert(v);
                    }
                    EBP_OK(be->ops->download(be->ctx, v + len, params ? t[j].data : t[j].grad,
                                             t[j].n * sizeof(float)));
                    len += t[j].n;
                }
            }
    *n = len;
    return v;
}

#endif
