/* export_util.c — what every exporter asks of a profile's chosen configuration: its schedule's
 * registry row, whether it is a virtual pipeline, the nodes it spans, and the layers of each of
 * its stages as the schedules split them (pp_sched_split_layers: the one split). Private to
 * profiles/ (export_impl.h). Not here: which target runs what (export.c), and any target's
 * names or syntax (export_<target>.c). */
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

pp_status pp_export_stage_layers(const pp_profile *p, int *layers, int *stages)
{
    const pp_config *c = &p->chosen.config;
    /* one pipe: its p x v stages (interleaved, V-shaped); two pipes: p per pipe */
    int S = c->p * (pp_export_desc(c)->pipes == 1 ? c->v : 1);
    int begin[PP_EXPORT_MAX_STAGES + 1];
    if (S < 1 || S > PP_EXPORT_MAX_STAGES)
        return PP_ERR(PP_ERR_INVALID, "%s: %d pipeline stages: expected 1..%d", p->name, S,
                      PP_EXPORT_MAX_STAGES);
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
