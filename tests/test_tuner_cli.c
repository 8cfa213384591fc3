/* test_tuner_cli.c — `pptune schedule`: the JSON form read back gives the same schedule, the
 * command's output and figures, and its errors (message and exit status) for bad options, bad
 * files and invalid schedules; -o never leaves a partial file. Runs the built program. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_profile.h"
#include "pp_sched.h"
#include "pp_test_run.h"
#include "sched_equal.h"
#include "sched_json.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"

/* ---- JSON in-process round trip ------------------------------------------------------------- */

static char *json_of(const pp_sched *s)
{
    pp_cost cost;
    pp_sim_result sim;
    cr_assert_eq(pp_cost_init_unit(&cost, s, 2.0), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sim_run(s, &cost, 0, &sim), PP_OK, "%s", pp_err_msg());
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_json(s, &sim, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    pp_sim_result_fini(&sim);
    pp_cost_fini(&cost);
    return buf;
}

Test(tuner_cli, json_written_then_read_gives_an_equal_schedule)
{
    int n;
    const pp_sched_desc *g = pp_sched_generators(&n);
    for (int i = 0; i < n; i++) {
        pp_sched_params p = {.ranks = 4, .microbatches = 8, .layers = 30, .uneven = 1};
        if (!strcmp(g[i].name, "bitpipe") || !strcmp(g[i].name, "interleaved"))
            p.layers = 46; /* 8 stages: (46 + 2) / 8 = 6 */
        pp_sched *s, *back;
        cr_assert_eq(pp_sched_generate(g[i].name, &p, &s), PP_OK, "%s: %s", g[i].name,
                     pp_err_msg());
        char *json = json_of(s);
        cr_assert_eq(pp_sched_read_json(json, "x.json", &back), PP_OK, "%s: %s", g[i].name,
                     pp_err_msg());
        char why[256];
        cr_assert(pp_test_sched_equal(s, back, why, sizeof why), "%s: %s", g[i].name, why);
        free(json);
        pp_sched_destroy(s);
        pp_sched_destroy(back);
    }
}

Test(tuner_cli, json_reader_accepts_reduces_given_only_on_the_actions)
{
    const char *j = "{\"kind\": \"mini\", \"ranks\": 1, \"microbatches\": 1, \"stages\": "
                    "[[{\"rank\": 0, \"layers\": [0, 1]}]], \"ops\": [[{\"op\": \"F\", "
                    "\"stage\": 0, \"mb\": 0}, {\"op\": \"B\", \"stage\": 0, \"mb\": 0}, "
                    "{\"op\": \"REDUCE\", \"stages\": [[0, 0]], \"ranks\": [0]}]]}";
    pp_sched *s;
    cr_assert_eq(pp_sched_read_json(j, "mini.json", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(s->n_reduces, 1);
    cr_assert_eq(s->ops[0][2].op, PP_OP_REDUCE);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
}

/* ---- running the program ---------------------------------------------------------------------- */

static char tmpdir[64];

/* The last run's result for the checks after it (freed by the next run or the suite's end). */
static pp_test_run_result R;

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/pptune-cli-XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
    pp_test_run_done(&R);
}

/* Runs pptune with args (a shell fragment) in tmpdir, leaving the result in R. */
static void run(const char *args)
{
    pp_test_run_done(&R);
    R = pp_test_run("cd '%s' && '%s' %s", tmpdir, PPTUNE, args);
}

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *fp = fopen(path, "w");
    cr_assert(fp);
    fputs(text, fp);
    fclose(fp);
}

static void expect_fail(const char *args, int status, const char *msg)
{
    run(args);
    cr_assert_eq(R.code, status, "pptune %s: exit %d, stderr: %s", args, R.code, R.err);
    cr_assert(strstr(R.err, msg), "pptune %s: stderr \"%s\" lacks \"%s\"", args, R.err, msg);
}

TestSuite(tuner_cli_run, .init = make_tmpdir, .fini = remove_tmpdir);

Test(tuner_cli_run, default_output_is_a_summary_and_a_timeline)
{
    run("schedule --kind 1f1b --ranks 4 --microbatches 8");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "1f1b: D = 4 ranks, N = 8 micro-batches"), "%s", R.out);
    cr_assert(strstr(R.out, "bubble over ideal     0.375  (idle / compute time"), "%s", R.out);
    cr_assert(strstr(R.out, "bubble over total     0.272727"), "%s", R.out); /* 3/11 */
    cr_assert(strstr(R.out, "peak activations      4 3 2 1  (ranks 0..3"), "%s", R.out);
    cr_assert(strstr(R.out, "cross-rank transfers  48"), "%s", R.out); /* 2 x 8 x 3 hops */
    cr_assert(strstr(R.out, "rank 3  "), "%s", R.out);
}

