/* gen_interleaved.c — Megatron's interleaved 1F1B (virtual pipeline), current form.
 *
 * Chunk c of rank d is virtual stage c*D + d. Micro-batches are taken in groups of G consecutive
 * ones (Megatron's microbatch_group_size_per_vp_stage, default D; the last group absorbs any
 * remainder). Within a group, for c = 0..v-1, for each micro-batch m of the group, the k-th
 * forward slot is (m, chunk c) and the k-th backward slot is (m, chunk v-1-c).
 * Rank d warms up with 2(D-d-1) + (v-1)G forwards (capped at v*N), then runs F(k+w), B(k)
 * pairs, then the remaining backwards. Constraints (Megatron, Llama 3): v >= 2, D <= G <= N, and
 * N mod G = 0 or N mod G >= D, otherwise dependency bubbles appear. */
#include <stdlib.h>

#include "gen.h"

typedef struct {
    int mb, chunk;
} slot;

/* Megatron's get_schedule_table: the (micro-batch, chunk) of every forward slot. */
static void schedule_table(int N, int v, int G, slot *t)
{
    int k = 0;
    for (int g0 = 0; g0 < N; g0 += G) {
        int g1 = g0 + G >= N ? N : g0 + G; /* the last group runs to N */
        for (int c = 0; c < v; c++)
            for (int m = g0; m < g1; m++)
                t[k++] = (slot){m, c};
        if (g1 == N)
            break;
    }
}

pp_status pp_gen_interleaved(const pp_sched_params *p, pp_sched **out)
{
    int D = p->ranks, N = p->microbatches;
    int v = p->chunks, G = p->group; /* resolved and checked by the registry (registry.c) */
    pp_sched *s;
    pp_sched_split sp = pp_sched_params_split(p);
    PP_TRY(pp_sched_create("interleaved", D, N, v, 1, p->layers, &sp, &s));
    s->group = G;
    for (int c = 0; c < v; c++)
        for (int d = 0; d < D; d++)
            pp_sched_stage(s, 0, c * D + d)->rank = d;
    int total = v * N;
    slot *t = pp_calloc((size_t)total, sizeof *t);
    if (!t) {
        pp_sched_destroy(s);
        return PP_ERR_NOMEM;
    }
    schedule_table(N, v, G, t);
    pp_status st = PP_OK;
    for (int d = 0; d < D && st == PP_OK; d++) {
        int w = 2 * (D - d - 1) + (v - 1) * G;
        if (w > total)
            w = total;
        int f = 0, b = 0;
        for (; f < w && st == PP_OK; f++)
            st = pp_sched_push(s, d, PP_OP_F, 0, t[f].chunk * D + d, t[f].mb);
        while (f < total && st == PP_OK) {
            st = pp_sched_push(s, d, PP_OP_F, 0, t[f].chunk * D + d, t[f].mb);
            f++;
            if (st == PP_OK)
                st = pp_sched_push(s, d, PP_OP_B, 0, (v - 1 - t[b].chunk) * D + d, t[b].mb);
            b++;
        }
        for (; b < total && st == PP_OK; b++)
            st = pp_sched_push(s, d, PP_OP_B, 0, (v - 1 - t[b].chunk) * D + d, t[b].mb);
    }
    free(t);
    return pp_gen_finish(s, st, out);
}
