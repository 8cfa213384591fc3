/* bench_cuda_layer.c — throughput of one gpt-13b transformer block (C = 5120, NH = 40,
 * F = 4C, T = 2048, B = 1) forward + backward on the CUDA backend, in bf16 (the default) or fp32:
 * milliseconds, TFLOP/s and the fraction of the device's dense bf16 peak (989 TFLOP/s for an
 * H100/H200 SXM, NVIDIA's datasheet; override with --peak).
 *
 * FLOPs counted are those the kernels perform (Megatron-LM's convention, Narayanan et al. 2021):
 * forward 2BT(3C^2 + C^2 + 2CF) for the four linear layers + 4BT^2C for QK^T and AV over the
 * whole T x T square; backward twice the forward. Timing: CUDA events on the backend's compute
 * stream around `iters` forward+backward pairs after `warmup` untimed ones and two AdamW steps
 * (in bf16 the optimizer leaves bf16 copies of the weights that the GEMMs then read, as in
 * training; the timed pairs run with them).
 * A program that prints figures, not a test. Where no CUDA device exists (or the build has no
 * CUDA) it prints one line "bench_cuda_layer: no CUDA device: ..." and exits 0.
 *
 *   bench_cuda_layer [--fp32] [--iters N] [--warmup N] [--seq T] [--batch B] [--peak TFLOPS]
 *                    [--json]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "pp_rt.h"

typedef struct {
    int precision, iters, warmup, T, B, json;
    double peak_tflops;
} opts;

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){.precision = PP_PREC_BF16,
                .iters = 10,
                .warmup = 3,
                .T = 2048,
                .B = 1,
                .peak_tflops = 989.0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--fp32"))
            o->precision = PP_PREC_FP32;
        else if (!strcmp(a, "--json"))
            o->json = 1;
        else if (v && !strcmp(a, "--iters") && (o->iters = atoi(v)) > 0)
            i++;
        else if (v && !strcmp(a, "--warmup") && (o->warmup = atoi(v)) >= 0)
            i++;
        else if (v && !strcmp(a, "--seq") && (o->T = atoi(v)) > 0)
            i++;
        else if (v && !strcmp(a, "--batch") && (o->B = atoi(v)) > 0)
            i++;
        else if (v && !strcmp(a, "--peak") && (o->peak_tflops = atof(v)) > 0)
            i++;
        else {
            fprintf(stderr,
                    "bench_cuda_layer: bad argument \"%s\"\nusage: bench_cuda_layer [--fp32] "
                    "[--iters N>0] [--warmup N>=0] [--seq T>0] [--batch B>0] [--peak TFLOPS] "
                    "[--json]\n",
                    a);
            return 0;
        }
    }
    return 1;
}

typedef struct {
    pp_backend *be;
    pp_rt_stage *st;
    float *x, *y, *dy, *dx; /* (B, T, C) in device memory */
    size_t io;              /* bytes of one of them */
} bench;

/* Uniform [-1, 1) values into a device buffer (random data: zeros would flatter the tensor
 * cores' power draw and the LayerNorms). */
static pp_status fill_random(pp_backend *be, float *dst, size_t n, uint32_t seed)
{
    float *h = malloc(n * sizeof(float));
    if (!h)
        return PP_ERR(PP_ERR_NOMEM, "bench: cannot allocate %zu host floats", n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
    }
    pp_status st = be->ops->upload(be->ctx, dst, h, n * sizeof(float));
    free(h);
    return st;
}

static pp_status bench_open(bench *b, const opts *o, const pp_model_cfg *m)
{
    PP_TRY(pp_backend_cuda_create(0, o->precision, &b->be));
    pp_rt_stage_params p = {
        .model = m, .layer_begin = 0, .layer_end = 1, .micro_batch = o->B, .seq = o->T, .seed = 1};
    PP_TRY(pp_rt_stage_create(b->be, &p, &b->st));
    b->io = pp_rt_stage_io_bytes(b->st);
    float **bufs[4] = {&b->x, &b->y, &b->dy, &b->dx};
    for (int i = 0; i < 4; i++)
        if (!(*bufs[i] = pp_backend_alloc(b->be, b->io, PP_MEM_COMM)))
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
    PP_TRY(fill_random(b->be, b->x, b->io / sizeof(float), 1u));
    PP_TRY(fill_random(b->be, b->dy, b->io / sizeof(float), 2u));
    return PP_OK;
}

static void bench_close(bench *b)
{
    pp_rt_stage_destroy(b->st);
    float *bufs[4] = {b->x, b->y, b->dy, b->dx};
    for (int i = 0; i < 4; i++)
        pp_backend_free(b->be, bufs[i], b->io, PP_MEM_COMM);
    pp_backend_destroy(b->be);
}

/* Milliseconds of `iters` forwards and of `iters` backwards (each timed on its own). */
static pp_status time_layer(bench *b, int iters, double *fwd_ms, double *bwd_ms)
{
    *fwd_ms = *bwd_ms = 0.0;
    for (int i = 0; i < iters; i++) {
        double f, g;
        PP_TRY(pp_backend_cuda_timer_start(b->be));
        PP_TRY(pp_rt_stage_forward(b->st, 0, NULL, b->x, NULL, b->y, NULL));
        PP_TRY(pp_backend_cuda_timer_stop(b->be, &f));
        PP_TRY(pp_backend_cuda_timer_start(b->be));
        PP_TRY(pp_rt_stage_backward(b->st, 0, b->dy, b->dx, 1.0f));
        PP_TRY(pp_backend_cuda_timer_stop(b->be, &g));
        *fwd_ms += f;
        *bwd_ms += g;
    }
    return PP_OK;
}

