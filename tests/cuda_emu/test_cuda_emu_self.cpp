/* test_cuda_emu_self.cpp — the CUDA emulation itself (part of the suite cuda_emu): that what the
 * emulation claims to detect it detects, and that what it computes is what CUDA and cuBLAS
 * document. Without these, a pass of test_cuda*.c under the emulation would say little.
 *   - bf16 conversion: round to nearest even, NaN kept NaN, against a reference in double;
 *   - kernels: a block reduction through __syncthreads and warp shuffles, blocks of several
 *     OS threads at once (per-thread __shared__), an invalid configuration reported as
 *     cudaErrorInvalidConfiguration, a thread that leaves before a barrier and a divergent
 *     __syncthreads abort (as a hang on a GPU would fail the run);
 *   - cuBLAS: column-major results of op N/T by hand, beta = 0 not reading C, bad leading
 *     dimensions refused (CUBLAS_STATUS_INVALID_VALUE), operands reaching outside their
 *     allocation refused, unsupported types refused;
 *   - memory: copies in the wrong direction refused, the PP_CUDA_EMU_MEM_LIMIT budget (and the
 *     backend's out-of-memory path at creation), PP_CUDA_EMU_DEVICES=0 (no device), the host
 *     dereferencing a device pointer faults (where the CPU has protection keys).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "cuda_emu_impl.h"
#include "cuda_impl.h"

/* ---- bf16 ---- */

/* The bf16 nearest to f (ties to the even mantissa), by comparing distances in double. */
static uint16_t bf16_reference(float f)
{
    if (isnan(f))
        return 0x7fff;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16); /* truncation: toward zero */
    uint32_t lo_bits = (uint32_t)lo << 16, hi_bits = (uint32_t)(lo + 1) << 16;
    float flo, fhi;
    memcpy(&flo, &lo_bits, 4);
    memcpy(&fhi, &hi_bits, 4); /* the next one away from zero (may be inf) */
    if ((lo_bits & 0x7fffffffu) == 0x7f800000u || lo_bits == u)
        return lo; /* inf, or exact */
    double dlo = fabs((double)f - (double)flo), dhi;
    if (isinf(fhi)) /* halfway to the next power of two past the largest: 2^128 */
        dhi = fabs(ldexp(f > 0 ? 1.0 : -1.0, 128) - (double)f);
    else
        dhi = fabs((double)fhi - (double)f);
    if (dlo < dhi)
        return lo;
    if (dhi < dlo)
        return (uint16_t)(lo + 1);
    return (lo & 1) ? (uint16_t)(lo + 1) : lo;
}

Test(cuda_emu, bf16_rounds_to_nearest_even_and_keeps_nan)
{
    const uint32_t edges[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f808001u,
                              0x3f807fffu, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u, 0x7f7f7fffu,
                              0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                              0x00008000u, 0x00018000u, 0x80008000u, 0x00000001u};
    for (uint32_t u : edges) {
        float f;
        memcpy(&f, &u, 4);
        uint16_t got = __float2bfloat16_rn(f).x;
        cr_expect_eq(got, bf16_reference(f), "bits %#010x: got %#06x, want %#06x", u, got,
                     bf16_reference(f));
    }
    uint32_t x = 12345u;
    for (int i = 0; i < 1000000; i++) {
        x = x * 1664525u + 1013904223u;
        float f;
        memcpy(&f, &x, 4);
        uint16_t got = __float2bfloat16_rn(f).x;
        if (got != bf16_reference(f))
            cr_assert_fail("bits %#010x: got %#06x, want %#06x", x, got, bf16_reference(f));
        if (!isnan(f))
            cr_assert(__bfloat162float(__float2bfloat16_rn(f)) ==
                          __bfloat162float(__nv_bfloat16{got}),
                      "round trip");
    }
    __nv_bfloat162 p = __floats2bfloat162_rn(1.0f, -2.0f);
    cr_expect(p.x.x == 0x3f80 && p.y.x == 0xc000, "floats2bfloat162: %#x %#x", p.x.x, p.y.x);
}

/* ---- kernels ---- */

/* out[block] = sum over the block's threads of (linear thread index + 1) + block index:
 * warp sums by shuffles, warp partials through shared memory and a barrier. */
