/* pp_sched.h — pipeline schedules: the IR, the generators, the checker, the simulator, renderers.
 *
 * A schedule is a plain value: the placement of every stage of one or two pipelines on ranks, and
 * for every rank the ordered list of actions it performs in one training iteration. It can be
 * generated, printed, parsed back, checked and simulated. This module is pure C: no I/O except
 * the renderers, which write to a caller's FILE*.
 *
 * Vocabulary (Narayanan et al., SC'21, arXiv:2104.04473; Li & Hoefler, "Chimera", SC'21,
 * arXiv:2107.06925):
 *   D = ranks in one pipeline, N = micro-batches per iteration, v = chunks (stages) per rank per
 *   pipeline, S = stages per pipeline. A *pipe* is one direction of data flow: pipe 0 is the only
 *   pipeline, or the "down" one of a bidirectional schedule; pipe 1 is "up". Stages are numbered
 *   0..S-1 along each pipe's data flow. Micro-batch ids are global (0..N-1) across pipes; each
 *   micro-batch travels through exactly one pipe (sched->mb_pipe).
 *
 * Actions. F / B are the forward / backward of one micro-batch through one stage. Communication
 * follows PyTorch pipelining's convention:
 *   SEND_F(p, s, m)  on the rank of stage s:   send F(p,s,m)'s output  to the rank of stage s+1
 *   RECV_F(p, s, m)  on the rank of stage s:   receive the input of F(p,s,m) from stage s-1
 *   SEND_B(p, s, m)  on the rank of stage s:   send B(p,s,m)'s input-gradient to stage s-1
 *   RECV_B(p, s, m)  on the rank of stage s:   receive the output-gradient of stage s from stage s+1
 * so SEND_F(p,s,m) pairs with RECV_F(p,s+1,m) and SEND_B(p,s,m) with RECV_B(p,s-1,m). A hop
 * between two stages on the same rank (BitPipe's V turn, interleaved chunks never) has no
 * send/recv: it is a local hand-over. SEND is asynchronous (posted, never blocks the rank);
 * RECV blocks the rank until the data has arrived.
 *   REDUCE(id) synchronises gradients: sched->reduces[id] lists the ranks taking part and the
 *   (pipe, stage) pairs whose weights are reduced (all replicas of the same layers). Every
 *   participant has exactly one REDUCE action with that id. It is a collective issued
 *   asynchronously (it overlaps the compute that follows) and completes when all participants
 *   have issued it and it has run.
 *
 * Ownership: pp_sched_create / generators return a schedule the caller frees with
 * pp_sched_destroy (NULL is a no-op). The struct is visible so renderers, the simulator, the
 * runtime and tests can read it directly; mutate it only through the builder functions.
 */
#ifndef PP_SCHED_H
#define PP_SCHED_H

#include <stdint.h>
#include <stdio.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The op kinds. The order is part of the IR (tables in check.c index by it): new kinds go at the
 * end. I and W are the split backward of the Zero Bubble papers (Qi et al., ICLR 2024: B-input
 * and B-weight) as PyTorch pipelining spells them: I computes the input gradient (what the
 * previous stage waits for), W the weight gradient (which can wait). A (stage, micro-batch) has
 * either one B or one I and one W; zb-h1, zbv and dualpipev emit them. */
typedef enum {
    PP_OP_F = 0,  /* forward of one micro-batch through one stage */
    PP_OP_B,      /* full backward: input and weight gradients */
    PP_OP_SEND_F, /* see the file comment */
    PP_OP_RECV_F,
    PP_OP_SEND_B,
    PP_OP_RECV_B,
    PP_OP_REDUCE, /* gradient sync of replicas; stage holds the descriptor id */
    PP_OP_I,      /* split backward: input gradient only (ships SEND_B like B) */
    PP_OP_W,      /* split backward: weight gradient only (after its I; moves no data) */
    PP_OP__COUNT
} pp_op_kind;

/* "F", "B", "SEND_F", ..., "REDUCE", "I", "W" (PyTorch's spelling of the kinds they share);
 * "?" for a value outside the enum. */
const char *pp_op_name(pp_op_kind k);
/* Parses an op name as printed by pp_op_name; returns -1 if unknown. */
int pp_op_parse(const char *name);

/* An overlapped pair (PyTorch pipelining's OVERLAP_F_B, DualPipe's overlapped chunks): an F
 * whose `overlap` is 1 and the B right after it on the same rank are one action of the grammar
 * (one token "F3.0+B2.7", one CSV cell "(0F3;7B2)OVERLAP_F_B"), kept as two entries of the list
 * so that every walker of F and B (in-flight counts, the memory plan, the executor) sees them
 * as they are. The pair starts when the inputs of both have arrived (its RECVs come before the
 * F, its SENDs after the B, as PyTorch lowers OVERLAP_F_B) and runs F then B on the rank's
 * compute stream, which is how PyTorch's own simulator times it. Only an F can open a pair,
 * only the B right after it closes it (pp_sched_check). */
