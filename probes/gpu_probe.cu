/* gpu_probe.cu — the GPU probes: memory (cudaMemGetInfo), cuBLAS GEMM rate in bf16/fp16/fp32
 * over a sweep of shapes (cublasGemmEx), on-device and device-to-device copies for every pair and
 * direction (cudaMemcpyPeerAsync, as nvbandwidth does), NCCL send/recv between pairs and
 * all-reduce over all GPUs of the node (nccl-tests conventions: algbw = bytes / time, all-reduce
 * busbw = algbw * 2(n-1)/n), each with an alpha-beta fit.
 *
 * The GPU plugin (pptune-gpu.so, plugin.h): the only file of probes/ that includes CUDA or NCCL
 * headers, loaded by plugin.c when a probe needs GPUs, so that pptune links none of them. Every CUDA/cuBLAS/NCCL call goes through a
 * PP_*_CHECK macro that turns the error into a pp_status with the call's text and file:line;
 * every kernel launch is followed by a launch-error check. Timing: CUDA events on the stream.
 * Not here: anything across nodes (mpi_gather.c), printing.
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../runtime/cuda/cuda_status.h" /* PP_CUDA_CHECK, PP_CUBLAS_CHECK, PP_NCCL_CHECK */
#include "plugin.h"

/* In functions that own resources: on error, record it and jump to their cleanup. */
#define CK(expr)                                                                                   \
    do {                                                                                           \
        if ((st = (expr)) != PP_OK)                                                                \
            goto done;                                                                             \
    } while (0)

#define MAX_GPUS 64
#define MAX_POINTS 24

/* ---- availability and versions ---- */

static int gpu_available(char *why, size_t why_len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        snprintf(why, why_len, "no CUDA device: %s", cudaGetErrorString(e));
        return 0;
    }
    if (n == 0) {
        snprintf(why, why_len, "no CUDA device: the driver reports none");
        return 0;
    }
    snprintf(why, why_len, "%d CUDA device%s", n, n == 1 ? "" : "s");
    return 1;
}

static void version_str(char *buf, size_t n, int v, int nccl)
{
    if (v <= 0)
        snprintf(buf, n, "%s", "");
    else if (nccl) /* NCCL_VERSION_CODE: major*10000 + minor*100 + patch since 2.9 */
        snprintf(buf, n, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
    else /* CUDA: major*1000 + minor*10 */
        snprintf(buf, n, "%d.%d", v / 1000, v % 1000 / 10);
}

static void gpu_versions(pp_software *sw)
{
    int rt = 0, drv = 0, nc = 0;
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv); /* 0 when no driver is installed */
    ncclGetVersion(&nc);
    version_str(sw->cuda_runtime, sizeof sw->cuda_runtime, rt, 0);
    version_str(sw->cuda_driver, sizeof sw->cuda_driver, drv, 0);
    version_str(sw->nccl, sizeof sw->nccl, nc, 1);
}

/* ---- timing helpers ---- */

typedef struct {
    cudaStream_t s;
    cudaEvent_t a, b;
} timer;

static pp_status timer_init(timer *t)
{
    PP_TRY(PP_CUDA_CHECK(cudaStreamCreateWithFlags(&t->s, cudaStreamNonBlocking)));
    PP_TRY(PP_CUDA_CHECK(cudaEventCreate(&t->a)));
    PP_TRY(PP_CUDA_CHECK(cudaEventCreate(&t->b)));
    return PP_OK;
}

static void timer_fini(timer *t)
{
    if (t->a)
        cudaEventDestroy(t->a);
    if (t->b)
        cudaEventDestroy(t->b);
    if (t->s)
        cudaStreamDestroy(t->s);
}

static pp_status timer_elapsed(timer *t, double *seconds)
{
    float ms = 0;
    PP_TRY(PP_CUDA_CHECK(cudaEventSynchronize(t->b)));
    PP_TRY(PP_CUDA_CHECK(cudaEventElapsedTime(&ms, t->a, t->b)));
    *seconds = ms * 1e-3;
    return PP_OK;
}

/* ---- fills (non-zero operands: zeros can take faster paths than real data) ---- */

__global__ static void fill_u16(uint16_t *x, size_t n, uint16_t base)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = (uint16_t)(base | (uint16_t)(i * 2654435761u >> 22 & 0xff));
}

