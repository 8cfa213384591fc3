/* registry.c — the one table of schedule generators. Add a generator here and nowhere else. */
#include <string.h>

#include "gen.h"

static const pp_sched_generator generators[] = {
    {"gpipe", "all forwards, then all backwards (GPipe)", 0, pp_gen_gpipe},
    {"1f1b", "one forward one backward after a warm-up (PipeDream-Flush, Megatron)", 0,
     pp_gen_1f1b},
    {"interleaved", "Megatron virtual pipeline: v chunks per rank, groups of G micro-batches", 0,
     pp_gen_interleaved},
    {"chimera", "bidirectional: two model replicas in opposite directions (Chimera, SC'21)", 1,
     pp_gen_chimera},
    {"bitpipe", "bidirectional, interleaved, V-shaped, eager gradient sync (BitPipe)", 1,
     pp_gen_bitpipe},
};

const pp_sched_generator *pp_sched_generators(int *n)
{
    *n = (int)(sizeof generators / sizeof generators[0]);
    return generators;
}

const pp_sched_generator *pp_sched_find(const char *name)
{
    int n;
    const pp_sched_generator *g = pp_sched_generators(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(g[i].name, name) == 0)
            return &g[i];
    PP_ERR(PP_ERR_NOTFOUND,
           "unknown schedule \"%s\": expected one of gpipe, 1f1b, interleaved, chimera, bitpipe",
           name);
    return NULL;
}

pp_status pp_sched_generate(const char *kind, const pp_sched_params *p, pp_sched **out)
{
    *out = NULL;
    const pp_sched_generator *g = pp_sched_find(kind);
    if (!g)
        return PP_ERR_NOTFOUND;
    if (p->ranks < 1)
        return PP_ERR(PP_ERR_INVALID, "%s needs at least 1 rank, got %d", kind, p->ranks);
    if (p->microbatches < 1)
        return PP_ERR(PP_ERR_INVALID, "%s needs at least 1 micro-batch, got %d", kind,
                      p->microbatches);
    pp_sched *s = NULL;
    PP_TRY(g->generate(p, &s));
    pp_status st = pp_sched_lower_comms(s);
    if (st != PP_OK) {
        pp_sched_destroy(s);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = s;
    return PP_OK;
}