typedef struct {
    uint8_t op;      /* pp_op_kind */
    uint8_t pipe;    /* 0 or 1; unused for REDUCE */
    uint8_t overlap; /* 1: this F and the B that follows are an overlapped pair (above); 0 */
    int32_t stage;   /* stage along the pipe; for REDUCE: the reduce id (index in sched->reduces) */
    int32_t mb;      /* global micro-batch id; -1 for REDUCE */
    int32_t peer;    /* SEND/RECV: the other rank; F/B/REDUCE: -1. Filled by pp_sched_lower_comms */
} pp_action;

typedef struct {
    int rank;        /* rank holding this stage */
    int layer_begin; /* first transformer layer of this stage, [begin, end) */
    int layer_end;
} pp_stage;

#define PP_REDUCE_MAX_RANKS 8
#define PP_REDUCE_MAX_STAGES 16

typedef struct {
    int pipe, stage;
} pp_stage_ref;

typedef struct {
    int n_ranks;
    int ranks[PP_REDUCE_MAX_RANKS];          /* participants, ascending */
    int n_stages;
    pp_stage_ref stages[PP_REDUCE_MAX_STAGES]; /* every (pipe, stage) whose grads are reduced;
                                                  each rank reduces the ones it holds */
} pp_reduce;

typedef struct pp_sched {
    char kind[24];       /* generator name: "gpipe", "1f1b", "interleaved", "chimera", "bitpipe",
                            or whatever a parsed file said */
    int ranks;           /* D */
    int microbatches;    /* N */
    int chunks;          /* v: stages per rank per pipe (1 for gpipe/1f1b/chimera, 2 for bitpipe) */
    int group;           /* interleaved micro-batch group size G; 0 where it does not apply */
    int n_pipes;         /* 1, or 2 for bidirectional schedules */
    int stages_per_pipe; /* S = v * D */
    int layers;          /* transformer layers of the model, L; each pipe holds all of them */
    pp_stage *stages;    /* [n_pipes * S], index pipe * S + stage */
    uint8_t *mb_pipe;    /* [N] pipe each micro-batch goes through */
    pp_reduce *reduces;  /* [n_reduces] */
    int n_reduces, cap_reduces;
    pp_action **ops;     /* [ranks][n_ops[r]] the per-rank ordered action lists */
    int *n_ops;          /* [ranks] */
    int *cap_ops;        /* [ranks] */
} pp_sched;

/* ---- Parameters of the generators ---------------------------------------------------------- */
typedef struct {
    int ranks;        /* D >= 1 */
    int microbatches; /* N >= 1 */
    int chunks;       /* v, interleaved only (>= 2); 0 = the generator's natural value */
    int group;        /* G, interleaved only; 0 = D */
    int layers;       /* L; 0 = one layer per stage (unit costs) */
    int uneven;       /* 1: Llama-3 split, one layer fewer on the first and last stage */
    int first_layers; /* A: layers of a pipe's first stage; 0 = as the others */
    int last_layers;  /* Z: layers of a pipe's last stage; 0 = as the others */
} pp_sched_params;

/* ---- Layer splits ---------------------------------------------------------------------------
 * How a pipe's L layers go to its S stages (global stages along the data flow: for interleaved
 * schedules the virtual stages, chunk c of rank d being stage c * D + d; for bidirectional ones
 * the same split in both pipes, whose stage s holds the same layers). The first stage also holds
 * the embedding, the last one the final LayerNorm, the LM head and the loss, which is why they
 * may take fewer layers. Megatron-LM's --decoder-first-pipeline-num-layers /
 * --decoder-last-pipeline-num-layers: A and Z given, the other stages share the rest evenly. */
typedef struct {
    int uneven; /* 1: Llama 3's shorthand, A = Z = (L + 2) / S - 1 */
    int first;  /* A >= 1, or 0: as the other stages */
    int last;   /* Z >= 1, or 0: as the other stages */
} pp_sched_split;

static inline pp_sched_split pp_sched_params_split(const pp_sched_params *p)
{
    return (pp_sched_split){.uneven = p->uneven, .first = p->first_layers, .last = p->last_layers};
}
/* Whether the split is the even one (nothing asked). */
static inline int pp_sched_split_is_even(const pp_sched_split *sp)
{
    return !sp || (!sp->uneven && !sp->first && !sp->last);
}

/* ---- The registry: one descriptor per schedule ----------------------------------------------
 * A descriptor is everything the rest of the program may know about a schedule: its name, its
 * shape (pipes, weight replicas, chunks) and its rules, with their reason text. The tuner, the
 * profile reader, the exporters and pprun ask the registry; no schedule name is compared outside
 * schedules/. Adding a schedule is one generator file, one row in registry.c, and its tests. */
/* Whether Megatron-LM (and NeMo, which runs Megatron-Core's schedules) can run a schedule. */
typedef enum {
    PP_SCHED_MEGATRON_UPSTREAM = 0, /* Megatron's own pipelining (1F1B; virtual pipeline) */
    PP_SCHED_MEGATRON_FORK,         /* only a fork of Megatron, switched on by megatron_flag */
    PP_SCHED_MEGATRON_NONE,         /* no Megatron has it */
} pp_sched_megatron;

