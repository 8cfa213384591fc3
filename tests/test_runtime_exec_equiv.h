/* test_runtime_exec_equiv.h — shared by the executor tests: a tiny model, the unpipelined
 * one-rank reference built straight on the stage API, and tensor comparisons. */
#ifndef TEST_RUNTIME_EXEC_EQUIV_H
#define TEST_RUNTIME_EXEC_EQUIV_H

#include "pp_rt.h"

typedef struct {
    const char *kind;
    int D, N, v, uneven, dp;
    int group;               /* interleaved G; 0 = D */
    int layers, first, last; /* a first/last-stage split of `layers` (0: the grid's L) */
} exec_case;

/* Runs the case (one gradient step, then three AdamW steps) against the reference and
 * asserts the invariant; returns the layer count it used. */
int exec_check_case(const exec_case *c);

/* The same for a schedule built by the caller (s->layers blocks of the tiny model), with dp
 * replicas; `what` names it in failures. */
void exec_check_sched(const pp_sched *s, int dp, const char *what);

/* max |a - b| / max |b| over n entries (test_runtime_model.c): relative to the tensor's scale,
 * so tiny entries that differ only by summation order do not dominate. */
double exec_max_rel_diff(const float *a, const float *b, size_t n);

/* A model of `layers` blocks, C = 16, 2 heads, FFN 32, vocabulary 64, sequence 8; with
 * exec_llama set (a test sets it first) the Llama block at that size instead: C = 16, 4 query
 * heads and 2 KV heads, SwiGLU of width 24, RMSNorm, rotary with Llama 3 scaling, untied head. */
extern int exec_llama;
/* exec_llama's values: the GPT block (0), Llama's, or Qwen3's (Llama's with the per-head q/k
 * RMSNorm and heads 8 wide where hidden / heads is 4, no rotary scaling) */
enum { EXEC_GPT = 0, EXEC_LLAMA = 1, EXEC_QWEN3 = 2 };
pp_model_cfg exec_tiny_model(int layers);

#endif
