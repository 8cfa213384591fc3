/* registry.c — the one table of schedules: each row is the schedule's descriptor (its shape and
 * its rules, with their reason text) and its generator. Add a schedule here and nowhere else;
 * the rest of the program asks these rows and never compares schedule names. */
#include <string.h>

#include "gen.h"

static const pp_sched_desc schedules[] = {
    {.name = "gpipe", .title = "GPipe",
     .summary = "all forwards, then all backwards (GPipe)",
     .pipes = 1, .weight_replicas = 1, .chunks = 1, .min_ranks = 1,
     .torch_name = "GPipe", .generate = pp_gen_gpipe},
    {.name = "1f1b", .title = "1F1B",
     .summary = "one forward one backward after a warm-up (PipeDream-Flush, Megatron)",
     .pipes = 1, .weight_replicas = 1, .chunks = 1, .min_ranks = 1,
     .torch_name = "1F1B", .generate = pp_gen_1f1b},
    /* Megatron's virtual pipeline (Narayanan et al., SC'21): v >= 2 chunks per rank, micro-batches
     * in groups of D <= G <= N; N mod G below D leaves dependency bubbles. One rank cannot
     * interleave. */
    {.name = "interleaved", .title = "interleaved 1F1B",
     .summary = "Megatron virtual pipeline: v chunks per rank, groups of G micro-batches",
     .pipes = 1, .weight_replicas = 1, .chunks = 0, .chunks_min = 2, .grouped = 1,
     .min_ranks = 2,
     .torch_name = "Interleaved1F1B", .generate = pp_gen_interleaved},
    /* Bidirectional: the two pipes meet in the middle, so D is even, and each pipe's N/2
     * micro-batches run in groups of D/2, so N is a multiple of D (Li & Hoefler, SC'21; BitPipe). */
    {.name = "chimera", .title = "Chimera",
     .summary = "bidirectional: two model replicas in opposite directions (Chimera, SC'21)",
     .pipes = 2, .weight_replicas = 2, .chunks = 1, .min_ranks = 2, .even_ranks = 1,
     .n_multiple_of_ranks = 1, .split_ends_together = 1, .megatron = PP_SCHED_MEGATRON_NONE,
     .generate = pp_gen_chimera},
    {.name = "bitpipe", .title = "BitPipe",
     .summary = "bidirectional, interleaved, V-shaped, eager gradient sync (BitPipe)",
     .pipes = 2, .weight_replicas = 2, .chunks = 2, .min_ranks = 2, .even_ranks = 1,
     .n_multiple_of_ranks = 1, .split_ends_together = 1, .megatron = PP_SCHED_MEGATRON_FORK,
     .megatron_flag = "--enable-bitpipe-schedule", /* BitPipe's Megatron fork */
     .generate = pp_gen_bitpipe},
    /* The zero-bubble family (split backward: I, W). Megatron-LM upstream has none of them (the
     * authors' fork, sail-sg/zero-bubble-pipeline-parallelism, has its own flags); PyTorch
     * pipelining runs them (ScheduleInterleavedZeroBubble, ScheduleZBVZeroBubble,
     * ScheduleDualPipeV). In the tuner's default search: its time model prices I and W
     * (tuner/timemodel.c) and its memory model what W holds (tuner/memory.c). */
    {.name = "zb-h1", .title = "ZB-H1",
     .summary = "1F1B with split backward, W passes fill the bubble (Zero Bubble, ICLR'24)",
     .pipes = 1, .weight_replicas = 1, .chunks = 1, .min_ranks = 1, .split_backward = 1,
     .megatron = PP_SCHED_MEGATRON_NONE,
     .torch_name = "InterleavedZeroBubble", .generate = pp_gen_zbh1},
    {.name = "zbv", .title = "ZB-V",
     .summary = "V-shaped zero bubble: two chunks per rank in a V, split backward (ZB-V)",
     .pipes = 1, .weight_replicas = 1, .chunks = 2, .min_ranks = 1, .split_backward = 1,
     .megatron = PP_SCHED_MEGATRON_NONE,
     .torch_name = "ZBVZeroBubble", .generate = pp_gen_zbv},
    /* PyTorch's ScheduleDualPipeV refuses fewer micro-batches than stages. */
    {.name = "dualpipev", .title = "DualPipeV",
     .summary = "DeepSeek DualPipe in V form: paired F/B of two micro-batches (DualPipeV)",
     .pipes = 1, .weight_replicas = 1, .chunks = 2, .min_ranks = 1, .n_min_stages = 1,
     .split_backward = 1, .megatron = PP_SCHED_MEGATRON_NONE,
     .torch_name = "DualPipeV", .generate = pp_gen_dualpipev},
};

#define N_SCHEDULES ((int)(sizeof schedules / sizeof schedules[0]))

const pp_sched_desc *pp_sched_generators(int *n)
{
    *n = N_SCHEDULES;
    return schedules;
}

const pp_sched_desc *pp_sched_lookup(const char *name)
{
    for (int i = 0; name && i < N_SCHEDULES; i++)
        if (strcmp(schedules[i].name, name) == 0)
            return &schedules[i];
    return NULL;
}

const pp_sched_desc *pp_sched_find(const char *name)
{
    const pp_sched_desc *d = pp_sched_lookup(name);
    if (d)
        return d;
    char known[256];
    PP_ERR(PP_ERR_NOTFOUND, "unknown schedule \"%s\": expected one of %s", name ? name : "",
           pp_sched_names(PP_SCHED_MEGATRON_NONE, ", ", known, sizeof known));
    return NULL;
}