static __global__ void block_sum_kernel(float *out)
{
    __shared__ float part[32];
    int t = (int)(threadIdx.x + threadIdx.y * blockDim.x);
    int nt = (int)(blockDim.x * blockDim.y);
    float v = pp_warp_sum((float)(t + 1));
    if (t % 32 == 0)
        part[t / 32] = v;
    __syncthreads();
    if (t == 0) {
        float s = 0.0f;
        for (int w = 0; w < nt / 32; w++)
            s += part[w];
        out[blockIdx.x] = s + (float)blockIdx.x;
    }
}

static void expect_block_sums(dim3 block, unsigned blocks)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, blocks * sizeof(float)), cudaSuccess);
    PP_LAUNCH(block_sum_kernel, blocks, block, 0, (cudaStream_t)NULL)(d);
    cr_assert_eq(cudaGetLastError(), cudaSuccess);
    std::vector<float> h(blocks);
    cr_assert_eq(cudaMemcpyAsync(h.data(), d, blocks * sizeof(float), cudaMemcpyDeviceToHost, NULL),
                 cudaSuccess);
    double n = (double)block.x * block.y;
    for (unsigned b = 0; b < blocks; b++)
        cr_expect_eq(h[b], n * (n + 1) / 2 + b, "block %u of (%u x %u): %g", b, block.x, block.y,
                     (double)h[b]);
    cudaFree(d);
}

Test(cuda_emu, block_reduction_through_barrier_and_shuffles)
{
    expect_block_sums(dim3(256), 5);
    expect_block_sums(dim3(32, 8), 3);
    expect_block_sums(dim3(1024), 2);
}

Test(cuda_emu, threads_launching_at_once_have_their_own_shared_memory)
{
    std::vector<std::thread> th;
    for (int i = 0; i < 4; i++)
        th.emplace_back([] {
            for (int r = 0; r < 20; r++)
                expect_block_sums(dim3(512), 3);
        });
    for (auto &t : th)
        t.join();
}

static __global__ void nothing_kernel(float *p)
{
    (void)p;
}

Test(cuda_emu, invalid_configuration_is_reported_like_cuda)
{
    PP_LAUNCH(nothing_kernel, 1, 1025, 0, (cudaStream_t)NULL)(NULL);
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidConfiguration, "1025 threads per block");
    PP_LAUNCH(nothing_kernel, dim3(1, 65536), 32, 0, (cudaStream_t)NULL)(NULL);
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidConfiguration, "gridDim.y 65536");
    PP_LAUNCH(nothing_kernel, 0u, 32, 0, (cudaStream_t)NULL)(NULL);
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidConfiguration, "an empty grid");
    cr_expect_eq(cudaGetLastError(), cudaSuccess, "the error is not sticky");
}

static __global__ void early_exit_kernel(float *p)
{
    if (threadIdx.x == 3)
        return; /* the bug: every other thread waits below for ever */
    __syncthreads();
    p[threadIdx.x] = 1.0f;
}

Test(cuda_emu, a_thread_leaving_before_a_barrier_aborts, .signal = SIGABRT)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 64 * sizeof(float)), cudaSuccess);
    PP_LAUNCH(early_exit_kernel, 1, 64, 0, (cudaStream_t)NULL)(d);
}

static __global__ void divergent_barrier_kernel(float *p)
{
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    p[threadIdx.x] = 1.0f;
}

Test(cuda_emu, a_divergent_syncthreads_aborts, .signal = SIGABRT)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 64 * sizeof(float)), cudaSuccess);
    PP_LAUNCH(divergent_barrier_kernel, 1, 64, 0, (cudaStream_t)NULL)(d);
}

static __global__ void half_warp_shuffle_kernel(float *p)
{
    if (threadIdx.x % 32 < 16)
        p[threadIdx.x] = pp_warp_sum(1.0f); /* half the warp never comes */
}

Test(cuda_emu, a_warp_exchange_without_the_whole_warp_aborts, .signal = SIGABRT)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 64 * sizeof(float)), cudaSuccess);
    PP_LAUNCH(half_warp_shuffle_kernel, 1, 64, 0, (cudaStream_t)NULL)(d);
}

/* ---- cuBLAS ---- */

