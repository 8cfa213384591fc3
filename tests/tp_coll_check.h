/* tp_coll_check.h — one rank's part of a check of the tensor-parallel collectives
 * (pp_transport_allgather, pp_transport_reduce_scatter_sum) on any transport: the same
 * deterministic data on every transport, results reduced to hashes of their bits, so the thread
 * transport's hashes (computed in the test) and the MPI transport's (tests/tp_coll_mpi.c under
 * mpirun) and the NCCL transport's under the CUDA emulation (tp_coll_mpi.c --nccl, built as
 * tp_coll_emu) must be equal bit for bit. Also checks, on the transport itself, that a
 * reduce-scatter equals the matching slice of an all-reduce of the same data, and that the
 * all-to-all of expert parallelism (pp_transport_alltoallv) delivers every block where it goes.
 */
#ifndef TP_COLL_CHECK_H
#define TP_COLL_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"

enum { TP_COLL_N = 1100, TP_COLL_HASHES = 5 }; /* floats per part: more than one summing block */

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

/* Where the collectives' buffers live: host memory (tp_coll_host), or a device's (the NCCL
 * check: tp_coll_mpi.c --nccl), with copies to and from host arrays. */
typedef struct {
    void *ctx;
    float *(*alloc)(void *ctx, size_t n);
    void (*release)(void *ctx, float *p, size_t n);
    void (*put)(void *ctx, float *dst, const float *src_host, size_t n);
    void (*get)(void *ctx, float *dst_host, const float *src, size_t n);
} tp_coll_mem;

/* Releases p (n floats) of mem; NULL (an allocation that failed or never happened): nothing. */
static inline void tp_coll_drop(const tp_coll_mem *mem, float *p, size_t n)
{
    if (p)
        mem->release(mem->ctx, p, n);
}

static inline float *tp_host_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return (float *)malloc(n * sizeof(float));
}
static inline void tp_host_release(void *ctx, float *p, size_t n)
{
    (void)ctx;
    (void)n;
    free(p);
}
static inline void tp_host_copy(void *ctx, float *dst, const float *src, size_t n)
{
    (void)ctx;
    memcpy(dst, src, n * sizeof *dst);
}
static const tp_coll_mem tp_coll_host = {NULL, tp_host_alloc, tp_host_release, tp_host_copy,
                                         tp_host_copy};

/* Floats member i sends member j in the all-to-all check: blocks of uneven sizes, some empty
 * (member 1's to itself among them), the others more than one NCCL chunk's worth. */
static inline size_t tp_coll_a2a_n(int i, int j)
{
    return (size_t)((2 * i + j + 1) % 4) * 301;
}

/* The all-to-all over all `world` ranks (tag 6): member i's block for j holds
 * tp_coll_val(i, 4096 j + k); checks what arrives on the host and hashes it into *h. */
static inline pp_status tp_coll_check_alltoallv(pp_transport *t, const tp_coll_mem *mem,
                                                const int *all, int rank, int world, uint64_t *h)
{
    size_t sb[32], rb[32], ns = 0, nr = 0;
    for (int j = 0; j < world; j++) {
        sb[j] = tp_coll_a2a_n(rank, j) * sizeof(float), ns += sb[j] / sizeof(float);
        rb[j] = tp_coll_a2a_n(j, rank) * sizeof(float), nr += rb[j] / sizeof(float);
    }
    float *hs = (float *)malloc(ns * sizeof *hs), *hr = (float *)malloc(nr * sizeof *hr);
    float *ds = mem->alloc(mem->ctx, ns), *dr = mem->alloc(mem->ctx, nr);
    pp_status st = hs && hr && ds && dr ? PP_OK : PP_ERR_NOMEM;
    for (int j = 0, o = 0; st == PP_OK && j < world; j++)
        for (size_t k = 0; k < tp_coll_a2a_n(rank, j); k++)
            hs[o++] = tp_coll_val(rank, 4096 * (size_t)j + k);
    if (st == PP_OK) {
        mem->put(mem->ctx, ds, hs, ns);
        st = pp_transport_alltoallv(t, rank, all, world, 6, ds, sb, dr, rb);
    }
    if (st == PP_OK) {
        mem->get(mem->ctx, hr, dr, nr);
        for (int i = 0, o = 0; st == PP_OK && i < world; i++)
            for (size_t k = 0; k < tp_coll_a2a_n(i, rank); k++, o++)
                if (hr[o] != tp_coll_val(i, 4096 * (size_t)rank + k))
                    st = PP_ERR(PP_ERR_CHECK, "rank %d: the all-to-all's block from %d differs "
                                "at float %zu", rank, i, k);
        *h = tp_coll_hash(hr, nr);
    }
    tp_coll_drop(mem, ds, ns);
    tp_coll_drop(mem, dr, nr);
    free(hs);
    free(hr);
    return st;
}