__global__ static void fill_f32(float *x, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = (float)(i * 2654435761u >> 20 & 0xfff) * 1e-4f;
}

static pp_status fill(void *p, size_t n, int elem_bytes, uint16_t base, cudaStream_t s)
{
    unsigned blocks = (unsigned)((n + 255) / 256);
    if (elem_bytes == 2)
        fill_u16<<<blocks, 256, 0, s>>>((uint16_t *)p, n, base);
    else
        fill_f32<<<blocks, 256, 0, s>>>((float *)p, n);
    return PP_CUDA_CHECK(cudaGetLastError());
}

/* ---- GEMM ---- */

typedef struct {
    const char *name;
    cudaDataType_t type;
    int bytes;
    uint16_t fill_base; /* small positive values: 0x3c00 is 1.0 in fp16, 0x3c00 ~ 0.0078 in bf16 */
} dtype;

static const dtype dtypes[] = {
    {"bf16", CUDA_R_16BF, 2, 0x3c00}, {"fp16", CUDA_R_16F, 2, 0x3000}, {"fp32", CUDA_R_32F, 4, 0}};
static const int quick_sizes[] = {2048, 4096, 8192};
static const int full_sizes[] = {1024, 2048, 4096, 8192};

static pp_status gemm_shape(cublasHandle_t h, timer *t, const dtype *dt, int m, int n, int k,
                            void *a, void *b, void *c, int samples, pp_measure *out)
{
    const float one = 1.0f, zero = 0.0f;
    double flop = 2.0 * m * n * k, r[16], secs = 0;
#define GEMM()                                                                                     \
    PP_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a, dt->type, m, b,    \
                                 dt->type, k, &zero, c, dt->type, m, CUBLAS_COMPUTE_32F,           \
                                 CUBLAS_GEMM_DEFAULT))
    /* warm-up (cuBLAS picks its kernel), then size the repeat count to ~20 ms per sample */
    PP_TRY(PP_CUDA_CHECK(cudaEventRecord(t->a, t->s)));
    PP_TRY(GEMM());
    PP_TRY(PP_CUDA_CHECK(cudaEventRecord(t->b, t->s)));
    PP_TRY(timer_elapsed(t, &secs));
    int reps = secs > 0 ? (int)(0.02 / secs) + 1 : 1;
    for (int s = 0; s < samples; s++) {
        PP_TRY(PP_CUDA_CHECK(cudaEventRecord(t->a, t->s)));
        for (int i = 0; i < reps; i++)
            PP_TRY(GEMM());
        PP_TRY(PP_CUDA_CHECK(cudaEventRecord(t->b, t->s)));
        PP_TRY(timer_elapsed(t, &secs));
        r[s] = flop * reps / secs;
    }
#undef GEMM
    *out = pp_measure_of(r, samples);
    return PP_OK;
}

static pp_status gemm_sweep(const pp_probe_opts *o, int dev, pp_device *d)
{
    const int *sizes = o->quick ? quick_sizes : full_sizes;
    int ns = o->quick ? 3 : 4, samples = o->quick ? 3 : 5, np = 0;
    size_t max = (size_t)sizes[ns - 1] * sizes[ns - 1];
    void *a = NULL, *b = NULL, *c = NULL;
    cublasHandle_t h = NULL;
    timer t{};
    pp_status st = PP_OK;
    d->gemm = (pp_gemm_point *)pp_calloc(3 * (size_t)ns, sizeof *d->gemm);
    if (!d->gemm)
        return PP_ERR_NOMEM;
    CK(timer_init(&t));
    CK(PP_CUBLAS_CHECK(cublasCreate(&h)));
    CK(PP_CUBLAS_CHECK(cublasSetStream(h, t.s)));
    CK(PP_CUDA_CHECK(cudaMalloc(&a, max * 4)));
    CK(PP_CUDA_CHECK(cudaMalloc(&b, max * 4)));
    CK(PP_CUDA_CHECK(cudaMalloc(&c, max * 4)));
    for (int di = 0; di < 3; di++) {
        const dtype *dt = &dtypes[di];
        CK(fill(a, max * 4 / dt->bytes, dt->bytes, dt->fill_base, t.s));
        CK(fill(b, max * 4 / dt->bytes, dt->bytes, dt->fill_base, t.s));
        for (int si = 0; si < ns; si++) {
            int m = sizes[si];
            pp_gemm_point *p = &d->gemm[np++];
            snprintf(p->dtype, sizeof p->dtype, "%s", dt->name);
            p->m = p->n = p->k = m;
            CK(gemm_shape(h, &t, dt, m, m, m, a, b, c, samples, &p->flops));
            pp_probe_say(o, "gpu %d: %s GEMM %d^3  %.1f TFLOP/s (%.1f..%.1f)", dev, dt->name, m,
                         p->flops.median / 1e12, p->flops.min / 1e12, p->flops.max / 1e12);
        }
    }
    d->n_gemm = np;
    d->gemm_flops = d->gemm[ns - 1].flops.median; /* bf16 at the largest shape */
    snprintf(d->gemm_dtype, sizeof d->gemm_dtype, "bf16");
done:
    if (h)
        cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    timer_fini(&t);
    if (st != PP_OK)
        d->n_gemm = np;
    return st;
}

