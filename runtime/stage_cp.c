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
 * Communication: ring attention (TransformerEngine's AttnFuncWithCPAndKVP2P,
 * transformer_engine/pytorch/attention.py): the K/V blocks go around the cp ring, cp rank r
 * holding at step i the block of rank r - i; each step sends the block on to the next rank
 * before computing on it (the transports' sends copy and return, so the transfer runs while
 * the step computes; under MPI an MPI_Isend), and the backend merges each step's partial
 * attention with the online softmax (runtime/backend.h: attention_cp_fwd). The backward passes
 * the blocks around again, each with the gradient of its K/V accumulating as it goes; after
 * the last step that gradient reaches its owner. Whole qkv rows travel (the q columns too), as
 * the transports move contiguous buffers: 1 + NH / (2 NKV) times the K/V bytes. Each step ends
 * when its sends are received (cp_release): a rank's message copies are then one block in a
 * forward step and two in a backward step, at points of its program order the memory plan
 * walks (plan/plan.c), whatever the other ranks' timing.
 * Not here: the loss and the gradient reduction over the group, which the executor treats as
 * data-parallel replicas (Megatron reduces gradients over the combined dp x cp group).
 */
#include "stage_impl.h"

/* Global chunk of local chunk j (0, 1) of this rank. */
static int chunk_of(const pp_rt_stage *st, int j)
{
    return pp_rt_cp_chunk(j, st->cp, st->cpr);
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

/* The ring's previous rank's block (K/V rows, or their gradient) into buf. */
static pp_status ring_recv(pp_rt_stage *st, float *buf)
{
    return st->cp_recv(st->cp_ctx, buf, (size_t)st->B * st->T * st->qkv);
}

static pp_status ring_send(pp_rt_stage *st, const float *buf)
{
    return st->cp_send(st->cp_ctx, buf, (size_t)st->B * st->T * st->qkv);
}

/* The end of a ring step: its sends received, their copies freed (pp_rt_stage_params.cp_release),
 * so at most the step's blocks are in flight from each rank: one forward, two backward. */
static pp_status ring_release(pp_rt_stage *st)
{
    return st->cp_release ? st->cp_release(st->cp_ctx) : PP_OK;
}

/* Step i of the ring holds the block of cp rank cpr - i (mod cp): the rank's own first. */
static int owner_at(const pp_rt_stage *st, int i)
{
    return (st->cpr - i + st->cp) % st->cp;
}

pp_status pp_stage_cp_attention_fwd(pp_rt_stage *st, const float *qkv, float *atty, float *att)
{
    pp_backend *be = st->be;
    float *kv = st->cp_kv, *ml = st->cp_ml, *scratch = st->cp_scratch;
    const float *cur = qkv;
    for (int i = 0; i < st->cp; i++) {
        int more = i + 1 < st->cp;
        if (more) /* on its way while this step computes */
            PP_TRY(ring_send(st, cur));
        PP_TRY(be->ops->attention_cp_fwd(be->ctx, atty, att, ml, scratch, qkv, cur, st->B, st->T,
                                         st->Hl, st->KVl, st->hd, st->cp, st->cpr,
                                         owner_at(st, i)));
        if (more) { /* the send copied cur: the buffer takes the next block */
            PP_TRY(ring_recv(st, kv));
            cur = kv;
            PP_TRY(ring_release(st));
        }
    }
    return be->ops->attention_cp_fwd_end(be->ctx, atty, att, ml, st->B, st->T, st->Hl, st->hd,
                                         st->cp, st->cpr);
}

pp_status pp_stage_cp_attention_bwd(pp_rt_stage *st, const float *qkv, const float *att,
                                    const float *atty, const float *datty, float *dqkv,
                                    float *dkv, float *dsum, float *scratch)
{
    pp_backend *be = st->be;
    const float *cur = qkv;
    for (int i = 0; i < st->cp; i++) {
        int more = i + 1 < st->cp;
        if (more)
            PP_TRY(ring_send(st, cur));
        PP_TRY(be->ops->attention_cp_bwd(be->ctx, dqkv, dkv, dsum, scratch, datty, atty, att, qkv,
                                         cur, st->B, st->T, st->Hl, st->KVl, st->hd, st->cp,
                                         st->cpr, owner_at(st, i)));
        /* the block's gradient goes on with it; after the last step it reaches its owner */
        PP_TRY(ring_send(st, dkv));
        if (more) {
            PP_TRY(ring_recv(st, st->cp_kv));
            cur = st->cp_kv;
        }
        PP_TRY(ring_recv(st, dkv));
        PP_TRY(ring_release(st));
    }
    /* dkv: every rank's queries' share of this rank's keys' and values' gradient; dqkv's k
     * and v columns are zero (the first step zeroed them, the steps wrote only q columns) */
    return be->ops->add(be->ctx, dqkv, dkv, (size_t)st->B * st->T * st->qkv);
}
