/* tp_coll_mpi.c — the process side of tests/tp_coll_check.h: run under `mpirun -np W`, every
 * rank runs the check and prints one line "rank R H0 H1 H2 H3 H4" (hex hashes). Plain: on the MPI
 * transport with host buffers (test_runtime_mpi.c compares the lines with the thread
 * transport's). `--nccl`: on the NCCL transport with the buffers in a CUDA backend on device R
 * (one node; built against the CUDA emulation as tp_coll_emu, test_cuda_nccl.c compares the
 * lines with the MPI transport's). Exit 1 with the error on stderr when a collective fails.
 * A test helper, not installed. It reaches the runtime's private backend and transport tables
 * (backend.h, transport.h) to move test data to and from the device and to bind the backend,
 * as the executor does. */
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "tp_coll_check.h"
#include "transport.h"

static float *dev_alloc(void *ctx, size_t n)
{
    return (float *)pp_backend_alloc(ctx, n * sizeof(float), PP_MEM_ACTS);
}
static void dev_release(void *ctx, float *p, size_t n)
{
    pp_backend_free(ctx, p, n * sizeof(float), PP_MEM_ACTS);
}
static void dev_put(void *ctx, float *dst, const float *src, size_t n)
{
    pp_backend *be = ctx;
    be->ops->upload(be->ctx, dst, src, n * sizeof *dst);
}
static void dev_get(void *ctx, float *dst, const float *src, size_t n)
{
    pp_backend *be = ctx;
    be->ops->download(be->ctx, dst, src, n * sizeof *dst);
}

static int failed(pp_transport *t, const char *what)
{
    fprintf(stderr, "tp_coll_mpi: %s: %s\n", what, pp_err_msg());
    if (t)
        pp_transport_abort(t);
    return 1;
}

int main(int argc, char **argv)
{
    int nccl = argc > 1 && strcmp(argv[1], "--nccl") == 0;
    pp_transport *boot, *t = NULL;
    pp_backend *be = NULL;
    if (pp_transport_mpi_create(&boot) != PP_OK)
        return failed(NULL, "MPI");
    int rank = pp_transport_self(boot), world = pp_transport_ranks(boot);
    if (nccl && (pp_backend_cuda_create(rank, PP_PREC_FP32, &be) != PP_OK ||
                 pp_transport_nccl_create(boot, rank, &t) != PP_OK))
        return failed(boot, "the NCCL transport on a CUDA backend");
    if (nccl)
        pp_transport_bind(t, rank, be);
    tp_coll_mem dev = {be, dev_alloc, dev_release, dev_put, dev_get};
    uint64_t h[TP_COLL_HASHES] = {0};
    pp_status st =
        world % 2 || world > 32
            ? PP_ERR(PP_ERR_INVALID, "an even world of at most 32 ranks, got %d", world)
            : tp_coll_check_rank(nccl ? t : boot, nccl ? &dev : &tp_coll_host, rank, world, h);
    if (st == PP_OK && be)
        st = pp_backend_sync(be);
    if (st != PP_OK)
        return failed(boot, nccl ? "nccl" : "mpi");
    printf("rank %d %016llx %016llx %016llx %016llx %016llx\n", rank, (unsigned long long)h[0],
           (unsigned long long)h[1], (unsigned long long)h[2], (unsigned long long)h[3],
           (unsigned long long)h[4]);
    fflush(stdout);
    pp_transport_barrier(boot, rank);
    if (t) {
        pp_transport_bind(t, rank, NULL);
        pp_transport_destroy(t);
    }
    pp_backend_destroy(be);
    pp_transport_destroy(boot);
    return 0;
}