/* ---- copies ---- */

/* One size: warm-up, then `samples` timed blocks of `iters` copies. src/dst on (possibly)
 * different devices; the stream belongs to the source device. */
static pp_status copy_point(timer *t, void *dst, int ddev, const void *src, int sdev, size_t bytes,
                            int samples, pp_xfer_point *pt)
{
    int iters = (int)((256u << 20) / (bytes ? bytes : 1));
    iters = iters < 4 ? 4 : iters > 100 ? 100 : iters;
    double r[16], secs;
    PP_TRY(PP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, ddev, src, sdev, bytes, t->s)));
    for (int s = 0; s < samples; s++) {
        PP_TRY(PP_CUDA_CHECK(cudaEventRecord(t->a, t->s)));
        for (int i = 0; i < iters; i++)
            PP_TRY(PP_CUDA_CHECK(cudaMemcpyPeerAsync(dst, ddev, src, sdev, bytes, t->s)));
        PP_TRY(PP_CUDA_CHECK(cudaEventRecord(t->b, t->s)));
        PP_TRY(timer_elapsed(t, &secs));
        r[s] = secs / iters;
    }
    *pt = pp_xfer_point{(double)bytes, pp_measure_of(r, samples)};
    return PP_OK;
}

static size_t sweep_hi(const pp_probe_opts *o)
{
    return (size_t)(o->quick ? 64 : 256) << 20;
}
static size_t sweep_factor(const pp_probe_opts *o)
{
    return o->quick ? 8 : 4;
}

/* Copy sweep src -> dst device (src == dst: within one device's memory). */
static pp_status copy_sweep(const pp_probe_opts *o, int sdev, int ddev, pp_xfer_point *pts, int *n)
{
    void *src = NULL, *dst = NULL;
    timer t{};
    pp_status st = PP_OK;
    size_t hi = sweep_hi(o);
    int samples = o->quick ? 3 : 5;
    *n = 0;
    CK(PP_CUDA_CHECK(cudaSetDevice(ddev)));
    CK(PP_CUDA_CHECK(cudaMalloc(&dst, hi)));
    CK(PP_CUDA_CHECK(cudaSetDevice(sdev)));
    CK(PP_CUDA_CHECK(cudaMalloc(&src, hi)));
    CK(PP_CUDA_CHECK(cudaMemset(src, 1, hi)));
    CK(timer_init(&t));
    for (size_t b = 8; b <= hi && *n < MAX_POINTS; b *= sweep_factor(o)) {
        CK(copy_point(&t, dst, ddev, src, sdev, b, samples, &pts[*n]));
        (*n)++;
    }
done:
    timer_fini(&t);
    cudaFree(src);
    cudaFree(dst);
    return st;
}

static pp_status enable_peers(int n)
{
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            int can = 0;
            if (a == b)
                continue;
            PP_TRY(PP_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b)));
            if (!can)
                continue; /* cudaMemcpyPeer still works, staged through the host */
            PP_TRY(PP_CUDA_CHECK(cudaSetDevice(a)));
            cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled)
                cudaGetLastError(); /* clear the sticky-until-read error */
            else
                PP_TRY(PP_CUDA_CHECK(e));
        }
    return PP_OK;
}

