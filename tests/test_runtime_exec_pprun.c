/* test_runtime_exec_pprun.c — the pprun program as a user runs it: --help, one clear line and
 * exit code 2 for bad input, training that brings the loss well down on a text file with a
 * fixed seed, the JSON summary's fields, and a Chrome trace with every action of every rank. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <criterion/criterion.h>
#include <glob.h>
#include <jansson.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_rt.h"
#include "pp_test_run.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"
#define PROSE PP_FIXTURES_DIR "/text/prose.txt"

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

Test(runtime_pprun, help_describes_every_option)
{
    pp_test_run_result r = pp_test_run(PPRUN " --help");
    cr_assert_eq(r.code, 0);
    const char *opts[] = {"--model",
                          "--schedule",
                          "--ranks",
                          "--microbatches",
                          "--micro-batch-size",
                          "--chunks",
                          "--dp",
                          "--seq",
                          "--steps",
                          "--data",
                          "--seed",
                          "--json",
                          "--trace",
                          "--first-stage-layers",
                          "--last-stage-layers",
                          "--threads"};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        cr_assert(strstr(r.out, opts[i]), "--help does not mention %s", opts[i]);
    pp_test_run_done(&r);
}

Test(runtime_pprun, bad_input_is_one_line_and_exit_code_2)
{
    struct {
        const char *args, *says;
    } cases[] = {
        {"--model nope", "unknown model \"nope\""},
        {"--schedule zigzag", "unknown schedule \"zigzag\""},
        {"--model tiny --ranks 8", "4 layers cannot fill 8 stages"}, /* tiny has 4 layers */
        {"--model tiny --seq 65", "--seq 65 is longer than model tiny allows (at most 64)"},
        {"--data /nonexistent/corpus.txt", "cannot read the data file /nonexistent/corpus.txt"},
        {"--schedule chimera --ranks 3", "chimera needs an even number of ranks, got 3"},
        {"--ranks 0", "--ranks: invalid value \"0\""},
        {"--lr fast", "--lr: invalid value \"fast\""},
        {"--frobnicate", "unknown option"},
        /* issue 18, finding 6: these ran until memory ran out */
        {"--microbatches 100000000", "--microbatches"},
        {"--layers 100000000", "--layers: expected at most 4096"},
        /* finding 14: infinite rates were accepted; an argument's newline split the message */
        {"--lr inf", "--lr: invalid value \"inf\": expected a finite number"},
        {"--clip inf", "--clip: invalid value \"inf\": expected a finite number"},
        {"--lr 1e9", "--lr: expected at most 10"},
        {"--ranks '3\nFAKE'", "--ranks: invalid value \"3\\nFAKE\""},
        /* issue 20: splits that do not add up, and threads */
        {"--ranks 4 --layers 12 --first-stage-layers 4 --last-stage-layers 3",
         "leave 5 of the 12 layers for the other 2 stages"},
        {"--ranks 2 --layers 12 --first-stage-layers 6 --last-stage-layers 5",
         "must add up to 12, got 6 + 5"},
        {"--ranks 3 --layers 7 --uneven --last-stage-layers 2", "not both"},
        {"--last-stage-layers 0", "--last-stage-layers: invalid value \"0\""},
        {"--threads 0", "--threads: invalid value \"0\""},
        {"--threads 5000", "--threads: expected at most 1024"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[256];
        snprintf(args, sizeof args, "%s --steps 1", cases[i].args);
        pp_test_run_result r = pp_test_run(PPRUN " %s", args);
        cr_assert_eq(r.code, 2, "pprun %s: exit code %d, expected 2 (stderr: %s)", args, r.code,
                     r.err);
        cr_assert_eq(lines(r.err), 1, "pprun %s: expected one line, got:\n%s", args, r.err);
        cr_assert(strstr(r.err, cases[i].says), "pprun %s: \"%s\" lacks \"%s\"", args, r.err,
                  cases[i].says);
        cr_assert_str_eq(r.out, "", "pprun %s printed on stdout", args);
        pp_test_run_done(&r);
    }
}

