/* cpu_gemm.c — the BLAS plugin (pptune-blas.so, plugin.h): the single-thread GEMM rate of a
 * CPU-backend rank, measured with the BLAS the CPU backend uses (OpenBLAS's cblas_sgemm), and
 * the library's configuration string. A plugin so that pptune itself links no BLAS: OpenBLAS
 * starts its thread pool when loaded, which costs every `pptune --help` and, under a tight
 * `ulimit -v`, never finished.
 *
 * Every figure is the median of repeated timed samples after a warm-up, with min/max kept;
 * each sample repeats the operation until it lasts long enough for the clock to resolve it.
 * Not here: memory and memcpy (cpu_measure.c), deciding how many CPU devices a node has
 * (probe.c), printing.
 */
#include <cblas.h>
#include <stdlib.h>

#include "plugin.h"

typedef struct {
    int m, n, k;
} shape;

/* Square shapes, then one shaped like a GPT-125m MLP projection (tokens x 4h x h). */
static const shape full_shapes[] = {
    {256, 256, 256}, {512, 512, 512}, {768, 3072, 768}, {1024, 1024, 1024}};
static const shape quick_shapes[] = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}};

static void fill_random(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 16) & 0x7fff) / 32768.0f - 0.5f;
    }
}

static pp_status gemm_point(const pp_probe_opts *o, shape s, pp_gemm_point *p)
{
    size_t na = (size_t)s.m * s.k, nb = (size_t)s.k * s.n, nc = (size_t)s.m * s.n;
    float *a = pp_calloc(na + nb + nc, sizeof *a);
    if (!a)
        return PP_ERR_NOMEM;
    float *b = a + na, *c = b + nb;
    fill_random(a, na + nb, 7);
    double flop = 2.0 * s.m * s.n * s.k, min_sample = o->quick ? 0.02 : 0.05;
    int samples = o->quick ? 5 : 9;
    double t0 = pp_now(); /* warm-up (also sizes the repeat count) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a, s.k, b, s.n,
                0.0f, c, s.n);
    double once = pp_now() - t0;
    int reps = once > 0 ? (int)(min_sample / once) + 1 : 1;
    double rate[16];
    for (int i = 0; i < samples; i++) {
        t0 = pp_now();
        for (int r = 0; r < reps; r++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.m, s.n, s.k, 1.0f, a, s.k, b,
                        s.n, 0.0f, c, s.n);
        rate[i] = flop * reps / (pp_now() - t0);
    }
    free(a);
    *p = (pp_gemm_point){
        .dtype = "fp32", .m = s.m, .n = s.n, .k = s.k, .flops = pp_measure_of(rate, samples)};
    pp_probe_say(o, "cpu: sgemm %dx%dx%d  %.2f GFLOP/s (%.2f..%.2f)", s.m, s.n, s.k,
                 p->flops.median / 1e9, p->flops.min / 1e9, p->flops.max / 1e9);
    return PP_OK;
}

static pp_status gemm_sweep(const pp_probe_opts *o, pp_gemm_point **pts, int *n)
{
    const shape *sh = o->quick ? quick_shapes : full_shapes;
    int ns =
        o->quick ? (int)(sizeof quick_shapes / sizeof *sh) : (int)(sizeof full_shapes / sizeof *sh);
    /* one BLAS thread: each CPU rank of the runtime runs its own GEMMs on its own core */
    openblas_set_num_threads(1);
    *pts = pp_calloc((size_t)ns, sizeof **pts);
    if (!*pts)
        return PP_ERR_NOMEM;
    for (int i = 0; i < ns; i++) {
        pp_status st = gemm_point(o, sh[i], &(*pts)[i]);
        if (st != PP_OK) {
            free(*pts);
            *pts = NULL;
            return pp_err_trace(st, __FILE__, __LINE__);
        }
    }
    *n = ns;
    return PP_OK;
}

static const char *blas_config(void)
{
    return openblas_get_config();
}

PP_PLUGIN_EXPORT const pp_probe_plugin *pp_probe_plugin_blas(void)
{
    static const pp_probe_plugin table = {
        PP_PROBE_PLUGIN_ERR_FIELDS,
        .name = "blas",
        .gemm_sweep = gemm_sweep,
        .blas_config = blas_config,
    };
    return &table;
}
