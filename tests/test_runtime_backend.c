/* test_runtime_backend.c — the executor's choice of backend, on a machine without a GPU:
 *   - the staging path (what the executor does for a CUDA backend's device memory: download,
 *     send / all-reduce, upload; backend copy / add for REDUCE packing, the tied embedding and
 *     dp; chunked downloads for the norm) run on CPU backends gives the plain CPU run's
 *     losses, gradient norms, gradients and parameters bit for bit, for every schedule with
 *     dp = 2 (REDUCE of the bidirectional ones, tied embedding, dp all-reduce, clipping);
 *   - a CUDA backend where there is none is PP_ERR_UNSUPPORTED saying why, and pprun says so in
 *     one line with exit code 2; bad --backend / --precision values are refused the same way.
 * The CUDA backend itself is checked against the CPU in test_cuda_exec.c (needs a GPU).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "exec_backend_pair.h"
#include "pp_test_run.h"

#define PPRUN PP_BINARY_DIR "/runtime/pprun"

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Two steps with the optimizer, then one without: everything compared bit for bit. */
static void staged_equals_plain(const char *kind)
{
    pp_model_cfg m = ebp_model();
    const int dp = 2, steps = 3;
    pp_rt_executor *ex[2];
    EBP_OK(ebp_create(&m, kind, dp, PP_RT_BACKEND_CPU, PP_PREC_FP32, &ex[0]));
    EBP_OK(ebp_create(&m, kind, dp, PP_RT_BACKEND_CPU_STAGED, PP_PREC_FP32, &ex[1]));
    int32_t *b = ebp_batches(ex[0], &m, steps);
    size_t per = (size_t)pp_rt_executor_batch_rows(ex[0]) * (EBP_T + 1);
    for (int i = 0; i < steps; i++) {
        pp_rt_step_result r[2];
        for (int e = 0; e < 2; e++)
            EBP_OK(pp_rt_executor_step(ex[e], b + per * (size_t)i, i < steps - 1, &r[e]));
        cr_assert(r[0].loss == r[1].loss, "%s step %d: loss %.9g plain vs %.9g staged", kind, i,
                  r[0].loss, r[1].loss);
        cr_assert(r[0].grad_norm == r[1].grad_norm,
                  "%s step %d: gradient norm %.9g plain vs %.9g staged", kind, i, r[0].grad_norm,
                  r[1].grad_norm);
    }
    size_t n[2];
    float *g0 = ebp_download(ex[0], dp, 0, &n[0]), *g1 = ebp_download(ex[1], dp, 0, &n[1]);
    cr_assert_eq(n[0], n[1]);
    cr_assert(memcmp(g0, g1, n[0] * sizeof *g0) == 0, "%s: gradients differ", kind);
    uint64_t c[2];
    for (int e = 0; e < 2; e++)
        EBP_OK(pp_rt_executor_param_checksum(ex[e], &c[e]));
    cr_assert_eq(c[0], c[1], "%s: parameter checksums %016llx plain vs %016llx staged", kind,
                 (unsigned long long)c[0], (unsigned long long)c[1]);
    free(g0);
    free(g1);
    free(b);
    pp_rt_executor_destroy(ex[0]);
    pp_rt_executor_destroy(ex[1]);
}

Test(runtime_backend, staged_transfers_equal_the_cpu_run_bit_for_bit)
{
    for (int k = 0; k < EBP_N_KINDS; k++)
        staged_equals_plain(ebp_kinds[k]);
}

Test(runtime_backend, bad_backend_kind_is_invalid)
{
    pp_model_cfg m = ebp_model();
    pp_rt_executor *ex = NULL;
    cr_assert_eq(ebp_create(&m, "1f1b", 1, 7, PP_PREC_FP32, &ex), PP_ERR_INVALID);
    cr_assert_null(ex);
    cr_assert(strstr(pp_err_msg(), "backend kind 7"), "%s", pp_err_msg());
}

Test(runtime_backend, cuda_without_a_device_is_unsupported)
{
    if (pp_cuda_device_count() > 0)
        cr_skip_test("skipped: this machine has a CUDA device (test_cuda_exec covers it)");
    pp_model_cfg m = ebp_model();
    pp_rt_executor *ex = NULL;
    cr_assert_eq(ebp_create(&m, "1f1b", 1, PP_RT_BACKEND_CUDA, PP_PREC_FP32, &ex),
                 PP_ERR_UNSUPPORTED);
    cr_assert_null(ex);
    cr_assert(strstr(pp_err_msg(), "built without CUDA") || strstr(pp_err_msg(), "no CUDA device"),
              "%s", pp_err_msg());
}

Test(runtime_backend, pprun_backend_cuda_without_a_device_is_one_line_and_exit_2)
{
    if (pp_cuda_device_count() > 0)
        cr_skip_test("skipped: this machine has a CUDA device");
    pp_test_run_result r = pp_test_run(PPRUN " --backend cuda --steps 1 --transport thread");
    cr_assert_eq(r.code, 2, "exit code %d, expected 2 (stderr: %s)", r.code, r.err);
    cr_assert_eq(lines(r.err), 1, "expected one line, got:\n%s", r.err);
    cr_assert(strstr(r.err, "--backend cuda") &&
                  (strstr(r.err, "built without CUDA") || strstr(r.err, "no CUDA device")),
              "%s", r.err);
    cr_assert_str_empty(r.out);
    pp_test_run_done(&r);
}

