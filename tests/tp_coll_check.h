/* tp_coll_check.h — one rank's part of a check of the tensor-parallel collectives
 * (pp_transport_allgather, pp_transport_reduce_scatter_sum) on any transport with host
 * buffers: the same deterministic data on every transport, results reduced to hashes of their
 * bits, so the thread transport's hashes (computed in the test) and the MPI transport's
 * (tests/tp_coll_mpi.c under mpirun) must be equal bit for bit. Also checks, on the transport
 * itself, that a reduce-scatter equals the matching slice of an all-reduce of the same data.
 */
#ifndef TP_COLL_CHECK_H
#define TP_COLL_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"

enum { TP_COLL_N = 1100, TP_COLL_HASHES = 4 }; /* floats per part: more than one summing block */

/* Rank r's float i: values of mixed magnitude (1e7 on rank 0 every third element), so a sum
 * in another order would round differently. */
static inline float tp_coll_val(int rank, size_t i)
{
    float v = (float)((rank * 7919 + (int)i * 104729) % 1000) * 1e-3f - 0.37f * (float)rank;
    return rank == 0 && i % 3 == 0 ? v + 1e7f : v;
}

/* FNV-1a over the floats' bytes. */
static inline uint64_t tp_coll_hash(const float *x, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < n * sizeof *x; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Runs, as `rank` of `world` ranks (world even, >= 2): over all ranks an all-gather (hash 0)
 * and a reduce-scatter (hash 1, checked against an all-reduce's slice); over the ranks of
 * this rank's parity (a tensor group of a strided placement), the same two in place (hashes 2
 * and 3). Returns PP_OK, a transport error, or PP_ERR_CHECK (message says which) when the
 * reduce-scatter differs from the all-reduce. */
static inline pp_status tp_coll_check_rank(pp_transport *t, int rank, int world,
                                           uint64_t h[TP_COLL_HASHES])
{
    int all[64], half[32], nh = 0;
    for (int r = 0; r < world; r++) {
        all[r] = r;
        if (r % 2 == rank % 2)
            half[nh++] = r;
    }
    size_t n = TP_COLL_N, wn = n * (size_t)world;
    float *part = malloc(n * sizeof *part), *full = malloc(wn * sizeof *full),
          *ar = malloc(wn * sizeof *ar);
    pp_status st = part && full && ar ? PP_OK : PP_ERR_NOMEM;
    for (size_t i = 0; st == PP_OK && i < n; i++)
        part[i] = tp_coll_val(rank, i);
    if (st == PP_OK)
        st = pp_transport_allgather(t, rank, all, world, 1, part, full, n);
    if (st == PP_OK)
        h[0] = tp_coll_hash(full, wn);
    for (size_t i = 0; st == PP_OK && i < wn; i++)
        full[i] = ar[i] = tp_coll_val(rank, i);
    if (st == PP_OK)
        st = pp_transport_reduce_scatter_sum(t, rank, all, world, 2, full, part, n);
    if (st == PP_OK)
        st = pp_transport_allreduce_sum(t, rank, all, world, 3, ar, wn);
    if (st == PP_OK && memcmp(part, ar + (size_t)rank * n, n * sizeof *part) != 0)
        st = PP_ERR(PP_ERR_CHECK, "rank %d: the reduce-scatter differs from the all-reduce", rank);
    if (st == PP_OK)
        h[1] = tp_coll_hash(part, n);
    /* in place, on the parity group: the part is this member's own slice of full */
    int me = rank / 2;
    size_t hn = n * (size_t)nh;
    for (size_t i = 0; st == PP_OK && i < hn; i++)
        full[i] = (size_t)me * n <= i && i < (size_t)(me + 1) * n ? tp_coll_val(rank, i) : -1.0f;
    if (st == PP_OK)
        st = pp_transport_allgather(t, rank, half, nh, 4, full + (size_t)me * n, full, n);
    if (st == PP_OK)
        h[2] = tp_coll_hash(full, hn);
    for (size_t i = 0; st == PP_OK && i < hn; i++)
        full[i] = tp_coll_val(rank, i + 7);
    if (st == PP_OK)
        st = pp_transport_reduce_scatter_sum(t, rank, half, nh, 5, full, full + (size_t)me * n, n);
    if (st == PP_OK)
        h[3] = tp_coll_hash(full + (size_t)me * n, n);
    free(part);
    free(full);
    free(ar);
    return st;
}

/* In the runtime suite (test_runtime_exec_transport.c): the four ranks' hashes on the thread
 * transport, asserting every rank succeeded. */
void tp_coll_thread_hashes(uint64_t h[4][TP_COLL_HASHES]);

#endif