static json_t *parse(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert(j, "not JSON (line %d: %s):\n%.400s", e.line, e.text, text);
    return j;
}

/* 200 steps of the tiny model, 2-rank 1F1B, on the prose fixture with seed 7: the mean loss of
 * the last 10 steps must be below 0.6 x the first step's (ln 256 = 5.55 at the start; byte
 * unigram statistics alone are worth about 3.3). */
Test(runtime_pprun, trains_tiny_model_on_text, .timeout = 600)
{
    pp_test_run_result r =
        pp_test_run(PPRUN " --model tiny --schedule 1f1b --ranks 2 --microbatches 2 "
                          "--micro-batch-size 2 --seq 32 --steps 200 --lr 3e-3 --seed 7 --json "
                          "--quiet --data " PROSE);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    json_t *j = parse(r.out);
    json_t *steps = json_object_get(j, "per_step");
    cr_assert_eq(json_array_size(steps), 200);
    double first = json_real_value(json_object_get(json_array_get(steps, 0), "loss"));
    double last = 0;
    for (size_t i = 190; i < 200; i++)
        last += json_real_value(json_object_get(json_array_get(steps, i), "loss")) / 10;
    cr_assert(first > 5.0 && first < 6.0, "first loss %g, expected about ln 256", first);
    cr_assert(last < 0.6 * first, "loss went from %g to %g (last 10 steps)", first, last);

    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "schedule"), "kind")),
                     "1f1b");
    cr_assert_gt(json_real_value(json_object_get(j, "median_step_seconds")), 0);
    cr_assert_gt(json_real_value(json_object_get(j, "tokens_per_second")), 0);
    cr_assert_eq(json_real_value(json_object_get(j, "tokens_per_step")), 2.0 * 2 * 32);
    json_t *ranks = json_object_get(j, "ranks");
    cr_assert_eq(json_array_size(ranks), 2);
    for (size_t g = 0; g < 2; g++) {
        json_t *peak = json_object_get(json_array_get(ranks, g), "peak_bytes");
        const char *cats[] = {"weights", "grads", "optim", "acts", "comm", "total"};
        for (size_t c = 0; c < 6; c++)
            cr_assert_gt(json_integer_value(json_object_get(peak, cats[c])), 0,
                         "rank %zu reports no %s bytes", g, cats[c]);
        /* AdamW keeps two moments per parameter */
        cr_assert_eq(json_integer_value(json_object_get(peak, "optim")),
                     2 * json_integer_value(json_object_get(peak, "weights")));
        /* every message buffer is carved from the rank's arena */
        json_int_t arena = json_integer_value(json_object_get(json_array_get(ranks, g),
                                                              "arena_bytes"));
        cr_assert_geq(arena, json_integer_value(json_object_get(peak, "comm")),
                      "rank %zu: arena %lld B", g, (long long)arena);
    }
    json_decref(j);
    pp_test_run_done(&r);
}

