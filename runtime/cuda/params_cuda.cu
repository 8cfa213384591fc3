/* params_cuda.cu — the CUDA backend's optional table entries (backend.h, "optional"): filling
 * parameters on the device, the sum of squares of a gradient for the global norm, and pinned
 * host memory for the executor's staging copies. Each replaces a host loop that moved whole
 * tensors through small synchronous copies: for a 13B model's 1.6 G parameters per rank that
 * was ~400 000 copy-and-wait round trips at initialisation and again at every step's norm.
 *
 *   init_normal: element i from (key, i) by the arithmetic of runtime/init_normal.h, the one the
 *     host uses (see there for the last-bit caveat of the device's double log/cos/sin);
 *   sum_sq: a grid that depends on n only (one block per SUMSQ_THREADS elements, at most
 *     SUMSQ_BLOCKS); each thread accumulates its grid-stride elements in double, each block
 *     reduces in shared memory as a fixed tree, the host adds the block partials in block
 *     order: the same result at every run on any GPU (a different order from the CPU backend's
 *     element order: equal to ~1e-16 relative, not bit for bit);
 *   host_alloc: cudaMallocHost (page-locked: copies run at full PCIe/NVLink-C2C rate and can be
 *     asynchronous), falling back to malloc when the driver refuses.
 */
#include <stdlib.h>

#include "../init_normal.h"
#include "cuda_impl.h"

#define CX(ctx) ((pp_cuda_ctx *)(ctx))
#define SUMSQ_BLOCKS PP_RT_SUMSQ_BLOCKS /* cuda_sizes.h: the plan counts its partials */
#define SUMSQ_THREADS 256

static __global__ void init_normal_kernel(float *dst, size_t n, uint64_t key, double std)
{
    size_t pairs = (n + 1) / 2;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < pairs;
         j += (size_t)gridDim.x * blockDim.x) {
        float p[2];
        pp_normal_pair(key, j, std, p);
        dst[2 * j] = p[0];
        if (2 * j + 1 < n)
            dst[2 * j + 1] = p[1];
    }
}

pp_status pp_cuda_init_normal(void *ctx, float *dst, size_t n, uint64_t key, double std)
{
    pp_cuda_ctx *cx = CX(ctx);
    if (!n)
        return PP_OK;
    pp_cuda_shadow_invalidate(cx, dst, n * sizeof(float));
    size_t pairs = (n + 1) / 2;
    PP_LAUNCH(init_normal_kernel, pp_cuda_blocks(pairs, 256), 256, 0, cx->stream)(dst, n, key, std);
    PP_CUDA_LAUNCH_CHECK();
    return PP_OK;
}

static __global__ void sum_sq_kernel(double *partial, const float *x, size_t n)
{
    __shared__ double s[SUMSQ_THREADS];
    double acc = 0.0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double v = (double)x[i];
        acc += v * v;
    }
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = SUMSQ_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half)
            s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = s[0];
}

pp_status pp_cuda_sum_sq(void *ctx, const float *x, size_t n, double *acc)
{
    pp_cuda_ctx *cx = CX(ctx);
    if (!n)
        return PP_OK;
    void *ws;
    PP_TRY(pp_cuda_ws_reserve(cx, pp_rt_size_cuda_sumsq_ws(), &ws)); /* SUMSQ_BLOCKS doubles */
    size_t want = (n + SUMSQ_THREADS - 1) / SUMSQ_THREADS;
    unsigned blocks = (unsigned)(want < SUMSQ_BLOCKS ? want : SUMSQ_BLOCKS);
    PP_LAUNCH(sum_sq_kernel, blocks, SUMSQ_THREADS, 0, cx->stream)((double *)ws, x, n);
    PP_CUDA_LAUNCH_CHECK();
    double part[SUMSQ_BLOCKS];
    PP_CUDA_TRY(cudaMemcpyAsync(part, ws, blocks * sizeof(double), cudaMemcpyDeviceToHost,
                                cx->stream));
    PP_CUDA_TRY(cudaStreamSynchronize(cx->stream));
    double s = *acc;
    for (unsigned b = 0; b < blocks; b++)
        s += part[b];
    *acc = s;
    return PP_OK;
}

void *pp_cuda_host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: pageable memory does the job, slower */
        p = malloc(bytes ? bytes : 1);
        if (!p)
            return NULL;
        /* remember nothing: host_free tells the two kinds apart by asking the driver */
    }
    return p;
}

void pp_cuda_host_free(void *ctx, void *p)
{
    (void)ctx;
    if (!p)
        return;
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) == cudaSuccess && a.type == cudaMemoryTypeHost)
        (void)cudaFreeHost(p);
    else {
        (void)cudaGetLastError();
        free(p);
    }
}
