/* test_runtime_tp_pprun.c — pprun --tp: a tensor-parallel run trains the same model as the
 * t = 1 run (per-step losses within 1e-5 relative, the fp32 tolerance of test_runtime_tp.c),
 * its JSON summary places every rank (tp + t * (pp + p * dp)) and reports each rank's
 * tensor-parallel communication, its trace carries it, and layouts the split cannot take are
 * refused in one line with exit 2; --sequence-parallel trains the same model too. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_test_run.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

static json_t *run_json(const char *args)
{
    pp_test_run_result r = pp_test_run(PPRUN " %s --json --quiet", args);
    cr_assert_eq(r.code, 0, "pprun %s: stderr: %s", args, r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert(j, "pprun %s: not JSON (%s)", args, e.text);
    pp_test_run_done(&r);
    return j;
}

static double step_loss(json_t *j, size_t i)
{
    return json_real_value(
        json_object_get(json_array_get(json_object_get(j, "per_step"), i), "loss"));
}

/* pprun --cp: 2 (and 4) ranks sharing each sequence train the same model as --cp 1 (the
 * fp32 tolerance of test_runtime_tp.c), the Llama block with tensor and sequence parallelism
 * too; the JSON places every rank (replica, cp rank); a sequence that 2 cp does not divide is
 * refused in one line with exit 2. */
Test(runtime_tp_pprun, cp_trains_like_cp1)
{
    static const char *const runs[][2] = {
        {"--model tiny --schedule 1f1b --ranks 2 --microbatches 4 --seq 16 --steps 3", "2"},
        {"--model tiny --schedule gpipe --ranks 1 --microbatches 2 --dp 2 --seq 16 --steps 3",
         "4"},
        {"--model tiny-llama --schedule interleaved --ranks 2 --microbatches 4 --seq 16 "
         "--steps 3 --tp 2 --sequence-parallel",
         "2"}};
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char args[320];
        json_t *one = run_json(runs[k][0]);
        snprintf(args, sizeof args, "%s --cp %s", runs[k][0], runs[k][1]);
        json_t *cp = run_json(args);
        int c = atoi(runs[k][1]);
        cr_assert_eq(json_integer_value(json_object_get(cp, "cp")), c);
        for (size_t i = 0; i < 3; i++) {
            double a = step_loss(cp, i), b = step_loss(one, i);
            cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "%s: step %zu: loss %.9g, %.9g without",
                      args, i + 1, a, b);
        }
        json_t *ranks = json_object_get(cp, "ranks");
        size_t n1 = json_array_size(json_object_get(one, "ranks"));
        cr_assert_eq(json_array_size(ranks), n1 * (size_t)c, "%s", args);
        int tp = (int)json_integer_value(json_object_get(cp, "tp")), D = k == 1 ? 1 : 2;
        for (size_t g = 0; g < json_array_size(ranks); g++) {
            json_t *r = json_array_get(ranks, g);
            size_t rep = g / ((size_t)tp * D); /* dp x cp replicas, cp rank innermost */
            cr_assert_eq(json_integer_value(json_object_get(r, "cp_rank")),
                         (json_int_t)(rep % (size_t)c), "%s rank %zu", args, g);
            cr_assert_eq(json_integer_value(json_object_get(r, "replica")),
                         (json_int_t)(rep / (size_t)c), "%s rank %zu", args, g);
        }
        json_decref(one);
        json_decref(cp);
    }
    pp_test_run_result r = pp_test_run(PPRUN " --model tiny --seq 12 --cp 4 --steps 1");
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert(strstr(r.err, "the sequence length 12 must be a multiple of 2 x --cp 4 = 8"), "%s",
              r.err);
    cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
    pp_test_run_done(&r);
}