typedef struct pp_sched_desc {
    const char *name;    /* "1f1b" */
    const char *title;   /* as the literature writes it, for messages: "Chimera" */
    const char *summary; /* one line for --help */
    int pipes;           /* 1, or 2 for bidirectional schedules (two pipelines, opposite ways) */
    int weight_replicas; /* model copies whose stages the D ranks hold together (1; 2 for the
                            bidirectional ones: every rank holds stages of both pipes) */
    int chunks;          /* v, stages per rank per pipe; 0 = tunable (interleaved) */
    int chunks_min;      /* tunable chunks: the least v; the default when none is given */
    int grouped;         /* takes a micro-batch group size G (interleaved: D <= G <= N) */
    int min_ranks;       /* D >= min_ranks */
    int even_ranks;      /* D must be even */
    int n_multiple_of_ranks; /* N mod D must be 0 */
    int n_min_stages;        /* N >= S (the stages per pipe) or the order cannot be built
                                (DualPipeV, as PyTorch refuses fewer); 0: no such rule */
    int split_backward;      /* 1: the generator emits I and W (split backward), so running it
                                needs a cost table with I/W durations and a runtime that runs
                                them; 0: B only */
    int opt_in;              /* 1: the tuner searches it only where --schedules names it (new
                                families stay out of the default search until the time and
                                memory models price them) */
    /* Layer splits (pp_sched_split): every schedule takes first/last-stage counts A and Z of its
     * pipe's global stages (interleaved: virtual stage 0 on rank 0's first chunk, S - 1 on rank
     * D - 1's last; bidirectional: the same split in both pipes, as stage s of either holds the
     * same layers). split_ends_together: the ranks that hold a pipe's first stage hold the
     * other pipe's last one (bidirectional), so only A + Z sets their load and the tuner
     * searches A = Z; otherwise A and Z sit on different ranks and are searched apart. */
    int split_ends_together;
    pp_sched_megatron megatron; /* how Megatron-LM runs it */
    const char *megatron_flag;  /* PP_SCHED_MEGATRON_FORK: the fork's flag; NULL otherwise */
    /* PyTorch pipelining's name of the same schedule (torch.distributed.pipelining
     * get_schedule_class: "1F1B", "ZBVZeroBubble", ...), which torchtitan takes as
     * --parallelism.pipeline_parallel_schedule; NULL where PyTorch has none. */
    const char *torch_name;
    /* The generator. Call it through pp_sched_generate, which checks p against the row and
     * resolves chunks and group first; a direct call must pass pp_sched_desc_check itself. */
    pp_status (*generate)(const pp_sched_params *p, pp_sched **out);
} pp_sched_desc;

/* Whether a search given the --schedules comma list `list` (NULL or "" = the default set) covers
 * d: named in the list, or the list is empty and d is not opt_in. */
int pp_sched_desc_searched(const pp_sched_desc *d, const char *list);

/* The schedule a program runs when none is named (pprun, pptune simulate). */
#define PP_SCHED_DEFAULT "1f1b"

/* The registry: all descriptors, in a stable order. *n receives the count. */
const pp_sched_desc *pp_sched_generators(int *n);
/* NULL (and a PP_ERR_NOTFOUND message listing the known ones) if no schedule has that name. */
const pp_sched_desc *pp_sched_find(const char *name);
/* Like pp_sched_find, but NULL without touching the error message (for callers that only ask). */
const pp_sched_desc *pp_sched_lookup(const char *name);
/* Writes into buf the registry's names, in order, separated by sep ("gpipe, 1f1b, ..."), of the
 * schedules whose Megatron support is at most `at_most` (NONE: all of them; UPSTREAM: what
 * upstream Megatron and NeMo run; FORK: also the forks'), for messages. Returns buf. */
char *pp_sched_names(pp_sched_megatron at_most, const char *sep, char *buf, size_t n);
/* The v a schedule runs with when asked for `chunks` (0 = its natural value): the fixed count,
 * or for a tunable one `chunks` itself, chunks_min when 0. */
int pp_sched_desc_chunks(const pp_sched_desc *d, int chunks);
/* PP_OK when `chunks` as a command line gave it (0: not given) is one the schedule takes: any
 * for a schedule of tunable chunks (its minimum is checked when it is generated), 0 or its own
 * count for the others; else PP_ERR_INVALID naming the schedule, its count and --chunks. For
 * the command lines (pptune schedule, pprun): the generator itself runs a one-chunk schedule
 * with v = 1 whatever it is asked. */
pp_status pp_sched_chunks_option(const pp_sched_desc *d, int chunks);
/* The micro-batch group a grouped schedule runs with when asked for `group` (0 = D); 0 for the
 * others. */
