/* pp_rt_place.h — where a rank sits in the three parallel dimensions, written down once for
 * the runtime (executor, pprun) and the tuner (time model, trials): tensor-parallel ranks are
 * innermost (Megatron-LM's order: a tensor-parallel group is t consecutive ranks, so it stays
 * inside a node's NVLink domain), then pipeline ranks, then data-parallel replicas:
 *     global = tp + t * (pp + p * dp)      (t tensor, p pipeline ranks; 0 <= tp < t, ...)
 * Plain arithmetic, no allocation; part of the plan library (pp_rt_plan).
 */
#ifndef PP_RT_PLACE_H
#define PP_RT_PLACE_H

typedef struct {
    int t, p, dp; /* tensor-parallel ranks, pipeline ranks, data-parallel replicas (all >= 1) */
} pp_rt_place;

/* Returns the global rank of (tensor rank tp, pipeline rank pp, replica dp). */
static inline int pp_rt_place_global(const pp_rt_place *pl, int tp, int pp, int dp)
{
    return tp + pl->t * (pp + pl->p * dp);
}
/* The coordinates of global rank g (the inverse of pp_rt_place_global). */
static inline int pp_rt_place_tp(const pp_rt_place *pl, int g)
{
    return g % pl->t;
}
static inline int pp_rt_place_pp(const pp_rt_place *pl, int g)
{
    return g / pl->t % pl->p;
}
static inline int pp_rt_place_dp(const pp_rt_place *pl, int g)
{
    return g / (pl->t * pl->p);
}
/* Returns t * p * dp, the ranks of the layout. */
static inline int pp_rt_place_ranks(const pp_rt_place *pl)
{
    return pl->t * pl->p * pl->dp;
}

#endif