Test(tuner_cli_run, seed_article_figures)
{
    run("schedule --kind interleaved --ranks 4 --microbatches 8 --chunks 2 --format json");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "\"bubble_over_ideal\": 0.1875,"), "%s", R.out);
    run("schedule --kind 1f1b --ranks 4 --microbatches 32 --format json");
    cr_assert(strstr(R.out, "\"bubble_over_ideal\": 0.09375,"), "%s", R.out);
}

Test(tuner_cli_run, help_lists_every_schedule)
{
    run("schedule --help");
    cr_assert_eq(R.code, 0);
    int n;
    const pp_sched_desc *g = pp_sched_generators(&n);
    for (int i = 0; i < n; i++)
        cr_assert(strstr(R.out, g[i].name), "%s missing from --help", g[i].name);
    cr_assert(strstr(R.out, "--check FILE"));
    /* the CSV grammar it writes and reads: torch 2.15's, WAIT actions and the pair cell */
    static const char *const grammar[] = {"torch 2.15", "WAIT_SEND_F", "WAIT_SEND_B",
                                          "WAIT_REDUCE_GRAD", "OVERLAP_F_B", "compute_only",
                                          "compute_comms"};
    for (size_t i = 0; i < sizeof grammar / sizeof grammar[0]; i++)
        cr_assert(strstr(R.out, grammar[i]), "%s missing from --help", grammar[i]);
}

Test(tuner_cli_run, bad_options_exit_2_naming_the_value)
{
    expect_fail("schedule --kind zigzag --ranks 4 --microbatches 8", 2,
                "unknown schedule \"zigzag\": expected one of gpipe");
    expect_fail("schedule --kind 1f1b --ranks x --microbatches 8", 2,
                "--ranks expects an integer >= 1, got \"x\"");
    expect_fail("schedule --kind 1f1b --ranks 0 --microbatches 8", 2,
                "--ranks expects an integer >= 1, got \"0\"");
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches 8 --fb-ratio 0", 2,
                "--fb-ratio expects a number > 0");
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches 8 --format png", 2,
                "--format expects one of text, json, csv, ascii, svg, got \"png\"");
    expect_fail("schedule --kind 1f1b --ranks 4", 2, "needs --ranks D and --microbatches N");
    expect_fail("schedule --ranks 4 --microbatches 8", 2, "needs --kind");
    expect_fail("schedule --kind bitpipe --ranks 3 --microbatches 6", 2, "even number of ranks");
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches 8 --bogus", 2,
                "unknown option \"--bogus\"");
}

