/* stage_cp.c — context parallelism inside a stage (Megatron-Core's --context-parallel-size,
 * Korthikanti/NVIDIA's "context parallelism" with TransformerEngine's attention): the cp ranks
 * of a group share each sequence, every rank holding 2 of its 2 cp chunks (chunks i and
 * 2 cp - 1 - i on rank i, the causal load balancing of Megatron-Core's get_batch_on_this_cp_rank
 * in megatron/core/utils.py), so every per-token layer (norms, linears, the MLP, the head and its
 * loss) runs unchanged on the rank's tokens, and only these see the whole sequence:
 *   - the embedding and rotary positions: the tokens' true positions (rope_freq.h's
 *     pp_rope_pos; learned positions here, per chunk);
 *   - attention: the rank's queries over every key of the sequence, causal by global position.
 *
 * Communication: the group's qkv rows are all-gathered before attention and the gradient of
 * them (this rank's queries' share of every key's) reduce-scattered back after it, over the
 * transport's collectives: an all-gather of K/V, not TransformerEngine's ring (which passes
 * K/V to the next rank while a step's partial attention runs, and merges the partial softmaxes
 * by their log-sum-exp); the result is the same attention, without the overlap. Whole qkv rows
 * travel (the q columns too), so the transport's contiguous collectives can move them: 1 +
 * NH/(2 NKV) times the K/V bytes. The backward gathers again rather than keeping the group's
 * K/V in the slot, as the ring passes them again in its backward.
 * Not here: the loss and the gradient reduction over the group, which the executor treats as
 * data-parallel replicas (Megatron reduces gradients over the combined dp x cp group).
 */
#include "stage_impl.h"

/* Global chunk of local chunk j (0, 1) of this rank. */
static int chunk_of(const pp_rt_stage *st, int j)
{
    return j ? 2 * st->cp - 1 - st->cpr : st->cpr;
}

/* The embedding of each (sequence, local chunk) at the chunk's true positions: the position
 * table (learned positions; none for rotary models) read or accumulated from the chunk's start.
 * Forward (dout NULL): the embedding into out; backward (out NULL): its gradient dout
 * accumulated into the tables'. */
static pp_status embed_chunks(pp_rt_stage *st, float *out, const float *dout, const int32_t *tok)
{
    pp_backend *be = st->be;
    const pp_rt_tensor *t = st->tensors;
    int L = st->T / 2, C = st->cfg.hidden;
    for (int b = 0; b < st->B; b++)
        for (int j = 0; j < 2; j++) {
            size_t row = (size_t)b * st->T + (size_t)j * L, at = (size_t)chunk_of(st, j) * L * C;
            const pp_rt_tensor *wpe = st->i_wpe >= 0 ? &t[st->i_wpe] : NULL;
            if (dout)
                PP_TRY(be->ops->encoder_bwd(be->ctx, t[st->i_wte].grad,
                                            wpe ? wpe->grad + at : NULL, dout + row * C,
                                            tok + row, 1, L, C));
            else
                PP_TRY(be->ops->encoder_fwd(be->ctx, out + row * C, tok + row, t[st->i_wte].data,
                                            wpe ? wpe->data + at : NULL, 1, L, C));
        }
    return PP_OK;
}

pp_status pp_stage_cp_embed_fwd(pp_rt_stage *st, float *out, const int32_t *tok)
{
    return embed_chunks(st, out, NULL, tok);
}

pp_status pp_stage_cp_embed_bwd(pp_rt_stage *st, const float *dout, const int32_t *tok)
{
    return embed_chunks(st, NULL, dout, tok);
}

/* The group's qkv rows into st->cp_all, in cp-rank order. */
static pp_status gather(pp_rt_stage *st, const float *qkv)
{
    size_t n = (size_t)st->B * st->T * st->qkv;
    return st->cp_allgather(st->cp_ctx, qkv, st->cp_all, n);
}

pp_status pp_stage_cp_attention_fwd(pp_rt_stage *st, const float *qkv, float *atty, float *att)
{
    pp_backend *be = st->be;
    PP_TRY(gather(st, qkv));
    return be->ops->attention_cp_fwd(be->ctx, atty, att, st->cp_all, st->B, st->T, st->Hl,
                                     st->KVl, st->hd, st->cp, st->cpr);
}

pp_status pp_stage_cp_attention_bwd(pp_rt_stage *st, const float *qkv, const float *att,
                                    const float *datty, float *dqkv, float *dall, float *scratch)
{
    pp_backend *be = st->be;
    PP_TRY(gather(st, qkv));
    PP_TRY(be->ops->attention_cp_bwd(be->ctx, dall, scratch, datty, att, st->cp_all, st->B,
                                     st->T, st->Hl, st->KVl, st->hd, st->cp, st->cpr));
    /* every rank's share summed: this rank's rows of the whole gradient */
    return st->cp_reduce_scatter(st->cp_ctx, dall, dqkv, (size_t)st->B * st->T * st->qkv);
}
