/* test_runtime_exec_arena.c — the executor allocates from its memory plan (issue 11): every
 * buffer of a step is the plan's next record, carved from the rank's arena
 * (runtime/executor_arena.c), so no step buffer reaches the backend's allocator; a plan whose
 * record differs from what the step asks for (bytes, category, an offset that lands on a live
 * buffer) fails the step with PP_ERR_CHECK naming both sides. Reads the executor's private
 * state (executor.h, backend.h) to count the backend's allocations and to spoil a record.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "executor.h"
#include "pp_rt.h"

#include "pp_test_ok.h"

enum { B = 2, T = 16 };

static pp_model_cfg model(void)
{
    return (pp_model_cfg){.layers = 8, .hidden = 32, .heads = 2, .ffn = 64, .vocab = 128, .seq = T};
}

typedef struct {
    pp_sched *s;
    pp_rt_executor *ex;
    pp_rt_data *data;
    int32_t *batch;
} setup;

static void make_tp(setup *u, const char *kind, int D, int N, int v, int dp, int backend, int tp,
                    int seq_par)
{
    pp_model_cfg m = model();
    pp_sched_params sp = {.ranks = D, .microbatches = N, .chunks = v, .layers = m.layers};
    OK(pp_sched_generate(kind, &sp, &u->s));
    pp_rt_exec_params ep = {.model = &m,
                            .sched = u->s,
                            .micro_batch = B,
                            .seq = T,
                            .dp = dp,
                            .seed = 5,
                            .clip = 1.0f,
                            .adamw = {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f},
                            .backend = backend,
                            .tp = tp,
                            .sequence_parallel = seq_par};
    OK(pp_rt_executor_create(&ep, &u->ex));
    OK(pp_rt_data_synthetic(m.vocab, 3, &u->data));
    u->batch = calloc((size_t)pp_rt_executor_batch_rows(u->ex) * (T + 1), sizeof *u->batch);
}

static void make(setup *u, const char *kind, int D, int N, int v, int dp, int backend)
{
    make_tp(u, kind, D, N, v, dp, backend, 1, 0);
}

static pp_status step(setup *u)
{
    OK(pp_rt_data_next(u->data, pp_rt_executor_batch_rows(u->ex), T, u->batch));
    pp_rt_step_result r;
    return pp_rt_executor_step(u->ex, u->batch, 1, &r);
}

static void drop(setup *u)
{
    pp_rt_executor_destroy(u->ex);
    pp_sched_destroy(u->s);
    pp_rt_data_destroy(u->data);
    free(u->batch);
}

/* A copy of the CPU backend's table whose alloc counts its calls (ranks are threads). */
static atomic_int raw_allocs;
static const pp_backend_ops *cpu_ops;
static pp_backend_ops counting_ops;

static void *counting_alloc(void *ctx, size_t bytes)
{
    atomic_fetch_add(&raw_allocs, 1);
    return cpu_ops->alloc(ctx, bytes);
}

static void count_allocs(setup *u)
{
    for (int g = 0; g < pp_rt_executor_ranks(u->ex); g++) {
        pp_backend *be = pp_rt_executor_backend(u->ex, g);
        if (be->ops != &counting_ops) {
            cpu_ops = be->ops;
            counting_ops = *cpu_ops;
            counting_ops.alloc = counting_alloc;
            be->ops = &counting_ops;
        }
    }
    atomic_store(&raw_allocs, 0);
}

static const struct {
    const char *kind;
    int D, N, v, dp;
} cases[] = {{"1f1b", 4, 8, 0, 1},
             {"gpipe", 2, 4, 0, 2},
             {"interleaved", 2, 4, 2, 1},
             {"chimera", 4, 4, 0, 1},
             {"bitpipe", 2, 4, 0, 2},
             {"zb-h1", 4, 8, 0, 1}, /* split backward: held-for-W buffers from the arena too */
             {"zbv", 2, 4, 0, 2}};

/* Once the first step has made the optimizer state, a step allocates nothing through the
 * backends (staged ranks: the transport's copies are host staging, outside them): every
 * buffer is carved from the arena, the plan's records are taken exactly, the arena is the
 * plan's size and holds at least the step buffers' peak. Fails if any step buffer went to
 * the backend's allocator or if the walk in plan.c and the executor part ways. */
