/* mem_shape.c — a schedule's shape for the memory model (mem_shape.h says what and why) and the
 * search's cache of shapes.
 *
 * The count vectors. Walking rank r's compute actions, the counts (a, b) change by +e_k (F),
 * -e_k (B), -e_k + e'_k (I), -e'_k (W). With f, h >= 0 the walk's peak is at a point right
 * after an F or an I, and a point followed by an F is dominated by the point after that F
 * (its vector plus e_k): so only the points after an F or I that the next compute action does not
 * extend by an F are kept, then the repeated ones (a steady state repeats a few vectors many
 * times) and the dominated ones are dropped. A rank whose counts ever go negative (not a valid
 * schedule) or whose vectors would outgrow SHAPE_MAX_INTS is not compressed: its memory is then
 * always walked on the schedule.
 * Not here: the runtime's own plan (fp32), which reads the schedule itself. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mem_shape.h"

/* Count-vector entries kept per rank at most (beyond it the walk is not worth replacing). */
#define SHAPE_MAX_INTS 65536

struct pp_tune_shape {
    pp_mem_place pl;
    pp_stage *stages; /* [n] */
    int *lists;       /* loc_off [ranks + 1] then loc [n] */
    double *units;    /* [ranks] pp_sched_in_flight_peak(s, r, NULL) */
    int split;        /* the schedule has I / W: vectors are (a, b), else a */
    int compressed;   /* 0: every rank's memory needs the schedule */
    int *n_vec;       /* [ranks] vectors of each rank */
    size_t *vec_at;   /* [ranks] the first of them in vec */
    int32_t *vec;     /* rank r's vector k: vec[vec_at[r] + k * dim_r], dim_r = its stages x
                         (split ? 2 : 1) */
    size_t n_ints;
};

pp_status pp_mem_place_of(const pp_sched *s, pp_mem_place *pl, int **owned)
{
    int n = s->n_pipes * s->stages_per_pipe, D = s->ranks;
    int *lists = pp_calloc((size_t)D + 1 + (size_t)n, sizeof *lists);
    if (!lists)
        return PP_ERR_NOMEM;
    int *off = lists, *loc = lists + D + 1;
    for (int i = 0; i < n; i++)
        if (s->stages[i].rank >= 0 && s->stages[i].rank < D)
            off[s->stages[i].rank + 1]++;
    for (int r = 0; r < D; r++)
        off[r + 1] += off[r];
    int *fill = pp_calloc((size_t)D + 1, sizeof *fill);
    if (!fill) {
        free(lists);
        return PP_ERR_NOMEM;
    }
    for (int i = 0; i < n; i++) { /* increasing i: each rank's list stays in stage order */
        int r = s->stages[i].rank;
        if (r >= 0 && r < D)
            loc[off[r] + fill[r]++] = i;
    }
    free(fill);
    *pl = (pp_mem_place){.ranks = D, .n_pipes = s->n_pipes, .S = s->stages_per_pipe,
                         .stages = s->stages, .loc_off = off, .loc = loc};
    *owned = lists;
    return PP_OK;
}

int pp_mem_frac_bits(double x)
{
    if (!(x >= 0) || !isfinite(x))
        return 1 << 20;
    if (x == 0)
        return 0;
    int k;
    double f = frexp(x, &k); /* x = f 2^k, f in [0.5, 1) */
    uint64_t M = (uint64_t)ldexp(f, 53); /* x = M 2^(k - 53), exactly */
    int tz = 0;
    while (!(M & 1))
        M >>= 1, tz++;
    int e = 53 - k - tz;
    return e > 0 ? e : 0;
}

/* ---- building -------------------------------------------------------------------------------- */
/* One rank's vectors while they are collected: the distinct ones (a hash set of their offsets). */
typedef struct {
    int dim;
    int32_t *v; /* [n * dim] */
    size_t n, cap;
    size_t *slot; /* [n_slot] offset + 1 into v, 0: empty */
    size_t n_slot;
} vec_set;

static uint64_t vec_hash(const int32_t *v, int dim)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < dim; i++)
        h = (h ^ (uint32_t)v[i]) * 1099511628211ull;
    return h;
}

static pp_status set_rehash(vec_set *vs)
{
    size_t n_slot = vs->n_slot ? 2 * vs->n_slot : 64;
    size_t *slot = pp_calloc(n_slot, sizeof *slot);
    if (!slot)
        return PP_ERR_NOMEM;
    for (size_t j = 0; j < vs->n; j++) {
        size_t h = vec_hash(vs->v + j * vs->dim, vs->dim) & (n_slot - 1);
        while (slot[h])
            h = (h + 1) & (n_slot - 1);
        slot[h] = j + 1;
    }
    free(vs->slot);
    vs->slot = slot;
    vs->n_slot = n_slot;
    return PP_OK;
}

