/* test_sched_csv.c — the action grammar and PyTorch pipelining's CSV (part of the sched suite):
 * every op kind round-trips through pp_action_format / pp_action_parse; every single-pipe
 * generator's schedule round-trips through the CSV writer and reader in both of PyTorch's forms;
 * PyTorch-style files (idle cells, CRLF, receives posted early, REDUCE_GRAD) read and check;
 * reader errors name the file, row (rank), column and cell; bidirectional schedules and REDUCE
 * are refused with a reason; split backward (I, W) and DualPipeV's OVERLAP_F_B pairs read. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pp_sched.h"
#include "pp_test_run.h"
#include "sched_equal.h"
#include "sched_render.h"

/* ---- the grammar ----------------------------------------------------------------------------- */

static void assert_token_round_trip(const pp_sched *s, pp_action a, const char *expect)
{
    char tok[64];
    pp_action_format(s, &a, PP_ACTION_TOKEN, tok, sizeof tok);
    cr_assert_str_eq(tok, expect);
    pp_action b;
    cr_assert_eq(pp_action_parse(s, tok, &b), PP_OK, "%s: %s", tok, pp_err_msg());
    if (b.peer == PP_ACTION_PEER_IMPLIED)
        b.peer = pp_sched_implied_peer(s, &b);
    cr_assert(a.op == b.op && a.pipe == b.pipe && a.stage == b.stage && a.mb == b.mb &&
                  a.peer == b.peer,
              "%s read back as op %d pipe %d stage %d mb %d peer %d", tok, b.op, b.pipe,
              (int)b.stage, (int)b.mb, (int)b.peer);
}

Test(sched_csv, grammar_round_trips_every_op_kind)
{
    /* two pipes of 4 stages on 4 ranks (pipe u reversed), so pipe letters are written */
    pp_sched *s;
    cr_assert_eq(pp_sched_create("g", 4, 4, 1, 2, 0, 0, &s), PP_OK, "%s", pp_err_msg());
    for (int k = 0; k < 4; k++) {
        pp_sched_stage(s, 0, k)->rank = k;
        pp_sched_stage(s, 1, k)->rank = 3 - k;
    }
    struct {
        pp_action a;
        const char *token, *words;
    } cases[] = {
        {{.op = PP_OP_F, .pipe = 0, .stage = 1, .mb = 2, .peer = -1},
         "Fd2.1",
         "F pipe 0 stage 1 mb 2"},
        {{.op = PP_OP_B, .pipe = 1, .stage = 3, .mb = 0, .peer = -1},
         "Bu0.3",
         "B pipe 1 stage 3 mb 0"},
        {{.op = PP_OP_I, .pipe = 0, .stage = 2, .mb = 3, .peer = -1},
         "Id3.2",
         "I pipe 0 stage 2 mb 3"},
        {{.op = PP_OP_W, .pipe = 1, .stage = 0, .mb = 1, .peer = -1},
         "Wu1.0",
         "W pipe 1 stage 0 mb 1"},
        {{.op = PP_OP_SEND_F, .pipe = 0, .stage = 1, .mb = 2, .peer = 2},
         "SFd2.1",
         "SEND_F pipe 0 stage 1 mb 2 peer 2"},
        {{.op = PP_OP_RECV_F, .pipe = 1, .stage = 1, .mb = 2, .peer = 3},
         "RFu2.1",
         "RECV_F pipe 1 stage 1 mb 2 peer 3"},
        {{.op = PP_OP_SEND_B, .pipe = 0, .stage = 3, .mb = 0, .peer = 2},
         "SBd0.3",
         "SEND_B pipe 0 stage 3 mb 0 peer 2"},
        {{.op = PP_OP_RECV_B, .pipe = 1, .stage = 0, .mb = 3, .peer = 2},
         "RBu3.0",
         "RECV_B pipe 1 stage 0 mb 3 peer 2"},
        {{.op = PP_OP_SEND_F, .pipe = 0, .stage = 0, .mb = 1, .peer = 3},
         "SFd1.0@3",
         "SEND_F pipe 0 stage 0 mb 1 peer 3"},
        {{.op = PP_OP_REDUCE, .pipe = 0, .stage = 5, .mb = -1, .peer = -1}, "AR5", "REDUCE #5"},
    };
    int seen[PP_OP__COUNT] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        assert_token_round_trip(s, cases[i].a, cases[i].token);
        char w[96];
        cr_assert_str_eq(pp_action_str(s, &cases[i].a, w, sizeof w), cases[i].words);
        seen[cases[i].a.op] = 1;
    }
    for (int k = 0; k < PP_OP__COUNT; k++)
        cr_assert(seen[k], "op %s has no round-trip case", pp_op_name((pp_op_kind)k));
    /* one pipe: no letter */
    pp_sched *one = generate("1f1b", 2, 2, 0);
    assert_token_round_trip(one, one->ops[0][1], "SF0.0");
    pp_sched_destroy(one);
    pp_sched_destroy(s);
}

