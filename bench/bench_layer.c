/* bench_layer.c — forward + backward time of one transformer block on the CPU backend against
 * the time of the same block's matrix products alone at OpenBLAS speed.
 *
 * Usage: bench_layer [T] [reps]     (defaults: T = 1024, 5 repetitions; C=768, NH=12, FFN=3072,
 *                                    B=1: a gpt-125m block; one OpenBLAS thread, as a rank)
 *
 * "Its GEMMs" are measured, not estimated: the stage's own GEMM calls (the four linear layers,
 * forward and backward) are recorded through a wrapped backend table during a real step and
 * replayed alone; the attention products are replayed with the same causal blocking as
 * cpu_attention.c (PP_ATT_BLOCK). The gap between the block and its GEMMs is the cost of
 * everything else: softmax, LayerNorm, GELU, biases, copies. Prints figures; asserts nothing.
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), the best of the repetitions: on a
 * shared machine, wall time counts the slices other processes take; the wall time of the
 * block is printed too.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "cpu/cpu_kernels.h"
#include "pp_rt.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- a timing wrapper around the backend's table ---- */

enum { K_GEMM, K_ATT_F, K_ATT_B, K_LN, K_GELU, K_BIAS, K_COPY, K__COUNT };
static const char *const kname[K__COUNT] = {"linear GEMMs",  "attention fwd", "attention bwd",
                                            "layernorm f+b", "gelu f+b",      "bias f+b",
                                            "copies"};
static double ktime[K__COUNT];
static const pp_backend_ops *orig;
static pp_backend_ops timed;

typedef struct {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float beta;
} gemm_call;
static gemm_call calls[64];
static int ncalls, recording;

#define TIMED(kind, expr)                                                                          \
    do {                                                                                           \
        double t0_ = cpu_now();                                                                    \
        pp_status st_ = (expr);                                                                    \
        ktime[kind] += cpu_now() - t0_;                                                            \
        return st_;                                                                                \
    } while (0)

static pp_status w_gemm(void *c, int ta, int tb, int m, int n, int k, float al, const float *a,
                        int lda, const float *b, int ldb, float be, float *y, int ldy)
{
    if (recording && ncalls < 64)
        calls[ncalls++] = (gemm_call){ta, tb, m, n, k, lda, ldb, ldy, be};
    TIMED(K_GEMM, orig->gemm(c, ta, tb, m, n, k, al, a, lda, b, ldb, be, y, ldy));
}
static pp_status w_attf(void *c, float *y, float *att, const float *qkv, int B, int T, int NH,
                        int NKV, int hd)
{
    TIMED(K_ATT_F, orig->attention_fwd(c, y, att, qkv, B, T, NH, NKV, hd));
}
static pp_status w_attb(void *c, float *dqkv, float *s, const float *dy, const float *att,
                        const float *qkv, int B, int T, int NH, int NKV, int hd)
{
    TIMED(K_ATT_B, orig->attention_bwd(c, dqkv, s, dy, att, qkv, B, T, NH, NKV, hd));
}
static pp_status w_lnf(void *c, float *o, float *m, float *r, const float *x, const float *g,
                       const float *b, int N, int C, float eps)
{
    TIMED(K_LN, orig->layernorm_fwd(c, o, m, r, x, g, b, N, C, eps));
}
static pp_status w_lnb(void *c, float *dx, float *dg, float *db, const float *dy, const float *x,
                       const float *g, const float *m, const float *r, int N, int C)
{
    TIMED(K_LN, orig->layernorm_bwd(c, dx, dg, db, dy, x, g, m, r, N, C));
}
static pp_status w_gf(void *c, float *y, const float *x, size_t n)
{
    TIMED(K_GELU, orig->gelu_fwd(c, y, x, n));
}
static pp_status w_gb(void *c, float *dx, const float *x, const float *dy, size_t n)
{
    TIMED(K_GELU, orig->gelu_bwd(c, dx, x, dy, n));
}
static pp_status w_bias(void *c, float *y, const float *b, int r, int k)
{
    TIMED(K_BIAS, orig->add_bias(c, y, b, r, k));
}
static pp_status w_biasg(void *c, float *db, const float *dy, int r, int k)
{
    TIMED(K_BIAS, orig->bias_grad(c, db, dy, r, k));
}
static pp_status w_copy(void *c, void *d, const void *s, size_t n)
{
    TIMED(K_COPY, orig->copy(c, d, s, n));
}

