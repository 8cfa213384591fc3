/* test_sched.c — the schedule IR: layer splits, the builder, communication lowering, and the
 * orders of the simple generators (GPipe, 1F1B). Generators with more structure have their own
 * parts (test_sched_<part>.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "pp_sched.h"
#include "sched_equal.h"

Test(sched_ir, even_and_llama3_uneven_splits)
{
    int b[9];
    cr_assert_eq(pp_sched_split_layers(40, 4, 0, b), PP_OK);
    for (int s = 0; s < 4; s++)
        cr_assert_eq(b[s + 1] - b[s], 10);
    /* Llama 3: 126 layers over 16 stages -> first and last 7, the rest 8 (126 + 2 = 16 * 8) */
    int u[17];
    cr_assert_eq(pp_sched_split_layers(126, 16, &(pp_sched_split){.uneven = 1}, u), PP_OK);
    cr_assert_eq(u[1] - u[0], 7);
    cr_assert_eq(u[16] - u[15], 7);
    cr_assert_eq(u[8] - u[7], 8);
    cr_assert_eq(u[16], 126);
}

Test(sched_ir, split_errors_name_the_rule)
{
    int b[8];
    cr_assert_eq(pp_sched_split_layers(10, 4, 0, b), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "10 layers do not split evenly over 4 stages"), "%s",
              pp_err_text());
    cr_assert_eq(pp_sched_split_layers(11, 4, &(pp_sched_split){.uneven = 1}, b), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "layers + 2"), "%s", pp_err_text());
}

/* Megatron's --decoder-first/last-pipeline-num-layers: A and Z given, the rest even. */
Test(sched_ir, first_and_last_stage_counts)
{
    int b[9];
    /* 12 layers, 4 stages, head-heavy: A = 4, Z = 2 -> 4 + 3 + 3 + 2 */
    cr_assert_eq(pp_sched_split_layers(12, 4, &(pp_sched_split){.first = 4, .last = 2}, b), PP_OK,
                 "%s", pp_err_text());
    int want[] = {4, 3, 3, 2};
    for (int s = 0; s < 4; s++)
        cr_assert_eq(b[s + 1] - b[s], want[s], "stage %d", s);
    /* only Z = 6: the other three share 12 - 6 -> 2 + 2 + 2 + 6 */
    cr_assert_eq(pp_sched_split_layers(12, 4, &(pp_sched_split){.last = 6}, b), PP_OK);
    cr_assert(b[1] == 2 && b[2] == 4 && b[3] == 6 && b[4] == 12);
    /* two stages: A + Z = L; one given, the other takes the rest */
    cr_assert_eq(pp_sched_split_layers(12, 2, &(pp_sched_split){.first = 7, .last = 5}, b), PP_OK);
    cr_assert(b[1] == 7 && b[2] == 12);
    cr_assert_eq(pp_sched_split_layers(12, 2, &(pp_sched_split){.last = 5}, b), PP_OK);
    cr_assert(b[1] == 7 && b[2] == 12);
    /* one stage: all layers, whatever A says when it says L */
    cr_assert_eq(pp_sched_split_layers(12, 1, &(pp_sched_split){.last = 12}, b), PP_OK);
    cr_assert(b[1] == 12);
    /* uneven is the shorthand of A = Z = (L + 2) / S - 1 */
    int u[9];
    cr_assert_eq(pp_sched_split_layers(10, 4, &(pp_sched_split){.uneven = 1}, u), PP_OK);
    cr_assert_eq(pp_sched_split_layers(10, 4, &(pp_sched_split){.first = 2, .last = 2}, b), PP_OK);
    cr_assert_eq(memcmp(u, b, 5 * sizeof *b), 0);
}