/* Adds a copy of v unless the set has it. */
static pp_status set_add(vec_set *vs, const int32_t *v)
{
    if (2 * (vs->n + 1) > vs->n_slot)
        PP_TRY(set_rehash(vs));
    size_t h = vec_hash(v, vs->dim) & (vs->n_slot - 1);
    for (; vs->slot[h]; h = (h + 1) & (vs->n_slot - 1))
        if (!memcmp(vs->v + (vs->slot[h] - 1) * vs->dim, v, (size_t)vs->dim * sizeof *v))
            return PP_OK;
    if (vs->n == vs->cap) {
        size_t cap = vs->cap ? 2 * vs->cap : 16;
        int32_t *nv = pp_realloc_array(vs->v, cap * (size_t)vs->dim, sizeof *nv);
        if (!nv)
            return PP_ERR_NOMEM;
        vs->v = nv, vs->cap = cap;
    }
    memcpy(vs->v + vs->n * vs->dim, v, (size_t)vs->dim * sizeof *v);
    vs->slot[h] = ++vs->n;
    return PP_OK;
}

typedef struct {
    long sum;
    size_t i;
} by_sum;

static int larger_sum(const void *a, const void *b)
{
    const by_sum *x = a, *y = b;
    if (x->sum != y->sum)
        return x->sum > y->sum ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int dominates(const int32_t *a, const int32_t *b, int dim)
{
    for (int i = 0; i < dim; i++)
        if (a[i] < b[i])
            return 0;
    return 1;
}

/* Keeps the vectors of vs that no other dominates, in place; their count. A dominating vector
 * has a sum at least as large, so in decreasing sum each is checked against the kept ones. */
static size_t keep_undominated(vec_set *vs)
{
    int dim = vs->dim;
    by_sum *o = pp_calloc(vs->n + 1, sizeof *o);
    int32_t *kept = pp_calloc(vs->n * (size_t)dim + 1, sizeof *kept);
    if (!o || !kept) {
        free(o);
        free(kept);
        return (size_t)-1;
    }
    for (size_t j = 0; j < vs->n; j++) {
        long sum = 0;
        for (int i = 0; i < dim; i++)
            sum += vs->v[j * dim + i];
        o[j] = (by_sum){sum, j};
    }
    qsort(o, vs->n, sizeof *o, larger_sum);
    size_t nk = 0;
    for (size_t j = 0; j < vs->n; j++) {
        const int32_t *v = vs->v + o[j].i * dim;
        size_t k = 0;
        while (k < nk && !dominates(kept + k * dim, v, dim))
            k++;
        if (k == nk)
            memcpy(kept + nk++ * dim, v, (size_t)dim * sizeof *v);
    }
    memcpy(vs->v, kept, nk * (size_t)dim * sizeof *kept);
    free(o);
    free(kept);
    return nk;
}

/* Rank r's candidate peak points into vs (see the file comment); *ok = 0 when its counts go
 * negative or a stage it runs is not placed on it. lidx: [n] scratch. */
static pp_status collect(const pp_sched *s, const pp_mem_place *pl, int split, int r, int *lidx,
                         vec_set *vs, int *ok)
{
    int nl = pl->loc_off[r + 1] - pl->loc_off[r], n = pl->n_pipes * pl->S;
    for (int i = 0; i < n; i++)
        lidx[i] = -1;
    for (int k = 0; k < nl; k++)
        lidx[pl->loc[pl->loc_off[r] + k]] = k;
    int32_t *cnt = pp_calloc((size_t)vs->dim + 1, sizeof *cnt);
    if (!cnt)
        return PP_ERR_NOMEM;
    pp_status st = PP_OK;
    int pending = 0; /* the counts are a point after an F or an I, not yet recorded */
    *ok = 1;
    for (int i = 0; i < s->n_ops[r] && st == PP_OK && *ok; i++) {
        const pp_action *a = &s->ops[r][i];
        if (!pp_op_is_compute(a->op))
            continue;
        int l = a->pipe < pl->n_pipes && a->stage >= 0 && a->stage < pl->S
                    ? lidx[a->pipe * pl->S + a->stage]
                    : -1;
        if (l < 0) {
            *ok = 0;
            break;
        }
        if (pending && a->op != PP_OP_F)
            st = set_add(vs, cnt);
        int32_t *held = split ? &cnt[nl + l] : NULL;
        switch (a->op) {
        case PP_OP_F: cnt[l]++; break;
        case PP_OP_B: cnt[l]--; break;
        case PP_OP_I:
            cnt[l]--;
            if (held)
                ++*held;
            break;
        default:
            if (held)
                --*held;
            break;
        }
        pending = a->op == PP_OP_F || a->op == PP_OP_I;
        if (cnt[l] < 0 || (held && *held < 0))
            *ok = 0;
    }
    if (st == PP_OK && *ok && pending)
        st = set_add(vs, cnt);
    free(cnt);
    return st;
}

/* The vectors of every rank (sh->compressed = 0 when one cannot be compressed). */
static pp_status compress(const pp_sched *s, pp_tune_shape *sh)
{
    const pp_mem_place *pl = &sh->pl;
    int D = pl->ranks, n = pl->n_pipes * pl->S;
    int *lidx = pp_calloc((size_t)n + 1, sizeof *lidx);
    sh->n_vec = pp_calloc((size_t)D, sizeof *sh->n_vec);
    sh->vec_at = pp_calloc((size_t)D + 1, sizeof *sh->vec_at);
    pp_status st = lidx && sh->n_vec && sh->vec_at ? PP_OK : PP_ERR_NOMEM;
    size_t cap = 0;
    sh->compressed = 1;
    for (int r = 0; r < D && st == PP_OK && sh->compressed; r++) {
        int nl = pl->loc_off[r + 1] - pl->loc_off[r];
        vec_set vs = {.dim = nl * (sh->split ? 2 : 1)};
        int ok = 1;
        if (vs.dim > 0)
            st = collect(s, pl, sh->split, r, lidx, &vs, &ok);
        size_t nk = st == PP_OK && ok && vs.dim > 0 ? keep_undominated(&vs) : 0;
        if (nk == (size_t)-1)
            st = PP_ERR_NOMEM;
        else if (!ok || nk * (size_t)vs.dim > SHAPE_MAX_INTS)
            sh->compressed = 0;
        else {
            size_t need = sh->n_ints + nk * (size_t)vs.dim;
            if (need > cap) { /* room for element need - 1 */
                size_t c = pp_grow(&sh->vec, need - 1, cap, sizeof *sh->vec, 256);
                st = c ? PP_OK : PP_ERR_NOMEM;
                cap = c;
            }
            if (st == PP_OK) {
                memcpy(sh->vec + sh->n_ints, vs.v, nk * (size_t)vs.dim * sizeof *vs.v);
                sh->vec_at[r] = sh->n_ints;
                sh->n_vec[r] = (int)nk;
                sh->n_ints = need;
            }
        }
        free(vs.v);
        free(vs.slot);
    }
    free(lidx);
    if (st == PP_OK && !sh->compressed) {
        free(sh->vec), sh->vec = NULL, sh->n_ints = 0;
    }
    return st;
}

pp_status pp_tune_shape_create(const pp_sched *s, pp_tune_shape **out)
{
    *out = NULL;
    pp_tune_shape *sh = pp_calloc(1, sizeof *sh);
    if (!sh)
        return PP_ERR_NOMEM;
    int n = s->n_pipes * s->stages_per_pipe;
    pp_status st = pp_mem_place_of(s, &sh->pl, &sh->lists);
    sh->stages = st == PP_OK ? pp_calloc((size_t)n, sizeof *sh->stages) : NULL;
    sh->units = st == PP_OK ? pp_calloc((size_t)s->ranks, sizeof *sh->units) : NULL;
    if (st == PP_OK && (!sh->stages || !sh->units))
        st = PP_ERR_NOMEM;
    if (st == PP_OK) {
        memcpy(sh->stages, s->stages, (size_t)n * sizeof *sh->stages);
        sh->pl.stages = sh->stages; /* the shape outlives the schedule */
        for (int r = 0; r < s->ranks; r++)
            sh->units[r] = pp_sched_in_flight_peak(s, r, NULL);
        sh->split = pp_sched_has_split_backward(s);
        st = compress(s, sh);
    }
    if (st != PP_OK) {
        pp_tune_shape_destroy(sh);
        return st;
    }
    *out = sh;
    return PP_OK;
}

void pp_tune_shape_destroy(pp_tune_shape *sh)
{
    if (!sh)
        return;
    free(sh->stages);
    free(sh->lists);
    free(sh->units);
    free(sh->n_vec);
    free(sh->vec_at);
    free(sh->vec);
    free(sh);
}

const pp_mem_place *pp_tune_shape_place(const pp_tune_shape *sh)
{
    return &sh->pl;
}

int pp_tune_shape_peak(const pp_tune_shape *sh, int r, const double *w, const double *held, int e,
                       double *bytes, double *units)
{
    if (!sh->compressed || e > 52)
        return 0;
    const int *loc = sh->pl.loc + sh->pl.loc_off[r];
    int nl = sh->pl.loc_off[r + 1] - sh->pl.loc_off[r], dim = nl * (sh->split ? 2 : 1);
    double peak = 0;
    for (int k = 0; k < sh->n_vec[r]; k++) {
        const int32_t *v = sh->vec + sh->vec_at[r] + (size_t)k * dim;
        double sum = 0;
        for (int l = 0; l < nl; l++)
            if (v[l])
                sum += v[l] * w[loc[l]];
        for (int l = 0; sh->split && l < nl; l++)
            if (v[nl + l])
                sum += v[nl + l] * held[loc[l]];
        if (sum > peak)
            peak = sum;
    }
    /* every term a multiple of 2^-e and every partial sum, of these or of the walk, at most the
     * peak: below 2^(52-e) they are all exact, so the walk's result is this one */
    if (!(peak < ldexp(1.0, 52 - e)))
        return 0;
    *bytes = peak;
    *units = sh->units[r];
    return 1;
}

/* ---- the cache ------------------------------------------------------------------------------- */
typedef struct {
    const char *kind; /* a registry row's name (lives as long as the program) */
    pp_sched_params sp;
    pp_tune_shape *sh;
} shape_entry;

struct pp_tune_shape_cache {
    shape_entry *e; /* open addressing, n_slot a power of two */
    size_t n, n_slot;
};

static size_t key_hash(const char *kind, const pp_sched_params *sp)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = kind; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    const int f[] = {sp->ranks,  sp->microbatches, sp->chunks,     sp->group,
                     sp->layers, sp->uneven,       sp->first_layers, sp->last_layers};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        h = (h ^ (uint32_t)f[i]) * 1099511628211ull;
    return (size_t)h;
}

