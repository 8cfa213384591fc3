/* backends.c — the backend rows (pp_backends.h): one per backend of the runtime. Not here: the
 * backends themselves (runtime/cpu/, runtime/cuda/) and their creation (runtime/
 * backend_device.c). */
#include <string.h>

#include "pp_backends.h"

#define PREC(p) (1u << (p))
#define CPU "cpu"
#define CUDA "cuda"

const char *const pp_backend_choices[] = {CPU, CUDA, NULL}; /* the rows with .choice, in order */

static const pp_backend_row rows[PP_RT_BACKEND__COUNT] = {
    {.kind = PP_RT_BACKEND_CPU,
     .name = CPU,
     .device_kind = "cpu",
     .help = "OpenBLAS and C kernels on host threads, fp32: the numerical reference",
     .choice = 1,
     .pprun_default = 1,
     .precisions = PREC(PP_PREC_FP32),
     .host_threads = 1,
     .context_parallel = 1},
    {.kind = PP_RT_BACKEND_CUDA,
     .name = CUDA,
     .device_kind = "gpu",
     .help = "cuBLAS and CUDA kernels on a GPU, fp32 or bf16",
     .choice = 1,
     .device_memory = 1,
     .staged = 1,
     .precisions = PREC(PP_PREC_FP32) | PREC(PP_PREC_BF16),
     .kernel_scratch = 1,
     .device_collectives = 1},
    {.kind = PP_RT_BACKEND_CPU_STAGED,
     .name = "cpu-staged",
     .device_kind = "cpu",
     .help = "the CPU backend with a device backend's staging copies (tests)",
     .staged = 1,
     .precisions = PREC(PP_PREC_FP32),
     .host_threads = 1,
     .context_parallel = 1},
};

const pp_backend_row *pp_backend_row_of(int kind)
{
    return kind >= 0 && kind < PP_RT_BACKEND__COUNT ? &rows[kind] : NULL;
}

const pp_backend_row *pp_backend_row_named(const char *name)
{
    for (int i = 0; name && i < PP_RT_BACKEND__COUNT; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

const pp_backend_row *pp_backend_row_for_device(const char *device_kind)
{
    for (int i = 0; device_kind && i < PP_RT_BACKEND__COUNT; i++)
        if (rows[i].choice && !strcmp(rows[i].device_kind, device_kind))
            return &rows[i];
    return NULL;
}

int pp_backend_row_has_precision(const pp_backend_row *r, int precision)
{
    return r && precision >= 0 && precision < 32 && (r->precisions & PREC(precision));
}

const char *pp_backend_row_flag(const pp_backend_row *r)
{
    return r && !r->pprun_default ? r->name : NULL;
}