int pp_sched_desc_group(const pp_sched_desc *d, int ranks, int group);
/* The period of d's steady state in micro-batches: the schedule of N + period micro-batches is
 * the one of N with one more period repeated in its middle (1 for a plain pipe; the group G for
 * a grouped one, pp_sched_desc_group; D for a bidirectional one, whose unit is D micro-batches,
 * D/2 per pipe). The tuner extrapolates a huge N from prefixes of the same N mod period. */
int pp_sched_desc_period(const pp_sched_desc *d, const pp_sched_params *p);
/* Whether p (ranks, micro-batches, chunks, group; layers and uneven are the split's, checked by
 * pp_sched_split_layers) obeys d's rules. PP_OK, or PP_ERR_INVALID with the rule and the numbers:
 * "chimera needs an even number of ranks, got 3". Pure: the search calls it for every candidate
 * and keeps the message as the candidate's reason. */
pp_status pp_sched_desc_check(const pp_sched_desc *d, const pp_sched_params *p);
/* Looks up `kind`, generates, lowers communication; the result passes pp_sched_check. */
pp_status pp_sched_generate(const char *kind, const pp_sched_params *p, pp_sched **out);
/* pp_sched_generate without the lowering: the compute actions (and REDUCEs) only, in the
 * order pp_sched_generate gives them; pp_sched_lower_comms on it later gives the same schedule
 * as pp_sched_generate (what the in-flight walks read needs no SEND/RECV: the tuner lowers
 * only the schedules it simulates). */
pp_status pp_sched_generate_compute(const char *kind, const pp_sched_params *p, pp_sched **out);

/* ---- The budget of one schedule -------------------------------------------------------------
 * Every micro-batch visits every stage of its pipe (a forward and a backward there), so a
 * schedule of D ranks, v chunks and N micro-batches has N x v x D stage visits and a few actions
 * per visit; the checker's tables are of that size too. PP_SCHED_MAX_VISITS bounds it before
 * anything is allocated: 2^21 is eight times the largest the search meets (Llama 3 405B, 2048
 * micro-batches x 128 stages) and about 10^7 actions. Ranks and stages are bounded as well. */
#define PP_SCHED_MAX_VISITS (1 << 21)
#define PP_SCHED_MAX_RANKS 65536
/* PP_OK, or PP_ERR_INVALID naming the sizes (as the options and the text format call them:
 * ranks, chunks, microbatches) and the budget. 64-bit products; any int is safe to pass. */
pp_status pp_sched_budget_check(int ranks, int microbatches, int chunks);

/* ---- Building a schedule (generators, parsers) ---------------------------------------------- */
/* An empty schedule with S = chunks * ranks stages per pipe, every stage unplaced (rank -1) and
 * layers split by pp_sched_split_layers(layers ? layers : S, S, split) (split NULL: even). */
pp_status pp_sched_create(const char *kind, int ranks, int microbatches, int chunks, int n_pipes,
                          int layers, const pp_sched_split *split, pp_sched **out);
void pp_sched_destroy(pp_sched *s);
/* Deep copy. */
pp_status pp_sched_clone(const pp_sched *s, pp_sched **out);
/* Splits s's layers (s->layers) over its stages by split instead (the same split in each pipe,
 * as pp_sched_create does). A generator's order and placement do not depend on the split
 * (tests/test_sched_gen.c checks every registered one), so a generated schedule resplit is the
 * one its generator gives with that split. PP_ERR_INVALID (s unchanged) where it does not
 * apply. */
pp_status pp_sched_resplit(pp_sched *s, const pp_sched_split *split);

/* Splits L layers over S stages into begin offsets begin[0..S] (begin[S] = L). split NULL or
 * even: every stage L/S (L % S must be 0). Uneven (Llama 3): first and last stage one layer
 * fewer than the others, so (L + 2) % S must be 0, S >= 3 and every stage keeps a layer. First
 * and/or last given (A, Z): those stages hold A and Z layers and the stages not given share the
 * rest evenly (so L - A - Z must be a multiple of them, each keeping a layer; with S = 2 and both
 * given, A + Z = L; S = 1 takes no first/last count other than L). uneven together with A or Z
 * is refused. Errors name the rule and the numbers. begin NULL: only checks. */
pp_status pp_sched_split_layers(int layers, int stages, const pp_sched_split *split, int *begin);


static inline pp_stage *pp_sched_stage(const pp_sched *s, int pipe, int stage)
{
    return &s->stages[pipe * s->stages_per_pipe + stage];
}
static inline int pp_sched_stage_layers(const pp_sched *s, int pipe, int stage)
{
    const pp_stage *st = pp_sched_stage(s, pipe, stage);
    return st->layer_end - st->layer_begin;
}

/* Whether any rank of s runs a split backward (an I or a W action). */
int pp_sched_has_split_backward(const pp_sched *s);

/* Appends one action to rank's list. peer is set to -1; pp_sched_lower_comms fills it. */
pp_status pp_sched_push(pp_sched *s, int rank, pp_op_kind op, int pipe, int stage, int mb);
/* Room for n actions on rank's list in one allocation (a generator that knows its count pushes
 * them without regrowing); never shrinks it. */