/* Every ordered pair: the pairwise matrices (nvbandwidth's device-pair matrix). */
static pp_status peer_matrix(const pp_probe_opts *o, pp_cluster *c, int first, int n,
                             pp_link *copy_class)
{
    int nd = c->n_devices;
    pp_xfer_point pts[MAX_POINTS];
    double al[MAX_GPUS * MAX_GPUS], be[MAX_GPUS * MAX_GPUS];
    int np = 0, k = 0;
    c->pair_bw_Bps = (double *)pp_calloc((size_t)nd * nd, sizeof(double));
    c->pair_alpha_s = (double *)pp_calloc((size_t)nd * nd, sizeof(double));
    if (!c->pair_bw_Bps || !c->pair_alpha_s)
        return PP_ERR_NOMEM;
    snprintf(c->pair_method, sizeof c->pair_method, "cuda-peer-copy (cudaMemcpyPeerAsync)");
    PP_TRY(enable_peers(n));
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (a == b)
                continue;
            PP_TRY(copy_sweep(o, a, b, pts, &np));
            double alpha, beta;
            PP_TRY(pp_fit_alpha_beta(pts, np, &alpha, &beta));
            c->pair_bw_Bps[(first + a) * nd + first + b] = beta;
            c->pair_alpha_s[(first + a) * nd + first + b] = alpha;
            al[k] = alpha;
            be[k++] = beta;
            pp_probe_say(o, "gpu %d -> %d: peer copy alpha %.2f us, beta %.1f GB/s", a, b,
                         alpha * 1e6, beta / 1e9);
            if (k == 1) {
                if (!(copy_class->points = pp_xfer_copy(pts, np)))
                    return PP_ERR_NOMEM;
                copy_class->n_points = np;
            }
        }
    copy_class->present = k > 0;
    copy_class->alpha_s = pp_measure_of(al, k).median;
    copy_class->beta_Bps = pp_measure_of(be, k).median;
    snprintf(copy_class->method, sizeof copy_class->method,
             "cuda-peer-copy (median of %d ordered pairs)", k);
    return PP_OK;
}

/* ---- NCCL ---- */

typedef struct {
    int n;
    ncclComm_t comm[MAX_GPUS];
    cudaStream_t s[MAX_GPUS];
    void *send[MAX_GPUS], *recv[MAX_GPUS];
} nccl_ctx;

static pp_status nccl_init(nccl_ctx *x, int n, size_t bytes)
{
    int devs[MAX_GPUS] = {0};
    x->n = n;
    for (int i = 0; i < n; i++)
        devs[i] = i;
    PP_TRY(PP_NCCL_CHECK(ncclCommInitAll(x->comm, n, devs)));
    for (int i = 0; i < n; i++) {
        PP_TRY(PP_CUDA_CHECK(cudaSetDevice(i)));
        PP_TRY(PP_CUDA_CHECK(cudaStreamCreateWithFlags(&x->s[i], cudaStreamNonBlocking)));
        PP_TRY(PP_CUDA_CHECK(cudaMalloc(&x->send[i], bytes)));
        PP_TRY(PP_CUDA_CHECK(cudaMalloc(&x->recv[i], bytes)));
        PP_TRY(PP_CUDA_CHECK(cudaMemset(x->send[i], 0, bytes)));
    }
    return PP_OK;
}

static void nccl_fini(nccl_ctx *x)
{
    for (int i = 0; i < x->n; i++) {
        if (x->comm[i])
            ncclCommDestroy(x->comm[i]);
        cudaSetDevice(i);
        cudaFree(x->send[i]);
        cudaFree(x->recv[i]);
        if (x->s[i])
            cudaStreamDestroy(x->s[i]);
    }
}

static pp_status nccl_sync(nccl_ctx *x)
{
    for (int i = 0; i < x->n; i++) {
        PP_TRY(PP_CUDA_CHECK(cudaSetDevice(i)));
        PP_TRY(PP_CUDA_CHECK(cudaStreamSynchronize(x->s[i])));
    }
    return PP_OK;
}

