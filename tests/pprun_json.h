/* pprun_json.h — shared by the suites that compare pprun runs across transports
 * (test_runtime_mpi.c, test_ckpt_mpi.c: threads vs MPI; test_cuda_nccl.c: threads vs NCCL):
 * environment options for the children, pprun's --json summary parsed, and two runs' training
 * compared bit for bit. Header-only (static inline) so each suite picks it up by including it. */
#ifndef PPRUN_JSON_H
#define PPRUN_JSON_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_test_run.h"

#define MPIRUN "mpirun --oversubscribe --allow-run-as-root"

/* Appends opt to the colon-separated options in variable var (keeping what CI set there). */
static inline void pp_test_add_option(const char *var, const char *opt)
{
    const char *old = getenv(var);
    char v[1024];
    snprintf(v, sizeof v, "%s%s%s", old ? old : "", old && *old ? ":" : "", opt);
    setenv(var, v, 1);
}

/* Skips the test (one line) unless mpirun exists and pprun was built with MPI. */
static inline void pp_test_need_mpi(void)
{
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    /* For an ASan build of pprun (no effect otherwise): Open MPI keeps allocations until exit
     * in its libraries and in components it dlopens. Keep the components loaded and unwind
     * malloc stacks fully (Open MPI and OpenBLAS lack frame pointers), so the suppressions
     * can name the library each such allocation comes from. */
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
    pp_test_add_option("ASAN_OPTIONS", "fast_unwind_on_malloc=0");
    pp_test_add_option("LSAN_OPTIONS",
                       "suppressions=" PP_FIXTURES_DIR "/lsan_openmpi.supp:print_suppressions=0");
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("mpirun not found: the MPI transport tests need Open MPI (openmpi-bin)");
    pp_test_run_result r =
        pp_test_run(PP_BINARY_DIR "/runtime/pprun --transport mpi --ranks 1 --steps 1 --quiet");
    int without = strstr(r.err, "built without MPI") != NULL;
    pp_test_run_done(&r);
    if (without)
        cr_skip_test("pprun was built without MPI: the MPI transport tests do not apply");
}

static inline json_t *pp_test_parse_json(const char *text, const char *what)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    cr_assert(j, "%s: not JSON (line %d: %s):\n%.400s", what, e.line, e.text, text);
    return j;
}

/* Every step's loss and gradient norm, and the parameter checksum after the last step, of run
 * b equal to run a's bit for bit (a: the threads run; b_name says what b is: "MPI", "NCCL"). */
static inline void pp_test_expect_same_training(json_t *a, json_t *b, const char *args,
                                                const char *b_name)
{
    json_t *sa = json_object_get(a, "per_step"), *sb = json_object_get(b, "per_step");
    cr_assert_gt(json_array_size(sa), 0);
    cr_assert_eq(json_array_size(sb), json_array_size(sa));
    for (size_t i = 0; i < json_array_size(sa); i++) {
        const char *keys[] = {"loss", "grad_norm"};
        for (int k = 0; k < 2; k++) {
            double x = json_real_value(json_object_get(json_array_get(sa, i), keys[k]));
            double y = json_real_value(json_object_get(json_array_get(sb, i), keys[k]));
            cr_assert(x == y, "pprun %s, step %zu: %s %.17g with threads, %.17g over %s", args,
                      i + 1, keys[k], x, y, b_name);
        }
    }
    const char *ca = json_string_value(json_object_get(a, "param_checksum"));
    const char *cb = json_string_value(json_object_get(b, "param_checksum"));
    cr_assert(ca && cb && strlen(ca) == 16, "pprun %s: no param_checksum", args);
    cr_assert_str_eq(cb, ca, "pprun %s: parameters after the last step differ (threads %s, %s %s)",
                     args, ca, b_name, cb);
}

/* The built pprun's --json summary for `args` (with --quiet), parsed; the run must exit 0. */
static inline json_t *pp_test_pprun_json(const char *args)
{
    pp_test_run_result r = pp_test_run(PP_BINARY_DIR "/runtime/pprun %s --json --quiet", args);
    cr_assert_eq(r.code, 0, "pprun %s: exit %d: %s", args, r.code, r.err);
    json_t *j = pp_test_parse_json(r.out, args);
    pp_test_run_done(&r);
    return j;
}

#endif
