/* export_util.c — what every exporter asks of a profile's chosen configuration: its schedule's
 * registry row, whether it is a virtual pipeline, the nodes it spans, and the layers of each of
 * its stages as the schedules split them (pp_sched_split_layers: the one split). Private to
 * profiles/ (export_impl.h). Not here: which target runs what (export.c), and any target's
 * names or syntax (export_<target>.c). */
#include <stdlib.h>
#include <string.h>

#include "export_impl.h"

const pp_sched_desc *pp_export_desc(const pp_config *c)
{
    return pp_sched_lookup(c->schedule);
}

int pp_export_virtual(const pp_config *c)
{
    return pp_export_desc(c)->chunks == 0 && c->v > 1;
}

void pp_export_nodes(const pp_profile *p, int *devices, int *nodes)
{
    const pp_config *c = &p->chosen.config;
    long gpus = (long)c->p * c->t * c->cp * c->d; /* the reader bounded it by the cluster's */
    int per_node = p->cluster.gpus_per_node;
    *devices = gpus < per_node ? (int)gpus : per_node;
    *nodes = (int)((gpus + *devices - 1) / *devices);
}

int pp_export_split_even(const pp_config *c)
{
    return !c->uneven && !c->first_layers && !c->last_layers;
}

pp_status pp_export_stages(const pp_profile *p, int *stages)
{
    /* one pipe: its p x v stages (interleaved, V-shaped); two pipes: p per pipe (64-bit: a
     * product of two profile fields) */
    long long n = pp_config_stages(&p->chosen.config);
    if (n < 1 || n > PP_EXPORT_MAX_STAGES || n > p->model.layers)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: %lld pipeline stages (p x v): expected 1..%d and at most the model's "
                      "%d layers",
                      p->name, n, PP_EXPORT_MAX_STAGES, p->model.layers);
    *stages = (int)n;
    return PP_OK;
}

pp_status pp_export_stage_layers(const pp_profile *p, int *layers, int *stages)
{
    const pp_config *c = &p->chosen.config;
    int S = 0, begin[PP_EXPORT_MAX_STAGES + 1];
    PP_TRY(pp_export_stages(p, &S));
    pp_sched_params sp;
    pp_config_sched_params(c, p->model.layers, &sp);
    pp_sched_split split = pp_sched_params_split(&sp);
    PP_TRY(pp_sched_split_layers(p->model.layers, S, &split, begin));
    for (int k = 0; k < S; k++)
        layers[k] = begin[k + 1] - begin[k];
    *stages = S;
    return PP_OK;
}

pp_status pp_export_edge_layers(const pp_profile *p, int *first, int *last)
{
    int layers[PP_EXPORT_MAX_STAGES];
    int S;
    PP_TRY(pp_export_stage_layers(p, layers, &S));
    *first = layers[0];
    *last = layers[S - 1];
    return PP_OK;
}

void pp_export_provenance(const pp_profile *p, FILE *fp)
{
    pp_fput_quoted(fp, p->name);
    fprintf(fp, "\n# cluster ");
    pp_fput_quoted(fp, p->cluster.name);
    fprintf(fp, " x%d (", p->cluster.nodes);
    pp_fput_quoted(fp, p->cluster.fingerprint);
    fprintf(fp, "), model ");
    pp_fput_quoted(fp, p->model.name);
    fprintf(fp, ", %s schedule\n", p->chosen.config.schedule);
}

int pp_export_megatron_split_says(const pp_profile *p)
{
    const pp_config *c = &p->chosen.config;
    int layers[PP_EXPORT_MAX_STAGES], S;
    if (pp_export_stage_layers(p, layers, &S) != PP_OK)
        return 0;
    int L = p->model.layers;
    if (pp_export_split_even(c))
        return L % S == 0;
    if (pp_export_virtual(c))
        return 0;
    for (int k = 2; k < S - 1; k++) /* the middle stages: one count */
        if (layers[k] != layers[1])
            return 0;
    return 1;
}