Test(runtime_exec_arena, a_step_allocates_only_from_the_plan)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setup u;
        make(&u, cases[i].kind, cases[i].D, cases[i].N, cases[i].v, cases[i].dp,
             PP_RT_BACKEND_CPU_STAGED);
        OK(step(&u));
        count_allocs(&u);
        OK(step(&u));
        cr_assert_eq(atomic_load(&raw_allocs), 0,
                     "%s: the second step made %d allocations outside the arena", cases[i].kind,
                     atomic_load(&raw_allocs));
        for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
            const rank_state *rs = &u.ex->rk[g];
            const pp_rt_plan_rank *pl = pp_rt_executor_plan(u.ex, g);
            cr_assert_gt(pl->n_bufs, 0, "%s rank %d", cases[i].kind, g);
            cr_assert_eq(rs->arena.next, pl->n_bufs, "%s rank %d: %d of %d records taken",
                         cases[i].kind, g, rs->arena.next, pl->n_bufs);
            cr_assert_eq(rs->arena.n_live, 0, "%s rank %d", cases[i].kind, g);
            pp_mem_stats m;
            pp_backend_mem_stats(rs->be, &m);
            cr_assert_eq(m.reserved, pl->arena_bytes, "%s rank %d: reserved %zu, arena %zu",
                         cases[i].kind, g, m.reserved, pl->arena_bytes);
            /* persistent: weights, grads, optimizer state, tokens (CPU: in acts) */
            size_t persistent = m.current_total;
            cr_assert_geq(pl->arena_bytes, pl->peak_total - persistent,
                          "%s rank %d: arena %zu, step buffers' peak %zu", cases[i].kind, g,
                          pl->arena_bytes, pl->peak_total - persistent);
            cr_log_info("%s rank %d: %d buffers, arena %zu B for a peak of %zu B", cases[i].kind,
                        g, pl->n_bufs, pl->arena_bytes, pl->peak_total - persistent);
        }
        drop(&u);
    }
}

/* The same with tensor parallelism and sequence parallelism (t = 2): the stages' forward and
 * backward workspaces of their sequence shards are buffers of the plan too, and so is the
 * forward workspace of the vocabulary-parallel loss on the last stage. */
Test(runtime_exec_arena, tensor_and_sequence_parallel_steps_allocate_only_from_the_plan)
{
    for (int sp = 0; sp <= 1; sp++) {
        setup u;
        make_tp(&u, "1f1b", 2, 4, 0, 1, PP_RT_BACKEND_CPU_STAGED, 2, sp);
        OK(step(&u));
        count_allocs(&u);
        OK(step(&u));
        cr_assert_eq(atomic_load(&raw_allocs), 0, "sp %d: %d allocations outside the arena", sp,
                     atomic_load(&raw_allocs));
        for (int g = 0; g < pp_rt_executor_ranks(u.ex); g++) {
            const pp_rt_plan_rank *pl = pp_rt_executor_plan(u.ex, g);
            int ws = 0;
            for (int i = 0; i < u.ex->rk[g].arena.plan->n; i++)
                ws += u.ex->rk[g].arena.plan->bufs[i].cat == PP_MEM_WORKSPACE;
            /* a backward workspace per micro-batch, and with SP, or on the last pipeline rank
             * (the loss's statistics), a forward one */
            int fwd = sp || u.ex->rk[g].r == 1;
            cr_assert_eq(ws, (fwd ? 2 : 1) * 4, "sp %d rank %d: %d workspaces", sp, g, ws);
            cr_assert_eq(u.ex->rk[g].arena.next, pl->n_bufs, "sp %d rank %d", sp, g);
        }
        drop(&u);
    }
}

/* The plan's record list of 1f1b: per micro-batch, a middle rank receives the activation,
 * produces its output and saves a slot (F), receives the output gradient, produces the input
 * gradient and uses a workspace (B); the first rank has no input to receive or gradient to
 * produce, the last no output or gradient to receive. Offsets are aligned and inside the
 * arena. */
