/* cuda_none.c — the CUDA backend's entry points in a build without CUDA (compiled only when
 * PP_HAVE_CUDA is off): each says so and returns PP_ERR_UNSUPPORTED, so code above the backend
 * needs no #ifdef. It deliberately does nothing else.
 */
#include "backend.h"
#include "pp_rt.h"

#define PP_NO_CUDA_MSG                                                                             \
    "this pptune was built without CUDA (configure with -DPP_CUDA=ON where nvcc exists)"

pp_status pp_backend_cuda_create(int device, int precision, pp_backend **out)
{
    (void)device, (void)precision;
    *out = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda backend: %s", PP_NO_CUDA_MSG);
}

pp_status pp_backend_cuda_sync(pp_backend *be)
{
    (void)be;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda sync: %s", PP_NO_CUDA_MSG);
}

pp_status pp_backend_cuda_timer_start(pp_backend *be)
{
    (void)be;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda timer: %s", PP_NO_CUDA_MSG);
}

pp_status pp_backend_cuda_timer_stop(pp_backend *be, double *ms)
{
    (void)be;
    *ms = 0.0;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda timer: %s", PP_NO_CUDA_MSG);
}

pp_status pp_backend_cuda_mem_info(pp_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    (void)be;
    *free_bytes = *total_bytes = 0;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda memory info: %s", PP_NO_CUDA_MSG);
}

pp_status pp_backend_cuda_streams(pp_backend *be, int *device, void **compute, void **comm)
{
    (void)be;
    *device = -1;
    *compute = *comm = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda streams: %s", PP_NO_CUDA_MSG);
}

pp_status pp_cuda_marks_create(pp_backend *be, int n, pp_cuda_marks **out)
{
    (void)be, (void)n;
    *out = NULL;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda marks: %s", PP_NO_CUDA_MSG);
}

pp_status pp_cuda_marks_record(pp_cuda_marks *mk, int i)
{
    (void)mk, (void)i;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda marks: %s", PP_NO_CUDA_MSG);
}

pp_status pp_cuda_marks_read(pp_cuda_marks *mk, double *seconds)
{
    (void)mk, (void)seconds;
    return PP_ERR(PP_ERR_UNSUPPORTED, "cuda marks: %s", PP_NO_CUDA_MSG);
}

void pp_cuda_marks_destroy(pp_cuda_marks *mk)
{
    (void)mk;
}

int pp_cuda_device_count(void)
{
    return 0;
}

/* The row's maker (row_cuda.c, runtime/backend.h): creation refused as above, no device. */
const pp_backend_maker pp_backend_maker_cuda = {pp_backend_cuda_create, pp_cuda_device_count};
