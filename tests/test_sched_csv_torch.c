/* test_sched_csv_torch.c — PyTorch pipelining 2.15's CSV grammar (part of the sched suite), without
 * torch: the rules torch's _PipelineScheduleRuntime puts on a compute_comms file it loads, held
 * by every single-pipe generator's CSV; torch 2.15's own _dump_csv output (fixtures that
 * tests/torch/csv_interop.py checks are byte for byte what torch writes) read as pptune's
 * schedules; DualPipeV's overlapped pair as one action in every form; older files still read.
 * tests/torch/ runs the same CSVs through torch itself where it is installed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_build.h"
#include "sched_equal.h"
#include "sched_render.h"

/* ---- the runtime's rules ----------------------------------------------------------------------
 * torch/distributed/pipelining/schedules.py (torch 2.15), _prepare_schedule_with_comms for
 * format="compute_comms" and _validate_send_waits: no idle cell; each REDUCE_GRAD s followed by
 * WAIT_REDUCE_GRAD s before another starts ("cannot start REDUCE_GRAD for stage X while stage Y
 * has a pending reduction"); each SEND_F/SEND_B s m waited once, later, by WAIT_SEND_F/B s m.
 * And one the loader does not check but a run needs: PyTorch's P2P ops have no tag
 * (stage.py), so between two ranks the receives must be posted in the order of the sends. */

typedef struct {
    int rank, dst, type, stage, mb; /* dst: the rank it goes to / comes from */
} xfer;

enum { T_SEND_F, T_SEND_B, T_RECV_F, T_RECV_B };

/* "12SEND_F3" -> stage 12, type "SEND_F", mb 3 (-1 when none). 0 for a compound cell. */
static int split_cell(const char *c, int *stage, char *type, size_t n, int *mb)
{
    if (c[0] == '(')
        return 0;
    char *end;
    *stage = (int)strtol(c, &end, 10);
    size_t k = 0;
    while ((end[k] >= 'A' && end[k] <= 'Z') || end[k] == '_')
        k++;
    cr_assert(k > 0 && k < n, "cell \"%s\"", c);
    memcpy(type, end, k);
    type[k] = '\0';
    *mb = end[k] ? atoi(end + k) : -1;
    return 1;
}

/* The rank the transfer of cell (stage, type) on `rank` talks to, and the cell's type code. */
static int xfer_of(const pp_sched *s, int stage, const char *type, int *peer)
{
    static const char *names[] = {"SEND_F", "SEND_B", "RECV_F", "RECV_B"};
    static const int step[] = {1, -1, -1, 1};
    for (int t = 0; t < 4; t++)
        if (!strcmp(type, names[t])) {
            *peer = pp_sched_rank_of(s, 0, stage + step[t]);
            return t;
        }
    return -1;
}

static void assert_row_rules(const pp_sched *s, int r, char *row, xfer *x, int *nx)
{
    int pending = -1, open[4096][3], n_open = 0;
    for (char *c = strtok(row, ","); c; c = strtok(NULL, ",")) {
        int stage, mb, peer;
        char type[32];
        cr_assert(*c, "rank %d: an idle cell in the compute_comms form", r);
        if (!split_cell(c, &stage, type, sizeof type, &mb))
            continue;
        if (!strcmp(type, "REDUCE_GRAD")) {
            cr_assert_eq(pending, -1, "rank %d: REDUCE_GRAD %d while %d is pending", r, stage,
                         pending);
            pending = stage;
        } else if (!strcmp(type, "WAIT_REDUCE_GRAD")) {
            cr_assert_eq(pending, stage, "rank %d: WAIT_REDUCE_GRAD %d, pending %d", r, stage,
                         pending);
            pending = -1;
        } else if (!strncmp(type, "WAIT_SEND_", 10)) {
            int k = 0;
            while (k < n_open &&
                   !(open[k][0] == type[10] && open[k][1] == stage && open[k][2] == mb))
                k++;
            cr_assert(k < n_open, "rank %d: %s without a pending send", r, c);
            memmove(open[k], open[k + 1], (size_t)(n_open - k - 1) * sizeof open[0]);
            n_open--;
        }
        int t = xfer_of(s, stage, type, &peer);
        if (t < 0)
            continue;
        if (t == T_SEND_F || t == T_SEND_B) {
            cr_assert_lt(n_open, 4096);
            open[n_open][0] = type[5];
            open[n_open][1] = stage;
            open[n_open++][2] = mb;
        }
        x[(*nx)++] = (xfer){.rank = r, .dst = peer, .type = t, .stage = stage, .mb = mb};
    }
    cr_assert_eq(pending, -1, "rank %d: REDUCE_GRAD %d is never waited", r, pending);
    cr_assert_eq(n_open, 0, "rank %d: %d sends are never waited", r, n_open);
}

