/* row_cpu_staged.c — a test backend's row (common/pp_backends.h): the CPU backend (row_cpu.c,
 * the same code) whose tensors the executor nevertheless moves through host staging copies
 * exactly as it does a device backend's, so that the staging path runs, and must give the CPU
 * run's floats bit for bit, on a machine without a GPU. Not a pprun --backend choice. */
#include "pp_backends.h"
#include "pp_rt_sizes.h"

static size_t attn_scratch(const pp_backend_stage *s)
{
    return pp_rt_size_attn_scratch_host(s->d, s->T); /* a (batch row, head), or a ring block */
}

static size_t kernel_scratch(const pp_backend_stage *s) /* its kernel threads' (row_cpu.c) */
{
    return pp_rt_size_cpu_kernel_scratch(s->d, s->B, s->T, s->kernel_threads, s->blas_threads);
}

const pp_backend_row pp_backend_row_cpu_staged = {
    .name = "cpu-staged",
    .device_kind = "cpu",
    .help = "the CPU backend with a device backend's staging copies (tests)",
    .staged = 1,
    .precisions = 1u << PP_PREC_FP32,
    .host_threads = 1,
    .context_parallel = 1,
    .attn_scratch = attn_scratch,
    .kernel_scratch = kernel_scratch,
};
