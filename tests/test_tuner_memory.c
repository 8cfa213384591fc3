/* test_tuner_memory.c — the per-rank memory model: a case computed by hand, the rows of
 * Korthikanti's Table 2, the rank's in-flight peak agreeing with the simulator's, and the
 * search's memory from a schedule's shape equal to the walk's. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "mem_shape.h"
#include "pp_tune.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* A GPT-shaped model small enough to count by hand. */
static pp_tune_model mini(void)
{
    pp_tune_model m = {.name = "mini", .layers = 4, .hidden = 64, .heads = 4, .kv_heads = 4,
                       .ffn = 256, .vocab = 100, .seq = 16, .gated_mlp = 0, .norm_bias = 1,
                       .linear_bias = 1, .learned_pos = 1, .tied_embed = 1, .global_batch = 8};
    return m;
}

Test(tuner_memory, hand_computed_1f1b_two_ranks)
{
    pp_tune_model m = mini();
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 1, .t = 1, .N = 4};
    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = 4};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK, "%s", pp_err_msg());
    pp_tune_rank_mem mem[2];
    cr_assert_eq(pp_tune_memory(&m, &c, s, &o, mem), PP_OK, "%s", pp_err_msg());

    /* Parameters. Block: attention 4h^2 + 4h = 16640, MLP 2 h ffn + ffn + h = 33088, two
     * LayerNorms 4h = 256 -> 49984. Rank 0: 2 blocks + embedding V h + s h = 7424 -> 107392.
     * Rank 1: 2 blocks + final LayerNorm 128 + the tied head's copy V h = 6400 -> 106496. */
    cr_assert_float_eq(mem[0].params, 107392.0, 1e-6);
    cr_assert_float_eq(mem[1].params, 106496.0, 1e-6);
    /* 18 bytes per parameter: 2 (bf16) + 4 (fp32 main grad) + 12 (Adam). */
    cr_assert_float_eq(mem[0].weights, 2 * 107392.0, 1e-6);
    cr_assert_float_eq(mem[0].grads, 4 * 107392.0, 1e-6);
    cr_assert_float_eq(mem[0].optim, 12 * 107392.0, 1e-6);
    /* Activations per block per micro-batch: s b h (10 + 24) = 2048 * 34 = 69632 bytes.
     * Rank 0 (1F1B warm-up 1): F0 F1 B0 ... peak 2 micro-batches of 2 blocks + embedding
     * (token ids 8 s b = 256, dropout mask s b h = 2048): 2 * (139264 + 2304) = 283136.
     * Rank 1: 1 in flight: 139264 + head (4 s b h = 8192, fp32 logits 4 s b V = 12800). */
    cr_assert_float_eq(mem[0].acts, 283136.0, 1e-6, "%f", mem[0].acts);
    cr_assert_float_eq(mem[1].acts, 160256.0, 1e-6, "%f", mem[1].acts);
    cr_assert_float_eq(mem[0].peak_units, 2.0, 1e-12);
    cr_assert_float_eq(mem[1].peak_units, 1.0, 1e-12);
    /* Communication: one outgoing activation and one gradient, 2 s b h bytes each. */
    cr_assert_float_eq(mem[0].comm, 8192.0, 1e-6);
    /* Workspace: MLP backward temporaries 2 * s b ffn * 2 bytes = 32768 + 1.5 GiB reserve. */
    cr_assert_float_eq(mem[0].workspace, 32768.0 + 1.5 * GIB, 1e-3);
    double total0 = 18 * 107392.0 + 283136.0 + 8192.0 + 32768.0 + 1.5 * GIB;
    cr_assert_float_eq(mem[0].total, total0, 1e-3);
    pp_sched_destroy(s);
}

/* Static bytes per parameter of the mini model's rank 0 under shard (d = 4, cp as given). */
static double static_per_param(pp_shard shard, int cp, pp_tune_rank_mem *out)
{
    pp_tune_model m = mini();
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 4, .t = 1, .N = 4,
                   .shard = shard, .cp = cp};
    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = 4};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_tune_rank_mem mem[2];
    cr_assert_eq(pp_tune_memory(&m, &c, s, &o, mem), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
    if (out)
        *out = mem[0];
    return (mem[0].weights + mem[0].grads + mem[0].optim) / mem[0].params;
}