/* Between every two ranks q -> r, the k-th receive r posts from q is the k-th send of q to r. */
static void assert_fifo(const pp_sched *s, const xfer *x, int nx)
{
    for (int q = 0; q < s->ranks; q++)
        for (int r = 0; r < s->ranks; r++) {
            int i = 0, j = 0;
            for (;;) {
                while (i < nx && !(x[i].rank == q && x[i].dst == r && x[i].type < T_RECV_F))
                    i++;
                while (j < nx && !(x[j].rank == r && x[j].dst == q && x[j].type >= T_RECV_F))
                    j++;
                if (i == nx || j == nx)
                    break;
                /* SEND_F s -> RECV_F s+1, SEND_B s -> RECV_B s-1 */
                int want_stage = x[i].stage + (x[i].type == T_SEND_F ? 1 : -1);
                cr_assert(x[j].type == x[i].type + 2 && x[j].stage == want_stage &&
                              x[j].mb == x[i].mb,
                          "%s: rank %d posts its receive of stage %d mb %d from rank %d where "
                          "rank %d's next send to it is stage %d mb %d",
                          s->kind, r, x[j].stage, x[j].mb, q, q, want_stage, x[i].mb);
                i++;
                j++;
            }
            cr_assert(i == nx && j == nx, "%s: ranks %d -> %d: sends and receives differ in number",
                      s->kind, q, r);
        }
}

/* All the rules on s's compute_comms CSV. */
static void assert_torch_runtime_rules(const pp_sched *s)
{
    char *csv = render(s, pp_sched_write_csv);
    xfer *x = pp_calloc(strlen(csv) / 4 + 1, sizeof *x);
    int nx = 0, r = 0;
    char *save = NULL;
    for (char *row = strtok_r(csv, "\n", &save); row; row = strtok_r(NULL, "\n", &save), r++) {
        char *copy = strdup(row);
        assert_row_rules(s, r, copy, x, &nx);
        free(copy);
    }
    cr_assert_eq(r, s->ranks);
    assert_fifo(s, x, nx);
    free(x);
    free(csv);
}

Test(sched_csv_torch, compute_comms_keeps_the_runtimes_rules_for_every_generator)
{
    int n, tried = 0;
    const pp_sched_desc *g = pp_sched_generators(&n);
    int shapes[][3] = {{1, 1, 0}, {2, 4, 0},  {4, 8, 0}, {4, 8, 3},
                       {3, 9, 2}, {4, 10, 0}, {8, 16, 0}};
    for (int i = 0; i < n; i++) {
        if (g[i].pipes != 1)
            continue;
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            pp_sched_params p = {
                .ranks = shapes[k][0], .microbatches = shapes[k][1], .chunks = shapes[k][2]};
            if (pp_sched_desc_check(&g[i], &p) != PP_OK)
                continue;
            pp_sched *s = generate(g[i].name, p.ranks, p.microbatches, p.chunks);
            assert_torch_runtime_rules(s);
            pp_sched_destroy(s);
            tried++;
        }
    }
    cr_assert_geq(tried, 20, "only %d generator shapes were tried", tried);
}

/* ---- torch 2.15's own files -------------------------------------------------------------------
 * tests/fixtures/pytorch/torch-2.15_*.csv: _dump_csv of torch's ScheduleInterleaved1F1B,
 * ScheduleZBVZeroBubble and ScheduleDualPipeV, with its WAIT_SEND_*, WAIT_REDUCE_GRAD, UNSHARD /
 * RESHARD cells and receives posted early. */