/* issue 20: a first/last-stage split shows in the schedule's stages (JSON: "layers") */
Test(tuner_cli_run, first_last_stage_split)
{
    run("schedule --kind 1f1b --ranks 4 --microbatches 4 --layers 12 --first-stage-layers 4 "
        "--last-stage-layers 2 --format json");
    cr_assert_eq(R.code, 0, "%s", R.err);
    json_error_t e;
    json_t *j = json_loads(R.out, 0, &e);
    cr_assert(j, "%s", R.out);
    json_t *st = json_array_get(json_object_get(j, "stages"), 0); /* pipe 0 */
    cr_assert(json_is_array(st), "%s", R.out);
    int want[] = {4, 3, 3, 2};
    for (int k = 0; k < 4; k++) {
        json_t *g = json_array_get(st, (size_t)k);
        json_t *ly = json_object_get(g, "layers");
        int b = (int)json_integer_value(json_array_get(ly, 0));
        int en = (int)json_integer_value(json_array_get(ly, 1));
        cr_assert_eq(en - b, want[k], "stage %d: %d layers", k, en - b);
    }
    json_decref(j);
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches 4 --first-stage-layers 4", 2,
                "need --layers L");
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches 4 --layers 12 "
                "--first-stage-layers 4 --last-stage-layers 3",
                2, "leave 5 of the 12 layers for the other 2 stages");
}

Test(tuner_cli_run, check_of_a_missing_file_exits_2)
{
    expect_fail("schedule --check nothere.json", 2, "nothere.json: cannot open");
}

/* A valid 2-rank, 1-micro-batch 1F1B in JSON, with one action replaced by `bad`. */
static void write_mini_json(const char *name, const char *rank1_ops)
{
    char text[2048];
    snprintf(text, sizeof text,
             "{\"kind\": \"mini\", \"ranks\": 2, \"microbatches\": 1, \"chunks\": 1,\n"
             " \"stages\": [[{\"rank\": 0, \"layers\": [0, 1]}, {\"rank\": 1, \"layers\": [1, "
             "2]}]],\n"
             " \"ops\": [[{\"op\": \"F\", \"pipe\": 0, \"stage\": 0, \"mb\": 0},\n"
             "          {\"op\": \"SEND_F\", \"pipe\": 0, \"stage\": 0, \"mb\": 0},\n"
             "          {\"op\": \"RECV_B\", \"pipe\": 0, \"stage\": 0, \"mb\": 0},\n"
             "          {\"op\": \"B\", \"pipe\": 0, \"stage\": 0, \"mb\": 0}],\n"
             "         [%s]]}\n",
             rank1_ops);
    write_file(name, text);
}

#define R1_GOOD                                                                                    \
    "{\"op\": \"RECV_F\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}, "                                 \
    "{\"op\": \"F\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}, "                                      \
    "{\"op\": \"B\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}, "                                      \
    "{\"op\": \"SEND_B\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}"

Test(tuner_cli_run, check_accepts_a_hand_written_json_schedule)
{
    write_mini_json("mini.json", R1_GOOD);
    run("schedule --check mini.json --fb-ratio 1");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "makespan              4\n"), "%s", R.out);
}

Test(tuner_cli_run, malformed_json_names_the_field)
{
    write_mini_json("sched.json", R1_GOOD ", {\"op\": \"X\"}");
    expect_fail("schedule --check sched.json", 2,
                "sched.json: ops[1][4].op: expected one of F, B, I, W, SEND_F, RECV_F, SEND_B, "
                "RECV_B, REDUCE, got \"X\"");
    write_mini_json("stage.json", "{\"op\": \"F\", \"pipe\": 0, \"stage\": 7, \"mb\": 0}");
    expect_fail("schedule --check stage.json", 2,
                "stage.json: ops[1][0].stage: expected an integer in 0..1, got 7");
    write_file("broken.json", "{\"ranks\": 2,,}");
    expect_fail("schedule --check broken.json", 2, "broken.json:1:");
    expect_fail("schedule --check broken.json", 2, "not valid JSON");
}

Test(tuner_cli_run, check_rejects_an_invalid_schedule_with_the_checkers_message)
{
    /* rank 1 runs its backward before its forward */
    write_mini_json("swap.json", "{\"op\": \"RECV_F\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}, "
                                 "{\"op\": \"B\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}, "
                                 "{\"op\": \"F\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}, "
                                 "{\"op\": \"SEND_B\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}");
    expect_fail("schedule --check swap.json", 2, "swap.json: rank 1, action 1");
    cr_assert(strstr(R.err, "backward before its forward"), "%s", R.err);
}

