/* test_runtime_pprun_summary.c — pprun's end-of-run summary for a person (without --json) and
 * its --help (issue 17): what a user reads after a run. Runs the built pprun. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "pp_test_run.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

Test(runtime_pprun_summary, a_run_ends_with_throughput_and_every_ranks_peak)
{
    pp_test_run_result r = pp_test_run(PPRUN " --model tiny --ranks 2 --dp 2 --steps 3 --quiet");
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "final loss"), "%s", r.out);
    cr_assert(strstr(r.out, " tokens/s") && strstr(r.out, "model TFLOP/s"), "%s", r.out);
    for (int g = 0; g < 4; g++) { /* D x dp ranks, each with its peak */
        char want[16];
        snprintf(want, sizeof want, "rank %d ", g);
        cr_assert(strstr(r.out, want), "%s missing: %s", want, r.out);
    }
    /* each peak with its binary unit, the tiny model's in MiB rather than fractions of a GiB */
    cr_assert(strstr(r.out, "rank 0 ") && strstr(r.out, " MiB"), "%s", r.out);
    cr_assert(!strstr(r.out, "GiB"), "%s", r.out);
    pp_test_run_done(&r);
}

Test(runtime_pprun_summary, json_keeps_stdout_to_the_json)
{
    pp_test_run_result r = pp_test_run(PPRUN " --model tiny --ranks 2 --steps 2 --quiet --json");
    cr_assert_eq(r.code, 0, "%s", r.err);
    json_error_t e;
    json_t *j = json_loads(r.out, 0, &e);
    cr_assert(j, "stdout is JSON alone: %s", e.text);
    json_decref(j);
    pp_test_run_done(&r);
}

Test(runtime_pprun_summary, help_names_the_backends_and_transports)
{
    pp_test_run_result r = pp_test_run(PPRUN " --help");
    cr_assert_eq(r.code, 0);
    const char *head = r.out, *nl = strstr(head, "\n\n");
    cr_assert(nl);
    char intro[1024];
    snprintf(intro, sizeof intro, "%.*s", (int)(nl - head), head);
    cr_assert(strstr(intro, "--backend cuda") && strstr(intro, "MPI") &&
                  strstr(intro, "CPU backend") && strstr(intro, "summary"),
              "the description says what pprun does: %s", intro);
    pp_test_run_done(&r);
}