static void assert_reads_as(const char *fixture, const char *kind, int D, int N, int v)
{
    pp_sched *theirs = read_pytorch_fixture(fixture);
    pp_sched *ours = generate(kind, D, N, v);
    snprintf(theirs->kind, sizeof theirs->kind, "%s", ours->kind);
    theirs->group = ours->group;
    char why[256];
    cr_assert(pp_test_sched_equal(ours, theirs, why, sizeof why), "%s: %s", fixture, why);
    assert_torch_runtime_rules(theirs); /* and written back, it keeps the rules */
    pp_sched_destroy(theirs);
    pp_sched_destroy(ours);
}

Test(sched_csv_torch, torchs_own_dumps_read_as_pptunes_schedules)
{
    /* the smallest case the issue names: 1 rank, 2 stages, N = 1, "1WAIT_REDUCE_GRAD" */
    pp_sched *s = read_pytorch_fixture("torch-2.15_interleaved1f1b_1rank_2stage_1mb_comms.csv");
    cr_assert(s->ranks == 1 && s->stages_per_pipe == 2 && s->microbatches == 1);
    cr_assert_eq(s->n_ops[0], 4, "F0.0 F0.1 B0.1 B0.0, the rest dropped");
    pp_sched_destroy(s);
    assert_reads_as("torch-2.15_interleaved1f1b_2rank_4stage_4mb_comms.csv", "interleaved", 2, 4,
                    2);
    assert_reads_as("torch-2.15_zbv_2rank_4mb_comms.csv", "zbv", 2, 4, 0);
    /* overlapped pairs, one cell each, in both forms: the pairs pptune generates */
    assert_reads_as("torch-2.15_dualpipev_2rank_4mb_comms.csv", "dualpipev", 2, 4, 0);
    assert_reads_as("torch-2.15_dualpipev_2rank_4mb_compute.csv", "dualpipev", 2, 4, 0);
}

/* The compute cells of a row in order (F, B, I, W and pairs), joined by ','. */
static char *compute_cells(const char *row)
{
    char *copy = strdup(row), *out = pp_calloc(strlen(row) + 1, 1), *save = NULL;
    for (char *c = strtok_r(copy, ",\r", &save); c; c = strtok_r(NULL, ",\r", &save)) {
        int stage, mb;
        char type[32];
        if (split_cell(c, &stage, type, sizeof type, &mb) && strlen(type) != 1)
            continue;
        if (*out)
            strcat(out, ",");
        strcat(out, c);
    }
    free(copy);
    return out;
}

/* DualPipeV written by pptune is torch's: the compute_only file byte for byte (but for line
 * ends), and in the compute_comms form the same compute cells, pairs included, in the same
 * order on every rank. */
Test(sched_csv_torch, dualpipev_csv_is_torchs)
{
    pp_sched *s = generate("dualpipev", 2, 4, 0);
    char *ours = render(s, pp_sched_write_csv_compute);
    char path[512];
    snprintf(path, sizeof path, "%s/pytorch/torch-2.15_dualpipev_2rank_4mb_compute.csv",
             PP_FIXTURES_DIR);
    char *theirs = pp_test_slurp(path);
    for (char *p = theirs, *q = theirs;; p++)
        if (*p != '\r' && !(*q++ = *p))
            break;
    cr_assert_str_eq(ours, theirs);
    cr_assert(strstr(ours, "(0F3;3B1)OVERLAP_F_B,(3F2;0B0)OVERLAP_F_B"), "%s", ours);
    free(ours);
    free(theirs);
    ours = render(s, pp_sched_write_csv);
    snprintf(path, sizeof path, "%s/pytorch/torch-2.15_dualpipev_2rank_4mb_comms.csv",
             PP_FIXTURES_DIR);
    theirs = pp_test_slurp(path);
    char *so = NULL, *st = NULL;
    char *ro = strtok_r(ours, "\n", &so), *rt = strtok_r(theirs, "\n", &st);
    for (int r = 0; r < 2; r++) {
        cr_assert(ro && rt);
        char *a = compute_cells(ro), *b = compute_cells(rt);
        cr_assert_str_eq(a, b, "rank %d", r);
        free(a);
        free(b);
        ro = strtok_r(NULL, "\n", &so);
        rt = strtok_r(NULL, "\n", &st);
    }
    free(ours);
    free(theirs);
    pp_sched_destroy(s);
}

