/* runtime_mem.c — the tuner's view of the bundled runtime's memory: pp_tune_memory_runtime[_on]
 * adapt the tuner's model and configuration to the runtime's own memory plan
 * (runtime/plan/pp_rt_plan.h) and its per-category bytes to pp_tune_rank_mem. No byte is
 * derived here: the plan is the runtime's, and the runtime's measured peaks equal it.
 * The trials this plans run the in-process transport (pprun's ranks as threads): on the CPU
 * its message copies are planned on the simulated timeline; on CUDA they are staged through
 * host memory, so they stay outside the device's accounting.
 */
#include <stdlib.h>
#include <string.h>

#include "pp_rt_plan.h"
#include "pp_rt_sizes.h"
#include "pp_tune.h"

/* The configuration's settings pass to the plan as they are: the same values. */
_Static_assert((int)PP_RECOMPUTE_NONE == (int)PP_RT_RC_NONE &&
                   (int)PP_RECOMPUTE_SELECTIVE == (int)PP_RT_RC_SELECTIVE &&
                   (int)PP_RECOMPUTE_FULL == (int)PP_RT_RC_FULL,
               "pp_recompute and PP_RT_RC_* agree");
_Static_assert((int)PP_SHARD_NONE == (int)PP_RT_SHARD_NONE &&
                   (int)PP_SHARD_OPTIMIZER == (int)PP_RT_SHARD_OPTIMIZER &&
                   (int)PP_SHARD_GRADIENTS == (int)PP_RT_SHARD_GRADIENTS,
               "pp_shard and PP_RT_SHARD_* agree");

static pp_status runtime_plan(const pp_tune_model *m, const pp_config *c, const pp_sched *s,
                              pp_rt_backend_kind backend, pp_precision precision,
                              int sequence_parallel, pp_tune_rank_mem *mem);

pp_status pp_tune_memory_runtime(const pp_tune_model *m, const pp_config *c,
                                 const pp_sched *s, const pp_tune_opts *o, pp_tune_rank_mem *mem)
{
    (void)o; /* the settings are c's */
    return runtime_plan(m, c, s, PP_RT_BACKEND_CPU, PP_PREC_FP32,
                        c->sequence_parallel && c->t > 1, mem);
}

pp_status pp_tune_memory_runtime_on(const pp_tune_model *m, const pp_config *c,
                                    const pp_sched *s, const pp_tune_opts *o,
                                    pp_rt_backend_kind backend, pp_precision precision,
                                    pp_tune_rank_mem *mem)
{
    (void)o;
    return runtime_plan(m, c, s, backend, precision, c->sequence_parallel && c->t > 1, mem);
}

static pp_status runtime_plan(const pp_tune_model *m, const pp_config *c, const pp_sched *s,
                              pp_rt_backend_kind backend, pp_precision precision,
                              int sequence_parallel, pp_tune_rank_mem *mem)
{
    const pp_backend_row *be = pp_backend_row_of(backend);
    if (!be || !be->choice)
        return PP_ERR(PP_ERR_INVALID, "runtime backend %d is not one pprun runs "
                                      "(common/backends.c)", (int)backend);
    if (!pp_backend_row_has_precision(be, precision))
        return PP_ERR(PP_ERR_INVALID, "the runtime's %s backend does not compute in %s", be->name,
                      precision == PP_PREC_BF16 ? "bf16" : "this precision");
    pp_model_cfg rm;
    pp_tune_model_cfg(m, &rm);
    pp_rt_plan_params pp = {
        .model = &rm,
        .sched = s,
        .micro_batch = c->b,
        .seq = m->seq, /* trials run the model's full length */
        .dp = c->d * (c->cp > 1 ? c->cp : 1), /* the runtime's replicas: dp x cp */
        .backend = backend,
        .precision = precision,
        .transport_caps = 0, /* the in-process transport */
        .tp = c->t,
        .sequence_parallel = sequence_parallel,
        .recompute = (int)c->recompute, /* pp_recompute's values are PP_RT_RC_*'s */
        .recompute_layers = c->recompute_layers,
        .shard = (int)c->shard, /* pp_shard's values are PP_RT_SHARD_*'s */
        /* one kernel thread per rank (no per-thread attention scratch): a configuration's
         * ranks fill the CPU devices, so pprun gives each its one core's share */
        .kernel_threads = 1,
        .cp = c->cp};
    pp_rt_plan_rank *plan = pp_calloc((size_t)s->ranks, sizeof *plan);
    if (!plan)
        return PP_ERR_NOMEM;
    pp_status st = pp_rt_plan_compute(&pp, plan);
    for (int r = 0; st == PP_OK && r < s->ranks; r++) {
        const pp_rt_plan_rank *p = &plan[r];
        pp_tune_rank_mem *o = &mem[r];
        memset(o, 0, sizeof *o);
        o->params = (double)p->params;
        o->weights = (double)p->at_peak[PP_MEM_WEIGHTS];
        o->grads = (double)p->at_peak[PP_MEM_GRADS];
        o->optim = (double)p->at_peak[PP_MEM_OPTIM];
        o->acts = (double)p->at_peak[PP_MEM_ACTS];
        o->comm = (double)p->at_peak[PP_MEM_COMM];
        o->workspace = (double)p->at_peak[PP_MEM_WORKSPACE];
        o->total = (double)p->peak_total;
        o->peak_units = p->peak_units;
    }
    free(plan);
    return st == PP_OK ? PP_OK : pp_err_trace(st, __FILE__, __LINE__);
}