pp_status pp_export_layout(const pp_profile *p, char *buf, size_t n)
{
    int layers[PP_EXPORT_MAX_STAGES], S;
    PP_TRY(pp_export_stage_layers(p, layers, &S));
    size_t len = (size_t)snprintf(buf, n, "E");
    for (int k = 0; k < S && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%st*%d", k ? "|" : "", layers[k]);
    if (len < n)
        len += (size_t)snprintf(buf + len, n - len, "L");
    if (len >= n)
        return PP_ERR(PP_ERR_INVALID, "%s: the layout of %d stages does not fit %zu bytes",
                      p->name, S, n);
    return PP_OK;
}

char *pp_export_float(double x, char *buf, size_t n)
{
    char s[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, sizeof s, "%.*g", digits, x);
        if (strtod(s, NULL) == x)
            break;
    }
    if (!strpbrk(s, ".ni")) { /* no point (nor nan / inf): 1e-06 -> 1.0e-06, 2 -> 2.0 */
        char *e = strchr(s, 'e');
        snprintf(buf, n, "%.*s.0%s", e ? (int)(e - s) : (int)strlen(s), s, e ? e : "");
    } else {
        snprintf(buf, n, "%s", s);
    }
    return buf;
}

void pp_export_recompute_method(const pp_config *c, const char **method, int *layers)
{
    int block = c->recompute_layers > 0;
    *method = block ? "block" : "uniform";
    *layers = block ? c->recompute_layers : 1;
}

pp_status pp_export_no_zero2(const pp_profile *p, const char *target)
{
    if (p->chosen.config.shard != PP_SHARD_GRADIENTS)
        return PP_OK;
    return PP_ERR(PP_ERR_UNSUPPORTED,
                  "%s: the configuration shards the gradients over the data-parallel ranks "
                  "(shard \"gradients\", ZeRO-2), which %s cannot express (its distributed "
                  "optimizer shards only the optimizer state); Megatron-LM says it "
                  "(--format megatron: --use-megatron-fsdp --data-parallel-sharding-strategy "
                  "optim_grads), or search with --shard optimizer",
                  p->name, target);
}

char *pp_export_moe_layer_freq(const pp_profile *p, char *buf, size_t n, int *list)
{
    const pp_profile_moe *e = &p->model.moe;
    *list = e->first_dense > 0 || (e->every > 1 && e->phase != 0);
    if (!*list) {
        snprintf(buf, n, "%d", e->every > 1 ? e->every : 1);
        return buf;
    }
    size_t len = (size_t)snprintf(buf, n, "(");
    int run = 0, prev = -1;
    for (int l = 0; l <= p->model.layers && len < n; l++) {
        int moe = l < p->model.layers && l >= e->first_dense &&
                  (e->every <= 1 || l % e->every == e->phase);
        if (l < p->model.layers && moe == prev) {
            run++;
            continue;
        }
        if (prev >= 0)
            len += (size_t)snprintf(buf + len, n - len, "%s[%d]*%d", buf[len - 1] == '(' ? "" : "+",
                                    prev, run);
        prev = moe, run = 1;
    }
    if (len < n)
        snprintf(buf + len, n - len, ")");
    return buf;
}

pp_status pp_export_moe_router(const pp_profile *p, const char *target, const char **score,
                               int *pre_softmax)
{
    const pp_profile_moe *e = &p->model.moe;
    int sigmoid = e->router && !strcmp(e->router, "sigmoid");
    if (sigmoid && !e->norm_topk && e->top_k > 1)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: a sigmoid router without renormalised top-k weights: %s's "
                      "(Megatron-Core's) sigmoid router always renormalises them",
                      p->name, target);
    *score = sigmoid ? "sigmoid" : "softmax";
    *pre_softmax = !sigmoid && !e->norm_topk;
    return PP_OK;
}

pp_status pp_export_no_moe(const pp_profile *p, const char *target, const char *why)
{
    if (p->model.moe.experts > 0)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: a mixture-of-experts model (%d experts, top-%d): %s %s; the "
                      "Megatron-LM and NeMo 2 exports carry it",
                      p->name, p->model.moe.experts, p->model.moe.top_k, target, why);
    if (p->model.qk_norm)
        return PP_ERR(PP_ERR_UNSUPPORTED,
                      "%s: per-head q/k RMSNorm (Qwen3's q_norm, k_norm): %s %s; the "
                      "Megatron-LM and NeMo 2 exports carry it (qk_layernorm)",
                      p->name, target, why);
    return PP_OK;
}