static int tmp_leftovers(void)
{
    DIR *d = opendir(tmpdir);
    cr_assert(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

Test(tuner_cli_run, output_file_is_written_whole_or_not_at_all)
{
    write_file("out.json", "old\n");
    write_mini_json("swap.json", "{\"op\": \"B\", \"pipe\": 0, \"stage\": 1, \"mb\": 0}");
    expect_fail("schedule --check swap.json --format json -o out.json", 2, "swap.json");
    char path[256];
    snprintf(path, sizeof path, "%s/out.json", tmpdir);
    char *old = pp_test_slurp(path);
    cr_assert_str_eq(old, "old\n", "a failed run must leave the old file");
    free(old);
    cr_assert_eq(tmp_leftovers(), 0, "no temporary file left behind");
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches 8 -o nodir/out.json", 1,
                "nodir/out.json");
    /* success: complete, and --check reads it back */
    run("schedule --kind chimera --ranks 4 --microbatches 8 --format json -o out.json");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert_str_eq(R.out, "");
    cr_assert_eq(tmp_leftovers(), 0);
    run("schedule --check out.json");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "chimera: D = 4 ranks, N = 8"), "%s", R.out);
}

/* Every -o honours "-" as standard output (issue 31 item 6): no file named "-" is written, and
 * what the file would hold is on stdout. */
Test(tuner_cli_run, every_dash_o_dash_writes_to_stdout)
{
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"schedule --kind 1f1b --ranks 4 --microbatches 8 --format json -o -", "\"ranks\""},
        {"simulate --model tiny --cluster dgx-h100 --schedule 1f1b -p 2 -b 1 --timeline -o -",
         "rank 1"},
        {"probe --preset dgx-h100 -o -", "\"fingerprint\""},
    };
    char dash[256];
    snprintf(dash, sizeof dash, "%s/-", tmpdir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(cases[i].args);
        cr_assert_eq(R.code, 0, "pptune %s: %s", cases[i].args, R.err);
        cr_expect(access(dash, F_OK) != 0, "pptune %s wrote a file named \"-\"", cases[i].args);
        unlink(dash);
        cr_expect(strstr(R.out, cases[i].want), "pptune %s: stdout lacks %s: %s", cases[i].args,
                  cases[i].want, R.out);
    }
}

/* --version (issue 31 item 5): pptune and pprun print the same version with the git revision
 * the build was configured from, a commit of this checkout's history (the project version
 * alone outside a git checkout). */
Test(tuner_cli_run, version_names_the_git_revision)
{
    run("--version");
    cr_assert_eq(R.code, 0, "%s", R.err);
    char version[64] = "", rev[64] = "";
    int n = sscanf(R.out, "pptune %63s (git %63[0-9a-z-])", version, rev);
    cr_assert_geq(n, 1, "pptune --version: %s", R.out);
    char *mine = strdup(R.out + strlen("pptune"));
    pp_test_run_result P = pp_test_run("'%s/runtime/pprun' --version", PP_BINARY_DIR);
    cr_assert_eq(P.code, 0, "%s", P.err);
    cr_expect(!strncmp(P.out, "pprun", 5) && !strcmp(P.out + 5, mine),
              "pprun --version \"%s\" differs from pptune's \"%s\"", P.out, R.out);
    pp_test_run_done(&P);
    free(mine);
    pp_test_run_result G =
        pp_test_run("git -C '%s/..' rev-parse --is-inside-work-tree", PP_FIXTURES_DIR);
    int in_git = G.code == 0;
    pp_test_run_done(&G);
    if (!in_git) {
        cr_expect_eq(n, 1, "outside git: no revision expected: %s", R.out);
        return;
    }
    cr_assert_eq(n, 2, "a git checkout: pptune --version names no revision: %s", R.out);
    char *dirty = strstr(rev, "-dirty");
    if (dirty)
        *dirty = '\0';
    G = pp_test_run("git -C '%s/..' merge-base --is-ancestor %s HEAD", PP_FIXTURES_DIR, rev);
    cr_expect_eq(G.code, 0, "revision %s is not in this checkout's history", rev);
    pp_test_run_done(&G);
}