Test(sched_csv, grammar_parse_errors_show_the_token)
{
    pp_sched *s = generate("1f1b", 2, 2, 0);
    const char *bad[] = {"X0.0", "F2.0", "F0.2", "F0", "F0.0@1", "SF0.0@5", "Fu0.0", "AR", "AR-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_action a;
        cr_assert_eq(pp_action_parse(s, bad[i], &a), PP_ERR_PARSE, "accepted %s", bad[i]);
        char got[32];
        snprintf(got, sizeof got, "got \"%s\"", bad[i]);
        cr_assert(strstr(pp_err_text(), got), "%s", pp_err_text());
    }
    pp_sched_destroy(s);
}

Test(sched_csv, predicates_name_the_neighbour_stage)
{
    struct {
        int op, stage, peer_stage, dir;
    } c[] = {{PP_OP_SEND_F, 3, 4, 1},
             {PP_OP_RECV_F, 3, 2, 1},
             {PP_OP_SEND_B, 3, 2, -1},
             {PP_OP_RECV_B, 3, 4, -1}};
    for (int i = 0; i < 4; i++) {
        pp_action a = {.op = (uint8_t)c[i].op, .stage = c[i].stage, .mb = 0};
        cr_assert_eq(pp_action_peer_stage(&a), c[i].peer_stage, "%s", pp_op_name(c[i].op));
        cr_assert_eq(pp_op_dir(c[i].op), c[i].dir);
        cr_assert(pp_op_is_comm(c[i].op) && !pp_op_is_compute(c[i].op));
        cr_assert_eq(pp_op_mate(pp_op_mate(c[i].op)), c[i].op);
    }
    pp_action f = {.op = PP_OP_F, .stage = 3}, b = {.op = PP_OP_B, .stage = 3};
    cr_assert_eq(pp_action_src_stage(&f), 2);
    cr_assert_eq(pp_action_dst_stage(&f), 4);
    cr_assert_eq(pp_action_src_stage(&b), 4);
    cr_assert_eq(pp_action_dst_stage(&b), 2);
    cr_assert_eq(pp_op_recv_of(PP_OP_B), PP_OP_RECV_B);
    cr_assert_eq(pp_op_send_of(PP_OP_F), PP_OP_SEND_F);
    cr_assert(pp_op_is_compute(PP_OP_I) && pp_op_is_split_backward(PP_OP_W));
    cr_assert(!pp_op_is_comm(PP_OP_REDUCE) && !pp_op_is_compute(PP_OP_REDUCE));
}

/* A split backward in the text form is checked like any other: F I W passes, B with I/W of the
 * same (stage, micro-batch) does not. */