/* One operation: a send a -> b (a >= 0), or an all-reduce over all GPUs (a < 0). */
static pp_status nccl_op(nccl_ctx *x, int a, int b, size_t bytes)
{
    PP_TRY(PP_NCCL_CHECK(ncclGroupStart()));
    if (a >= 0) {
        PP_TRY(PP_NCCL_CHECK(ncclSend(x->send[a], bytes, ncclInt8, b, x->comm[a], x->s[a])));
        PP_TRY(PP_NCCL_CHECK(ncclRecv(x->recv[b], bytes, ncclInt8, a, x->comm[b], x->s[b])));
    } else {
        for (int i = 0; i < x->n; i++)
            PP_TRY(PP_NCCL_CHECK(ncclAllReduce(x->send[i], x->recv[i], bytes / 4, ncclFloat,
                                               ncclSum, x->comm[i], x->s[i])));
    }
    return PP_NCCL_CHECK(ncclGroupEnd());
}

/* nccl-tests method: warm-up, then timed loops of iterations; host clock around the loop plus
 * the final stream synchronisation. */
static pp_status nccl_sweep(const pp_probe_opts *o, nccl_ctx *x, int a, int b, pp_xfer_point *pts,
                            int *n)
{
    int samples = o->quick ? 3 : 5;
    *n = 0;
    for (size_t bytes = 8; bytes <= sweep_hi(o) && *n < MAX_POINTS; bytes *= sweep_factor(o)) {
        int iters = (int)((256u << 20) / bytes);
        iters = iters < 5 ? 5 : iters > 50 ? 50 : iters;
        double r[16];
        PP_TRY(nccl_op(x, a, b, bytes));
        PP_TRY(nccl_sync(x));
        for (int s = 0; s < samples; s++) {
            double t0 = pp_now();
            for (int i = 0; i < iters; i++)
                PP_TRY(nccl_op(x, a, b, bytes));
            PP_TRY(nccl_sync(x));
            r[s] = (pp_now() - t0) / iters;
        }
        pts[*n] = pp_xfer_point{(double)bytes, pp_measure_of(r, samples)};
        (*n)++;
    }
    return PP_OK;
}

/* Send/recv between pairs (quick: GPU 0 with each other GPU; full: every ordered pair) -> the
 * intra-node class; all-reduce over all GPUs -> c->allreduce. */
static pp_status nccl_probe(const pp_probe_opts *o, pp_cluster *c, int n)
{
    nccl_ctx x;
    memset(&x, 0, sizeof x);
    pp_xfer_point pts[MAX_POINTS];
    double al[MAX_GPUS * MAX_GPUS], be[MAX_GPUS * MAX_GPUS];
    int np = 0, k = 0;
    pp_status st = PP_OK;
    pp_link *l = &c->links[PP_LINK_INTRA];
    CK(nccl_init(&x, n, sweep_hi(o)));
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            if (a == b || (o->quick && a > 0))
                continue;
            CK(nccl_sweep(o, &x, a, b, pts, &np));
            CK(pp_fit_alpha_beta(pts, np, &al[k], &be[k]));
            pp_probe_say(o, "gpu %d -> %d: nccl send/recv alpha %.2f us, beta %.1f GB/s", a, b,
                         al[k] * 1e6, be[k] / 1e9);
            if (k++ == 0) {
                free(l->points);
                if (!(l->points = pp_xfer_copy(pts, np)))
                    CK(PP_ERR_NOMEM);
                l->n_points = np;
            }
        }
    l->present = 1;
    l->source = PP_SRC_PROBED;
    l->alpha_s = pp_measure_of(al, k).median;
    l->beta_Bps = pp_measure_of(be, k).median;
    snprintf(l->method, sizeof l->method, "nccl-sendrecv (median of %d ordered pairs)", k);
    CK(nccl_sweep(o, &x, -1, -1, pts, &np));
    {
        pp_collective *ar = &c->allreduce;
        if (!(ar->points = pp_xfer_copy(pts, np)))
            CK(PP_ERR_NOMEM);
        ar->n_points = np;
        ar->present = 1;
        ar->ranks = n;
        ar->source = PP_SRC_PROBED;
        const pp_xfer_point *big = &pts[np - 1];
        ar->busbw_Bps = big->bytes / big->seconds.median * 2.0 * (n - 1) / n;
        CK(pp_fit_alpha_beta(pts, np, &ar->alpha_s, &ar->beta_Bps));
        pp_probe_say(o, "nccl all-reduce over %d GPUs: busbw %.1f GB/s at %.0f MiB", n,
                     ar->busbw_Bps / 1e9, big->bytes / (1 << 20));
    }
done:
    nccl_fini(&x);
    return st;
}

/* ---- per device ---- */

