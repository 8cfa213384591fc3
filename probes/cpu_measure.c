/* cpu_measure.c — what a CPU-backend rank gets: memory, single-thread BLAS GEMM rate, memcpy
 * bandwidth. (Transfers between threads: cpu_transfer.c.)
 *
 * Every figure is the median of repeated timed samples after a warm-up, with min/max kept;
 * each sample repeats the operation until it lasts long enough for the clock to resolve it.
 * Not here: deciding how many CPU devices a node has (probe.c), printing.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_impl.h"

/* ---- memory ---- */

static double read_number_file(const char *path)
{
    FILE *fp = fopen(path, "r");
    double v = -1;
    if (fp) {
        char buf[64];
        if (fgets(buf, sizeof buf, fp) && strncmp(buf, "max", 3) != 0)
            v = atof(buf);
        fclose(fp);
    }
    return v;
}

pp_status pp_cpu_usable_memory(double *bytes)
{
    double avail = -1;
    FILE *fp = fopen("/proc/meminfo", "r");
    if (fp) {
        char line[128];
        while (fgets(line, sizeof line, fp))
            if (!strncmp(line, "MemAvailable:", 13))
                avail = atof(line + 13) * 1024.0; /* the file says kB, meaning KiB */
        fclose(fp);
    }
    if (avail < 0) {
        long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || page <= 0)
            return PP_ERR(PP_ERR_IO, "cannot tell available memory: /proc/meminfo has no "
                                     "MemAvailable and sysconf(_SC_AVPHYS_PAGES) failed");
        avail = (double)pages * (double)page;
    }
    /* a container's limit is what the kernel enforces (cgroup v2, then v1) */
    const char *limits[] = {"/sys/fs/cgroup/memory.max",
                            "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        double lim = read_number_file(limits[i]);
        if (lim > 0 && lim < avail)
            avail = lim;
    }
    *bytes = avail;
    return PP_OK;
}

/* ---- GEMM ---- */

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

pp_status pp_cpu_gemm_sweep(const pp_probe_opts *o, pp_gemm_point **pts, int *n)
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

/* ---- memcpy ---- */

pp_status pp_cpu_memcpy(const pp_probe_opts *o, pp_measure *bw)
{
    size_t bytes = (size_t)(o->quick ? 32 : 128) << 20;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return PP_ERR(PP_ERR_NOMEM, "memcpy probe: cannot allocate 2 x %zu MiB", bytes >> 20);
    }
    memset(src, 1, bytes);
    memcpy(dst, src, bytes); /* warm-up: faults the pages in */
    int samples = o->quick ? 5 : 9;
    double rate[16];
    for (int i = 0; i < samples; i++) {
        double t0 = pp_now();
        memcpy(dst, src, bytes);
        rate[i] = (double)bytes / (pp_now() - t0);
    }
    *bw = pp_measure_of(rate, samples);
    /* read dst so the copies cannot be optimised away */
    volatile char sink = dst[bytes / 2];
    (void)sink;
    free(src);
    free(dst);
    pp_probe_say(o, "cpu: memcpy %zu MiB  %.2f GB/s (%.2f..%.2f)", bytes >> 20, bw->median / 1e9,
                 bw->min / 1e9, bw->max / 1e9);
    return PP_OK;
}
