/* axes.c — the settings the search varies beside the layout: recomputation (none, selective,
 * full, full on the first k layers of each stage), sequence parallelism, sharding over the
 * data-parallel ranks, context parallelism; which values a candidate takes, the rules with
 * their reasons, and what a user forces (pptune --recompute full ...).
 *
 * The values tried for a layout:
 *   recompute: none; selective (not with flash attention: it keeps exactly what none keeps,
 *   memory.c, and only costs time, so it can never win); full; full on the first k layers of
 *   each stage for k = q/4, q/2, 3q/4 (q = layers per model chunk, rounded, distinct, 1..q-1).
 *   One k for every stage, as Megatron's --recompute-method block --recompute-num-layers k
 *   gives: the fullest rank decides what fits, and a per-stage k would be a schedule Megatron
 *   cannot be told to run.
 *   sequence parallelism: off and on where t > 1.
 *   shard: none, optimizer, gradients where d x cp > 1 (none is not dominated: its one
 *   all-reduce may take the tree's logarithmic latency where the sharded pair pays two rings).
 *   cp (search.c's enumeration): 1, 2, 4, ... up to max_cp, where 2 cp divides the sequence
 *   (Megatron's causal load balancing splits it into 2 cp chunks).
 *   ep (a mixture-of-experts model only): every divisor of the routed experts that divides
 *   d x cp, up to max_ep (Megatron-Core carves the expert-parallel group out of the data- and
 *   context-parallel ranks; expert tensor parallelism stays t). The bundled runtime runs no
 *   MoE model, so trials never see one.
 * Where the devices are CPUs the trials run the bundled runtime, which runs recomputation,
 * optimizer and gradient sharding and context parallelism (not recomputation or sharding
 * together with cp: such a candidate is searched and modelled, not trialled).
 * Not here: the models' effects (memory.c, timemodel.c), the enumeration of layouts (search.c).
 */
#include <stdio.h>
#include <string.h>

#include "axes.h"
#include "pp_tune.h"

void pp_tune_force_init(pp_tune_force *f)
{
    f->recompute = f->recompute_layers = f->sequence_parallel = f->shard = f->cp = f->ep =
        PP_TUNE_SEARCHED;
}

void pp_tune_force_apply(const pp_tune_force *f, pp_config *c)
{
    c->recompute = f->recompute >= 0 ? (pp_recompute)f->recompute : PP_RECOMPUTE_NONE;
    c->recompute_layers = f->recompute_layers >= 0 ? f->recompute_layers : 0;
    c->sequence_parallel = f->sequence_parallel > 0;
    c->shard = f->shard >= 0 ? (pp_shard)f->shard : PP_SHARD_NONE;
    c->cp = f->cp >= 1 ? f->cp : 1;
    c->ep = f->ep >= 1 ? f->ep : 1;
}

char *pp_tune_force_flags(const pp_tune_force *f, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = '\0';
#define ADD(...)                                                                                  \
    do {                                                                                          \
        if (len < n)                                                                              \
            len += (size_t)snprintf(buf + len, n - len, __VA_ARGS__);                             \
    } while (0)
    if (f->recompute >= 0)
        ADD("%s--recompute %s", len ? " " : "", pp_recompute_name((pp_recompute)f->recompute));
    if (f->recompute_layers >= 0)
        ADD("%s--recompute-layers %d", len ? " " : "", f->recompute_layers);
    if (f->sequence_parallel >= 0)
        ADD("%s--%ssequence-parallel", len ? " " : "", f->sequence_parallel ? "" : "no-");
    if (f->shard >= 0)
        ADD("%s--shard %s", len ? " " : "", pp_shard_name((pp_shard)f->shard));
    if (f->cp >= 1)
        ADD("%s--cp %d", len ? " " : "", f->cp);
    if (f->ep >= 1)
        ADD("%s--ep %d", len ? " " : "", f->ep);
#undef ADD
    return buf;
}

int pp_tune_recomputed_layers(const pp_config *c, int layers)
{
    if (c->recompute == PP_RECOMPUTE_SELECTIVE)
        return layers;
    if (c->recompute != PP_RECOMPUTE_FULL)
        return 0;
    return c->recompute_layers > 0 && c->recompute_layers < layers ? c->recompute_layers
                                                                   : layers;
}

