/* test_sched_fmt.c — the schedule renderers: the text form round-trips for every generator and
 * a hand-built uneven schedule, the parser's errors name line and token, CSV follows PyTorch's
 * cell syntax, and the ascii / JSON / SVG renderers show what the simulation computed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_equal.h"
#include "sched_render.h"

static void assert_text_round_trip(const pp_sched *s)
{
    char *text = render(s, pp_sched_write_text);
    pp_sched *back = NULL;
    cr_assert_eq(pp_sched_parse_text(text, "roundtrip.txt", &back), PP_OK, "%s\n%s",
                 pp_err_msg(), text);
    char why[256];
    cr_assert(pp_test_sched_equal(s, back, why, sizeof why), "%s: %s\n%s", s->kind, why, text);
    /* and writing the parsed one gives the same text */
    char *again = render(back, pp_sched_write_text);
    cr_assert_str_eq(again, text);
    free(again);
    free(text);
    pp_sched_destroy(back);
}

Test(sched_fmt, text_round_trips_for_every_generator)
{
    int n;
    const pp_sched_desc *g = pp_sched_generators(&n);
    cr_assert_geq(n, 5);
    for (int i = 0; i < n; i++) {
        /* D = 4, N = 8 is valid for all five (N a multiple of D, G = D <= N) */
        pp_sched *s = generate(g[i].name, 4, 8, 0);
        assert_text_round_trip(s);
        pp_sched_destroy(s);
    }
    pp_sched *s = generate("interleaved", 4, 12, 3);
    assert_text_round_trip(s);
    pp_sched_destroy(s);
}

/* V placement of 4 stages on 2 ranks over 10 layers split 2-3-3-2 (Llama 3 style), one
 * micro-batch, a REDUCE per rank, and one SEND whose peer is not the one the placement implies
 * (the text form must carry it). */
static pp_sched *hand_built(void)
{
    pp_sched *s;
    cr_assert_eq(pp_sched_create("hand-v", 2, 2, 2, 1, 10, &(pp_sched_split){.uneven = 1}, &s),
                 PP_OK, "%s", pp_err_msg());
    int place[4] = {0, 1, 1, 0};
    for (int k = 0; k < 4; k++)
        pp_sched_stage(s, 0, k)->rank = place[k];
    int red;
    pp_stage_ref refs[2] = {{0, 0}, {0, 3}};
    int r0 = 0;
    cr_assert_eq(pp_sched_add_reduce(s, &r0, 1, refs, 2, &red), PP_OK);
    for (int m = 0; m < 2; m++) {
        pp_sched_push(s, 0, PP_OP_F, 0, 0, m);
        pp_sched_push(s, 1, PP_OP_F, 0, 1, m);
        pp_sched_push(s, 1, PP_OP_F, 0, 2, m);
        pp_sched_push(s, 0, PP_OP_F, 0, 3, m);
    }
    for (int m = 0; m < 2; m++) {
        pp_sched_push(s, 0, PP_OP_B, 0, 3, m);
        pp_sched_push(s, 1, PP_OP_B, 0, 2, m);
        pp_sched_push(s, 1, PP_OP_B, 0, 1, m);
        pp_sched_push(s, 0, PP_OP_B, 0, 0, m);
    }
    pp_sched_push(s, 0, PP_OP_REDUCE, 0, red, -1);
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK);
    for (int i = 0; i < s->n_ops[1]; i++)
        if (s->ops[1][i].op == PP_OP_SEND_F) {
            s->ops[1][i].peer = 1; /* deliberately odd: only the text's @peer can carry it */
            break;
        }
    return s;
}

Test(sched_fmt, text_round_trips_a_hand_built_uneven_schedule)
{
    pp_sched *s = hand_built();
    cr_assert_eq(pp_sched_stage_layers(s, 0, 0), 2);
    cr_assert_eq(pp_sched_stage_layers(s, 0, 1), 3);
    char *text = render(s, pp_sched_write_text);
    cr_assert(strstr(text, "layers d: 0-2 2-5 5-8 8-10"), "%s", text);
    cr_assert(strstr(text, "reduce 0: ranks 0 stages d0 d3"), "%s", text);
    cr_assert(strstr(text, "@1"), "the odd peer is written: %s", text);
    cr_assert(strstr(text, "rank 0: F0.0 SF0.0"), "%s", text);
    free(text);
    assert_text_round_trip(s);
    pp_sched_destroy(s);
}