Test(tuner_memory, sharding_divides_optimizer_then_gradients_over_d_times_cp)
{
    cr_assert_float_eq(static_per_param(PP_SHARD_NONE, 1, NULL), 18.0, 1e-12);
    /* ZeRO-1 (Megatron's distributed optimizer): 2 + 4 + 12/d */
    cr_assert_float_eq(static_per_param(PP_SHARD_OPTIMIZER, 1, NULL), 6.0 + 12.0 / 4, 1e-12);
    /* ZeRO-2: the fp32 main gradient sharded too, 2 + 16/d */
    cr_assert_float_eq(static_per_param(PP_SHARD_GRADIENTS, 1, NULL), 2.0 + 16.0 / 4, 1e-12);
    /* context-parallel ranks hold the same weights: the shards are over d x cp */
    cr_assert_float_eq(static_per_param(PP_SHARD_GRADIENTS, 2, NULL), 2.0 + 16.0 / 8, 1e-12);
    /* ZeRO-2 holds one layer's 16-bit gradient until its reduce-scatter: 2 x 49984 bytes more
     * workspace than ZeRO-1 */
    pp_tune_rank_mem z1, z2;
    static_per_param(PP_SHARD_OPTIMIZER, 1, &z1);
    static_per_param(PP_SHARD_GRADIENTS, 1, &z2);
    cr_assert_float_eq(z2.workspace - z1.workspace, 2.0 * 49984, 1e-6);
}

Test(tuner_memory, context_parallelism_divides_every_activation_by_cp)
{
    pp_tune_rank_mem one, two;
    static_per_param(PP_SHARD_NONE, 1, &one);
    static_per_param(PP_SHARD_NONE, 2, &two);
    cr_assert_float_eq(two.acts, one.acts / 2, 1e-6, "%f vs %f", two.acts, one.acts);
    cr_assert_float_eq(two.comm, one.comm / 2, 1e-6);
}

Test(tuner_memory, korthikanti_table2_rows_for_gpt_shapes)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("gpt-13b", &m), PP_OK);
    double s = m.seq, h = m.hidden, a = m.heads;
    int b = 2;
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    for (int t = 1; t <= 8; t *= 2) {
        double sbh = s * b * h;
        pp_config c = {.b = b, .t = t, .d = 1, .cp = 1};
        o.flash_attention = 0;
        c.recompute = PP_RECOMPUTE_NONE;
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o),
                           sbh * (10 + 24.0 / t + 5 * a * s / (h * t)), 1e-3, "t=%d", t);
        o.flash_attention = 1; /* the score term goes */
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o), sbh * (10 + 24.0 / t),
                           1e-3);
        o.flash_attention = 0;
        c.recompute = PP_RECOMPUTE_SELECTIVE;
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o), sbh * (10 + 24.0 / t),
                           1e-3);
        c.sequence_parallel = 1; /* Table 2's "tensor + sequence parallel" rows (t > 1) */
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o),
                           t > 1 ? sbh * 34.0 / t : sbh * 34.0, 1e-3);
        c.recompute = PP_RECOMPUTE_FULL; /* full + SP: each tensor rank its 1/t shard */
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o), 2 * sbh / t, 1e-3, "t=%d",
                           t);
        c.sequence_parallel = 0;
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o), 2 * sbh, 1e-3);
        c.recompute = PP_RECOMPUTE_NONE, c.cp = 4; /* context parallelism: s / cp tokens */
        cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o),
                           sbh / 4 * (10 + 24.0 / t + 5 * a * (s / 4) / (h * t)), 1e-3);
    }
}

/* Llama's block, counted per variant (not GPT's 34 sbh): no dropout masks (8 outside the
 * tensor-parallel regions), grouped-query K/V (8 KV heads of 32: 2 x 2 x 1024/4096), SwiGLU's
 * three ffn-wide tensors (gate and up, which its backward needs, and its output):
 * 4 + 1 + 6 x 14336/4096 = 26 inside. Llama 3 405B, the case: full recomputation with
 * sequence parallelism keeps 2 sbh / t (the 1/t shard), not the whole input. */
Test(tuner_memory, llama_block_variant_and_full_recompute_shard)
{
    pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("llama3-8b", &m), PP_OK);
    cr_assert(m.gated_mlp && !m.linear_bias && m.kv_heads == 8 && m.heads == 32);
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    double sbh = (double)m.seq * 1 * m.hidden, inside = 4 + 1 + 6.0 * m.ffn / m.hidden;
    pp_config c = {.b = 1, .t = 4, .d = 1, .cp = 1};
    cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o), sbh * (8 + inside / 4), 1e-3);
    cr_assert_eq(pp_tune_model_preset("llama3-405b", &m), PP_OK);
    c = (pp_config){.b = 1, .t = 8, .d = 1, .cp = 1, .recompute = PP_RECOMPUTE_FULL,
                    .sequence_parallel = 1};
    double full_sp = pp_tune_act_bytes_per_layer(&m, &c, &o);
    c.sequence_parallel = 0;
    cr_assert_float_eq(pp_tune_act_bytes_per_layer(&m, &c, &o), 8 * full_sp, 1e-3);
    cr_assert_float_eq(full_sp, 2.0 * m.seq * m.hidden / 8, 1e-3);
}

