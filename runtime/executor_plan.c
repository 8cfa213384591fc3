/* executor_plan.c — the executor's memory plan (plan/pp_rt_plan.h): computed when the executor
 * is created, from the same parameters its ranks are built with, with each pipeline rank's
 * buffer assignment, from which every buffer of a step is then allocated (executor_arena.c:
 * the plan's records in order, carved from one arena per rank). What the stages allocated
 * once (their weights) is held against the plan before the first step. After steps, each
 * rank's measured peaks equal the plan (to the byte where pp_rt_plan_is_exact; the in-process
 * transport's message copies, outside the arena, depend on timing otherwise).
 * Not here: the persistent allocations, which the stages and backends make with the sizes
 * of plan/pp_rt_sizes.h that the plan adds up.
 */
#include <stdlib.h>

#include "backend.h"
#include "executor.h"

static void plan_params(const pp_rt_executor *ex, pp_rt_plan_params *pp)
{
    *pp = (pp_rt_plan_params){.model = &ex->model,
                              .sched = ex->sched,
                              .micro_batch = ex->B,
                              .seq = ex->T,
                              .dp = ex->dp,
                              .backend = ex->backend,
                              .precision = ex->precision,
                              .transport_caps = ex->tp_caps,
                              .tp = ex->TP,
                              .sequence_parallel = ex->SP,
                              .recompute = ex->recompute,
                              .recompute_layers = ex->recompute_layers,
                              .shard = ex->shard,

                              .cp = ex->CP};
    const pp_backend_row *row = pp_backend_row_of(ex->backend); /* NULL: refused later */
    if (row && row->host_threads) { /* what its backends are made with */
        pp->kernel_threads = pp_backend_cpu_set_kernel_threads(0);
        pp->blas_threads = pp_backend_cpu_blas_threads();
    }
}

pp_status pp_ex_plan_create(pp_rt_executor *ex)
{
    if (!(ex->plan = pp_calloc((size_t)ex->D, sizeof *ex->plan)) ||
        !(ex->asg = pp_calloc((size_t)ex->D, sizeof *ex->asg)))
        return PP_ERR_NOMEM;
    pp_rt_plan_params pp;
    plan_params(ex, &pp);
    ex->plan_exact = pp_rt_plan_is_exact(&pp);
    return pp_rt_plan_assign(&pp, ex->plan, ex->asg);
}

pp_status pp_ex_plan_check(const pp_rt_executor *ex)
{
    for (int g = 0; g < ex->G; g++) {
        if (!ex_local(ex, g))
            continue;
        pp_mem_stats m;
        pp_backend_mem_stats(ex->be[g], &m);
        /* before the first AdamW the weights are the fp32 parameters only, and so are the
         * gradients (gradient sharding: none yet, executor_zero2.c makes its shards on the
         * first step) */
        size_t want = 4 * ex->plan[ex_pp(ex, g)].params;
        const pp_mem_category held[] = {PP_MEM_WEIGHTS, PP_MEM_GRADS};
        for (int k = 0; k < (ex->shard == PP_RT_SHARD_GRADIENTS ? 1 : 2); k++)
            if (m.current[held[k]] != want)
                return PP_ERR(PP_ERR_CHECK,
                              "rank %d: its stages hold %zu bytes of %s, the memory plan says "
                              "%zu (runtime/plan/pp_rt_sizes.h and runtime/stage.c disagree)",
                              g, m.current[held[k]], pp_mem_category_name(held[k]), want);
    }
    return PP_OK;
}

const pp_rt_plan_rank *pp_rt_executor_plan(const pp_rt_executor *ex, int g)
{
    return ex && g >= 0 && g < ex->G ? &ex->plan[ex_pp(ex, g)] : NULL;
}

int pp_rt_executor_plan_is_exact(const pp_rt_executor *ex)
{
    return ex ? ex->plan_exact : 0;
}
