/* axes.h — the searched settings of a candidate (axes.c): the values the search tries, their
 * rules, and their text. Private to the tuner (search.c and the program's printers). */
#ifndef PP_TUNE_AXES_H
#define PP_TUNE_AXES_H

#include "pp_tune.h"

typedef struct {
    const pp_tune_model *m;
    const pp_tune_opts *o;
    const pp_tune_force *force;
    int max_ep;       /* the largest expert parallelism tried (0: PP_TUNE_MAX_EP_DEFAULT) */
    pp_status (*fn)(void *ctx, const pp_config *c); /* called per setting */
    void *ctx;
} pp_tune_axes_ctx;

/* Calls a->fn for each combination of settings the search tries for layout c (its p, v, t, d,
 * cp set): recompute x sequence parallelism x shard x ep (a MoE model: the divisors of its
 * experts that divide d x cp, up to max_ep), forced values only where forced. Stops at
 * the first error fn returns. */
pp_status pp_tune_axes_each(const pp_tune_axes_ctx *a, pp_config c);
/* The largest ep tried by default (--max-ep): Megatron-Core's published MoE runs go to 64
 * (DeepSeek-V3 trained with expert parallelism 64, arXiv:2412.19437 sec. 3.2). */
#define PP_TUNE_MAX_EP_DEFAULT 64
/* The largest cp the search tries (forced: that one), given --max-cp (0: 16). */
int pp_tune_axes_cp_max(const pp_tune_axes_ctx *a, int max_cp);
/* NULL when c's settings keep their rules, else the reason (in why). */
const char *pp_tune_axes_rule(const pp_tune_model *m, const pp_config *c, char *why, size_t n);
/* Short form for a leaderboard column, one word: "-", "full", "full-4,sp,z1", "sel,sp,z2". */
char *pp_tune_axes_str(const pp_config *c, char *buf, size_t n);
/* Sentence for a header: "recompute full on the first 4 layers of each stage; sequence
 * parallelism on; optimizer state sharded (ZeRO-1); context parallelism 2". */
char *pp_tune_axes_describe(const pp_config *c, char *buf, size_t n);

#endif