/* pptune's CSVs from before the pair had a cell wrote it as two cells, F then B: they read as the
 * same order without the pair. */
Test(sched_csv_torch, older_files_with_a_pair_as_two_cells_still_read)
{
    pp_sched *s = generate("dualpipev", 2, 4, 0);
    char *csv = render(s, pp_sched_write_csv_compute), *old = pp_calloc(strlen(csv) + 1, 1);
    for (const char *p = csv; *p; p++) /* "(0F3;3B1)OVERLAP_F_B" -> "0F3,3B1" */
        if (*p == ';')
            strcat(old, ",");
        else if (*p == ')')
            p += strlen(")OVERLAP_F_B") - 1;
        else if (*p != '(')
            strncat(old, p, 1);
    cr_assert(!strstr(old, "OVERLAP") && strstr(old, "0F3,3B1"), "%s", old);
    pp_sched *back;
    cr_assert_eq(pp_sched_read_csv(old, "old.csv", &back), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(back), PP_OK, "%s", pp_err_msg());
    int pairs = 0;
    for (int r = 0; r < s->ranks; r++)
        for (int i = 0; i < s->n_ops[r]; i++) {
            pairs += s->ops[r][i].overlap;
            s->ops[r][i].overlap = 0;
        }
    cr_assert_eq(pairs, 6, "(0F3;3B1) (3F2;0B0) (3F3;0B1) on rank 0, three on rank 1");
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK); /* without pairs, each RECV at its compute */
    snprintf(back->kind, sizeof back->kind, "%s", s->kind);
    char why[256];
    cr_assert(pp_test_sched_equal(s, back, why, sizeof why), "%s", why);
    free(csv);
    free(old);
    pp_sched_destroy(back);
    pp_sched_destroy(s);
}

/* ---- the overlapped pair in the one action grammar ---------------------------------------------
 */

Test(sched_csv_torch, a_pair_is_one_token_in_text_traces_and_messages)
{
    pp_sched *s = generate("dualpipev", 2, 4, 0);
    const pp_action *head = NULL;
    for (int i = 0; i < s->n_ops[0] && !head; i++)
        if (s->ops[0][i].overlap)
            head = &s->ops[0][i];
    cr_assert(head && head[1].op == PP_OP_B);
    char tok[64], words[128];
    cr_assert_str_eq(pp_action_format(s, head, PP_ACTION_TOKEN, tok, sizeof tok), "F3.0+");
    cr_assert_str_eq(pp_action_str(s, head, words, sizeof words),
                     "F pipe 0 stage 0 mb 3 overlapped with the next B");
    char *text = render(s, pp_sched_write_text);
    cr_assert(strstr(text, " F3.0+B1.3 "), "%s", text);
    free(text);
    pp_action a[2];
    int n;
    cr_assert_eq(pp_action_parse_pair(s, "F3.0+B1.3", a, &n), PP_OK, "%s", pp_err_msg());
    cr_assert(n == 2 && a[0].overlap && a[0].op == PP_OP_F && a[1].op == PP_OP_B && !a[1].overlap);
    cr_assert(a[1].stage == 3 && a[1].mb == 1);
    cr_assert_eq(pp_action_parse_pair(s, "B1.3", a, &n), PP_OK);
    cr_assert(n == 1 && !a[0].overlap);
    const char *bad[] = {"F3.0+F1.3", "F3.0+I1.3", "B1.3+F3.0", "F3.0+B1.3+", "SF3.0+"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(pp_action_parse_pair(s, bad[i], a, &n), PP_ERR_PARSE, "accepted %s", bad[i]);
        char got[48];
        snprintf(got, sizeof got, "got \"%s\"", bad[i]);
        cr_assert(strstr(pp_err_text(), got), "%s", pp_err_text());
    }
    pp_sched_destroy(s);
}