/* Two AdamW steps (the first allocates the optimizer state); the second's milliseconds. */
static pp_status time_adamw(bench *b, double *ms)
{
    pp_adamw hp = {.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    PP_TRY(pp_rt_stage_adamw(b->st, &hp, 1, 1.0f));
    PP_TRY(pp_backend_cuda_timer_start(b->be));
    PP_TRY(pp_rt_stage_adamw(b->st, &hp, 2, 1.0f));
    PP_TRY(pp_backend_cuda_timer_stop(b->be, ms));
    return PP_OK;
}

/* Forward FLOPs of one block as the kernels compute them (see the file comment). */
static double layer_fwd_flops(const pp_model_cfg *m, int B, int T)
{
    double C = m->hidden, F = m->ffn, bt = (double)B * T;
    return 2.0 * bt * (3.0 * C * C + C * C + 2.0 * C * F) + 4.0 * bt * T * C;
}

int main(int argc, char **argv)
{
    opts o;
    if (!parse(argc, argv, &o))
        return 2;
    /* gpt-13b (Brown et al. 2020, table 2.1): 40 layers, d_model 5120, 40 heads, d_ff 4 d_model */
    pp_model_cfg m = {.layers = 40,
                      .hidden = 5120,
                      .heads = 40,
                      .ffn = 20480,
                      .vocab = 50257,
                      .seq = o.T > 2048 ? o.T : 2048};
    const char *prec = o.precision == PP_PREC_BF16 ? "bf16" : "fp32";
    bench b = {0};
    pp_status st = bench_open(&b, &o, &m);
    if (st == PP_ERR_UNSUPPORTED && !b.be) {
        if (o.json)
            printf("{\"bench\": \"cuda_layer\", \"skipped\": \"%s\"}\n", pp_err_text());
        else
            printf("bench_cuda_layer: %s\n", pp_err_text());
        return 0;
    }
    double fwd = 0.0, bwd = 0.0, adam = 0.0;
    if (st == PP_OK)
        st = time_layer(&b, o.warmup, &fwd, &bwd);
    if (st == PP_OK) /* as in training; in bf16 it also leaves the weights' bf16 copies */
        st = time_adamw(&b, &adam);
    if (st == PP_OK)
        st = time_layer(&b, o.iters, &fwd, &bwd);
    if (st != PP_OK) {
        fprintf(stderr, "bench_cuda_layer: %s\n", pp_err_msg());
        bench_close(&b);
        return 1;
    }
    pp_mem_stats ms;
    pp_backend_mem_stats(b.be, &ms);
    size_t dev_free = 0, dev_total = 0;
    (void)pp_backend_cuda_mem_info(b.be, &dev_free, &dev_total);
    double f1 = layer_fwd_flops(&m, o.B, o.T), ff = fwd / o.iters, bb = bwd / o.iters;
    double tf_f = f1 / (ff * 1e9), tf_b = 2.0 * f1 / (bb * 1e9), tf = 3.0 * f1 / ((ff + bb) * 1e9);
    if (o.json)
        printf("{\"bench\": \"cuda_layer\", \"model\": \"gpt-13b\", \"precision\": \"%s\", "
               "\"B\": %d, \"T\": %d, \"iters\": %d, \"fwd_ms\": %.4f, \"bwd_ms\": %.4f, "
               "\"layer_ms\": %.4f, \"adamw_ms\": %.4f, \"tflops\": %.2f, \"pct_of_peak\": %.2f, "
               "\"peak_tflops\": %.1f, \"peak_bytes\": %zu, \"device_used_bytes\": %zu}\n",
               prec, o.B, o.T, o.iters, ff, bb, ff + bb, adam, tf, 100.0 * tf / o.peak_tflops,
               o.peak_tflops, ms.peak_total, dev_total - dev_free);
    else {
        printf("gpt-13b block (C=%d NH=%d F=%d), B=%d T=%d, %s, mean of %d iterations:\n", m.hidden,
               m.heads, m.ffn, o.B, o.T, prec, o.iters);
        printf("  forward   %9.3f ms  %7.1f TFLOP/s\n", ff, tf_f);
        printf("  backward  %9.3f ms  %7.1f TFLOP/s\n", bb, tf_b);
        printf("  fwd+bwd   %9.3f ms  %7.1f TFLOP/s = %.1f %% of %.0f TFLOP/s peak\n", ff + bb, tf,
               100.0 * tf / o.peak_tflops, o.peak_tflops);
        printf("  AdamW     %9.3f ms  (one step of the block's parameters)\n", adam);
        printf("  memory    %.2f GiB peak through the backend, %.2f GiB in use on the device\n",
               ms.peak_total / 1073741824.0, (dev_total - dev_free) / 1073741824.0);
    }
    bench_close(&b);
    return 0;
}