Test(sched_csv, checker_takes_split_backward_from_the_text_form)
{
    const char *t = "schedule t ranks 1 microbatches 1\nplace d: 0\nrank 0: F0.0 I0.0 W0.0\n";
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(t, "zb.txt", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(s->ops[0][1].op, PP_OP_I);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
    t = "schedule t ranks 1 microbatches 1\nplace d: 0\nrank 0: F0.0 I0.0 B0.0 W0.0\n";
    cr_assert_eq(pp_sched_parse_text(t, "zb.txt", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(s), PP_ERR_CHECK);
    cr_assert(strstr(pp_err_text(), "rank 0, action 1 (I pipe 0 stage 0 mb 0): pipe 0 stage 0 mb "
                                    "0 has both a fused backward (B at action 2) and a split one"),
              "%s", pp_err_text());
    pp_sched_destroy(s);
}

/* ---- CSV round trips ------------------------------------------------------------------------- */

/* The CSV holds no kind, group or layer split: the reader's are "csv", 0 and one per stage. */
static void assert_csv_round_trip(const pp_sched *s, render_fn writer)
{
    char *csv = render(s, writer);
    pp_sched *back;
    cr_assert_eq(pp_sched_read_csv(csv, "rt.csv", &back), PP_OK, "%s: %s\n%s", s->kind,
                 pp_err_msg(), csv);
    cr_assert_str_eq(back->kind, "csv");
    snprintf(back->kind, sizeof back->kind, "%s", s->kind);
    back->group = s->group;
    char why[256];
    cr_assert(pp_test_sched_equal(s, back, why, sizeof why), "%s: %s\n%s", s->kind, why, csv);
    cr_assert_eq(pp_sched_check(back), PP_OK, "%s", pp_err_msg());
    free(csv);
    pp_sched_destroy(back);
}

Test(sched_csv, every_single_pipe_generator_round_trips_in_both_forms)
{
    int n, tried = 0;
    const pp_sched_desc *g = pp_sched_generators(&n);
    int shapes[][3] = {{1, 1, 0}, {2, 2, 0}, {4, 8, 0}, {4, 8, 3}, {3, 9, 2}, {8, 16, 0}};
    for (int i = 0; i < n; i++) {
        if (g[i].pipes != 1)
            continue;
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            pp_sched_params p = {
                .ranks = shapes[k][0], .microbatches = shapes[k][1], .chunks = shapes[k][2]};
            if (pp_sched_desc_check(&g[i], &p) != PP_OK)
                continue;
            pp_sched *s = generate(g[i].name, p.ranks, p.microbatches, p.chunks);
            assert_csv_round_trip(s, pp_sched_write_csv);
            assert_csv_round_trip(s, pp_sched_write_csv_compute);
            pp_sched_destroy(s);
            tried++;
        }
    }
    cr_assert_geq(tried, 10, "only %d generator shapes were tried", tried);
}

Test(sched_csv, compute_comms_has_pytorchs_send_recv_and_reduce_grad)
{
    pp_sched *s = generate("1f1b", 2, 2, 0);
    char *csv = render(s, pp_sched_write_csv);
    /* torch 2.15's grammar: each forward send waited after its micro-batch's backward, the
     * backward sends at the end, each REDUCE_GRAD with its wait */
    cr_assert_str_eq(csv, "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,"
                          "0WAIT_SEND_F1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
                          "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1REDUCE_GRAD,"
                          "1WAIT_REDUCE_GRAD,1WAIT_SEND_B0,1WAIT_SEND_B1\n");
    free(csv);
    csv = render(s, pp_sched_write_csv_compute);
    cr_assert_str_eq(csv, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
    free(csv);
    pp_sched_destroy(s);
}

Test(sched_csv, reduce_grad_follows_the_send_of_each_stages_last_backward)
{
    pp_sched *s = generate("interleaved", 2, 4, 2);
    char *csv = render(s, pp_sched_write_csv);
    /* rank 1 holds stages 1 and 3; stage 3's last B sends to stage 2 on rank 0; the wait of
     * stage 1's forward send of micro-batch 3 follows its backward */
    cr_assert(strstr(csv, "3B3,3SEND_B3,3REDUCE_GRAD,3WAIT_REDUCE_GRAD,"), "%s", csv);
    cr_assert(strstr(csv, "1B3,1WAIT_SEND_F3,1SEND_B3,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,"), "%s", csv);
    cr_assert(strstr(csv, "0B3,0WAIT_SEND_F3,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,"), "%s", csv);
    free(csv);
    pp_sched_destroy(s);
}

/* ---- PyTorch-style files --------------------------------------------------------------------- */

Test(sched_csv, pytorch_style_files_read_as_the_schedule_they_describe)
{
    pp_sched *ours = generate("interleaved", 2, 4, 2);
    const char *names[] = {"interleaved_2rank_4stage_compute.csv",
                           "interleaved_2rank_4stage_comms.csv"};
    for (int i = 0; i < 2; i++) {
        pp_sched *s = read_pytorch_fixture(names[i]);
        cr_assert_eq(s->ranks, 2);
        cr_assert_eq(s->microbatches, 4);
        cr_assert_eq(s->chunks, 2);
        int place[4] = {0, 1, 0, 1}; /* the looped placement, inferred from the rows */
        for (int k = 0; k < 4; k++)
            cr_assert_eq(pp_sched_stage(s, 0, k)->rank, place[k], "stage %d", k);
        /* idle cells and REDUCE_GRAD dropped, early receives moved to their wait points:
         * exactly pptune's interleaved schedule of that shape */
        snprintf(s->kind, sizeof s->kind, "interleaved");
        s->group = ours->group;
        char why[256];
        cr_assert(pp_test_sched_equal(ours, s, why, sizeof why), "%s: %s", names[i], why);
        pp_sched_destroy(s);
    }
    pp_sched_destroy(ours);
}

Test(sched_csv, reader_takes_quotes_blanks_crlf_and_fsdp_cells)
{
    const char *t = "\"0F0\", 0UNSHARD ,0SEND_F0,,0RECV_B0,0B0,0RESHARD,0REDUCE_GRAD\r\n"
                    "1RECV_F0,1F0,1B0,1SEND_B0,1REDUCE_GRAD\r\n\r\n";
    pp_sched *s;
    cr_assert_eq(pp_sched_read_csv(t, "q.csv", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(s->n_ops[0], 4);
    cr_assert_eq(s->n_ops[1], 4);
    cr_assert_eq(s->ops[0][1].peer, 1);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
}

static void assert_csv_error(const char *text, const char *expect)
{
    pp_sched *s = (pp_sched *)1;
    cr_assert_eq(pp_sched_read_csv(text, "x.csv", &s), PP_ERR_PARSE, "accepted: %s", text);
    cr_assert_null(s);
    cr_assert(strstr(pp_err_text(), expect), "message \"%s\" lacks \"%s\"", pp_err_text(), expect);
}

Test(sched_csv, reader_errors_name_file_row_column_and_cell)
{
    assert_csv_error("0F0,0SEND_F0\n1RECV_F0,1F0,1X0\n",
                     "x.csv: row 2 (rank 1), column 3: \"1X0\": expected a PyTorch pipelining "
                     "action STAGE TYPE [MICROBATCH]");
    assert_csv_error("0F0,F1\n", "x.csv: row 1 (rank 0), column 2: \"F1\": expected");
    assert_csv_error("0F0,0F\n", "column 2: \"0F\": F needs a micro-batch index");
    assert_csv_error("0F0,0BW0\n", "column 2: \"0BW0\": expected");
    assert_csv_error("0F0,0F1\n1F0,0B0\n",
                     "x.csv: row 2 (rank 1), column 2: \"0B0\": stage 0 is already on rank 0 "
                     "(row 1, column 1)");
    assert_csv_error("0F0,0I\n", "column 2: \"0I\": I needs a micro-batch index");
    assert_csv_error("0F0,(0F1;1B0)OVERLAP\n", "column 2: \"(0F1;1B0)OVERLAP\": expected an "
                                               "overlapped pair (SUB;SUB)OVERLAP_F_B");
    assert_csv_error("0F0,(0F1;1SEND_B0)OVERLAP_F_B\n",
                     "column 2: \"(0F1;1SEND_B0)OVERLAP_F_B\": an OVERLAP_F_B pair is a forward "
                     "and then a full backward (e.g. (0F3;7B2)OVERLAP_F_B), got \"1SEND_B0\" as "
                     "its second");
    assert_csv_error("(1B0;0F1)OVERLAP_F_B\n", "got \"1B0\" as its first");
    assert_csv_error("(0F1;1B0;1W0)OVERLAP_F_B\n", "got a third, \"1W0\"");
    assert_csv_error("(0F1)OVERLAP_F_B\n", "got 1 action");
    assert_csv_error("0F0,0WAIT_SEND_F\n", "WAIT_SEND_F needs a micro-batch index");
    assert_csv_error("0F0,0B0,2F0,2B0\n", "x.csv: stage 1 appears in no row");
    assert_csv_error("0F0,1F0\n2F0\n", "x.csv: 3 stages over 2 ranks");
    assert_csv_error("\n\n", "x.csv: empty");
    assert_csv_error("0REDUCE_GRAD\n", "no forward or backward");
}

Test(sched_csv, reader_leaves_a_wrong_order_to_the_checker)
{
    pp_sched *s;
    cr_assert_eq(
        pp_sched_read_csv("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n", "late.csv", &s),
        PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sched_check(s), PP_ERR_CHECK);
    cr_assert(strstr(pp_err_text(), "rank 1, action 0 (F pipe 0 stage 1 mb 0): forward before "
                                    "the RECV_F of its input"),
              "%s", pp_err_text());
    pp_sched_destroy(s);
}

/* ---- what has no CSV form -------------------------------------------------------------------- */

Test(sched_csv, bidirectional_schedules_are_refused)
{
    int n, refused = 0;
    const pp_sched_desc *g = pp_sched_generators(&n);
    for (int i = 0; i < n; i++) {
        if (g[i].pipes != 2)
            continue;
        pp_sched *s = generate(g[i].name, 4, 8, 0);
        render_fn writers[] = {pp_sched_write_csv, pp_sched_write_csv_compute};
        for (int w = 0; w < 2; w++) {
            char *buf = NULL;
            size_t len = 0;
            FILE *fp = open_memstream(&buf, &len);
            cr_assert_eq(writers[w](s, fp), PP_ERR_INVALID, "%s was written as CSV", g[i].name);
            fclose(fp);
            cr_assert_str_eq(buf, "", "nothing is written");
            free(buf);
            char expect[160];
            snprintf(expect, sizeof expect,
                     "%s is bidirectional (2 pipes): PyTorch pipelining's CSV holds one pipeline",
                     g[i].name);
            cr_assert(strstr(pp_err_text(), expect), "%s", pp_err_text());
        }
        pp_sched_destroy(s);
        refused++;
    }
    cr_assert_geq(refused, 2, "chimera and bitpipe at least");
}

Test(sched_csv, a_reduce_has_no_pytorch_equivalent_and_is_refused)
{
    const char *t = "schedule t ranks 1 microbatches 1\nplace d: 0\nreduce 0: ranks 0 stages d0\n"
                    "rank 0: F0.0 B0.0 AR0\n";
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(t, "r.txt", &s), PP_OK, "%s", pp_err_msg());
    FILE *fp = fopen("/dev/null", "w");
    cr_assert_eq(pp_sched_write_csv(s, fp), PP_ERR_INVALID);
    fclose(fp);
    cr_assert(strstr(pp_err_text(), "rank 0, action 2 (REDUCE #0): PyTorch's CSV has no gradient "
                                    "sync between replicas"),
              "%s", pp_err_text());
    pp_sched_destroy(s);
}
