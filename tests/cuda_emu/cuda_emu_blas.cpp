/* cuda_emu_blas.cpp — the CUDA emulation's cuBLAS (tests only; what the emulation is and is not:
 * cuda_emu.cpp): a handle that records its stream and math mode, and cublasGemmEx /
 * cublasGemmStridedBatchedEx as a naive loop with cuBLAS's documented column-major semantics:
 *   C(m,n) = alpha op(A)(m,k) op(B)(k,n) + beta C, element (i,j) of a matrix X at X[i + j*ldX],
 *   op(X) = X (CUBLAS_OP_N) or X^T (CUBLAS_OP_T, CUBLAS_OP_C on real data), batch i at
 *   X + i*strideX; beta == 0: C is not read (NaNs in it do not propagate).
 * Arguments are checked as cuBLAS documents (CUBLAS_STATUS_INVALID_VALUE for m, n, k < 0, an
 * unknown op, lda < max(1, rows of stored A) = max(1, transa == N ? m : k), ldb < max(1,
 * transb == N ? k : n), ldc < max(1, m), NULL alpha/beta); type combinations other than
 * fp32 x fp32 and bf16 x bf16 into fp32 with CUBLAS_COMPUTE_32F are CUBLAS_STATUS_NOT_SUPPORTED.
 * Beyond cuBLAS: every operand matrix of every batch must lie inside one live allocation
 * (CUBLAS_STATUS_EXECUTION_FAILED with a line on stderr otherwise), where a GPU would fault or
 * silently read a neighbour. Accumulation: fp32, k in increasing order (cuBLAS's own order and
 * blocking are not modelled; nor are TF32 or the math modes).
 */
#include "cublas_v2.h"
#include "cuda_bf16.h"
#include "cuda_emu_impl.h"

#include <stdio.h>
#include <string.h>

namespace
{
enum : unsigned { BLAS_MAGIC = 0xb1a5u };
} // namespace

struct pp_emu_blas {
    unsigned magic;
    cudaStream_t stream;
    cublasMath_t math;
};

