/* cuda_status.h — the one conversion of CUDA, cuBLAS and NCCL results into pp_status, for the
 * CUDA backend and transport (the .cu files of runtime/cuda/) and the GPU probe
 * (probes/gpu_probe.cu).
 *
 * A failure records "CALL failed: REASON" at the caller's file:line (through the CHECK macros)
 * and returns PP_ERR_OOM where the library ran out of device memory, so a trial can be told
 * apart from a broken device, and PP_ERR_DEVICE otherwise. NCCL's reason is followed by its
 * last error text, which names the failing peer or setting more often than the code does.
 *
 * Header-only (static inline) so that probes/ needs no link to the runtime. Only .cu files
 * include it: it names CUDA, cuBLAS and NCCL types; under the tests' CPU emulation the same
 * files compile as C++ against tests/cuda_emu/'s stand-in headers. An includer that never
 * converts an NCCL result emits no reference to NCCL (unused inline functions are dropped).
 */
#ifndef PP_CUDA_STATUS_H
#define PP_CUDA_STATUS_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "pp_common.h"

static inline pp_status pp_cuda_status(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return PP_OK;
    pp_status st = e == cudaErrorMemoryAllocation ? PP_ERR_OOM : PP_ERR_DEVICE;
    return pp_err_set(st, file, line, "%s failed: %s (%s)", call, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

static inline pp_status pp_cublas_status(cublasStatus_t e, const char *call, const char *file,
                                         int line)
{
    if (e == CUBLAS_STATUS_SUCCESS)
        return PP_OK;
    pp_status st = e == CUBLAS_STATUS_ALLOC_FAILED ? PP_ERR_OOM : PP_ERR_DEVICE;
    return pp_err_set(st, file, line, "%s failed: %s", call, cublasGetStatusString(e));
}

static inline pp_status pp_nccl_status(ncclResult_t r, const char *call, const char *file, int line)
{
    if (r == ncclSuccess)
        return PP_OK;
    const char *last = ncclGetLastError(NULL);
    return pp_err_set(PP_ERR_DEVICE, file, line, "%s failed: %s%s%s", call, ncclGetErrorString(r),
                      last && *last ? ": " : "", last ? last : "");
}

/* The call's text and the caller's file:line go into the message. */
#define PP_CUDA_CHECK(call) pp_cuda_status((call), #call, __FILE__, __LINE__)
#define PP_CUBLAS_CHECK(call) pp_cublas_status((call), #call, __FILE__, __LINE__)
#define PP_NCCL_CHECK(call) pp_nccl_status((call), #call, __FILE__, __LINE__)
/* Propagating forms, for functions that own nothing to clean up. */
#define PP_CUDA_TRY(call) PP_TRY(PP_CUDA_CHECK(call))
#define PP_CUBLAS_TRY(call) PP_TRY(PP_CUBLAS_CHECK(call))
#define PP_NCCL_TRY(call) PP_TRY(PP_NCCL_CHECK(call))

#endif