Test(sched_csv_torch, the_checker_holds_a_pair_together)
{
    const char *head = "schedule t ranks 1 microbatches 2\nplace d: 0\nrank 0: ";
    struct {
        const char *ops, *why;
    } bad[] = {
        {"F0.0 B0.0 F1.0 B1.0", "action 1 (B pipe 0 stage 0 mb 0 overlapped with the next B): "
                                "only a forward opens an overlapped pair (OVERLAP_F_B), not a B"},
        {"F0.0 F1.0+ I0.0 W0.0 B1.0", "action 1 (F pipe 0 stage 0 mb 1 overlapped with the next "
                                      "B): an overlapped pair is the F and the B right after it "
                                      "(OVERLAP_F_B), but action 2 is I pipe 0 stage 0 mb 0"},
        {"F0.0 B0.0 F1.0 B1.0 F1.0+", "needs its B right after the F; the rank ends here"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char t[256];
        snprintf(t, sizeof t, "%s%s\n", head, bad[i].ops);
        pp_sched *s;
        cr_assert_eq(pp_sched_parse_text(t, "pair.txt", &s), PP_OK, "%s", pp_err_msg());
        if (i == 0) /* the grammar has no "B0.0+": only a hand-built list can say it */
            s->ops[0][1].overlap = 1;
        EXPECT_REJECT(s, PP_ERR_CHECK, bad[i].why);
        pp_sched_destroy(s);
    }
    pp_sched *s;
    char t[256];
    snprintf(t, sizeof t, "%sF0.0 F1.0+B0.0 B1.0\n", head);
    cr_assert_eq(pp_sched_parse_text(t, "pair.txt", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    cr_assert(s->ops[0][1].overlap && s->n_ops[0] == 4);
    pp_sched_destroy(s);
}

/* Lowering keeps a pair together: the RECVs of both halves before its F, the SENDs after its B. */
Test(sched_csv_torch, lowering_puts_a_pairs_comms_around_it)
{
    pp_sched *s = generate("dualpipev", 2, 4, 0);
    char *text = render(s, pp_sched_write_text);
    /* rank 1: F2.2 (stage 2, fed by stage 1 on rank 1) and B0.1 (fed by B0.2 on rank 1): no
     * comms; rank 0: F2.3 needs RF2.3, B0.0 needs RB0.0, both before the pair */
    cr_assert(strstr(text, " RF2.3 RB0.0 F2.3+B0.0 "), "%s", text);
    cr_assert(strstr(text, " F3.1+B1.2 F3.2+B1.1 SF3.2 SB1.1 "), "%s", text);
    free(text);
    pp_sched_destroy(s);
}

/* Issue 30: a rank's row with no compute or comms cell left (only UNSHARD / RESHARD, which are
 * dropped) reached memcpy(NULL, ..., 0), which UBSan reports (the sanitizer pass runs this
 * suite). Such a file reads, and the check refuses it for what the empty rank lacks. */
Test(sched_csv_torch, a_rank_row_with_no_actions_reads_and_is_refused_by_the_check)
{
    static const char *const files[] = {"0F0,0B0\n1UNSHARD\n", "0UNSHARD\n1F0,1B0\n",
                                        "0F0,0SEND_F0,0RECV_B0,0B0\n1UNSHARD,1RESHARD\n"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        pp_sched *s = NULL;
        cr_assert_eq(pp_sched_read_csv(files[i], "empty-row.csv", &s), PP_OK, "%s: %s", files[i],
                     pp_err_msg());
        cr_assert_eq(s->ranks, 2, "%s", files[i]);
        cr_assert(s->n_ops[0] == 0 || s->n_ops[1] == 0, "%s", files[i]);
        cr_assert_neq(pp_sched_check(s), PP_OK, "%s", files[i]);
        cr_assert(strstr(pp_err_msg(), "is missing"), "%s", pp_err_msg());
        pp_err_clear();
        pp_sched_destroy(s);
    }
}