Test(runtime_tp_pprun, tp2_trains_like_tp1_and_reports_its_communication)
{
    const char *base = "--model tiny --schedule 1f1b --ranks 2 --microbatches 4 --dp 2 "
                       "--seq 16 --steps 3";
    char args[256], trace[128];
    snprintf(trace, sizeof trace, "/tmp/pprun_tp_trace_%ld.json", (long)getpid());
    json_t *one = run_json(base);
    snprintf(args, sizeof args, "%s --tp 2 --trace %s", base, trace);
    json_t *two = run_json(args);
    cr_assert_eq(json_integer_value(json_object_get(two, "tp")), 2);
    for (size_t i = 0; i < 3; i++) {
        double a = step_loss(two, i), b = step_loss(one, i);
        cr_assert(fabs(a - b) <= 1e-5 * fabs(b), "step %zu: loss %.9g with --tp 2, %.9g without",
                  i + 1, a, b);
    }
    json_t *ranks = json_object_get(two, "ranks");
    cr_assert_eq(json_array_size(ranks), 8);
    for (size_t g = 0; g < 8; g++) {
        json_t *r = json_array_get(ranks, g);
        cr_assert_eq(json_integer_value(json_object_get(r, "tensor_rank")), (json_int_t)(g % 2));
        cr_assert_eq(json_integer_value(json_object_get(r, "pipeline_rank")),
                     (json_int_t)(g / 2 % 2));
        cr_assert_eq(json_integer_value(json_object_get(r, "replica")), (json_int_t)(g / 4));
        json_t *c = json_object_get(r, "tp_comm");
        cr_assert_gt(json_real_value(json_object_get(c, "bytes")), 0, "rank %zu", g);
        cr_assert_gt(json_real_value(json_object_get(c, "seconds")), 0, "rank %zu", g);
        json_t *c1 =
            json_object_get(json_array_get(json_object_get(one, "ranks"), g % 4), "tp_comm");
        cr_assert_eq(json_real_value(json_object_get(c1, "bytes")), 0);
    }
    char *text = pp_test_slurp(trace);
    remove(trace);
    cr_assert(text && strstr(text, "\"name\":\"tp comm\""), "the trace has no tp comm events");
    free(text);
    json_decref(one);
    json_decref(two);
}

/* pprun --tp 2 --sequence-parallel trains the same model (losses within the same tolerance),
 * says so in its summary, and every rank's tensor-parallel traffic is larger than without
 * sequence parallelism (the all-gathers and reduce-scatters besides the LayerNorm gradients'
 * all-reduce: the tp_comm of the JSON summary counts them). */
Test(runtime_tp_pprun, sequence_parallel_trains_like_tp1_and_counts_its_collectives)
{
    const char *base = "--model tiny --schedule gpipe --ranks 2 --microbatches 4 --dp 2 "
                       "--seq 16 --steps 3";
    char args[256];
    json_t *one = run_json(base);
    snprintf(args, sizeof args, "%s --tp 2", base);
    json_t *tp = run_json(args);
    snprintf(args, sizeof args, "%s --tp 2 --sequence-parallel", base);
    json_t *sp = run_json(args);
    cr_assert(json_is_true(json_object_get(sp, "sequence_parallel")));
    cr_assert(json_is_false(json_object_get(tp, "sequence_parallel")));
    for (size_t i = 0; i < 3; i++) {
        double a = step_loss(sp, i), b = step_loss(one, i);
        cr_assert(fabs(a - b) <= 1e-5 * fabs(b),
                  "step %zu: loss %.9g with --tp 2 --sequence-parallel, %.9g without", i + 1, a,
                  b);
    }
    for (size_t g = 0; g < 8; g++) {
        double a = json_real_value(json_object_get(
                   json_object_get(json_array_get(json_object_get(sp, "ranks"), g), "tp_comm"),
                   "bytes")),
               b = json_real_value(json_object_get(
                   json_object_get(json_array_get(json_object_get(tp, "ranks"), g), "tp_comm"),
                   "bytes"));
        cr_assert_gt(a, b, "rank %zu: %g tensor-parallel bytes with SP, %g without", g, a, b);
    }
    json_decref(one);
    json_decref(tp);
    json_decref(sp);
}

Test(runtime_tp_pprun, refuses_layouts_the_split_cannot_take)
{
    struct {
        const char *args, *says;
    } cases[] = {
        {"--tp 3", "--tp 3 must divide the model's 4 attention heads"},
        {"--tp 0", "--tp: invalid value \"0\""},
        {"--tp 4 --sequence-parallel --seq 6",
         "sequence length 6 must be a multiple of --tp 4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_test_run_result r = pp_test_run(PPRUN " %s --steps 1", cases[i].args);
        cr_assert_eq(r.code, 2, "pprun %s: exit %d (stderr: %s)", cases[i].args, r.code, r.err);
        cr_assert(strstr(r.err, cases[i].says), "pprun %s: \"%s\" lacks \"%s\"", cases[i].args,
                  r.err, cases[i].says);
        cr_assert(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "pprun %s: not one line: %s",
                  cases[i].args, r.err);
        pp_test_run_done(&r);
    }
}
