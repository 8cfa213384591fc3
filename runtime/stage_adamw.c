/* stage_adamw.c — AdamW over a stage's tensors (Loshchilov & Hutter 2019, decoupled weight
 * decay). Optimizer state (m, v) is one PP_MEM_OPTIM allocation made on the first step.
 * It does not clip: the caller computes the global gradient norm (across stages and ranks) and
 * passes the clipping factor as grad_scale.
 */
#include <math.h>

#include "stage_impl.h"

/* The step's scalars (bias corrections, the clipping factor), checked. */
static pp_status scalars(const pp_adamw *hp, int step, float grad_scale, pp_adamw_scalars *s)
{
    if (step < 1)
        return PP_ERR(PP_ERR_INVALID, "adamw: step counts from 1, got %d", step);
    if (!(hp->beta1 >= 0.0f && hp->beta1 < 1.0f && hp->beta2 >= 0.0f && hp->beta2 < 1.0f))
        return PP_ERR(PP_ERR_INVALID, "adamw: betas must be in [0, 1), got %g and %g",
                      (double)hp->beta1, (double)hp->beta2);
    *s = (pp_adamw_scalars){
        .lr = hp->lr,
        .beta1 = hp->beta1,
        .beta2 = hp->beta2,
        .eps = hp->eps,
        .bc1 = (float)(1.0 - pow(hp->beta1, step)),
        .bc2 = (float)(1.0 - pow(hp->beta2, step)),
        .grad_scale = grad_scale,
    };
    return PP_OK;
}

pp_status pp_rt_stage_adamw_slice(pp_rt_stage *st, int tensor, size_t off, size_t len,
                                  const float *grad, float *m, float *v, const pp_adamw *hp,
                                  int step, float grad_scale)
{
    if (tensor < 0 || tensor >= st->ntensors || off + len > st->tensors[tensor].n)
        return PP_ERR(PP_ERR_INVALID, "adamw: elements [%zu, %zu) of tensor %d are not the "
                                      "stage's", off, off + len, tensor);
    pp_adamw_scalars s;
    PP_TRY(scalars(hp, step, grad_scale, &s));
    s.weight_decay = st->decay[tensor] ? hp->weight_decay : 0.0f;
    s.part = 1; /* the caller refreshes the whole tensor's copies once gathered */
    /* the kernel's arithmetic is element-wise: a slice steps as it would within the tensor */
    return st->be->ops->adamw(st->be->ctx, st->tensors[tensor].data + off, grad, m, v, len,
                              &s);
}

pp_status pp_rt_stage_adamw(pp_rt_stage *st, const pp_adamw *hp, int step, float grad_scale)
{
    pp_adamw_scalars s;
    PP_TRY(scalars(hp, step, grad_scale, &s));
    pp_backend *be = st->be;
    size_t n = st->nparams;
    if (!st->opt) {
        st->opt = pp_backend_alloc(be, 2 * n * sizeof(float), PP_MEM_OPTIM);
        if (!st->opt)
            return pp_err_trace(PP_ERR_OOM, __FILE__, __LINE__);
        PP_TRY(be->ops->zero(be->ctx, st->opt, 2 * n * sizeof(float)));
    }
    for (int i = 0; i < st->ntensors; i++) {
        pp_rt_tensor *t = &st->tensors[i];
        size_t off = (size_t)(t->data - st->params);
        s.weight_decay = st->decay[i] ? hp->weight_decay : 0.0f;
        PP_TRY(
            be->ops->adamw(be->ctx, t->data, t->grad, st->opt + off, st->opt + n + off, t->n, &s));
    }
    return PP_OK;
}