Test(sched_fmt, text_of_a_bidirectional_schedule_names_pipes)
{
    pp_sched *s = generate("bitpipe", 4, 4, 0);
    char *text = render(s, pp_sched_write_text);
    cr_assert(strstr(text, "pipes 2"), "%s", text);
    cr_assert(strstr(text, "mb-pipe: dduu"), "%s", text);
    cr_assert(strstr(text, "place u:"), "%s", text);
    cr_assert(strstr(text, "Fu"), "%s", text);
    free(text);
    pp_sched_destroy(s);
}

static void assert_parse_error(const char *text, const char *expect)
{
    pp_sched *s = (pp_sched *)1;
    cr_assert_eq(pp_sched_parse_text(text, "bad.txt", &s), PP_ERR_PARSE, "accepted: %s", text);
    cr_assert_null(s);
    cr_assert(strstr(pp_err_text(), expect), "message \"%s\" lacks \"%s\"", pp_err_text(),
              expect);
}

Test(sched_fmt, text_parse_errors_name_line_and_token)
{
    const char *head = "schedule t ranks 2 microbatches 1\nplace d: 0 1\n";
    char buf[512];
    snprintf(buf, sizeof buf, "%srank 0: F0.0 X9\n", head);
    assert_parse_error(buf, "bad.txt:3: rank 0, action 1: expected F, B, SF");
    assert_parse_error(buf, "got \"X9\"");
    snprintf(buf, sizeof buf, "%srank 0: F1.0\n", head); /* micro-batch 1 of 1 */
    assert_parse_error(buf, "micro-batch 0..0");
    snprintf(buf, sizeof buf, "%srank 2: F0.0\n", head);
    assert_parse_error(buf, "bad.txt:3: rank: expected \"R:\" with R in 0..1, got \"2:\"");
    snprintf(buf, sizeof buf, "%srank 0: AR0\n", head);
    assert_parse_error(buf, "action AR0 names a reduce descriptor, but 0 are defined");
    assert_parse_error("rank 0: F0.0\n", "bad.txt:1: expected the \"schedule KIND");
    assert_parse_error("schedule t ranks 2\n", "\"ranks\" and \"microbatches\" are required");
    assert_parse_error("schedule t ranks 2 microbatches 1\nplace d: 0 5\n",
                       "place d, stage 1: expected a rank in 0..1, got \"5\"");
    assert_parse_error("schedule t ranks 2 microbatches 1 layers 4\nlayers d: 0-3 3-3\n",
                       "layers d, stage 1: expected a range b-e with 0 <= b < e <= 4");
    assert_parse_error("", "not a schedule in the text form");
}