Test(runtime_pprun, trace_has_every_action_of_every_rank)
{
    char path[128];
    snprintf(path, sizeof path, "/tmp/pprun_trace_%ld.json", (long)getpid());
    char args[512];
    snprintf(args, sizeof args,
             "--model tiny --schedule interleaved --ranks 2 --chunks 2 --microbatches 4 "
             "--seq 16 --steps 2 --quiet --trace %s",
             path);
    pp_test_run_result r = pp_test_run(PPRUN " %s", args);
    cr_assert_eq(r.code, 0, "stderr: %s", r.err);
    char *text = pp_test_slurp(path);
    json_t *j = parse(text);
    free(text);
    remove(path);
    char pattern[160];
    snprintf(pattern, sizeof pattern, "%s.tmp.*", path);
    glob_t gl;
    cr_assert_eq(glob(pattern, 0, NULL, &gl), GLOB_NOMATCH, "a temporary trace file was left");

    pp_sched_params sp = {.ranks = 2, .microbatches = 4, .chunks = 2, .layers = 4};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("interleaved", &sp, &s), PP_OK);
    int actions[2] = {0, 0}, named[2] = {0, 0}, hops = 0;
    long long flow_sum[2] = {0, 0}; /* sums of the ids of flow starts and finishes */
    int flows[2] = {0, 0};
    json_t *ev = json_object_get(j, "traceEvents");
    cr_assert(json_is_array(ev));
    for (size_t i = 0; i < json_array_size(ev); i++) {
        json_t *e = json_array_get(ev, i);
        int tid = (int)json_integer_value(json_object_get(e, "tid"));
        const char *ph = json_string_value(json_object_get(e, "ph"));
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (tid < 0 || tid > 1)
            continue;
        if (strcmp(ph, "s") == 0 || strcmp(ph, "f") == 0) {
            int fin = ph[0] == 'f';
            flows[fin]++;
            flow_sum[fin] += json_integer_value(json_object_get(e, "id"));
            continue;
        }
        if (strcmp(ph, "M") == 0)
            named[tid] += strcmp(json_string_value(json_object_get(e, "name")), "thread_name") == 0;
        else if (strcmp(ph, "X") == 0 && strcmp(cat, "sync") && strcmp(cat, "optim")) {
            cr_assert_geq(json_real_value(json_object_get(e, "dur")), 0);
            actions[tid]++;
        }
    }
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < s->n_ops[g]; i++)
            hops += s->ops[g][i].op == PP_OP_SEND_F || s->ops[g][i].op == PP_OP_SEND_B;
    /* one arrow from every SEND to its RECV, per step */
    cr_assert_eq(flows[0], 2 * hops, "%d flow starts for %d hops in 2 steps", flows[0], hops);
    cr_assert_eq(flows[1], 2 * hops, "%d flow ends for %d hops in 2 steps", flows[1], hops);
    cr_assert_eq(flow_sum[0], flow_sum[1], "flow starts and ends do not pair up");
    for (int g = 0; g < 2; g++) {
        cr_assert_eq(named[g], 1, "rank %d track is not named", g);
        cr_assert_eq(actions[g], 2 * s->n_ops[g], "rank %d: %d action events for 2 steps of %d", g,
                     actions[g], s->n_ops[g]);
    }
    pp_sched_destroy(s);
    json_decref(j);
    pp_test_run_done(&r);
}

/* ---- issue 20: BLAS threads per rank and first/last-stage splits ---- */
/* The CPUs this test may run on, as pprun counts them (its affinity mask). */
static long usable_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* This machine's usable cores shared by n ranks, at least 1 each. */
static int cores_per(int n)
{
    long c = usable_cpus() / n;
    return c > 1 ? (int)c : 1;
}

/* The summary's threads_per_rank is what OpenBLAS reports after the run
 * (openblas_get_num_threads), so a count that was not applied would show. */
static void check_threads(const char *args, int want, const char *from)
{
    pp_test_run_result r = pp_test_run(
        "env -u OPENBLAS_NUM_THREADS %s " PPRUN " --steps 1 --json --quiet %s",
        strstr(args, "ENV") ? "OPENBLAS_NUM_THREADS=1" : "", strstr(args, "ENV") ? args + 3 : args);
    cr_assert_eq(r.code, 0, "pprun %s: %s", args, r.err);
    json_t *j = parse(r.out);
    int got = (int)json_integer_value(json_object_get(j, "threads_per_rank"));
    const char *src = json_string_value(json_object_get(j, "threads_from"));
    cr_assert_eq(got, want, "pprun %s: threads_per_rank %d, expected %d", args, got, want);
    cr_assert(src && !strcmp(src, from), "pprun %s: threads_from %s, expected %s", args,
              src ? src : "(none)", from);
    json_decref(j);
    pp_test_run_done(&r);
}

Test(runtime_pprun, blas_threads_fill_the_cores_unless_told)
{
    /* the ranks of this process are threads: D x tp x dp of them share the cores */
    check_threads("--ranks 1", cores_per(1), "cores / ranks");
    check_threads("--ranks 2", cores_per(2), "cores / ranks");
    check_threads("--ranks 1 --dp 2", cores_per(2), "cores / ranks");
    check_threads("--ranks 1 --tp 4 --seq 16", cores_per(4), "cores / ranks");
    check_threads("--ranks 2 --tp 2 --dp 2 --seq 16", cores_per(8), "cores / ranks");
    check_threads("--ranks 1 --threads 3", 3, "--threads");
    check_threads("ENV --ranks 1", 1, "OPENBLAS_NUM_THREADS");
    check_threads("ENV --ranks 1 --threads 2", 2, "--threads"); /* the flag wins */
}