pp_status pp_sched_reserve(pp_sched *s, int rank, int n);
/* Adds a reduce descriptor; returns its id in *id. Ranks are sorted. */
pp_status pp_sched_add_reduce(pp_sched *s, const int *ranks, int n_ranks,
                              const pp_stage_ref *stages, int n_stages, int *id);

/* Inserts SEND/RECV actions into a compute-only schedule (F, B, I, W, REDUCE): each RECV right
 * before the compute that consumes it (F, B, I), each SEND right after the compute that produces
 * it (W moves no data); hops between stages on one rank get none. An overlapped pair is one
 * compute here: the RECVs of both its halves before its F, the SENDs of both after its B (as
 * PyTorch's _add_send_recv lowers OVERLAP_F_B). Existing SEND/RECV actions are removed first,
 * so the call is idempotent. Fills peer on every SEND/RECV. */
pp_status pp_sched_lower_comms(pp_sched *s);

/* ---- Checking -------------------------------------------------------------------------------- */
/* Validates a schedule: placement complete and consistent, every (pipe, stage, mb) of the right
 * pipe has exactly one F and one backward on the stage's rank, fused (B) or split (I and W, never
 * both forms), B or I after F, W after its I, local dependencies in order (a backward's input
 * gradient comes from the next stage's B or I), every cross-rank hop has its RECV before the
 * consumer and a matching SEND on the peer, each REDUCE after the last backward (B or W) of its
 * stages on that rank, and no deadlock. On failure returns PP_ERR_CHECK or PP_ERR_DEADLOCK
 * with a message naming rank, action index, action and reason, e.g. "rank 1, action 7 (B pipe 0
 * stage 1 mb 3): backward before its forward". */
pp_status pp_sched_check(const pp_sched *s);

/* ---- The action grammar (action.c) ------------------------------------------------------------
 * One textual form of an action, used by the text format (fmt_text.c), the runtime's traces and,
 * spelled out, by every message that names an action:
 *   token:  OP [PIPE] MB . STAGE [@PEER]     e.g. F0.1  SF3.0  RBu2.5  Fd1.0@3
 *           ARk                              REDUCE with descriptor k
 *           F... '+' B...                    an overlapped pair (pp_action.overlap), one
 *                                            token: F3.0+B2.7; the F alone is written "F3.0+"
 *                                            (what a trace names it), the B as usual
 *     OP is F, B, I, W (compute), SF / RF / SB / RB (SEND_F / RECV_F / SEND_B / RECV_B);
 *     PIPE d or u, written only when the schedule has two pipes (absent means d); MB the global
 *     micro-batch, STAGE the stage along the pipe (0-based); @PEER only where the peer differs
 *     from the one the placement implies (never for a lowered schedule).
 *   spelled out (messages): "SEND_F pipe 0 stage 3 mb 2 peer 1", "F pipe 0 stage 3 mb 2",
 *     "REDUCE #1", "F pipe 0 stage 3 mb 2 overlapped with the next B" — the same fields in
 *     words, so "rank 1, action 7 (...)" reads without a key.
 * PyTorch's CSV cells (fmt_csv.c: "1F0", "0SEND_F3") are PyTorch's grammar, kept for interop. */
typedef enum {
    PP_ACTION_TOKEN = 0, /* the compact token: files, traces; pp_action_parse reads it back */
    PP_ACTION_WORDS      /* spelled out, for messages */
} pp_action_style;

/* pp_action_parse's peer when the token has no @PEER: fill it from the placement once known. */
#define PP_ACTION_PEER_IMPLIED INT32_MIN

/* Writes action a of schedule s in the given style into buf (n bytes, truncated if short).
 * Returns buf. s gives the token its pipe letter and implied peer; it may be NULL for the
 * spelled-out form (then a token has no pipe letter and always its @PEER). */
char *pp_action_format(const pp_sched *s, const pp_action *a, pp_action_style style, char *buf,
                       size_t n);
/* The spelled-out form, for messages: pp_action_format(s, a, PP_ACTION_WORDS, buf, n). */
char *pp_action_str(const pp_sched *s, const pp_action *a, char *buf, size_t n);
/* Parses one token (the whole string) against s's shape: pipe < n_pipes, mb < microbatches,
 * stage < stages_per_pipe, peer in -1..ranks-1; a REDUCE id is only checked to be >= 0.
 * *out gets the action, with peer PP_ACTION_PEER_IMPLIED where the token has none (-1 for
 * compute and REDUCE). An F token may end in '+' (the F of an overlapped pair: overlap = 1).
 * PP_OK, or PP_ERR_PARSE with "expected ..., got \"TOKEN\"" and no position: the caller
 * prefixes where the token was. */
pp_status pp_action_parse(const pp_sched *s, const char *token, pp_action *out);
/* Parses a token that may be a whole pair "F3.0+B2.7": out[0] (and out[1] for a pair) filled;
 * returns the count in *n (1 or 2). Errors as pp_action_parse; a pair whose second half is not
 * a B is PP_ERR_PARSE ("an overlapped pair is F...+B..."). */