static void wrap(pp_backend *be)
{
    orig = be->ops;
    timed = *orig;
    timed.gemm = w_gemm;
    timed.attention_fwd = w_attf;
    timed.attention_bwd = w_attb;
    timed.layernorm_fwd = w_lnf;
    timed.layernorm_bwd = w_lnb;
    timed.gelu_fwd = w_gf;
    timed.gelu_bwd = w_gb;
    timed.add_bias = w_bias;
    timed.bias_grad = w_biasg;
    timed.copy = w_copy;
    be->ops = &timed;
}

/* ---- GEMMs alone ---- */

static float *randbuf(size_t n)
{
    float *p = malloc(n * sizeof(float));
    uint32_t x = 12345u;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = ((float)(x >> 9) / 8388608.0f - 0.5f) * 0.1f;
    }
    return p;
}

static double replay_linear(void)
{
    size_t amax = 0, bmax = 0, cmax = 0;
    for (int i = 0; i < ncalls; i++) {
        gemm_call *g = &calls[i];
        size_t a = (size_t)(g->ta ? g->k : g->m) * g->lda,
               b = (size_t)(g->tb ? g->n : g->k) * g->ldb;
        size_t c = (size_t)g->m * g->ldc;
        amax = a > amax ? a : amax, bmax = b > bmax ? b : bmax, cmax = c > cmax ? c : cmax;
    }
    float *A = randbuf(amax), *B = randbuf(bmax), *Cb = randbuf(cmax);
    double t0 = cpu_now();
    for (int i = 0; i < ncalls; i++) {
        gemm_call *g = &calls[i];
        pp_cpu_gemm(NULL, g->ta, g->tb, g->m, g->n, g->k, 1.0f, A, g->lda, B, g->ldb, g->beta, Cb,
                    g->ldc);
    }
    double t = cpu_now() - t0;
    free(A), free(B), free(Cb);
    return t;
}

/* The products of cpu_attention.c, block for block (forward 2 per row block, backward 2 per row
 * block and 2 per key block), on buffers of the same shapes. */
static double replay_attention(int B, int T, int C, int NH, double *flops)
{
    int hs = C / NH, C3 = 3 * C;
    float *qkv = randbuf((size_t)T * C3), *S = randbuf((size_t)T * T), *y = randbuf((size_t)T * C);
    float *d = randbuf((size_t)T * C3);
    double f = 0.0, t0 = cpu_now();
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            for (int r0 = 0; r0 < T; r0 += PP_ATT_BLOCK) {
                int r1 = r0 + PP_ATT_BLOCK < T ? r0 + PP_ATT_BLOCK : T, rb = r1 - r0;
                pp_cpu_gemm(NULL, 0, 1, rb, r1, hs, 1.0f, qkv + (size_t)r0 * C3, C3, qkv + C, C3,
                            0.0f, S + (size_t)r0 * T, T);
                pp_cpu_gemm(NULL, 0, 0, rb, hs, r1, 1.0f, S + (size_t)r0 * T, T, qkv + 2 * C, C3,
                            0.0f, y + (size_t)r0 * C, C);
                pp_cpu_gemm(NULL, 0, 1, rb, r1, hs, 1.0f, y + (size_t)r0 * C, C, qkv + 2 * C, C3,
                            0.0f, S + (size_t)r0 * T, T);
                pp_cpu_gemm(NULL, 0, 0, rb, hs, r1, 1.0f, S + (size_t)r0 * T, T, qkv + C, C3, 0.0f,
                            d + (size_t)r0 * C3, C3);
                f += 4.0 * 2.0 * rb * r1 * hs;
            }
            for (int c0 = 0; c0 < T; c0 += PP_ATT_BLOCK) {
                int c1 = c0 + PP_ATT_BLOCK < T ? c0 + PP_ATT_BLOCK : T, cb = c1 - c0;
                size_t blk = (size_t)c0 * T + c0;
                pp_cpu_gemm(NULL, 1, 0, cb, hs, T - c0, 1.0f, S + blk, T, qkv + (size_t)c0 * C3, C3,
                            0.0f, d + C + (size_t)c0 * C3, C3);
                pp_cpu_gemm(NULL, 1, 0, cb, hs, T - c0, 1.0f, S + blk, T, y + (size_t)c0 * C, C,
                            0.0f, d + 2 * C + (size_t)c0 * C3, C3);
                f += 2.0 * 2.0 * cb * (T - c0) * hs;
            }
        }
    double t = cpu_now() - t0;
    free(qkv), free(S), free(y), free(d);
    *flops = f;
    return t;
}