Test(sched_fmt, text_comments_and_blank_lines_are_ignored)
{
    const char *t = "# a comment\n\nschedule t ranks 1 microbatches 1  # trailing\n"
                    "place d: 0\nrank 0: F0.0 B0.0\n";
    pp_sched *s;
    cr_assert_eq(pp_sched_parse_text(t, "c.txt", &s), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(s->n_ops[0], 2);
    cr_assert_eq(s->ops[0][1].op, PP_OP_B);
    cr_assert_eq(pp_sched_check(s), PP_OK, "%s", pp_err_msg());
    pp_sched_destroy(s);
}

/* Splits a CSV text into rows; returns the row count and copies row r into out. */
static int csv_row(const char *csv, int r, char *out, size_t n)
{
    int rows = 0;
    for (const char *p = csv; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (rows == r)
            snprintf(out, n, "%.*s", (int)len, p);
        rows++;
        p += len + (nl ? 1 : 0);
    }
    return rows;
}

Test(sched_fmt, csv_is_one_row_per_rank_in_pytorch_cells)
{
    pp_sched *s = generate("1f1b", 4, 8, 0);
    char *csv = render(s, pp_sched_write_csv);
    char row[4096];
    cr_assert_eq(csv_row(csv, 1, row, sizeof row), 4);
    /* rank 1 starts: receive mb 0's input for stage 1, run it, send it on */
    cr_assert(strncmp(row, "1RECV_F0,1F0,1SEND_F0,", 22) == 0, "%s", row);
    csv_row(csv, 3, row, sizeof row);
    cr_assert(strstr(row, "3B0,3SEND_B0"), "%s", row);
    free(csv);
    pp_sched_destroy(s);
}

/* PyTorch's CSV holds one pipeline: a bidirectional schedule has no CSV form (it used to be
 * written as one 2S-stage pipeline, which PyTorch's loader cannot run). test_sched_csv.c tests
 * the refusal for every two-pipe generator. */
Test(sched_fmt, csv_refuses_a_bidirectional_schedule)
{
    pp_sched *s = generate("bitpipe", 4, 4, 0);
    FILE *fp = fopen("/dev/null", "w");
    cr_assert_eq(pp_sched_write_csv(s, fp), PP_ERR_INVALID);
    fclose(fp);
    cr_assert(strstr(pp_err_text(), "bidirectional (2 pipes)"), "%s", pp_err_text());
    pp_sched_destroy(s);
}

typedef struct {
    pp_sched *s;
    pp_cost cost;
    pp_sim_result sim;
} simulated;

static simulated simulate(const char *kind, int D, int N, int v, double fb)
{
    simulated x = {.s = generate(kind, D, N, v)};
    cr_assert_eq(pp_cost_init_unit(&x.cost, x.s, fb), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_sim_run(x.s, &x.cost, 1, &x.sim), PP_OK, "%s", pp_err_msg());
    return x;
}

static void simulated_fini(simulated *x)
{
    pp_sim_result_fini(&x->sim);
    pp_cost_fini(&x->cost);
    pp_sched_destroy(x->s);
}

static char *render_sim(const simulated *x, int fmt)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    pp_status st = fmt == 0   ? pp_sched_write_ascii(x->s, &x->sim, 12, fp)
                   : fmt == 1 ? pp_sched_write_json(x->s, &x->sim, fp)
                              : pp_sched_write_svg(x->s, &x->sim, fp);
    cr_assert_eq(st, PP_OK, "%s", pp_err_msg());
    fclose(fp);
    return buf;
}

Test(sched_fmt, ascii_timeline_is_scaled_with_idle_visible)
{
    /* GPipe D = 2, N = 1, B = 2F: rank 0 F [0,1) B [4,6); rank 1 F [1,2) B [2,4); makespan 6.
     * 12 columns = 2 per unit. */
    simulated x = simulate("gpipe", 2, 1, 0, 2.0);
    cr_assert_float_eq(x.sim.makespan, 6.0, 1e-12);
    char *out = render_sim(&x, 0);
    cr_assert(strstr(out, "rank 0  F0......B0==   idle 50%"), "%s", out);
    cr_assert(strstr(out, "rank 1  ..F0B0==....   idle 50%"), "%s", out);
    cr_assert(strstr(out, "0 .. 6, 1 column = 0.5"), "%s", out);
    free(out);
    simulated_fini(&x);
}