char *pp_sched_names(pp_sched_megatron at_most, const char *sep, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < N_SCHEDULES && len < n; i++)
        if (schedules[i].megatron <= at_most)
            len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? sep : "", schedules[i].name);
    return buf;
}

int pp_sched_desc_searched(const pp_sched_desc *d, const char *list)
{
    if (!list || !*list)
        return !d->opt_in;
    size_t n = strlen(d->name);
    for (const char *p = list; (p = strstr(p, d->name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

pp_status pp_sched_chunks_option(const pp_sched_desc *d, int chunks)
{
    if (!d || !d->chunks || chunks == 0 || chunks == d->chunks)
        return PP_OK;
    return PP_ERR(PP_ERR_INVALID,
                  "--chunks %d: %s has %d chunk%s per rank%s; --chunks is for the schedules of "
                  "tunable chunks (interleaved)",
                  chunks, d->name, d->chunks, d->chunks == 1 ? "" : "s",
                  d->pipes == 2 ? " per pipe" : "");
}

int pp_sched_desc_chunks(const pp_sched_desc *d, int chunks)
{
    if (d->chunks)
        return d->chunks;
    return chunks ? chunks : d->chunks_min;
}

int pp_sched_desc_group(const pp_sched_desc *d, int ranks, int group)
{
    if (!d->grouped)
        return 0;
    return group ? group : ranks;
}

int pp_sched_desc_period(const pp_sched_desc *d, const pp_sched_params *p)
{
    if (d->grouped)
        return pp_sched_desc_group(d, p->ranks, p->group);
    return d->n_multiple_of_ranks ? p->ranks : 1;
}

pp_status pp_sched_desc_check(const pp_sched_desc *d, const pp_sched_params *p)
{
    const char *k = d->name;
    int D = p->ranks, N = p->microbatches;
    if (D < 1)
        return PP_ERR(PP_ERR_INVALID, "%s needs at least 1 rank, got %d", k, D);
    if (N < 1)
        return PP_ERR(PP_ERR_INVALID, "%s needs at least 1 micro-batch, got %d", k, N);
    if (d->even_ranks && (D < d->min_ranks || D % 2 != 0))
        return PP_ERR(PP_ERR_INVALID, "%s needs an even number of ranks, got %d", k, D);
    if (D < d->min_ranks)
        return PP_ERR(PP_ERR_INVALID, "%s needs at least %d ranks, got %d", k, d->min_ranks, D);
    if (d->n_multiple_of_ranks && N % D != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "%s needs the micro-batches to be a multiple of the ranks (N mod D = 0), "
                      "got N = %d, D = %d",
                      k, N, D);
    /* chunks: a fixed count refuses another one where the schedule has a choice to refuse
     * (bidirectional, V-shaped: --chunks is a shape, not ignored); the single-pipe ones of one
     * chunk take v = 1. */
    if (d->chunks && (d->pipes == 2 || d->chunks > 1) && p->chunks != 0 && p->chunks != d->chunks) {
        if (d->pipes == 1)
            return PP_ERR(PP_ERR_INVALID, "%s has %d chunks per rank, got --chunks %d", k,
                          d->chunks, p->chunks);
        return PP_ERR(PP_ERR_INVALID,
                      "%s has %d chunk%s per rank per pipe (%d in all), got --chunks %d", k,
                      d->chunks, d->chunks == 1 ? "" : "s", d->pipes * d->chunks, p->chunks);
    }
    int v = pp_sched_desc_chunks(d, p->chunks);
    PP_TRY(pp_sched_budget_check(D, N, v < 1 ? 1 : v));
    if (d->n_min_stages && N < v * D)
        return PP_ERR(PP_ERR_INVALID,
                      "%s needs at least as many micro-batches as stages (N >= %d x D = %d), "
                      "got N = %d",
                      k, v, v * D, N);
    if (!d->chunks && v < d->chunks_min)
        return PP_ERR(PP_ERR_INVALID, "%s needs at least %d chunks per rank (--chunks), got %d",
                      k, d->chunks_min, v);
    if (d->grouped) {
        int G = pp_sched_desc_group(d, D, p->group);
        if (G < D)
            return PP_ERR(PP_ERR_INVALID,
                          "%s needs a group size of at least the ranks (G >= D): G = %d, D = %d",
                          k, G, D);
        if (G > N)
            return PP_ERR(PP_ERR_INVALID,
                          "%s needs the group size within the micro-batches (G <= N): G = %d, "
                          "N = %d",
                          k, G, N);
        if (N % G != 0 && N % G < D)
            return PP_ERR(PP_ERR_INVALID,
                          "%s needs N mod G = 0 or N mod G >= D (else dependency bubbles): "
                          "N = %d, G = %d, D = %d",
                          k, N, G, D);
    }
    return PP_OK;
}

pp_status pp_sched_generate_compute(const char *kind, const pp_sched_params *p, pp_sched **out)
{
    *out = NULL;
    const pp_sched_desc *d = pp_sched_find(kind);
    if (!d)
        return PP_ERR_NOTFOUND;
    PP_TRY(pp_sched_desc_check(d, p));
    pp_sched_params q = *p;
    q.chunks = pp_sched_desc_chunks(d, p->chunks);
    q.group = pp_sched_desc_group(d, p->ranks, p->group);
    return d->generate(&q, out);
}

pp_status pp_sched_generate(const char *kind, const pp_sched_params *p, pp_sched **out)
{
    *out = NULL;
    pp_sched *s = NULL;
    PP_TRY(pp_sched_generate_compute(kind, p, &s));
    pp_status st = pp_sched_lower_comms(s);
    if (st != PP_OK) {
        pp_sched_destroy(s);
        return pp_err_trace(st, __FILE__, __LINE__);
    }
    *out = s;
    return PP_OK;
}