static double min_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

int main(int argc, char **argv)
{
    int T = argc > 1 ? atoi(argv[1]) : 1024, reps = argc > 2 ? atoi(argv[2]) : 5;
    if (T < 1 || T > 2048 || reps < 1 || reps > 100) {
        fprintf(stderr, "usage: bench_layer [T in 1..2048] [reps in 1..100]\n");
        return 2;
    }
    pp_model_cfg m;
    pp_backend *be;
    pp_rt_stage *st;
    if (pp_model_preset("gpt-125m", &m) || pp_backend_cpu_create(&be)) {
        fprintf(stderr, "bench_layer: %s\n", pp_err_msg());
        return 1;
    }
    const int B = 1, C = m.hidden, F = m.ffn, N = B * T;
    pp_rt_stage_params p = {
        .model = &m, .layer_begin = 0, .layer_end = 1, .micro_batch = B, .seq = T, .seed = 1};
    if (pp_rt_stage_create(be, &p, &st)) {
        fprintf(stderr, "bench_layer: %s\n", pp_err_msg());
        return 1;
    }
    wrap(be);
    float *x = randbuf((size_t)N * C), *y = randbuf((size_t)N * C), *dy = randbuf((size_t)N * C);
    float *dx = randbuf((size_t)N * C);
    double layer[100], wall[100], lin[100], att[100], kt[100][K__COUNT], att_flops = 0.0;
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (page faults, BLAS buffers) */
        memset(ktime, 0, sizeof ktime);
        recording = r == -1;
        double t0 = cpu_now(), w0 = pp_now();
        if (pp_rt_stage_forward(st, 0, NULL, x, NULL, y, NULL) ||
            pp_rt_stage_backward(st, 0, dy, dx, 1.0f)) {
            fprintf(stderr, "bench_layer: %s\n", pp_err_msg());
            return 1;
        }
        double t = cpu_now() - t0, w = pp_now() - w0;
        if (r < 0)
            continue;
        layer[r] = t;
        wall[r] = w;
        memcpy(kt[r], ktime, sizeof ktime);
        lin[r] = replay_linear();
        att[r] = replay_attention(B, T, C, m.heads, &att_flops);
    }
    double tl = min_of(layer, reps), tg = min_of(lin, reps), ta = min_of(att, reps);
    double lin_flops = 3.0 * 2.0 * N * ((double)C * 3 * C + (double)C * C + 2.0 * C * F);
    printf("bench_layer: one gpt-125m block, C=%d NH=%d FFN=%d T=%d B=%d, CPU backend "
           "(OpenBLAS, 1 thread), thread CPU time, best of %d\n",
           C, m.heads, F, T, B, reps);
    printf("  block forward+backward       %9.1f ms  (wall %.1f ms)\n", tl * 1e3,
           min_of(wall, reps) * 1e3);
    printf("  GEMMs alone: linear (%2d)     %9.1f ms  %6.1f GFLOP/s\n", ncalls, tg * 1e3,
           lin_flops / tg * 1e-9);
    printf("  GEMMs alone: attention       %9.1f ms  %6.1f GFLOP/s (causal blocks of %d)\n",
           ta * 1e3, att_flops / ta * 1e-9, PP_ATT_BLOCK);
    printf("  ratio block / all its GEMMs  %9.2f  (target <= 1.3)\n", tl / (tg + ta));
    printf("  ratio block / linear GEMMs   %9.2f\n", tl / tg);
    int best = 0;
    for (int r = 1; r < reps; r++)
        best = layer[r] < layer[best] ? r : best;
    printf("  inside the best run:");
    for (int k = 0; k < K__COUNT; k++)
        printf("%s %s %.1f ms", k ? "," : "", kname[k], kt[best][k] * 1e3);
    printf("\n");
    free(x), free(y), free(dy), free(dx);
    pp_rt_stage_destroy(st);
    pp_backend_destroy(be);
    return 0;
}
