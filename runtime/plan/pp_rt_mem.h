/* pp_rt_mem.h — the categories under which the runtime counts every byte it allocates, and
 * the statistics a backend keeps of them (pp_backend_mem_stats) and the memory plan predicts
 * (pp_rt_plan.h). Part of the plan library (pp_rt_plan).
 */
#ifndef PP_RT_MEM_H
#define PP_RT_MEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PP_MEM_WEIGHTS = 0,
    PP_MEM_GRADS,
    PP_MEM_OPTIM,
    PP_MEM_ACTS,      /* activations saved for backward */
    PP_MEM_COMM,      /* send / receive buffers */
    PP_MEM_WORKSPACE, /* scratch of the kernels */
    PP_MEM__COUNT
} pp_mem_category;

/* Returns a static string: "weights", "grads", "optim", "acts", "comm", "workspace", or
 * "unknown" for a value outside the enum. */
const char *pp_mem_category_name(pp_mem_category c);

typedef struct {
    size_t current[PP_MEM__COUNT]; /* bytes held now */
    size_t peak[PP_MEM__COUNT];    /* high-water mark of each category */
    size_t current_total;
    size_t peak_total; /* high-water mark of the sum (not the sum of peaks) */
    size_t reserved;   /* bytes of the arenas buffers are carved from (runtime/executor_arena.c):
                          held by the backend, counted above only for the buffers live in them */
} pp_mem_stats;

#ifdef __cplusplus
}
#endif
#endif