/* Help and errors list what the registries hold (item 5): every schedule of the registry in
 * simulate's and search's help and in an unknown schedule's error; every export target in
 * export's help and usage error. */
Test(tuner_cli_run, help_and_errors_list_every_registry_row)
{
    int n;
    const pp_sched_desc *g = pp_sched_generators(&n);
    static const char *lists[] = {"simulate --help", "search --help",
                                  "simulate --model tiny --schedule zigzag -p 2 -b 1",
                                  "schedule --kind zigzag --ranks 2 --microbatches 2"};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        run(lists[k]);
        for (int i = 0; i < n; i++)
            cr_expect(strstr(R.out, g[i].name) || strstr(R.err, g[i].name),
                      "pptune %s does not list %s", lists[k], g[i].name);
    }
    int nt;
    const pp_export_target *t = pp_profile_export_targets(&nt);
    run("export --help");
    for (int i = 0; i < nt; i++)
        cr_expect(strstr(R.out, t[i].format), "export --help lacks %s", t[i].format);
    run("export");
    for (int i = 0; i < nt; i++)
        cr_expect(strstr(R.err, t[i].format), "export's usage error lacks %s", t[i].format);
    run("--help");
    cr_expect(strstr(R.out, "--version"), "%s", R.out);
}

Test(tuner_cli_run, text_and_json_round_trip_through_the_command)
{
    const char *kinds[] = {"gpipe", "1f1b", "interleaved", "chimera", "bitpipe", "dualpipev"};
    for (int i = 0; i < 6; i++) { /* dualpipev: its overlapped pairs in both forms */
        char args[256];
        snprintf(args, sizeof args,
                 "schedule --kind %s --ranks 4 --microbatches 8 --format text -o a.txt", kinds[i]);
        run(args);
        cr_assert_eq(R.code, 0, "%s", R.err);
        snprintf(args, sizeof args,
                 "schedule --kind %s --ranks 4 --microbatches 8 --format json "
                 "-o a.json",
                 kinds[i]);
        run(args);
        cr_assert_eq(R.code, 0, "%s", R.err);
        char path[256];
        snprintf(path, sizeof path, "%s/a.txt", tmpdir);
        char *text = pp_test_slurp(path);
        run("schedule --check a.txt --format text");
        cr_assert_eq(R.code, 0, "%s", R.err);
        cr_assert_str_eq(R.out, text, "%s: text -> --check -> text differs", kinds[i]);
        run("schedule --check a.json --format text");
        cr_assert_eq(R.code, 0, "%s", R.err);
        cr_assert_str_eq(R.out, text, "%s: json -> --check -> text differs", kinds[i]);
        free(text);
    }
}

/* gpipe, D = 2, N = 2, in torch 2.15's compute_comms form */
#define GPIPE_2_2_COMMS                                                                            \
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,"             \
    "0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"                                                             \
    "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,"          \
    "1WAIT_SEND_B0,1WAIT_SEND_B1\n"

Test(tuner_cli_run, svg_and_csv_formats)
{
    run("schedule --kind gpipe --ranks 2 --microbatches 2 --format csv");
    cr_assert_eq(R.code, 0, "%s", R.err);
    /* PyTorch's compute_comms form: REDUCE_GRAD and its wait after each stage's last backward,
     * a wait for every send */
    cr_assert_str_eq(R.out, GPIPE_2_2_COMMS);
    run("schedule --kind gpipe --ranks 2 --microbatches 2 --format csv-compute");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert_str_eq(R.out, "0F0,0F1,0B0,0B1\n1F0,1F1,1B0,1B1\n");
    run("schedule --kind gpipe --ranks 2 --microbatches 2 --format svg");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "<svg") && strstr(R.out, "</svg>"));
}