Test(runtime_pprun, first_last_stage_split_is_run_and_reported)
{
    pp_test_run_result r = pp_test_run(PPRUN " --ranks 4 --layers 12 --first-stage-layers 4 "
                                             "--last-stage-layers 2 --steps 1 --json --quiet");
    cr_assert_eq(r.code, 0, "%s", r.err);
    json_t *j = parse(r.out);
    json_t *sl = json_object_get(json_object_get(j, "schedule"), "stage_layers");
    int want[] = {4, 3, 3, 2};
    cr_assert_eq(json_array_size(sl), 4);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(json_integer_value(json_array_get(sl, (size_t)k)), want[k], "stage %d", k);
    json_decref(j);
    pp_test_run_done(&r);
}

/* ---- issue 19: split backward ---- */
/* pprun takes every schedule of the registry by name (--help lists them all); a split-backward
 * one trains, and its trace names each I and W action (Chrome trace "cat" = the op), as many
 * per step as the schedule has. */
Test(runtime_pprun, runs_split_backward_schedules_and_traces_i_and_w)
{
    pp_test_run_result h = pp_test_run(PPRUN " --help");
    int n;
    const pp_sched_desc *d = pp_sched_generators(&n);
    for (int k = 0; k < n; k++)
        cr_assert(strstr(h.out, d[k].name), "--help does not list %s", d[k].name);
    pp_test_run_done(&h);
    char path[128];
    snprintf(path, sizeof path, "/tmp/pprun_split_%ld.json", (long)getpid());
    int ran = 0;
    for (int k = 0; k < n; k++) {
        if (!d[k].split_backward)
            continue;
        pp_test_run_result r = pp_test_run(PPRUN " --schedule %s --ranks 2 --microbatches 4 "
                                                 "--seq 16 --steps 2 --quiet --trace %s",
                                           d[k].name, path);
        cr_assert_eq(r.code, 0, "pprun --schedule %s: %s", d[k].name, r.err);
        char *text = pp_test_slurp(path);
        json_t *j = parse(text);
        free(text);
        remove(path);
        pp_model_cfg m;
        cr_assert_eq(pp_model_preset("tiny", &m), PP_OK);
        pp_sched_params sp = {.ranks = 2, .microbatches = 4, .layers = m.layers};
        pp_sched *s;
        cr_assert_eq(pp_sched_generate(d[k].name, &sp, &s), PP_OK, "%s", pp_err_msg());
        int want[2] = {0, 0}, got[2] = {0, 0};
        for (int g = 0; g < 2; g++)
            for (int i = 0; i < s->n_ops[g]; i++)
                if (pp_op_is_split_backward(s->ops[g][i].op))
                    want[s->ops[g][i].op == PP_OP_W]++;
        json_t *ev = json_object_get(j, "traceEvents");
        for (size_t i = 0; i < json_array_size(ev); i++) {
            const char *cat = json_string_value(json_object_get(json_array_get(ev, i), "cat"));
            if (cat && (!strcmp(cat, pp_op_name(PP_OP_I)) || !strcmp(cat, pp_op_name(PP_OP_W))))
                got[!strcmp(cat, pp_op_name(PP_OP_W))]++;
        }
        cr_assert(want[0] > 0 && want[0] == want[1], "%s: %d I, %d W", d[k].name, want[0], want[1]);
        cr_assert(got[0] == 2 * want[0] && got[1] == 2 * want[1],
                  "%s: the trace has %d I and %d W events for 2 steps of %d each", d[k].name,
                  got[0], got[1], want[0]);
        pp_sched_destroy(s);
        json_decref(j);
        pp_test_run_done(&r);
        ran++;
    }
    cr_assert_geq(ran, 3, "the registry has %d split-backward schedules", ran);
}