pp_status pp_action_parse_pair(const pp_sched *s, const char *token, pp_action out[2], int *n);

/* ---- IR predicates ----------------------------------------------------------------------------
 * Data flows forward (F, SEND_F, RECV_F: stage s -> s+1) or backward (B, I, SEND_B, RECV_B:
 * s -> s-1). A compute's input comes from stage s - dir and its output goes to s + dir; a SEND
 * ships to s + dir, a RECV takes from s - dir. W and REDUCE move no data (dir 0). */
static inline int pp_op_is_compute(int op)
{
    return op == PP_OP_F || op == PP_OP_B || op == PP_OP_I || op == PP_OP_W;
}
static inline int pp_op_is_send(int op)
{
    return op == PP_OP_SEND_F || op == PP_OP_SEND_B;
}
static inline int pp_op_is_recv(int op)
{
    return op == PP_OP_RECV_F || op == PP_OP_RECV_B;
}
/* SEND_F, RECV_F, SEND_B, RECV_B: point-to-point transfers between neighbour stages. */
static inline int pp_op_is_comm(int op)
{
    return pp_op_is_send(op) || pp_op_is_recv(op);
}
/* Split backward (I, W). */
static inline int pp_op_is_split_backward(int op)
{
    return op == PP_OP_I || op == PP_OP_W;
}
/* +1 forward (F, SEND_F, RECV_F), -1 backward (B, I, SEND_B, RECV_B), 0 for W and REDUCE. */
static inline int pp_op_dir(int op)
{
    if (op == PP_OP_F || op == PP_OP_SEND_F || op == PP_OP_RECV_F)
        return 1;
    if (op == PP_OP_B || op == PP_OP_I || op == PP_OP_SEND_B || op == PP_OP_RECV_B)
        return -1;
    return 0;
}
/* The RECV that brings a compute its input from another rank (F: RECV_F, B/I: RECV_B), the
 * SEND that ships its output (F: SEND_F, B/I: SEND_B); -1 for the others. */
static inline int pp_op_recv_of(int op)
{
    int d = pp_op_is_compute(op) ? pp_op_dir(op) : 0;
    return d > 0 ? PP_OP_RECV_F : d < 0 ? PP_OP_RECV_B : -1;
}
static inline int pp_op_send_of(int op)
{
    int d = pp_op_is_compute(op) ? pp_op_dir(op) : 0;
    return d > 0 ? PP_OP_SEND_F : d < 0 ? PP_OP_SEND_B : -1;
}
/* The other end of a transfer: SEND_F <-> RECV_F, SEND_B <-> RECV_B; -1 for the others. */
static inline int pp_op_mate(int op)
{
    switch (op) {
    case PP_OP_SEND_F: return PP_OP_RECV_F;
    case PP_OP_RECV_F: return PP_OP_SEND_F;
    case PP_OP_SEND_B: return PP_OP_RECV_B;
    case PP_OP_RECV_B: return PP_OP_SEND_B;
    default: return -1;
    }
}
/* The compute whose input a RECV brings or whose output a SEND ships (SEND_F/RECV_F: F,
 * SEND_B/RECV_B: B); -1 for the others. */
static inline int pp_op_compute_of(int op)
{
    return !pp_op_is_comm(op) ? -1 : pp_op_dir(op) > 0 ? PP_OP_F : PP_OP_B;
}
/* Stage that feeds a compute or RECV (stage - dir) and stage that a compute's or SEND's result
 * goes to (stage + dir), along the action's pipe; may be -1 or S (outside the pipe). Only
 * meaningful where pp_op_dir is not 0. */
static inline int pp_action_src_stage(const pp_action *a)
{
    return a->stage - pp_op_dir(a->op);
}
static inline int pp_action_dst_stage(const pp_action *a)
{
    return a->stage + pp_op_dir(a->op);
}
/* The neighbour stage a SEND/RECV talks to: s+1 for SEND_F / RECV_B, s-1 for RECV_F / SEND_B.
 * For other actions, the stage itself. */
static inline int pp_action_peer_stage(const pp_action *a)
{
    if (pp_op_is_send(a->op))
        return pp_action_dst_stage(a);
    if (pp_op_is_recv(a->op))
        return pp_action_src_stage(a);
    return a->stage;
}
/* The rank of stage `stage` of `pipe`, or -1 outside the pipe (or the schedule's pipes). */
static inline int pp_sched_rank_of(const pp_sched *s, int pipe, int stage)
{
    if (pipe < 0 || pipe >= s->n_pipes || stage < 0 || stage >= s->stages_per_pipe)
        return -1;
    return pp_sched_stage(s, pipe, stage)->rank;
}
/* The peer the placement implies for a SEND/RECV (the rank of its pp_action_peer_stage), the
 * value pp_sched_lower_comms gives it; -1 for other actions or outside the pipe. Parsers use it
 * to fill peers a file leaves out. */
static inline int pp_sched_implied_peer(const pp_sched *s, const pp_action *a)
{
    return pp_op_is_comm(a->op) ? pp_sched_rank_of(s, a->pipe, pp_action_peer_stage(a)) : -1;
}