Test(runtime_exec_arena, the_plan_lists_each_step_buffer_in_order)
{
    pp_model_cfg m = model();
    pp_sched *s;
    pp_sched_params sp = {.ranks = 4, .microbatches = 8, .layers = m.layers};
    OK(pp_sched_generate("1f1b", &sp, &s));
    pp_rt_plan_params p = {.model = &m,
                           .sched = s,
                           .micro_batch = B,
                           .seq = T,
                           .dp = 1,
                           .backend = PP_RT_BACKEND_CPU_STAGED};
    pp_rt_plan_rank out[4];
    pp_rt_plan_assignment asg[4];
    OK(pp_rt_plan_assign(&p, out, asg));
    const int want[4] = {8 * 4, 8 * 6, 8 * 6, 8 * 4};
    for (int r = 0; r < 4; r++) {
        cr_assert_eq(asg[r].n, want[r], "rank %d: %d buffers, want %d", r, asg[r].n, want[r]);
        cr_assert_eq(out[r].n_bufs, asg[r].n);
        cr_assert_eq(out[r].arena_bytes, asg[r].arena_bytes);
        int acts = 0, ws = 0;
        for (int i = 0; i < asg[r].n; i++) {
            const pp_rt_plan_buf *b = &asg[r].bufs[i];
            cr_assert_eq(b->offset % PP_RT_ARENA_ALIGN, 0, "rank %d buffer %d", r, i);
            cr_assert_leq(b->offset + b->bytes, asg[r].arena_bytes, "rank %d buffer %d", r, i);
            acts += b->cat == PP_MEM_ACTS;
            ws += b->cat == PP_MEM_WORKSPACE;
        }
        cr_assert_eq(acts, 8, "rank %d: one slot per micro-batch", r);
        cr_assert_eq(ws, 8, "rank %d: one workspace per backward", r);
        /* the first buffer of a rank: rank 0 starts with F (its output), the others with the
         * activation they receive (comm either way) */
        cr_assert_eq(asg[r].bufs[0].cat, PP_MEM_COMM, "rank %d", r);
        pp_rt_plan_assignment_fini(&asg[r]);
        cr_assert_null(asg[r].bufs);
    }
    pp_rt_plan_assignment_fini(NULL);
    pp_sched_destroy(s);
}

/* Rank 1 of 1f1b (4 ranks) starts its step by receiving an activation: its record #0. */
static void spoiled_step(void (*spoil)(pp_rt_plan_buf *bufs), const char *want1,
                         const char *want2)
{
    setup u;
    make(&u, "1f1b", 4, 4, 0, 1, PP_RT_BACKEND_CPU);
    spoil(u.ex->asg[1].bufs);
    pp_status st = step(&u);
    cr_assert_eq(st, PP_ERR_CHECK, "the step returned %d: %s", st, pp_err_msg());
    cr_assert(strstr(pp_err_msg(), want1), "message: %s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), want2), "message: %s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), "rank 1"), "message: %s", pp_err_msg());
    drop(&u);
}

static void more_bytes(pp_rt_plan_buf *b)
{
    b[0].bytes += 4;
}
static void other_category(pp_rt_plan_buf *b)
{
    b[0].cat = PP_MEM_ACTS;
}
static void same_offset(pp_rt_plan_buf *b)
{
    /* #1 is F's output while #0, its input, is still held */
    b[1].offset = b[0].offset;
}

Test(runtime_exec_arena, a_wrong_record_fails_the_step_naming_both)
{
    /* io = B*T*C floats = 4096 bytes */
    spoiled_step(more_bytes, "asks 4096 bytes of comm", "buffer #0 is 4100 bytes of comm");
    spoiled_step(other_category, "asks 4096 bytes of comm", "buffer #0 is 4096 bytes of acts");
    spoiled_step(same_offset, "buffer #1", "overlaps buffer #0");
}

/* A step that would take more buffers than the plan lists fails at the first one beyond it;
 * one that takes fewer fails at its end. */