/* Megatron's block method: the first k layers of each stage keep only their input, the rest
 * all of theirs. The mini model's rank 1 (2 layers, 1 in flight): k = 1 saves one layer's
 * 34 - 2 = 32 sbh. */
Test(tuner_memory, block_recomputation_of_the_first_k_layers)
{
    pp_tune_model m = mini();
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = 4};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &sp, &s), PP_OK);
    pp_tune_rank_mem none[2], k1[2], all[2];
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 2, .d = 1, .t = 1, .N = 4, .cp = 1};
    cr_assert_eq(pp_tune_memory(&m, &c, s, &o, none), PP_OK);
    c.recompute = PP_RECOMPUTE_FULL, c.recompute_layers = 1;
    cr_assert_eq(pp_tune_memory(&m, &c, s, &o, k1), PP_OK);
    c.recompute_layers = 0;
    cr_assert_eq(pp_tune_memory(&m, &c, s, &o, all), PP_OK);
    double sbh = 16.0 * 2 * 64;
    cr_assert_float_eq(none[1].acts - k1[1].acts, 32 * sbh, 1e-6);
    cr_assert_float_eq(none[1].acts - all[1].acts, 2 * 32 * sbh, 1e-6);
    pp_sched_destroy(s);
}

/* The in-flight peak the memory model walks equals the simulator's per-rank peak, for every
 * schedule, even and uneven. */
Test(tuner_memory, in_flight_peak_equals_the_simulators_for_every_schedule)
{
    pp_tune_model m = mini();
    m.layers = 22; /* 8 stages uneven: (22 + 2) / 8 = 3; 4 stages uneven: 6 */
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    int n;
    const pp_sched_desc *g = pp_sched_generators(&n);
    for (int i = 0; i < n; i++) {
        int v = !strcmp(g[i].name, "interleaved") || !strcmp(g[i].name, "bitpipe") ? 2 : 1;
        pp_sched_params sp = {.ranks = 4, .microbatches = 8, .layers = 22, .uneven = 1,
                              .chunks = !strcmp(g[i].name, "interleaved") ? 2 : 0};
        pp_sched *s;
        cr_assert_eq(pp_sched_generate(g[i].name, &sp, &s), PP_OK, "%s: %s", g[i].name,
                     pp_err_msg());
        pp_config c = {.p = 4, .v = v, .b = 1, .d = 1, .t = 1, .N = 8, .uneven = 1};
        c.schedule = g[i].name;
        pp_tune_rank_mem mem[4];
        cr_assert_eq(pp_tune_memory(&m, &c, s, &o, mem), PP_OK, "%s", pp_err_msg());
        pp_cost cost;
        pp_sim_result sim;
        cr_assert_eq(pp_cost_init_unit(&cost, s, 2.0), PP_OK);
        cr_assert_eq(pp_sim_run(s, &cost, 0, &sim), PP_OK, "%s", pp_err_msg());
        for (int r = 0; r < 4; r++)
            cr_assert_float_eq(mem[r].peak_units, sim.peak_activations[r], 1e-9,
                               "%s rank %d: walk %g vs simulator %g", g[i].name, r,
                               mem[r].peak_units, sim.peak_activations[r]);
        /* two replicas: a bidirectional rank holds about twice the weights of a 1F1B rank */
        if (g[i].pipes == 2)
            cr_assert(mem[1].params > 1.5 * (m.layers / 4.0) * 49984, "%s", g[i].name);
        pp_sim_result_fini(&sim);
        pp_cost_fini(&cost);
        pp_sched_destroy(s);
    }
}

/* One configuration's memory both ways: the walk (pp_tune_memory) and the search's shape of the
 * same schedule (mem_shape.c). Returns 1 when the shape gave the bytes, after checking every
 * field of every rank equals the walk's to the bit. */