Test(sched_fmt, ascii_marks_gradient_syncs_of_bidirectional_schedules)
{
    simulated x = simulate("bitpipe", 4, 4, 0, 2.0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_ascii(x.s, &x.sim, 0, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    cr_assert(strstr(buf, "f/b pipe 1 (up)"), "%s", buf);
    cr_assert(strstr(buf, "R gradient sync"), "%s", buf);
    cr_assert(strstr(buf, "~~") || strstr(buf, "##"), "BitPipe's second chunk has its own fill");
    /* every rank row shows its syncs */
    int rs = 0;
    for (const char *p = buf; (p = strstr(p, "rank ")); p++) {
        const char *nl = strchr(p, '\n');
        for (const char *q = p; q < nl; q++)
            rs += *q == 'R';
    }
    cr_assert_eq(rs, 8, "two syncs per rank on 4 ranks:\n%s", buf);
    free(buf);
    simulated_fini(&x);
}

Test(sched_fmt, json_carries_the_simulated_metrics)
{
    simulated x = simulate("1f1b", 4, 8, 0, 2.0);
    char *out = render_sim(&x, 1);
    cr_assert(strstr(out, "\"bubble_over_ideal\": 0.375,"), "%s", out);
    cr_assert(strstr(out, "\"peak_activations\": [4, 3, 2, 1],"), "%s", out);
    cr_assert(strstr(out, "\"kind\": \"1f1b\""), "%s", out);
    cr_assert(strstr(out, "{\"op\": \"SEND_F\", \"pipe\": 0, \"stage\": 0, \"mb\": 0, "
                          "\"peer\": 1}"),
              "%s", out);
    free(out);
    simulated_fini(&x);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

Test(sched_fmt, svg_draws_every_compute_with_a_title_and_legend)
{
    simulated x = simulate("interleaved", 4, 8, 2, 2.0);
    char *out = render_sim(&x, 2);
    cr_assert(strncmp(out, "<?xml", 5) == 0);
    cr_assert(strstr(out, "</svg>\n"));
    cr_assert(strstr(out, "interleaved: D = 4 ranks, N = 8 micro-batches, v = 2 chunks"), "%s",
              out);
    cr_assert(strstr(out, "18.8% over ideal"), "bubble 0.1875 in the subtitle");
    /* one titled block per compute action: 4 ranks x 2 chunks x 8 mbs x (F + B) */
    cr_assert_eq(count(out, "<title>F pipe") + count(out, "<title>B pipe"), 128);
    /* micro-batch 0's forward is the first palette colour, its backward a darker one */
    cr_assert(strstr(out, "fill=\"#4e79a7\""));
    cr_assert(strstr(out, "fill=\"#2e4864\""), "B of mb 0 at 60 %% of #4e79a7");
    cr_assert(strstr(out, ">idle</text>"));
    cr_assert_eq(count(out, ">rank "), 4);
    free(out);
    simulated_fini(&x);
}

/* issue 18, finding 6: 51 bytes took 3.3 GB before any structural check */
Test(sched_fmt, a_header_past_the_budget_is_refused_before_allocating)
{
    assert_parse_error("schedule x ranks 1 microbatches 16777216 chunks 8\n",
                       "ranks x chunks x microbatches = 1 x 8 x 16777216");
}

/* D = 8, v = 4, N = 32 (issue 17): 256 blocks a rank would be 3.75 px each, a barcode; the
 * chart aggregates by op kind, keeps idle hatched, and says seconds when asked. */
Test(sched_fmt, svg_aggregates_large_schedules_by_kind)
{
    simulated x = simulate("interleaved", 8, 32, 4, 2.0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    pp_sched_svg_opts o = {.unit = "s", .aggregate = -1};
    cr_assert_eq(pp_sched_write_svg_opts(x.s, &x.sim, &o, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    cr_assert_eq(count(buf, "<title>F pipe") + count(buf, "<title>B pipe"), 0,
                 "no block-by-block drawing");
    int f = count(buf, " forward, micro-batches "), b = count(buf, " backward, micro-batches "),
        mix = count(buf, " alternating F/B, micro-batches ");
    cr_assert(f >= 8 && b >= 8, "every rank's warm-up and cool-down show: %d %d", f, b);
    cr_assert(mix >= 8, "the steady phase is one kind of bar: %d", mix);
    cr_assert(f + b + mix < 8 * 256 / 8, "a few bars per rank, not a barcode: %d", f + b + mix);
    cr_assert(strstr(buf, ">forward</text>") && strstr(buf, ">backward</text>"));
    cr_assert(strstr(buf, ">idle</text>") && strstr(buf, "url(#idle)"));
    cr_assert(strstr(buf, "time (s)"), "the axis says seconds");
    free(buf);
    /* the default keeps a small chart block by block, in the cost table's units */
    buf = NULL;
    fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_svg(x.s, &x.sim, fp), PP_OK);
    fclose(fp);
    cr_assert(strstr(buf, "time (units of the cost table)"));
    free(buf);
    simulated_fini(&x);
}

/* Interleaved chunks differ by their fill, the legend says which is which, and micro-batches
 * from 10 on keep their full id (issue 17: "F-B4", "B10=" read as other blocks). */
Test(sched_fmt, ascii_tells_chunks_apart_and_keeps_two_digit_ids)
{
    simulated x = simulate("interleaved", 2, 12, 2, 2.0);
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_eq(pp_sched_write_ascii(x.s, &x.sim, 400, fp), PP_OK, "%s", pp_err_msg());
    fclose(fp);
    cr_assert(strstr(buf, "chunk fills (F/B): 0 -/=, 1 ~/#"), "%s", buf);
    cr_assert(strstr(buf, "F11-") || strstr(buf, "F11~"), "%s", buf);
    cr_assert(strstr(buf, "B10=") && strstr(buf, "B10#"), "both chunks' B of mb 10: %s", buf);
    cr_assert(strstr(buf, "~~") && strstr(buf, "##"), "chunk 1's fills: %s", buf);
    free(buf);
    simulated_fini(&x);
}
