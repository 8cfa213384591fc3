/* row_cpu.c — the CPU backend's row (common/pp_backends.h): OpenBLAS and C kernels on host
 * threads in fp32, the numerical reference and pprun's default. Its code: cpu_backend.c. */
#include "pp_backends.h"
#include "pp_rt_sizes.h"

static size_t attn_scratch(const pp_backend_stage *s)
{
    return pp_rt_size_attn_scratch_host(s->d, s->T); /* a (batch row, head), or a ring block */
}

static size_t kernel_scratch(const pp_backend_stage *s)
{
    return pp_rt_size_cpu_kernel_scratch(s->d, s->B, s->T, s->kernel_threads, s->blas_threads);
}

const pp_backend_row pp_backend_row_cpu = {
    .name = "cpu",
    .device_kind = "cpu",
    .help = "OpenBLAS and C kernels, fp32: the reference",
    .choice = 1,
    .pprun_default = 1,
    .precisions = 1u << PP_PREC_FP32,
    .host_threads = 1,
    .context_parallel = 1,
    .attn_scratch = attn_scratch,
    .kernel_scratch = kernel_scratch,
};