static bool blas_ok(cublasHandle_t h)
{
    return h && h->magic == BLAS_MAGIC;
}

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    if (!handle)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (pp_emu_device_count() == 0)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    *handle = new pp_emu_blas{BLAS_MAGIC, nullptr, CUBLAS_DEFAULT_MATH};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    if (!blas_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    handle->magic = 0;
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    if (!blas_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!pp_emu_stream_ok(stream))
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    if (!blas_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (mode != CUBLAS_DEFAULT_MATH && mode != CUBLAS_TENSOR_OP_MATH &&
        mode != CUBLAS_PEDANTIC_MATH && mode != CUBLAS_TF32_TENSOR_OP_MATH)
        return CUBLAS_STATUS_INVALID_VALUE;
    handle->math = mode; /* recorded, not modelled: every product is plain fp32 */
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS documents: the workspace must be aligned to 256 bytes. Here it must also be device
 * memory (on a GPU a host pointer would fault when a kernel used it). */
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void *workspace, size_t bytes)
{
    if (!blas_ok(handle))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if ((uintptr_t)workspace % 256 != 0 || (bytes && !workspace))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (bytes && !pp_emu_in_device_memory(workspace, bytes)) {
        fprintf(stderr, "cuda_emu: cublasSetWorkspace(%p, %zu): not device memory\n", workspace,
                bytes);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
        return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
        return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
        return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

namespace
{
/* One GEMM's operands, column-major as cuBLAS: C(m,n) = alpha op(A)(m,k) op(B)(k,n) + beta C,
 * A stored (rows_a x cols_a) with leading dimension lda, etc. */
struct gemm_args {
    cublasOperation_t ta, tb;
    int m, n, k;
    const void *a, *b;
    void *c;
    cudaDataType at, bt;
    int lda, ldb, ldc;
    long long sa, sb, sc;
    int batch;
};
} // namespace

static size_t elem_size(cudaDataType t)
{
    return t == CUDA_R_16BF ? 2 : 4;
}

static float load(const void *p, cudaDataType t, long long i)
{
    if (t == CUDA_R_16BF)
        return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    return ((const float *)p)[i];
}

/* Whether every matrix of a batch (base + i * stride, rows x cols, leading dimension ld, column-
 * major) lies inside one live allocation. An emulator check: cuBLAS itself would fault, or read
 * a neighbour's memory. */
static bool operand_in_memory(const void *base, cudaDataType t, int rows, int cols, int ld,
                              long long stride, int batch)
{
    long long span = (long long)(cols - 1) * ld + rows; /* elements */
    long long lo = 0, hi = span;
    if (batch > 1) {
        long long last = stride * (batch - 1);
        lo = last < 0 ? last : 0;
        hi = last < 0 ? span : last + span;
    }
    size_t es = elem_size(t);
    return pp_emu_in_device_memory((const char *)base + lo * (long long)es, (size_t)(hi - lo) * es);
}

static cublasStatus_t gemm(cublasHandle_t h, const gemm_args &g, cudaDataType ct,
                           cublasComputeType_t compute, const void *alpha, const void *beta)
{
    if (!blas_ok(h))
        return CUBLAS_STATUS_NOT_INITIALIZED;
    bool op_ok = (g.ta == CUBLAS_OP_N || g.ta == CUBLAS_OP_T || g.ta == CUBLAS_OP_C) &&
                 (g.tb == CUBLAS_OP_N || g.tb == CUBLAS_OP_T || g.tb == CUBLAS_OP_C);
    int ra = g.ta == CUBLAS_OP_N ? g.m : g.k; /* stored rows of A (column-major) */
    int rb = g.tb == CUBLAS_OP_N ? g.k : g.n;
    auto atleast1 = [](int v) { return v > 1 ? v : 1; };
    /* the argument checks cuBLAS documents for cublasGemmEx (and the batch count) */
    if (!op_ok || g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 0 || !alpha || !beta ||
        g.lda < atleast1(ra) || g.ldb < atleast1(rb) || g.ldc < atleast1(g.m))
        return CUBLAS_STATUS_INVALID_VALUE;
    bool types_ok = compute == CUBLAS_COMPUTE_32F && ct == CUDA_R_32F && g.at == g.bt &&
                    (g.at == CUDA_R_32F || g.at == CUDA_R_16BF);
    if (!types_ok)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (g.m == 0 || g.n == 0 || g.batch == 0)
        return CUBLAS_STATUS_SUCCESS;
    float al, be;
    memcpy(&al, alpha, sizeof al); /* CUBLAS_POINTER_MODE_HOST, the default */
    memcpy(&be, beta, sizeof be);
    int ca = g.ta == CUBLAS_OP_N ? g.k : g.m, cb = g.tb == CUBLAS_OP_N ? g.n : g.k;
    bool reads_ab = g.k > 0;
    if ((reads_ab && (!operand_in_memory(g.a, g.at, ra, ca, g.lda, g.sa, g.batch) ||
                      !operand_in_memory(g.b, g.bt, rb, cb, g.ldb, g.sb, g.batch))) ||
        !operand_in_memory(g.c, CUDA_R_32F, g.m, g.n, g.ldc, g.sc, g.batch)) {
        fprintf(stderr,
                "cuda_emu: GEMM (op %d/%d, m %d n %d k %d, lda %d ldb %d ldc %d, strides %lld "
                "%lld %lld, batch %d) reaches outside the allocations of its operands\n",
                (int)g.ta, (int)g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.sa, g.sb, g.sc,
                g.batch);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    pp_emu_device_enter();
    for (int i = 0; i < g.batch; i++) {
        long long oa = g.sa * i, ob = g.sb * i;
        float *c = (float *)g.c + g.sc * i;
        for (int j = 0; j < g.n; j++)
            for (int r = 0; r < g.m; r++) {
                float acc = 0.0f; /* fp32 accumulation, p in order */
                for (int p = 0; p < g.k; p++) {
                    long long ia =
                        g.ta == CUBLAS_OP_N ? r + (long long)p * g.lda : p + (long long)r * g.lda;
                    long long ib =
                        g.tb == CUBLAS_OP_N ? p + (long long)j * g.ldb : j + (long long)p * g.ldb;
                    acc += load(g.a, g.at, oa + ia) * load(g.b, g.bt, ob + ib);
                }
                float &out = c[r + (long long)j * g.ldc];
                out = be == 0.0f ? al * acc : al * acc + be * out; /* beta = 0: C is not read */
            }
    }
    pp_emu_device_leave();
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType Atype, int lda, const void *B,
                            cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo)
{
    (void)algo;
    gemm_args g{transa, transb, m, n, k, A, B, C, Atype, Btype, lda, ldb, ldc, 0, 0, 0, 1};
    return gemm(handle, g, Ctype, computeType, alpha, beta);
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType Atype,
                                          int lda, long long strideA, const void *B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void *beta, void *C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo)
{
    (void)algo;
    gemm_args g{transa, transb, m,   n,   k,       A,       B,       C,         Atype,
                Btype,  lda,    ldb, ldc, strideA, strideB, strideC, batchCount};
    return gemm(handle, g, Ctype, computeType, alpha, beta);
}
