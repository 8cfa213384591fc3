/* mem_shape.h — private to the tuner library: what the memory model reads of a schedule, kept
 * without the schedule's actions (mem_shape.c), so that the search computes the memory of every
 * candidate sharing a schedule without generating it again.
 *
 * A shape holds the stage placement and layer counts, each rank's in-flight peak in micro-batch
 * units, and each rank's in-flight counts at the points of its action list where its saved
 * activations can peak: the walk of pp_sched_in_flight_peak_split is cur = sum over the rank's
 * stages k of a_k f_k + b_k h_k (a_k: micro-batches of stage k past F and not yet past B or I;
 * b_k: past I and not yet past W; f, h >= 0 the stage's bytes), so its peak is the largest of
 * these sums over the count vectors (a, b) that no other point's vector dominates. The sums equal
 * the walk's own floating-point result whenever every term is a multiple of 2^-e and the peak is
 * below 2^(52-e) (every partial sum of either is then exact); otherwise, and for the runtime's
 * own plan (fp32), pp_tune_memory_shape says so and the caller walks the schedule. */
#ifndef PP_MEM_SHAPE_H
#define PP_MEM_SHAPE_H

#include "pp_tune.h"

typedef struct pp_tune_shape pp_tune_shape;

/* A shape of s (*out, owned by the caller: pp_tune_shape_destroy). Errors: allocation. */
pp_status pp_tune_shape_create(const pp_sched *s, pp_tune_shape **out);
void pp_tune_shape_destroy(pp_tune_shape *sh);

/* pp_tune_memory of the schedule sh was made from, to the last bit, into mem[0..D-1] with
 * *exact = 1; *exact = 0 (mem undefined) where that cannot be shown: the caller then calls
 * pp_tune_memory with the schedule. Errors as pp_tune_memory's. */
pp_status pp_tune_memory_shape(const pp_tune_model *m, const pp_config *c, const pp_tune_shape *sh,
                               const pp_tune_opts *o, pp_tune_rank_mem *mem, int *exact);

/* ---- for memory.c: the placement both paths account from, and the shape's walk ---------- */
typedef struct {
    int ranks, n_pipes, S;    /* S: stages per pipe */
    const pp_stage *stages;   /* [n_pipes * S] rank and layers of (pipe, stage), pipe * S + stage */
    const int *loc_off, *loc; /* rank r's stages: loc[loc_off[r] .. loc_off[r + 1]), their
                                 indices pipe * S + stage in increasing order */
} pp_mem_place;

/* s's placement into *pl; *owned (free it) holds the per-rank lists. Errors: allocation. */
pp_status pp_mem_place_of(const pp_sched *s, pp_mem_place *pl, int **owned);
const pp_mem_place *pp_tune_shape_place(const pp_tune_shape *sh);
/* Rank r's peak activation bytes (*bytes) and in-flight units (*units) for the stage bytes
 * w and held ([n_pipes * S], each a multiple of 2^-e): 1, or 0 when the shape cannot show them
 * equal to the schedule's walk (see above). */
int pp_tune_shape_peak(const pp_tune_shape *sh, int r, const double *w, const double *held, int e,
                       double *bytes, double *units);
/* The smallest e >= 0 with x * 2^e an integer (x finite, >= 0); a large value otherwise. */
int pp_mem_frac_bits(double x);

/* The shapes of one search, by (schedule kind, generator parameters); the cache owns them. */
typedef struct pp_tune_shape_cache pp_tune_shape_cache;
pp_tune_shape_cache *pp_tune_shape_cache_create(void);
void pp_tune_shape_cache_destroy(pp_tune_shape_cache *k);
/* The shape stored for (kind, sp), NULL when none. */
const pp_tune_shape *pp_tune_shape_cache_get(const pp_tune_shape_cache *k, const char *kind,
                                             const pp_sched_params *sp);
/* Stores sh (the cache owns it from here, also on error) for (kind, sp); NOMEM. */
pp_status pp_tune_shape_cache_put(pp_tune_shape_cache *k, const char *kind,
                                  const pp_sched_params *sp, pp_tune_shape *sh);

#endif