/* ---- PyTorch pipelining's CSV through the command ------------------------------------------- */

/* The zero-bubble family through the command: the timeline and its legend know I and W, and a
 * PyTorch CSV with I, W and DualPipeV's OVERLAP_F_B pairs (PyTorch's own test artifact) checks,
 * simulates and reads as pptune's dualpipev. */
Test(tuner_cli_run, split_backward_schedules_show_and_check)
{
    run("schedule --kind zbv --ranks 4 --microbatches 8 --width 102");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "zbv: D = 4 ranks, N = 8 micro-batches, v = 2 chunks per rank"), "%s",
              R.out);
    cr_assert(strstr(R.out, "I = W = 1 x F"), "%s", R.out);
    cr_assert(strstr(R.out, "makespan              25.5\n"), "%s", R.out);
    cr_assert(strstr(R.out, "peak activations      4 4 4 4  (ranks 0..3; micro-batches x L/D "
                            "layers, held from F to W)"),
              "%s", R.out);
    cr_assert(strstr(R.out, "held for W            0.5 1.5 2.5 3.5"), "%s", R.out);
    cr_assert(strstr(R.out, "I/W input/weight gradient"), "%s", R.out);
    cr_assert(strstr(R.out, "rank 3  ......F0F0F1F1F2F2F3F3I0W0F4I0W0"), "%s", R.out);
    char args[512];
    snprintf(args, sizeof args, "schedule --check '%s/pytorch/dualpipev_4rank_10mb.csv'",
             PP_FIXTURES_DIR);
    run(args);
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "csv: D = 4 ranks, N = 10 micro-batches, v = 2 chunks per rank"),
              "%s", R.out);
    char *theirs = strdup(R.out);
    run("schedule --kind dualpipev --ranks 4 --microbatches 10");
    cr_assert_eq(R.code, 0, "%s", R.err);
    /* the same figures as the generator's: everything after the title line */
    cr_assert_str_eq(strchr(theirs, '\n'), strchr(R.out, '\n'));
    free(theirs);
    run("schedule --kind dualpipev --ranks 4 --microbatches 6");
    cr_assert_eq(R.code, 2);
    cr_assert(strstr(R.err, "dualpipev needs at least as many micro-batches as stages (N >= 2 x "
                            "D = 8), got N = 6"),
              "%s", R.err);
}


Test(tuner_cli_run, check_reads_a_pytorch_csv)
{
    /* PyTorch's compute_comms shape: receives posted early, REDUCE_GRAD, CRLF rows */
    char args[512];
    snprintf(args, sizeof args, "schedule --check '%s/pytorch/interleaved_2rank_4stage_comms.csv'",
             PP_FIXTURES_DIR);
    run(args);
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "csv: D = 2 ranks, N = 4 micro-batches, v = 2 chunks per rank"), "%s",
              R.out);
    cr_assert(strstr(R.out, "makespan              13.5\n"), "%s", R.out); /* as interleaved */
    /* torch 2.15's own dumps, WAIT cells and all: the smallest the issue names, and DualPipeV's
     * overlapped pairs with communication (as pptune's dualpipev: 13 = 3N + D - 1) */
    snprintf(args, sizeof args,
             "schedule --check '%s/pytorch/torch-2.15_interleaved1f1b_1rank_2stage_1mb_comms.csv'",
             PP_FIXTURES_DIR);
    run(args);
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "csv: D = 1 ranks, N = 1 micro-batches, v = 2 chunks per rank"), "%s",
              R.out);
    snprintf(args, sizeof args,
             "schedule --check '%s/pytorch/torch-2.15_dualpipev_2rank_4mb_comms.csv'",
             PP_FIXTURES_DIR);
    run(args);
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert(strstr(R.out, "makespan              13\n"), "%s", R.out);
    /* compute_only, detected by its content under any name, and written back as PyTorch's
     * compute_comms form: the schedule pptune generates */
    write_file("order", "0F0,0F1,0B0,0B1\n,1F0,1F1,1B0,1B1\n");
    run("schedule --check order --format csv");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert_str_eq(R.out, GPIPE_2_2_COMMS);
    /* and CSV -> text -> CSV keeps it */
    run("schedule --kind interleaved --ranks 4 --chunks 2 --microbatches 8 --format csv -o a.csv");
    cr_assert_eq(R.code, 0, "%s", R.err);
    run("schedule --check a.csv --format text -o a.txt");
    cr_assert_eq(R.code, 0, "%s", R.err);
    run("schedule --check a.txt --format csv");
    cr_assert_eq(R.code, 0, "%s", R.err);
    char path[256];
    snprintf(path, sizeof path, "%s/a.csv", tmpdir);
    char *csv = pp_test_slurp(path);
    cr_assert_str_eq(R.out, csv);
    free(csv);
}

