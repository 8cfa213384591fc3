/* backend_device.c — what code above the backend table asks of any backend without naming a
 * device API: creation by kind, whether its memory is a device's, waiting for its queued
 * work, the device's memory figures and device-side timing marks. Each is an optional op of
 * the table (runtime/backend.h); a host backend leaves them NULL and gets the host answer
 * here. Not here: the accounting (backend.c) and anything CUDA (runtime/cuda/).
 */
#include <stdlib.h>

#include "backend.h"

struct pp_backend_marks {
    const pp_backend_ops *ops;
    void *impl; /* the backend's own handle */
};

/* The makers of the rows (backend.h), in the rows' order: the one place the runtime maps a row
 * to its code. */
static const pp_backend_maker *const makers[PP_RT_BACKEND__COUNT] = {
#define PP_BACKEND(ID, id) [PP_RT_BACKEND_##ID] = &pp_backend_maker_##id,
#include "pp_backend_list.h"
#undef PP_BACKEND
};

pp_status pp_backend_create(int kind, int device, int precision, pp_backend **out)
{
    *out = NULL;
    if (!pp_backend_row_of(kind))
        return PP_ERR(PP_ERR_INVALID, "backend kind %d: expected 0..%d (a row of "
                                      "pp_backend_list.h)", kind, PP_RT_BACKEND__COUNT - 1);
    return makers[kind]->create(device, precision, out);
}

int pp_backend_device_count(int kind)
{
    return pp_backend_row_of(kind) && makers[kind]->device_count ? makers[kind]->device_count()
                                                                 : 0;
}

int pp_backend_is_device(const pp_backend *be)
{
    return be && be->ops->device_memory;
}

pp_status pp_backend_sync(pp_backend *be)
{
    return be->ops->sync ? be->ops->sync(be->ctx) : PP_OK;
}

pp_status pp_backend_scratch_reserve(pp_backend *be, size_t bytes)
{
    return be->ops->scratch_reserve ? be->ops->scratch_reserve(be->ctx, bytes) : PP_OK;
}

pp_status pp_backend_weights_written(pp_backend *be, const float *w, size_t n)
{
    return be->ops->weights_written ? be->ops->weights_written(be->ctx, w, n) : PP_OK;
}

pp_status pp_backend_mem_info(pp_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = *total_bytes = 0;
    if (!be->ops->mem_info)
        return PP_ERR(PP_ERR_UNSUPPORTED, "backend \"%s\" has no device memory to report",
                      be->name);
    return be->ops->mem_info(be->ctx, free_bytes, total_bytes);
}

int pp_backend_has_marks(const pp_backend *be)
{
    return be && be->ops->marks_create;
}

pp_status pp_backend_marks_create(pp_backend *be, int n, pp_backend_marks **out)
{
    *out = NULL;
    if (!be->ops->marks_create)
        return PP_ERR(PP_ERR_UNSUPPORTED, "backend \"%s\" has no device timing marks", be->name);
    pp_backend_marks *mk = pp_calloc(1, sizeof *mk);
    if (!mk)
        return PP_ERR(PP_ERR_NOMEM, "cannot allocate a table of %d marks", n);
    mk->ops = be->ops;
    pp_status st = be->ops->marks_create(be->ctx, n, &mk->impl);
    if (st != PP_OK) {
        free(mk);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = mk;
    return PP_OK;
}

pp_status pp_backend_marks_record(pp_backend_marks *mk, int i)
{
    return mk->ops->marks_record(mk->impl, i);
}

pp_status pp_backend_marks_read(pp_backend_marks *mk, double *seconds)
{
    return mk->ops->marks_read(mk->impl, seconds);
}

void pp_backend_marks_destroy(pp_backend_marks *mk)
{
    if (!mk)
        return;
    mk->ops->marks_destroy(mk->impl);
    free(mk);
}