Test(sched_ir, bad_first_and_last_counts_say_why)
{
    int b[9];
    cr_assert_eq(pp_sched_split_layers(12, 4, &(pp_sched_split){.first = 4, .last = 3}, b),
                 PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "leave 5 of the 12 layers for the other 2 stages"), "%s",
              pp_err_text());
    cr_assert_eq(pp_sched_split_layers(12, 4, &(pp_sched_split){.first = 6, .last = 6}, b),
                 PP_ERR_INVALID); /* nothing left for the middle stages */
    cr_assert_eq(pp_sched_split_layers(12, 2, &(pp_sched_split){.first = 6, .last = 5}, b),
                 PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "must add up to 12, got 6 + 5"), "%s", pp_err_text());
    cr_assert_eq(pp_sched_split_layers(12, 4, &(pp_sched_split){.uneven = 1, .last = 2}, b),
                 PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "not both"), "%s", pp_err_text());
    cr_assert_eq(pp_sched_split_layers(12, 4, &(pp_sched_split){.first = -1}, b), PP_ERR_INVALID);
    cr_assert_eq(pp_sched_split_layers(12, 1, &(pp_sched_split){.first = 5}, b), PP_ERR_INVALID);
}

static int count_op(const pp_sched *s, int r, int op)
{
    int n = 0;
    for (int i = 0; i < s->n_ops[r]; i++)
        n += s->ops[r][i].op == op;
    return n;
}

Test(sched_ir, lowering_adds_one_send_and_recv_per_hop)
{
    pp_sched_params p = {.ranks = 4, .microbatches = 8};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &p, &s), PP_OK);
    /* rank 0: sends F of every mb, receives B of every mb; no RECV_F, no SEND_B */
    cr_assert_eq(count_op(s, 0, PP_OP_SEND_F), 8);
    cr_assert_eq(count_op(s, 0, PP_OP_RECV_B), 8);
    cr_assert_eq(count_op(s, 0, PP_OP_RECV_F), 0);
    cr_assert_eq(count_op(s, 3, PP_OP_SEND_F), 0);
    cr_assert_eq(count_op(s, 3, PP_OP_SEND_B), 8);
    cr_assert_eq(count_op(s, 1, PP_OP_RECV_F), 8);
    /* each RECV sits right before its consumer and names its peer */
    for (int i = 0; i < s->n_ops[1]; i++) {
        pp_action a = s->ops[1][i];
        if (a.op == PP_OP_RECV_F) {
            cr_assert_eq(a.peer, 0);
            cr_assert_eq(s->ops[1][i + 1].op, PP_OP_F);
            cr_assert_eq(s->ops[1][i + 1].mb, a.mb);
        }
    }
    /* idempotent */
    int n1 = s->n_ops[1];
    cr_assert_eq(pp_sched_lower_comms(s), PP_OK);
    cr_assert_eq(s->n_ops[1], n1);
    pp_sched_destroy(s);
}

/* Compute-only order of rank r as "F0 F1 B0 ..." */
static void order(const pp_sched *s, int r, char *buf, size_t n)
{
    buf[0] = '\0';
    size_t len = 0;
    for (int i = 0; i < s->n_ops[r]; i++) {
        pp_action a = s->ops[r][i];
        if (a.op != PP_OP_F && a.op != PP_OP_B)
            continue;
        len += (size_t)snprintf(buf + len, n - len, "%s%s%d", len ? " " : "",
                                a.op == PP_OP_F ? "F" : "B", (int)a.mb);
    }
}

Test(sched_gen, one_f_one_b_order_follows_megatron)
{
    pp_sched_params p = {.ranks = 4, .microbatches = 6};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("1f1b", &p, &s), PP_OK);
    char buf[256];
    order(s, 0, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
    order(s, 3, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
    pp_sched_destroy(s);
}

Test(sched_gen, gpipe_all_forwards_then_all_backwards)
{
    pp_sched_params p = {.ranks = 2, .microbatches = 3};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("gpipe", &p, &s), PP_OK);
    char buf[256];
    order(s, 1, buf, sizeof buf);
    cr_assert_str_eq(buf, "F0 F1 F2 B0 B1 B2");
    pp_sched_destroy(s);
}

Test(sched_gen, unknown_kind_lists_the_known_ones)
{
    pp_sched_params p = {.ranks = 2, .microbatches = 2};
    pp_sched *s;
    cr_assert_eq(pp_sched_generate("zigzag", &p, &s), PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_text(), "\"zigzag\""));
    cr_assert(strstr(pp_err_text(), "bitpipe"));
}