/* ---- In-flight activations (inflight.c) ------------------------------------------------------ */
/* A stage's activations in units of one micro-batch through L/D layers: its layers / (L / D). */
double pp_sched_stage_units(const pp_sched *s, int pipe, int stage);
/* The most a rank holds at once of sum(weight[stage]) over the micro-batches it has forwarded
 * through a stage and not yet backwarded there (F adds, B frees; split: activations are held
 * until W, I frees nothing), walking its action list in order. weight: [n_pipes * S], indexed
 * pipe * S + stage (bytes, say); NULL = the stage's units (pp_sched_stage_units), which is the
 * simulator's peak_activations. pp_sched_in_flight_peak_split(s, rank, weight, NULL). */
double pp_sched_in_flight_peak(const pp_sched *s, int rank, const double *weight);
/* The same walk where I frees part: a micro-batch holds full[stage] from its F to its B or I, and
 * held[stage] (<= full: what W needs, the inputs of the stage's linears and their output
 * gradients; the Zero Bubble paper's M_W) from its I to its W, so I frees full - held and W the
 * rest. full NULL: the stage's units; held NULL: full (I frees nothing). */
double pp_sched_in_flight_peak_split(const pp_sched *s, int rank, const double *full,
                                     const double *held);
/* The most a rank holds at once of sum(weight[stage]) over the micro-batches whose I it has run
 * and whose W it has not (the held-for-W set; 0 for schedules without split backward). weight
 * NULL: the stage's units. */
double pp_sched_held_for_w_peak(const pp_sched *s, int rank, const double *weight);
/* One compute action's step of these walks (the one definition; the simulator takes the steps
 * as it runs each rank): what is in flight after op (F, B, I or W) of a stage holding f from
 * its F and h from its I, and what is held for W after it. */
static inline double pp_in_flight_step(int op, double cur, double f, double h)
{
    switch (op) {
    case PP_OP_F: return cur + f;
    case PP_OP_B: return cur - f;
    case PP_OP_I: return cur - (f - h);
    default: return cur - h; /* W */
    }
}
static inline double pp_held_for_w_step(int op, double cur, double w)
{
    return op == PP_OP_I ? cur + w : op == PP_OP_W ? cur - w : cur;
}

/* ---- Simulation ------------------------------------------------------------------------------ */
/* Costs. Times are in any unit (seconds for the tuner, "F of L/D layers" for textbook figures).
 * Arrays indexed by pipe * S + stage have n_pipes * S entries. */
typedef struct {
    double *f;          /* [n_pipes*S] forward duration of one micro-batch through the stage */
    double *b;          /* [n_pipes*S] backward duration (fused: input and weight gradients) */
    double *i;          /* [n_pipes*S] split backward: input-gradient (I) duration; NULL = the
                           table has none, and a schedule with I/W is refused */
    double *w;          /* [n_pipes*S] split backward: weight-gradient (W) duration; NULL as i */
    double *send_bytes_f; /* [n_pipes*S] bytes a SEND_F of this stage carries; NULL = 0 */
    double *send_bytes_b; /* [n_pipes*S] bytes a SEND_B of this stage carries; NULL = 0 */
    double *latency;    /* [D*D] latency of a transfer src*D+dst; NULL = 0 */
    double *inv_bw;     /* [D*D] time per byte src*D+dst; NULL = free */
    double *reduce;     /* [n_reduces] duration of each REDUCE once all participants issued it;
                           NULL = 0 */
} pp_cost;

/* Unit costs: F of a stage = its layers / (L / D), B = fb_ratio * F, I = W = B / 2 (with the
 * default ratio 2: F = I = W, the Zero Bubble papers' textbook case), links and reduces free.
 * Allocates the arrays; release with pp_cost_fini. */
pp_status pp_cost_init_unit(pp_cost *c, const pp_sched *s, double fb_ratio);
/* Frees all nine arrays (each must be NULL or from malloc, so a caller may attach its own
 * latency/inv_bw/reduce arrays to a unit table) and zeroes the struct. NULL is a no-op. */
void pp_cost_fini(pp_cost *c);

typedef struct {
    double start, end; /* compute: when it ran; SEND: transfer on the link; RECV: wait begin and
                          data arrival; REDUCE: issue and completion */
} pp_span;

typedef struct {
    double makespan;          /* end of the last action (compute, transfer or reduce) */
    double *busy;             /* [D] compute time per rank */
    double *idle;             /* [D] makespan - busy */
    double bubble_over_total; /* sum(idle) / (D * makespan) */
    double bubble_over_ideal; /* sum(idle) / sum(busy) */
    double *peak_activations; /* [D] max in-flight activations, in micro-batch x (L/D layers):
                                 F to B, or F to W where split (I frees nothing here) */
    double *peak_held_for_w;  /* [D] max activations held between an I and its W, same units
                                 (0 without split backward): the part the tuner may weigh by
                                 the smaller bytes W needs (pp_sched_in_flight_peak_split) */
    long cross_rank_transfers; /* SEND actions that cross ranks */
    double *last_end;         /* [D] end of each rank's last compute or REDUCE (0 if none): when
                                 its gradients are complete, spans or not */
    pp_span **spans;          /* [D][n_ops[r]] per action, or NULL if not requested */
    long actions;             /* actions simulated */
    int n_ranks;              /* D: entries of busy, idle, peak_activations, spans */
} pp_sim_result;