int pp_tune_shard_ranks(const pp_config *c)
{
    return c->d * (c->cp > 1 ? c->cp : 1);
}

const char *pp_tune_axes_rule(const pp_tune_model *m, const pp_config *c, char *why, size_t n)
{
    if (c->sequence_parallel && c->t < 2)
        return snprintf(why, n, "sequence parallelism needs t > 1 (t = %d)", c->t), why;
    if (c->recompute_layers > 0 && c->recompute != PP_RECOMPUTE_FULL)
        return snprintf(why, n, "--recompute-layers %d needs recompute full (got %s)",
                        c->recompute_layers, pp_recompute_name(c->recompute)),
               why;
    if (c->cp > 1 && m->seq % (2 * c->cp))
        return snprintf(why, n,
                        "cp = %d must divide the sequence %d into 2 cp chunks (causal load "
                        "balancing)",
                        c->cp, m->seq),
               why;
    const pp_moe_cfg *e = &m->block.moe;
    if (c->ep > 1 && e->experts <= 0)
        return snprintf(why, n, "ep = %d needs a mixture-of-experts model (%s has no experts)",
                        c->ep, m->name),
               why;
    if (c->ep > 1 && e->experts % c->ep)
        return snprintf(why, n, "ep = %d must divide the %d routed experts (each expert-parallel "
                                "rank holds experts/ep whole experts)", c->ep, e->experts),
               why;
    if (c->ep > 1 && pp_tune_shard_ranks(c) % c->ep)
        return snprintf(why, n, "ep = %d must divide d x cp = %d (expert-parallel ranks are "
                                "carved out of the data- and context-parallel ranks, as "
                                "Megatron-Core builds its expert groups)",
                        c->ep, pp_tune_shard_ranks(c)),
               why;
    if (c->cp > 1 && c->sequence_parallel && (m->seq / c->cp) % c->t)
        return snprintf(why, n, "sequence parallelism needs t = %d to divide the %d tokens a "
                                "context-parallel rank holds", c->t, m->seq / c->cp),
               why;
    return NULL;
}

/* The k values of block recomputation for q layers per chunk: q/4, q/2, 3q/4 rounded, distinct,
 * in 1..q-1; returns their count. */
static int block_ks(int q, int out[3])
{
    int n = 0;
    for (int i = 1; i <= 3; i++) {
        int k = (q * i + 2) / 4;
        if (k >= 1 && k < q && (n == 0 || out[n - 1] != k))
            out[n++] = k;
    }
    return n;
}

/* The recompute settings (value, k) tried for c, into rc[] and ks[]; returns their count. */
static int recompute_values(const pp_tune_axes_ctx *a, const pp_config *c, int *rc, int *ks)
{
    int n = 0;
    const pp_tune_force *f = a->force;
    if (f->recompute >= 0) {
        rc[n] = f->recompute, ks[n++] = f->recompute_layers > 0 ? f->recompute_layers : 0;
        if (f->recompute == PP_RECOMPUTE_FULL && f->recompute_layers < 0) {
            int k[3], nk = block_ks(a->m->layers / (c->p * c->v), k);
            for (int i = 0; i < nk; i++)
                rc[n] = PP_RECOMPUTE_FULL, ks[n++] = k[i];
        }
        return n;
    }
    if (f->recompute_layers > 0) { /* a k given alone means full on the first k */
        rc[n] = PP_RECOMPUTE_FULL, ks[n++] = f->recompute_layers;
        return n;
    }
    rc[n] = PP_RECOMPUTE_NONE, ks[n++] = 0;
    if (!a->o->flash_attention)
        rc[n] = PP_RECOMPUTE_SELECTIVE, ks[n++] = 0;
    rc[n] = PP_RECOMPUTE_FULL, ks[n++] = 0;
    int k[3], nk = block_ks(a->m->layers / (c->p * c->v), k);
    for (int i = 0; i < nk; i++)
        rc[n] = PP_RECOMPUTE_FULL, ks[n++] = k[i];
    return n;
}

/* The ep values tried for c: forced, else 1 for a dense model, else every divisor of the
 * experts dividing d x cp up to max_ep; into out[], returns their count. */