/* issue 18, finding 6: sizes past the budget fail before anything is allocated */
Test(sched, generators_refuse_schedules_past_the_budget)
{
    struct {
        const char *kind;
        pp_sched_params p;
        const char *says;
    } cases[] = {
        {"1f1b", {.ranks = 4, .microbatches = 100000000}, "more than a schedule may have"},
        {"gpipe", {.ranks = 1000000, .microbatches = 4}, "ranks: expected at most 65536"},
        {"interleaved", {.ranks = 4, .microbatches = 8, .chunks = 100000000},
         "more than a schedule may have"},
        {"1f1b", {.ranks = 65536, .microbatches = 65536}, "more than a schedule may have"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_sched *s = NULL;
        cr_expect_eq(pp_sched_generate(cases[i].kind, &cases[i].p, &s), PP_ERR_INVALID,
                     "case %zu accepted", i);
        cr_expect_null(s);
        cr_expect(strstr(pp_err_text(), cases[i].says), "case %zu: %s", i, pp_err_text());
        pp_sched_destroy(s);
    }
}

/* The search generates a schedule's compute only (pp_sched_generate_compute), lowers it when it
 * simulates it, and makes another layer split of an order it holds by pp_sched_resplit
 * (tuner/search.c): for every registered generator, every split that applies, generated with
 * another split, resplit and lowered, equals pp_sched_generate's schedule of that split, action
 * for action (it fails when a generator's order or placement comes to depend on the split). */
Test(sched_gen, resplit_and_later_lowering_give_the_generated_schedule)
{
    int n_kinds;
    const pp_sched_desc *rows = pp_sched_generators(&n_kinds);
    const int Ds[] = {4, 6}, Ns[] = {8, 12};
    int compared = 0;
    for (int k = 0; k < n_kinds; k++)
        for (size_t di = 0; di < 2; di++)
            for (size_t ni = 0; ni < 2; ni++) {
                int D = Ds[di], N = Ns[ni];
                int v = pp_sched_desc_chunks(&rows[k], rows[k].chunks ? 0 : 2), S = v * D;
                pp_sched_params base = {.ranks = D, .microbatches = N, .chunks = v,
                                        .layers = 2 * S};
                if (pp_sched_desc_check(&rows[k], &base) != PP_OK) {
                    pp_err_clear();
                    continue;
                }
                pp_sched *from = NULL; /* even split, compute only */
                cr_assert_eq(pp_sched_generate_compute(rows[k].name, &base, &from), PP_OK,
                             "%s D=%d N=%d: %s", rows[k].name, D, N, pp_err_msg());
                int splits = 0;
                for (int A = 0; A <= 3; A++)
                    for (int Z = 0; Z <= 3; Z++)
                        for (int uneven = 0; uneven <= (A == 0 && Z == 0); uneven++) {
                            pp_sched_params p = base;
                            p.uneven = uneven, p.first_layers = A, p.last_layers = Z;
                            pp_sched *want = NULL, *got = NULL;
                            if (pp_sched_generate(rows[k].name, &p, &want) != PP_OK) {
                                pp_err_clear();
                                continue;
                            }
                            pp_sched_split split = pp_sched_params_split(&p);
                            cr_assert_eq(pp_sched_clone(from, &got), PP_OK);
                            cr_assert_eq(pp_sched_resplit(got, &split), PP_OK, "%s",
                                         pp_err_msg());
                            cr_assert_eq(pp_sched_lower_comms(got), PP_OK);
                            char why[256];
                            cr_assert(pp_test_sched_equal(want, got, why, sizeof why),
                                      "%s D=%d N=%d v=%d, split A=%d Z=%d uneven %d: %s",
                                      rows[k].name, D, N, v, A, Z, uneven, why);
                            splits++;
                            pp_sched_destroy(want);
                            pp_sched_destroy(got);
                        }
                cr_assert_geq(splits, 2, "%s D=%d N=%d: only %d splits apply", rows[k].name, D,
                              N, splits);
                pp_sched_destroy(from);
                compared++;
            }
    cr_assert_geq(compared, n_kinds, "each generator compared at least once (%d cases)",
                  compared);
}