static int shape_equals_walk(const pp_tune_model *m, const pp_config *c, const pp_sched *s,
                             const pp_tune_shape *sh)
{
    pp_tune_opts o;
    pp_tune_opts_default(&o);
    pp_tune_rank_mem walk[8], shaped[8];
    cr_assert_eq(pp_tune_memory(m, c, s, &o, walk), PP_OK, "%s", pp_err_msg());
    int exact = -1;
    cr_assert_eq(pp_tune_memory_shape(m, c, sh, &o, shaped, &exact), PP_OK, "%s", pp_err_msg());
    char cb[160];
    for (int r = 0; exact && r < c->p; r++)
        cr_assert(!memcmp(&walk[r], &shaped[r], sizeof walk[r]),
                  "%s %s rec %d/%d sp %d shard %d: rank %d acts %.17g (walk) vs %.17g (shape), "
                  "total %.17g vs %.17g",
                  m->name, pp_config_str(c, cb, sizeof cb), (int)c->recompute,
                  c->recompute_layers, c->sequence_parallel, (int)c->shard, r, walk[r].acts,
                  shaped[r].acts, walk[r].total, shaped[r].total);
    return exact;
}

/* The search computes a candidate's memory from its schedule's shape (the stage placement and
 * each rank's undominated in-flight count vectors, mem_shape.c) instead of walking the
 * schedule: for every schedule of the registry (4 ranks, 4 to 12 micro-batches, even and
 * shifted splits) and every setting (recompute none, selective, full, full on the first layer;
 * sequence parallelism; each sharding; cp; b; t) the bytes equal the walk's to the last bit.
 * GPT-13B's and Llama 3 70B's bytes are integers, where the shape must answer every time; a
 * model of hidden 3000, FFN 8000 and 2000 tokens has bytes of a full mantissa (64e6 / 3 x ...),
 * where its sums could round otherwise than the walk's: there the shape must decline (the
 * search then walks the schedule) rather than answer differently. */
Test(tuner_memory, shape_equals_the_walk_for_every_schedule_and_setting)
{
    const char *models[] = {"gpt-13b", "llama3-70b"};
    int n_kinds;
    const pp_sched_desc *g = pp_sched_generators(&n_kinds);
    for (int mi = 0; mi < 3; mi++) {
        pp_tune_model m;
        cr_assert_eq(pp_tune_model_preset(mi < 2 ? models[mi] : "llama3-8b", &m), PP_OK);
        if (mi == 2) {
            snprintf(m.name, sizeof m.name, "odd-shape");
            m.layers = 24, m.hidden = 3000, m.heads = m.kv_heads = 24, m.ffn = 8000;
            m.seq = 2000;
        }
        long exact = 0, tried = 0;
        for (int k = 0; k < n_kinds; k++)
            for (int N = 4; N <= 12; N += 4)
                for (int shift = 0; shift <= 1; shift++) {
                    pp_config c;
                    pp_config_defaults(&c);
                    c.schedule = g[k].name, c.p = 4, c.N = N, c.d = 4;
                    c.v = g[k].chunks ? g[k].chunks : 2, c.G = g[k].chunks ? 0 : 4;
                    if (shift) /* one layer fewer on the first stage, one more elsewhere */
                        c.first_layers = m.layers / (c.p * c.v) - 1;
                    pp_sched_params sp;
                    pp_tune_sched_params(&m, &c, &sp);
                    pp_sched *s = NULL;
                    if (pp_sched_generate(c.schedule, &sp, &s) != PP_OK) {
                        pp_err_clear(); /* a split this layer count does not allow */
                        continue;
                    }
                    pp_tune_shape *sh;
                    cr_assert_eq(pp_tune_shape_create(s, &sh), PP_OK);
                    for (int set = 0; set < 4 * 2 * 3 * 2 * 2; set++) {
                        int x = set;
                        pp_recompute rc[] = {PP_RECOMPUTE_NONE, PP_RECOMPUTE_SELECTIVE,
                                             PP_RECOMPUTE_FULL, PP_RECOMPUTE_FULL};
                        c.recompute = rc[x % 4], c.recompute_layers = x % 4 == 3, x /= 4;
                        c.t = 1 + x % 2, c.sequence_parallel = x % 2, x /= 2;
                        pp_shard sh3[] = {PP_SHARD_NONE, PP_SHARD_OPTIMIZER, PP_SHARD_GRADIENTS};
                        c.shard = sh3[x % 3], x /= 3;
                        c.cp = 1 + x % 2, x /= 2;
                        c.b = 1 + x % 2;
                        tried++;
                        exact += shape_equals_walk(&m, &c, s, sh);
                    }
                    pp_tune_shape_destroy(sh);
                    pp_sched_destroy(s);
                }
        cr_assert_gt(tried, 1000, "%s: only %ld configurations", m.name, tried);
        if (mi < 2)
            cr_assert_eq(exact, tried, "%s: the shape answered %ld of %ld", m.name, exact, tried);
        else
            cr_assert_lt(exact, tried, "%s: the shape answered all %ld", m.name, tried);
    }
}
