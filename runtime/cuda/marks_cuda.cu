/* marks_cuda.cu — device-side timing of a rank's actions: CUDA events recorded on a CUDA
 * backend's compute stream at chosen points (before and after every action of a step), read
 * back once the step's work has finished as seconds from the first mark. With a CUDA backend
 * the host returns from an F or B as soon as its kernels are queued, so host clocks around an
 * action measure the launches, not the work; these marks time what the device did, in stream
 * order (the executor turns them into its spans, so traces and trials see device time).
 *
 * An event is recorded when the stream reaches it, i.e. after all work queued before it; the
 * time between two marks is the stream's time between those points, including any idle wait
 * for work queued late. Only the compute stream is marked: transfers on the communication
 * stream show up as the compute stream's waits for them.
 */
#include <cuda_runtime.h>
#include <stdlib.h>

#include "cuda_status.h"
#include "pp_rt.h"


struct pp_cuda_marks {
    int device;
    cudaStream_t stream;
    cudaEvent_t *ev; /* [n] */
    unsigned char *recorded; /* [n] since the last reset */
    int n;
};

extern "C" void pp_cuda_marks_destroy(pp_cuda_marks *mk)
{
    if (!mk)
        return;
    if (mk->ev) {
        (void)cudaSetDevice(mk->device);
        for (int i = 0; i < mk->n; i++)
            if (mk->ev[i])
                (void)cudaEventDestroy(mk->ev[i]);
    }
    free(mk->ev);
    free(mk->recorded);
    free(mk);
}

extern "C" pp_status pp_cuda_marks_create(pp_backend *be, int n, pp_cuda_marks **out)
{
    *out = NULL;
    if (n < 1)
        return PP_ERR(PP_ERR_INVALID, "cuda marks: %d marks asked for, at least 1 needed", n);
    void *compute, *comm;
    int device;
    PP_TRY(pp_backend_cuda_streams(be, &device, &compute, &comm)); /* also sets the device */
    pp_cuda_marks *mk = (pp_cuda_marks *)calloc(1, sizeof *mk);
    if (!mk)
        return PP_ERR(PP_ERR_NOMEM, "cuda marks: cannot allocate the table of %d events", n);
    mk->device = device;
    mk->stream = (cudaStream_t)compute;
    mk->n = n;
    mk->ev = (cudaEvent_t *)calloc((size_t)n, sizeof *mk->ev);
    mk->recorded = (unsigned char *)calloc((size_t)n, 1);
    if (!mk->ev || !mk->recorded) {
        pp_cuda_marks_destroy(mk);
        return PP_ERR(PP_ERR_NOMEM, "cuda marks: cannot allocate the table of %d events", n);
    }
    for (int i = 0; i < n; i++) {
        pp_status st = pp_cuda_status(cudaEventCreate(&mk->ev[i]), "cudaEventCreate", __FILE__,
                                      __LINE__);
        if (st != PP_OK) {
            pp_cuda_marks_destroy(mk);
            return st;
        }
    }
    *out = mk;
    return PP_OK;
}

extern "C" pp_status pp_cuda_marks_record(pp_cuda_marks *mk, int i)
{
    if (i < 0 || i >= mk->n)
        return PP_ERR(PP_ERR_INVALID, "cuda marks: mark %d outside 0..%d", i, mk->n - 1);
    PP_CUDA_TRY(cudaEventRecord(mk->ev[i], mk->stream));
    mk->recorded[i] = 1;
    return PP_OK;
}

extern "C" pp_status pp_cuda_marks_read(pp_cuda_marks *mk, double *seconds)
{
    int last = -1;
    for (int i = 0; i < mk->n; i++)
        if (mk->recorded[i])
            last = i;
    if (last < 0 || !mk->recorded[0])
        return PP_ERR(PP_ERR_INVALID, "cuda marks: mark 0 (the origin) was not recorded");
    PP_CUDA_TRY(cudaSetDevice(mk->device));
    /* events complete in stream order: once the last recorded one has, all have */
    PP_CUDA_TRY(cudaStreamSynchronize(mk->stream));
    for (int i = 0; i < mk->n; i++) {
        seconds[i] = -1.0;
        if (!mk->recorded[i])
            continue;
        float ms = 0.0f;
        PP_CUDA_TRY(cudaEventElapsedTime(&ms, mk->ev[0], mk->ev[i]));
        seconds[i] = ms * 1e-3;
        mk->recorded[i] = 0;
    }
    return PP_OK;
}