static double vendor_peak_bf16(const char *name)
{
    if (strstr(name, "A100"))
        return 312e12;
    if (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "H800"))
        return 989e12;
    return 0;
}

static pp_status probe_device(const pp_probe_opts *o, pp_cluster *c, int node, int dev)
{
    cudaDeviceProp p;
    size_t freeb = 0, total = 0;
    pp_device d;
    memset(&d, 0, sizeof d);
    PP_TRY(PP_CUDA_CHECK(cudaSetDevice(dev)));
    PP_TRY(PP_CUDA_CHECK(cudaGetDeviceProperties(&p, dev)));
    PP_TRY(PP_CUDA_CHECK(cudaMemGetInfo(&freeb, &total)));
    snprintf(d.kind, sizeof d.kind, "gpu");
    snprintf(d.name, sizeof d.name, "%.63s", p.name);
    snprintf(d.pci, sizeof d.pci, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
    d.node = node;
    d.local_index = dev;
    d.mem_bytes = (double)total;
    d.mem_free_bytes = (double)freeb;
    d.peak_flops = vendor_peak_bf16(p.name);
    d.source = PP_SRC_PROBED;
    pp_probe_say(o, "gpu %d: %s, %.1f GB total, %.1f GB free", dev, p.name, total / 1e9,
                 freeb / 1e9);
    pp_status st = gemm_sweep(o, dev, &d);
    if (st == PP_OK) {
        pp_xfer_point pts[MAX_POINTS];
        int np = 0;
        st = copy_sweep(o, dev, dev, pts, &np);
        if (st == PP_OK) { /* the largest copies: bandwidth-bound */
            d.copy_Bps = pts[np - 1].seconds;
            double t[3] = {pts[np - 1].seconds.median, pts[np - 1].seconds.max,
                           pts[np - 1].seconds.min};
            d.copy_Bps.median = pts[np - 1].bytes / t[0];
            d.copy_Bps.min = pts[np - 1].bytes / t[1];
            d.copy_Bps.max = pts[np - 1].bytes / t[2];
            pp_probe_say(o, "gpu %d: on-device copy %.0f GB/s (bytes copied; traffic is twice)",
                         dev, d.copy_Bps.median / 1e9);
        }
    }
    if (st == PP_OK)
        st = pp_cluster_add_device(c, &d, NULL);
    free(d.gemm);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}

static pp_status gpu_probe_node(const pp_probe_opts *o, pp_cluster *c, int node)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
        return PP_ERR(PP_ERR_UNSUPPORTED, "no CUDA device: %s",
                      e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
    if (n > MAX_GPUS)
        return PP_ERR(PP_ERR_UNSUPPORTED, "%d GPUs on one node; the probe handles up to %d", n,
                      MAX_GPUS);
    int first = c->n_devices;
    for (int i = 0; i < n; i++)
        PP_TRY(probe_device(o, c, node, i));
    if (n < 2) {
        pp_probe_say(o, "one GPU: no device pairs, no NCCL link to measure");
        return PP_OK;
    }
    pp_link copy_class;
    memset(&copy_class, 0, sizeof copy_class);
    pp_status st = peer_matrix(o, c, first, n, &copy_class);
    if (st == PP_OK) {
        st = nccl_probe(o, c, n);
        if (st != PP_OK) { /* keep the copy-engine figures as the class, say why */
            pp_probe_say(o, "NCCL probe failed (%s): the intra-node link is the peer-copy fit",
                         pp_err_text());
            free(c->links[PP_LINK_INTRA].points);
            c->links[PP_LINK_INTRA] = copy_class;
            copy_class.points = NULL;
            size_t len = strlen(c->note);
            snprintf(c->note + len, sizeof c->note - len, "%sNCCL failed: link from peer copies",
                     len ? "; " : "");
            st = PP_OK;
        }
    }
    free(copy_class.points);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}

extern "C" PP_PLUGIN_EXPORT const pp_probe_plugin *pp_probe_plugin_gpu(void)
{
    static pp_probe_plugin table;
    table.abi = PP_PROBE_PLUGIN_ABI;
    table.name = "gpu";
    table.err_msg = pp_err_msg;
    table.err_text = pp_err_text;
    table.err_restore = pp_err_restore;
    table.gpu_available = gpu_available;
    table.gpu_probe_node = gpu_probe_node;
    table.gpu_versions = gpu_versions;
    return &table;
}