/* Runs, as `rank` of `world` ranks (world even, 2..32), with buffers in `mem`: over all ranks
 * an all-gather (hash 0) and a reduce-scatter (hash 1, checked against an all-reduce's slice);
 * over the ranks of this rank's parity (a tensor group of a strided placement), the same two
 * in place (hashes 2 and 3); and the all-to-all over all ranks (hash 4). Returns PP_OK, a transport error, or PP_ERR_CHECK (the message
 * says which) when the reduce-scatter differs from the all-reduce. */
static inline pp_status tp_coll_check_rank(pp_transport *t, const tp_coll_mem *mem, int rank,
                                           int world, uint64_t h[TP_COLL_HASHES])
{
    int all[32], half[32], nh = 0;
    for (int r = 0; r < world; r++) {
        all[r] = r;
        if (r % 2 == rank % 2)
            half[nh++] = r;
    }
    size_t n = TP_COLL_N, wn = n * (size_t)world;
    float *hp = (float *)malloc(n * sizeof *hp), *hf = (float *)malloc(wn * sizeof *hf),
          *ha = (float *)malloc(wn * sizeof *ha);
    float *part = mem->alloc(mem->ctx, n), *full = mem->alloc(mem->ctx, wn),
          *ar = mem->alloc(mem->ctx, wn);
    pp_status st = hp && hf && ha && part && full && ar ? PP_OK : PP_ERR_NOMEM;
    if (st == PP_OK) {
        for (size_t i = 0; i < n; i++)
            hp[i] = tp_coll_val(rank, i);
        mem->put(mem->ctx, part, hp, n);
        st = pp_transport_allgather(t, rank, all, world, 1, part, full, n);
    }
    if (st == PP_OK) {
        mem->get(mem->ctx, hf, full, wn);
        h[0] = tp_coll_hash(hf, wn);
        for (size_t i = 0; i < wn; i++)
            hf[i] = tp_coll_val(rank, i);
        mem->put(mem->ctx, full, hf, wn);
        mem->put(mem->ctx, ar, hf, wn);
        st = pp_transport_reduce_scatter_sum(t, rank, all, world, 2, full, part, n);
    }
    if (st == PP_OK)
        st = pp_transport_allreduce_sum(t, rank, all, world, 3, ar, wn);
    if (st == PP_OK) {
        mem->get(mem->ctx, hp, part, n);
        mem->get(mem->ctx, ha, ar, wn);
        if (memcmp(hp, ha + (size_t)rank * n, n * sizeof *hp) != 0)
            st = PP_ERR(PP_ERR_CHECK, "rank %d: the reduce-scatter differs from the all-reduce",
                        rank);
        h[1] = tp_coll_hash(hp, n);
    }
    /* in place, on the parity group: the part is this member's own slice of full */
    size_t me = (size_t)(rank / 2) * n, hn = n * (size_t)nh;
    if (st == PP_OK) {
        for (size_t i = 0; i < hn; i++)
            hf[i] = me <= i && i < me + n ? tp_coll_val(rank, i) : -1.0f;
        mem->put(mem->ctx, full, hf, hn);
        st = pp_transport_allgather(t, rank, half, nh, 4, full + me, full, n);
    }
    if (st == PP_OK) {
        mem->get(mem->ctx, hf, full, hn);
        h[2] = tp_coll_hash(hf, hn);
        for (size_t i = 0; i < hn; i++)
            hf[i] = tp_coll_val(rank, i + 7);
        mem->put(mem->ctx, full, hf, hn);
        st = pp_transport_reduce_scatter_sum(t, rank, half, nh, 5, full, full + me, n);
    }
    if (st == PP_OK) {
        mem->get(mem->ctx, hp, full + me, n);
        h[3] = tp_coll_hash(hp, n);
    }
    if (st == PP_OK)
        st = tp_coll_check_alltoallv(t, mem, all, rank, world, &h[4]);
    tp_coll_drop(mem, part, n);
    tp_coll_drop(mem, full, wn);
    tp_coll_drop(mem, ar, wn);
    free(hp);
    free(hf);
    free(ha);
    return st;
}

/* In the runtime suite (test_runtime_exec_transport.c): the four ranks' hashes on the thread
 * transport, asserting every rank succeeded. */
void tp_coll_thread_hashes(uint64_t h[4][TP_COLL_HASHES]);

#endif