static int same_key(const shape_entry *e, const char *kind, const pp_sched_params *sp)
{
    return e->sh && !strcmp(e->kind, kind) && !memcmp(&e->sp, sp, sizeof *sp);
}

pp_tune_shape_cache *pp_tune_shape_cache_create(void)
{
    return pp_calloc(1, sizeof(pp_tune_shape_cache));
}

void pp_tune_shape_cache_destroy(pp_tune_shape_cache *k)
{
    if (!k)
        return;
    for (size_t i = 0; i < k->n_slot; i++)
        pp_tune_shape_destroy(k->e[i].sh);
    free(k->e);
    free(k);
}

const pp_tune_shape *pp_tune_shape_cache_get(const pp_tune_shape_cache *k, const char *kind,
                                             const pp_sched_params *sp)
{
    if (!k->n_slot)
        return NULL;
    for (size_t h = key_hash(kind, sp) & (k->n_slot - 1); k->e[h].sh; h = (h + 1) & (k->n_slot - 1))
        if (same_key(&k->e[h], kind, sp))
            return k->e[h].sh;
    return NULL;
}

static void place_entry(shape_entry *e, size_t n_slot, shape_entry x)
{
    size_t h = key_hash(x.kind, &x.sp) & (n_slot - 1);
    while (e[h].sh)
        h = (h + 1) & (n_slot - 1);
    e[h] = x;
}

pp_status pp_tune_shape_cache_put(pp_tune_shape_cache *k, const char *kind,
                                  const pp_sched_params *sp, pp_tune_shape *sh)
{
    if (2 * (k->n + 1) > k->n_slot) {
        size_t n_slot = k->n_slot ? 2 * k->n_slot : 256;
        shape_entry *e = pp_calloc(n_slot, sizeof *e);
        if (!e) {
            pp_tune_shape_destroy(sh);
            return PP_ERR_NOMEM;
        }
        for (size_t i = 0; i < k->n_slot; i++)
            if (k->e[i].sh)
                place_entry(e, n_slot, k->e[i]);
        free(k->e);
        k->e = e, k->n_slot = n_slot;
    }
    place_entry(k->e, k->n_slot, (shape_entry){kind, *sp, sh});
    k->n++;
    return PP_OK;
}