static float *dev_floats(const std::vector<float> &h)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, h.size() * sizeof(float)), cudaSuccess);
    cr_assert_eq(
        cudaMemcpyAsync(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice, NULL),
        cudaSuccess);
    return d;
}

static std::vector<float> host_floats(const float *d, size_t n)
{
    std::vector<float> h(n);
    cr_assert_eq(cudaMemcpyAsync(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost, NULL),
                 cudaSuccess);
    return h;
}

/* A (2x3) = [1 2 3; 4 5 6] stored column-major with lda 3 (one padding row, value 100):
 * columns (1,4,100), (2,5,100), (3,6,100). B (3x2) = [1 0; 0 1; 1 1] column-major, ldb 3. */
Test(cuda_emu, gemm_is_column_major_as_cublas_documents)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *a = dev_floats({1, 4, 100, 2, 5, 100, 3, 6, 100});
    float *b = dev_floats({1, 0, 1, 0, 1, 1});
    float *c = dev_floats({NAN, NAN, NAN, NAN}); /* beta = 0: never read */
    float one = 1.0f, zero = 0.0f, two = 2.0f;
    /* C (2x2) = A B = [1+3, 2+3; 4+6, 5+6] = [4 5; 10 11], column-major (4, 10, 5, 11) */
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a, CUDA_R_32F, 3, b,
                              CUDA_R_32F, 3, &zero, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    std::vector<float> want = {4, 10, 5, 11};
    cr_expect(host_floats(c, 4) == want, "A B");
    /* C = 2 * B^T A^T + 1 * C = 2 (A B)^T + C: (8+4, 10+10, 20+5, 22+11) column-major */
    cr_assert_eq(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_T, 2, 2, 3, &two, b, CUDA_R_32F, 3, a,
                              CUDA_R_32F, 3, &one, c, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    want = {12, 20, 25, 33};
    cr_expect(host_floats(c, 4) == want, "2 B^T A^T + C");
    /* strided batch of 2 with a zero stride for B: both C_i = A_i B, A_1 = A shifted by 1 */
    float *c2 = dev_floats(std::vector<float>(8, 7.0f));
    cr_assert_eq(cublasGemmStridedBatchedEx(
                     h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, a, CUDA_R_32F, 3, 1, b, CUDA_R_32F,
                     3, 0, &zero, c2, CUDA_R_32F, 2, 4, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 CUBLAS_STATUS_SUCCESS);
    /* A_0 = [1 2; 4 5], A_1 = [4 5; 100 100] (from a+1), B' = [1 0; 0 1] */
    want = {1, 4, 2, 5, 4, 100, 5, 100};
    cr_expect(host_floats(c2, 8) == want, "strided batch");
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(c2);
    cublasDestroy(h);
}

Test(cuda_emu, gemm_refuses_what_cublas_refuses)
{
    cublasHandle_t h;
    cr_assert_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    float *a = dev_floats(std::vector<float>(64, 1.0f)), *c = dev_floats(std::vector<float>(64));
    float one = 1.0f, zero = 0.0f;
    auto g = [&](cublasOperation_t ta, int m, int n, int k, int lda, int ldb, int ldc,
                 cudaDataType t) {
        return cublasGemmEx(h, ta, CUBLAS_OP_N, m, n, k, &one, a, t, lda, a, t, ldb, &zero, c,
                            CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    cr_expect_eq(g(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    cr_expect_eq(g(CUBLAS_OP_N, 4, 4, 4, 3, 4, 4, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE,
                 "lda < m with op N");
    cr_expect_eq(g(CUBLAS_OP_T, 4, 4, 5, 4, 5, 4, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE,
                 "lda < k with op T");
    cr_expect_eq(g(CUBLAS_OP_N, 4, 4, 5, 4, 4, 4, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE,
                 "ldb < k");
    cr_expect_eq(g(CUBLAS_OP_N, 4, 4, 4, 4, 4, 3, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE,
                 "ldc < m");
    cr_expect_eq(g(CUBLAS_OP_N, -1, 4, 4, 4, 4, 4, CUDA_R_32F), CUBLAS_STATUS_INVALID_VALUE,
                 "m < 0");
    cr_expect_eq(g(CUBLAS_OP_N, 4, 4, 4, 21, 4, 4, CUDA_R_32F), CUBLAS_STATUS_EXECUTION_FAILED,
                 "A (lda 21, 4 columns: 3 * 21 + 4 = 67) reaches past its 64 floats");
    cr_expect_eq(g(CUBLAS_OP_N, 4, 4, 4, 4, 4, 4, (cudaDataType)2), CUBLAS_STATUS_NOT_SUPPORTED,
                 "an input type other than fp32 or bf16");
    cudaFree(a), cudaFree(c);
    cublasDestroy(h);
}

/* ---- memory ---- */

Test(cuda_emu, copies_in_the_wrong_direction_are_refused)
{
    float *d, h[4] = {0};
    cr_assert_eq(cudaMalloc((void **)&d, sizeof h), cudaSuccess);
    cr_expect_eq(cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, NULL), cudaSuccess);
    cr_expect_eq(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyHostToDevice, NULL),
                 cudaErrorInvalidValue, "host destination of a host-to-device copy");
    cr_expect_eq(cudaMemcpyAsync(d, d + 2, 8, cudaMemcpyHostToDevice, NULL), cudaErrorInvalidValue,
                 "device source of a host-to-device copy");
    cr_expect_eq(cudaGetLastError(), cudaErrorInvalidValue);
    cr_expect_eq(cudaFree(d + 1), cudaErrorInvalidValue, "not an allocation's start");
    cr_expect_eq(cudaFree(d), cudaSuccess);
}

Test(cuda_emu, the_memory_limit_makes_allocations_fail)
{
    setenv("PP_CUDA_EMU_MEM_LIMIT", "1048576", 1);
    void *p, *q;
    size_t f, t;
    cr_assert_eq(cudaMalloc(&p, 600000), cudaSuccess);
    cr_expect_eq(cudaMalloc(&q, 600000), cudaErrorMemoryAllocation);
    cr_expect_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    cr_expect(t == 1048576 && f == 1048576 - 600000, "free %zu of %zu", f, t);
    cudaFree(p);
    /* the backend's out-of-memory path at creation: its 32 MiB cuBLAS workspace cannot fit */
    pp_backend *be = (pp_backend *)1;
    cr_expect_eq(pp_backend_cuda_create(0, PP_PREC_FP32, &be), PP_ERR_OOM, "%s", pp_err_msg());
    cr_expect_null(be);
    cr_expect_eq(cudaMemGetInfo(&f, &t), cudaSuccess);
    cr_expect_eq(f, t, "a failed creation leaves nothing allocated (%zu of %zu free)", f, t);
}

Test(cuda_emu, no_device_means_the_backend_is_unsupported)
{
    setenv("PP_CUDA_EMU_DEVICES", "0", 1);
    pp_backend *be = (pp_backend *)1;
    cr_expect_eq(pp_backend_cuda_create(0, PP_PREC_FP32, &be), PP_ERR_UNSUPPORTED);
    cr_expect(strstr(pp_err_text(), "no CUDA-capable device"), "%s", pp_err_text());
    setenv("PP_CUDA_EMU_DEVICES", "2", 1);
    cr_expect_eq(pp_backend_cuda_create(2, PP_PREC_FP32, &be), PP_ERR_INVALID, "device 2 of 2");
    cr_expect_eq(pp_backend_cuda_create(1, PP_PREC_BF16, &be), PP_OK, "%s", pp_err_msg());
    pp_backend_destroy(be);
}

Test(cuda_emu, host_code_reading_device_memory_faults)
{
    float *d;
    cr_assert_eq(cudaMalloc((void **)&d, 64 * sizeof(float)), cudaSuccess);
    if (!pp_emu_device_protected())
        cr_skip_test("no memory protection keys here (or PP_CUDA_EMU_PROTECT=0): host reads of "
                     "device memory pass unnoticed");
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        volatile float x = d[3]; /* the host dereferencing a device pointer: a fault on a GPU */
        (void)x;
        _exit(42);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    /* SIGSEGV; under ASan, its report then an abort or exit 1 */
    cr_expect(!(WIFEXITED(status) && WEXITSTATUS(status) == 42),
              "the read should have faulted; the child went on past it");
    float h[64];
    cr_expect_eq(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, NULL), cudaSuccess,
                 "a copy still reads it");
    cr_expect(isnan(h[3]), "fresh device memory reads as NaN, got %g", (double)h[3]);
    cudaFree(d);
}