Test(runtime_exec_arena, a_plan_too_short_or_too_long_fails_the_step)
{
    setup u;
    make(&u, "1f1b", 4, 4, 0, 1, PP_RT_BACKEND_CPU);
    u.ex->asg[2].n -= 1;
    pp_status st = step(&u);
    cr_assert_eq(st, PP_ERR_CHECK, "%s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), "is beyond the memory plan's"), "message: %s", pp_err_msg());
    u.ex->asg[2].n += 1;
    drop(&u);

    make(&u, "1f1b", 4, 4, 0, 1, PP_RT_BACKEND_CPU);
    /* a record more than the step takes (the arena's size is unchanged: it is never placed) */
    pp_rt_plan_assignment *a = &u.ex->asg[3];
    pp_rt_plan_buf *more = pp_realloc_array(a->bufs, (size_t)a->n + 1, sizeof *more);
    cr_assert_not_null(more);
    more[a->n] = more[a->n - 1];
    a->bufs = more;
    a->n++;
    st = step(&u);
    cr_assert_eq(st, PP_ERR_CHECK, "%s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), "rank 3: the step made"), "message: %s", pp_err_msg());
    drop(&u);
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* In an AddressSanitizer build, a buffer given back to the arena is poisoned, so a read of it
 * after the step is reported as a read of freed malloc'ed memory would be. Asked of ASan itself
 * (__asan_address_is_poisoned) rather than by reading it: how a report ends the process (exit 1,
 * or abort with abort_on_error=1 as scripts/test.sh runs) is the environment's choice. */
Test(runtime_exec_arena, a_buffer_given_back_is_poisoned)
{
    setup u;
    make(&u, "1f1b", 4, 4, 0, 1, PP_RT_BACKEND_CPU);
    OK(step(&u));
    const pp_ex_arena *a = &u.ex->rk[1].arena;
    const char *p = (const char *)a->base + a->plan->bufs[0].offset;
    cr_assert(__asan_address_is_poisoned(p), "rank 1's first step buffer is not poisoned after "
                                             "the step");
    cr_assert(__asan_address_is_poisoned(p + a->plan->bufs[0].bytes - 1));
    drop(&u);
}
#endif

/* A split-backward schedule (ZB-H1) plans 1F1B's buffers (I has B's, W frees the slot I
 * kept) plus one held-for-W buffer per I (what W needs beside the slot, pp_rt_size_wheld_bytes),
 * every one given back within the step, and holds at least 1F1B's activations (a slot lives
 * until its W, after its I). */
Test(runtime_exec_arena, split_backward_plans_b_in_two_halves)
{
    pp_model_cfg m = model();
    pp_sched_params sp = {.ranks = 4, .microbatches = 8, .layers = m.layers};
    pp_sched *zb, *ob;
    OK(pp_sched_generate("zb-h1", &sp, &zb));
    OK(pp_sched_generate("1f1b", &sp, &ob));
    pp_rt_plan_rank pz[4], po[4];
    pp_rt_plan_assignment az[4];
    pp_rt_plan_params p = {.model = &m,
                           .sched = zb,
                           .micro_batch = B,
                           .seq = T,
                           .dp = 1,
                           .backend = PP_RT_BACKEND_CPU_STAGED};
    OK(pp_rt_plan_assign(&p, pz, az));
    p.sched = ob;
    OK(pp_rt_plan_compute(&p, po));
    for (int r = 0; r < 4; r++) {
        int n_i = 0; /* every stage of this model has layers, so every I holds a buffer */
        for (int i = 0; i < zb->n_ops[r]; i++)
            n_i += zb->ops[r][i].op == PP_OP_I;
        cr_assert_gt(n_i, 0);
        cr_assert_eq(pz[r].n_bufs, po[r].n_bufs + n_i, "rank %d: %d buffers, 1f1b %d + %d I", r,
                     pz[r].n_bufs, po[r].n_bufs, n_i);
        cr_assert_geq(pz[r].peak[PP_MEM_ACTS], po[r].peak[PP_MEM_ACTS], "rank %d", r);
        cr_assert_geq(pz[r].arena_bytes, pz[r].peak_total - pz[r].at_peak[PP_MEM_WEIGHTS] -
                                             pz[r].at_peak[PP_MEM_GRADS] -
                                             pz[r].at_peak[PP_MEM_OPTIM] - 2 * 8 * B * T * 4,
                      "rank %d", r);
        pp_rt_plan_assignment_fini(&az[r]);
    }
    pp_sched_destroy(zb);
    pp_sched_destroy(ob);
}