/* Runs the schedule against the costs. want_spans: also record every action's start and end.
 * The schedule must pass pp_sched_check (a deadlock is reported as PP_ERR_DEADLOCK).
 * Free the result with pp_sim_result_fini. At most PP_SIM_MAX_RANKS ranks (PP_ERR_INVALID
 * past it): the links between ranks are a ranks x ranks table (4096: 128 MiB). */
#define PP_SIM_MAX_RANKS 4096
pp_status pp_sim_run(const pp_sched *s, const pp_cost *c, int want_spans, pp_sim_result *out);
/* pp_sim_run of k cost tables c[0..k-1] over the same schedule in one pass, into out[0..k-1]
 * (no spans): out[i] is, double for double, what pp_sim_run(s, &c[i], 0, &out[i]) gives (the
 * order in which actions run depends on the schedule alone); the work other than the
 * arithmetic is done once. 1 <= k <= PP_SIM_MAX_LANES. An error leaves every out[i] empty. */
#define PP_SIM_MAX_LANES 64
pp_status pp_sim_run_lanes(const pp_sched *s, const pp_cost *c, int k, pp_sim_result *out);
void pp_sim_result_fini(pp_sim_result *r);

/* ---- Renderers (write to a FILE*, never open files) -------------------------------------------
 * text: one line per rank, round-trips through pp_sched_parse_text.
 * json: the interchange form (see README / docs), read back by the tuner's --check.
 * csv: PyTorch pipelining's CSV (torch.distributed.pipelining _dump_csv / _load_csv, torch 2.15's
 *      grammar), one row per rank, cells like 0F1, 1SEND_F0, (0F3;7B2)OVERLAP_F_B; single-pipe
 *      schedules without REDUCE only (PP_ERR_INVALID otherwise, saying why).
 *      pp_sched_write_csv writes PyTorch's "compute_comms" form (every action, the WAIT_SEND_F /
 *      WAIT_SEND_B of every send, REDUCE_GRAD and WAIT_REDUCE_GRAD after each stage's last
 *      backward, receives from a peer in its send order: what its runtime loads and runs;
 *      fmt_csv_write.c says where each goes); pp_sched_write_csv_compute its "compute_only"
 *      form (F, B, I, W cells, a pair as one cell). pp_sched_read_csv reads either, also as
 *      older torch and pptune wrote them (fmt_csv.c says how: placement from the rows, kind
 *      "csv", one layer per stage; a compute-only file is lowered); errors name the source, row
 *      (rank), column and cell. It does not check the schedule: call pp_sched_check.
 * ascii: a terminal timeline from a simulation; svg: a Gantt chart from a simulation. */
pp_status pp_sched_write_text(const pp_sched *s, FILE *fp);
pp_status pp_sched_parse_text(const char *text, const char *source_name, pp_sched **out);
pp_status pp_sched_write_json(const pp_sched *s, const pp_sim_result *sim, FILE *fp);
pp_status pp_sched_write_csv(const pp_sched *s, FILE *fp);
pp_status pp_sched_write_csv_compute(const pp_sched *s, FILE *fp);
pp_status pp_sched_read_csv(const char *text, const char *source_name, pp_sched **out);
/* width: columns, at most PP_SCHED_ASCII_MAX_WIDTH (more is PP_ERR_INVALID); <= 0: automatic. */
#define PP_SCHED_ASCII_MAX_WIDTH 10000
pp_status pp_sched_write_ascii(const pp_sched *s, const pp_sim_result *sim, int width, FILE *fp);
/* The automatic width, narrowed so that whole lines fit in line_width columns (a terminal's;
 * at least 20 timeline columns); line_width <= 0: the automatic width as it is. */
pp_status pp_sched_write_ascii_fit(const pp_sched *s, const pp_sim_result *sim, int line_width,
                                   FILE *fp);
pp_status pp_sched_write_svg(const pp_sched *s, const pp_sim_result *sim, FILE *fp);
typedef struct {
    const char *unit; /* the time axis's unit, e.g. "s" when the costs are seconds; NULL: "units
                         of the cost table" */
    int aggregate;    /* 1: rows by op kind, merged; 0: every block drawn; -1: 1 when blocks
                         would be narrower than 6 px on average */
} pp_sched_svg_opts;
/* pp_sched_write_svg with options (pp_sched_write_svg: unit NULL, aggregate -1). */
pp_status pp_sched_write_svg_opts(const pp_sched *s, const pp_sim_result *sim,
                                  const pp_sched_svg_opts *o, FILE *fp);

#ifdef __cplusplus
}
#endif
#endif