static int ep_values(const pp_tune_axes_ctx *a, const pp_config *c, int *out, int max)
{
    if (a->force->ep >= 1)
        return out[0] = a->force->ep, 1;
    int E = a->m->block.moe.experts, n = 0, dcp = pp_tune_shard_ranks(c);
    int hi = a->max_ep > 0 ? a->max_ep : PP_TUNE_MAX_EP_DEFAULT;
    out[n++] = 1;
    for (int e = 2; E > 0 && e <= E && e <= hi && n < max; e++)
        if (E % e == 0 && dcp % e == 0)
            out[n++] = e;
    return n;
}

pp_status pp_tune_axes_each(const pp_tune_axes_ctx *a, pp_config c)
{
    const pp_tune_force *f = a->force;
    int rc[8], ks[8];
    int n_rc = recompute_values(a, &c, rc, ks);
    int sp_lo = f->sequence_parallel >= 0 ? f->sequence_parallel : 0;
    int sp_hi = f->sequence_parallel >= 0 ? f->sequence_parallel : c.t > 1;
    int replicated = pp_tune_shard_ranks(&c) <= 1;
    int sh_lo = f->shard >= 0 ? f->shard : PP_SHARD_NONE;
    int sh_hi = f->shard >= 0       ? f->shard
                : replicated        ? PP_SHARD_NONE
                                    : PP_SHARD_GRADIENTS;
    int eps[32], n_ep = ep_values(a, &c, eps, 32);
    for (int sp = sp_lo; sp <= sp_hi; sp++)
        for (int sh = sh_lo; sh <= sh_hi; sh++)
            for (int i = 0; i < n_rc; i++)
                for (int k = 0; k < n_ep; k++) {
                    c.sequence_parallel = sp;
                    c.shard = (pp_shard)sh;
                    c.recompute = (pp_recompute)rc[i];
                    c.recompute_layers = ks[i];
                    c.ep = eps[k];
                    PP_TRY(a->fn(a->ctx, &c));
                }
    return PP_OK;
}

int pp_tune_axes_cp_max(const pp_tune_axes_ctx *a, int max_cp)
{
    if (a->force->cp >= 1)
        return a->force->cp;
    return max_cp > 0 ? max_cp : 16;
}

char *pp_tune_axes_str(const pp_config *c, char *buf, size_t n)
{
    char k[24] = "";
    if (c->recompute == PP_RECOMPUTE_FULL && c->recompute_layers > 0)
        snprintf(k, sizeof k, "-%d", c->recompute_layers);
    const char *rc = c->recompute == PP_RECOMPUTE_SELECTIVE ? "sel"
                     : c->recompute == PP_RECOMPUTE_FULL    ? "full"
                                                            : "";
    const char *sp = c->sequence_parallel && c->t > 1 ? "sp" : "";
    const char *sh = c->shard == PP_SHARD_OPTIMIZER   ? "z1"
                     : c->shard == PP_SHARD_GRADIENTS ? "z2"
                                                      : "";
    snprintf(buf, n, "%s%s%s%s%s%s", rc, k, rc[0] && (sp[0] || sh[0]) ? "," : "", sp,
             sp[0] && sh[0] ? "," : "", sh);
    size_t len = strlen(buf);
    if (c->ep > 1 && len < n)
        snprintf(buf + len, n - len, "%sep%d", len ? "," : "", c->ep);
    if (!buf[0])
        snprintf(buf, n, "-");
    return buf;
}

char *pp_tune_axes_describe(const pp_config *c, char *buf, size_t n)
{
    char rc[64];
    if (c->recompute == PP_RECOMPUTE_FULL && c->recompute_layers > 0)
        snprintf(rc, sizeof rc, "recompute full on the first %d layers of each stage",
                 c->recompute_layers);
    else
        snprintf(rc, sizeof rc, "recompute %s", pp_recompute_name(c->recompute));
    snprintf(buf, n, "%s; sequence parallelism %s; %s; context parallelism %d", rc,
             c->sequence_parallel && c->t > 1 ? "on" : "off",
             c->shard == PP_SHARD_OPTIMIZER   ? "optimizer state sharded (ZeRO-1)"
             : c->shard == PP_SHARD_GRADIENTS ? "optimizer state and gradients sharded (ZeRO-2)"
                                              : "replicated optimizer",
             c->cp);
    size_t len = strlen(buf);
    if (c->ep > 1 && len < n)
        snprintf(buf + len, n - len, "; expert parallelism %d", c->ep);
    return buf;
}
