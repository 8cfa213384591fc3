/* fmt_csv.c — a schedule as CSV in the style of PyTorch pipelining's artifacts.
 *
 * torch.distributed.pipelining writes a schedule (PipelineScheduleMulti._dump_csv) as one CSV
 * row per rank, each cell one action in the form _Action.__repr__ gives it:
 * STAGE + TYPE + MICROBATCH, e.g. "0F1", "1SEND_F0", "2RECV_B3", and "3REDUCE_GRAD" (no
 * micro-batch). This writer follows that, so the files can be read by its _load_csv / the
 * schedule visualiser, with these mappings:
 *   - stage index: PyTorch has one pipeline, so pipe 0's stage s is stage index s and pipe 1's
 *     stage s is stage index S + s (S = stages per pipe); a bidirectional schedule appears as a
 *     2S-stage "pipeline" whose second half runs the other way.
 *   - micro-batch: our global id (0..N-1), unchanged.
 *   - REDUCE: PyTorch's REDUCE_GRAD is per stage, ours is per descriptor; a REDUCE becomes one
 *     "<stage>REDUCE_GRAD" cell for every stage of the descriptor this rank holds, in the
 *     descriptor's order. A rank's row can therefore have more cells than it has actions.
 * Rows are rank 0..D-1, with no header row (as PyTorch). The rank is the row's position.
 * There is no reader here: the text and JSON forms are the ones that round-trip.
 */
#include "pp_sched.h"

static int csv_stage_index(const pp_sched *s, int pipe, int stage)
{
    return pipe * s->stages_per_pipe + stage;
}

static int write_reduce_cells(const pp_sched *s, int r, int id, int first, FILE *fp)
{
    if (id < 0 || id >= s->n_reduces)
        return PP_ERR(PP_ERR_INVALID, "rank %d: REDUCE %d, but the schedule has %d descriptors",
                      r, id, s->n_reduces);
    const pp_reduce *rd = &s->reduces[id];
    for (int i = 0; i < rd->n_stages; i++) {
        pp_stage_ref ref = rd->stages[i];
        if (pp_sched_stage(s, ref.pipe, ref.stage)->rank != r)
            continue;
        fprintf(fp, "%s%dREDUCE_GRAD", first ? "" : ",", csv_stage_index(s, ref.pipe, ref.stage));
        first = 0;
    }
    return first;
}

pp_status pp_sched_write_csv(const pp_sched *s, FILE *fp)
{
    for (int r = 0; r < s->ranks; r++) {
        int first = 1;
        for (int i = 0; i < s->n_ops[r]; i++) {
            const pp_action *a = &s->ops[r][i];
            if (a->op == PP_OP_REDUCE) {
                int f = write_reduce_cells(s, r, a->stage, first, fp);
                if (f < 0)
                    return (pp_status)f;
                first = f;
                continue;
            }
            fprintf(fp, "%s%d%s%d", first ? "" : ",", csv_stage_index(s, a->pipe, a->stage),
                    pp_op_name((pp_op_kind)a->op), (int)a->mb);
            first = 0;
        }
        fputc('\n', fp);
    }
    if (ferror(fp))
        return PP_ERR(PP_ERR_IO, "writing the CSV form of the schedule failed");
    return PP_OK;
}