Test(tuner_cli_run, csv_errors_name_the_cell_and_exit_2)
{
    write_file("bad.csv", "0F0,0SEND_F0\n1RECV_F0,1F0,1Q0\n");
    expect_fail("schedule --check bad.csv", 2,
                "pptune schedule: bad.csv: row 2 (rank 1), column 3: \"1Q0\": expected a PyTorch "
                "pipelining action");
    write_file("zb.csv", "0F0,0W0,0I0\n"); /* split backward reads; W before its I does not check */
    expect_fail("schedule --check zb.csv", 2,
                "zb.csv: rank 0, action 1 (W pipe 0 stage 0 mb 0): weight-gradient backward "
                "before its input-gradient backward (I at action 2)");
    /* a well-formed file whose order is wrong: the checker's message, with the file */
    write_file("late.csv", "0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n");
    expect_fail("schedule --check late.csv", 2,
                "late.csv: rank 1, action 0 (F pipe 0 stage 1 mb "
                "0): forward before the RECV_F of its input");
}

Test(tuner_cli_run, csv_of_a_bidirectional_schedule_is_refused)
{
    expect_fail("schedule --kind chimera --ranks 4 --microbatches 8 --format csv", 2,
                "--format csv: chimera is bidirectional (2 pipes), and PyTorch pipelining's CSV "
                "holds one pipeline; use --format text or json");
    expect_fail("schedule --kind bitpipe --ranks 4 --microbatches 8 --format csv-compute", 2,
                "bitpipe is bidirectional");
    /* a two-pipe schedule read from a file has no registry row: the writer refuses it */
    run("schedule --kind bitpipe --ranks 4 --microbatches 4 --format text -o b.txt");
    cr_assert_eq(R.code, 0, "%s", R.err);
    expect_fail("schedule --check b.txt --format csv", 2,
                "bitpipe is bidirectional (2 pipes): PyTorch pipelining's CSV holds one pipeline");
}

/* Options are read by getopt_long: --opt=value means --opt value, and a value left off is
 * named. */
Test(tuner_cli_run, equals_form_of_options_reads_the_same)
{
    run("schedule --kind 1f1b --ranks 4 --microbatches 8 --format text");
    cr_assert_eq(R.code, 0, "%s", R.err);
    char *spaced = strdup(R.out);
    run("schedule --kind=1f1b --ranks=4 --microbatches=8 --format=text");
    cr_assert_eq(R.code, 0, "%s", R.err);
    cr_assert_str_eq(R.out, spaced);
    free(spaced);
    expect_fail("schedule --kind 1f1b --ranks 4 --microbatches", 2, "--microbatches needs a value");
    expect_fail("simulate --model gpt-13b --nodes=0", 2, "--nodes expects an integer >= 1");
}