Test(runtime_backend, pprun_refuses_bad_backend_and_precision_values)
{
    struct {
        const char *args, *says;
    } cases[] = {
        {"--backend gpu", "--backend: invalid value \"gpu\": expected cpu"}, /* the rest: every_row_is_in_pprun_help_and_has_a_maker */
        {"--precision fp16", "--precision: invalid value \"fp16\": expected fp32 or bf16"},
        {"--precision bf16", "--precision bf16 needs --backend cuda"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_test_run_result r = pp_test_run(PPRUN " %s --steps 1", cases[i].args);
        cr_assert_eq(r.code, 2, "pprun %s: exit code %d (stderr: %s)", cases[i].args, r.code,
                     r.err);
        cr_assert_eq(lines(r.err), 1, "pprun %s: expected one line, got:\n%s", cases[i].args,
                     r.err);
        cr_assert(strstr(r.err, cases[i].says), "pprun %s: \"%s\" not in: %s", cases[i].args,
                  cases[i].says, r.err);
        pp_test_run_done(&r);
    }
}

Test(runtime_backend, pprun_backend_cpu_is_the_default)
{
    pp_test_run_result a = pp_test_run(PPRUN " --steps 2 --json --quiet --transport thread");
    pp_test_run_result b =
        pp_test_run(PPRUN " --steps 2 --json --quiet --transport thread --backend cpu "
                          "--precision fp32");
    cr_assert_eq(a.code, 0, "%s", a.err);
    cr_assert_eq(b.code, 0, "%s", b.err);
    const char *ca = strstr(a.out, "\"param_checksum\""), *cb = strstr(b.out, "\"param_checksum\"");
    cr_assert(ca && cb, "no param_checksum in the JSON: %s", a.out);
    cr_assert_eq(strncmp(ca, cb, 40), 0, "checksums differ: %.40s vs %.40s", ca, cb);
    pp_test_run_done(&a);
    pp_test_run_done(&b);
}

/* The backend table's optional device ops, as the executor asks them, on a host backend:
 * every answer is the host's (nothing to wait for, no device memory, no device timing). */
Test(runtime_backend, a_host_backend_answers_the_device_ops_as_the_host)
{
    pp_backend *be = NULL;
    cr_assert_eq(pp_backend_create(PP_RT_BACKEND_CPU_STAGED, 0, PP_PREC_FP32, &be), PP_OK, "%s",
                 pp_err_msg());
    cr_assert_str_eq(pp_backend_name(be), "cpu");
    cr_expect_eq(pp_backend_is_device(be), 0);
    cr_expect_eq(pp_backend_sync(be), PP_OK);
    size_t f = 1, t = 1;
    cr_expect_eq(pp_backend_mem_info(be, &f, &t), PP_ERR_UNSUPPORTED);
    cr_expect(f == 0 && t == 0, "free %zu total %zu", f, t);
    cr_expect_eq(pp_backend_has_marks(be), 0);
    pp_backend_marks *mk = (pp_backend_marks *)be;
    cr_expect_eq(pp_backend_marks_create(be, 4, &mk), PP_ERR_UNSUPPORTED);
    cr_expect_null(mk);
    pp_backend_marks_destroy(NULL);
    pp_backend_destroy(be);
    cr_expect_eq(pp_backend_device_count(PP_RT_BACKEND_CPU), 0);
    cr_expect_eq(pp_backend_create(9, 0, PP_PREC_FP32, &be), PP_ERR_INVALID);
    cr_expect_null(be);
    cr_expect(strstr(pp_err_msg(), "backend kind 9"), "%s", pp_err_msg());
}

/* Every backend row (one file per row, listed by CMake) reaches pprun and the runtime: each
 * --backend choice is in pprun --help with its row's line and in the refusal of a bad value,
 * the other rows (tests' backends) in neither; every kind has a maker that answers with a
 * backend whose memory is what its row says, or with PP_ERR_UNSUPPORTED where a device
 * backend has no device here, never "no such kind". */
Test(runtime_backend, every_row_is_in_pprun_help_and_has_a_maker)
{
    pp_test_run_result h = pp_test_run(PPRUN " --help");
    pp_test_run_result bad = pp_test_run(PPRUN " --backend none-such --steps 1");
    cr_assert_eq(h.code, 0, "%s", h.err);
    cr_assert_eq(bad.code, 2, "%s", bad.err);
    const char *help = strstr(h.out, "--backend K");
    cr_assert(help, "no --backend in pprun --help:\n%s", h.out);
    for (int k = 0; k < PP_RT_BACKEND__COUNT; k++) {
        const pp_backend_row *row = pp_backend_row_of(k);
        char line[160], word[64];
        snprintf(line, sizeof line, "%s: %s\n", row->name, row->help);
        snprintf(word, sizeof word, " %s", row->name); /* "expected cpu or cuda" */
        cr_assert_eq(strstr(help, line) != NULL, row->choice,
                     "%s: expected %s pprun --help's --backend lines", row->name,
                     row->choice ? "in" : "not in");
        cr_assert_eq(strstr(bad.err, word) != NULL, row->choice, "%s: expected %s \"%s\"",
                     row->name, row->choice ? "in" : "not in", bad.err);
        pp_backend *be = NULL;
        pp_status st = pp_backend_create(k, 0, PP_PREC_FP32, &be);
        cr_assert(st == PP_OK || (st == PP_ERR_UNSUPPORTED && row->device_memory &&
                                  pp_backend_device_count(k) == 0),
                  "%s: %s", row->name, pp_err_msg());
        if (be)
            cr_assert_eq(pp_backend_is_device(be), row->device_memory, "%s", row->name);
        pp_backend_destroy(be);
    }
    pp_test_run_done(&h);
    pp_test_run_done(&bad);
}
