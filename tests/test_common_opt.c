/* test_common_opt.c — the option tables both programs read their command lines with
 * (common/pp_opt.h): fields filled from the rows, the first bad word named with what it must
 * be, codes handed back, and --help generated from the same rows with their defaults. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pp_opt.h"

typedef struct {
    int n, flag, on, pick;
    double x;
    uint64_t seed;
    const char *name, *mode;
} target;

static const char *const PICKS[] = {"none", "some", "all", NULL};
enum { CODE_HELP = 1, CODE_N = 2 };

#define OFF(f) offsetof(target, f)
static const pp_opt rows[] = {
    {.kind = PP_OPT_SECTION, .help = "numbers:", .width = 20},
    {.name = "n", .letter = 'n', .kind = PP_OPT_INT, .offset = OFF(n), .min = 1, .arg = "N",
     .help = "a count", .show_default = 1, .code = CODE_N},
    {.name = "x", .kind = PP_OPT_DOUBLE, .offset = OFF(x), .min = 0, .arg = "X",
     .help = "a rate\nover two lines", .show_default = 1},
    {.name = "seed", .kind = PP_OPT_U64, .offset = OFF(seed), .arg = "S", .help = "a seed"},
    {.kind = PP_OPT_SECTION, .help = "words:"},
    {.name = "flag", .kind = PP_OPT_FLAG, .offset = OFF(flag), .help = "set it"},
    {.name = "no-on", .kind = PP_OPT_CLEAR, .offset = OFF(on), .help = "clear it"},
    {.name = "pick", .kind = PP_OPT_CHOICE, .offset = OFF(pick), .choices = PICKS, .arg = "P",
     .help = "how many", .show_default = 1},
    {.name = "mode", .kind = PP_OPT_NAME, .offset = OFF(mode), .choices = PICKS, .arg = "M"},
    {.name = "name", .kind = PP_OPT_STRING, .offset = OFF(name), .arg = "NAME",
     .help = "a name", .show_default = 1},
    {.name = "help", .letter = 'h', .kind = PP_OPT_CODE, .code = CODE_HELP},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

/* Parses the words of line (space separated, at most 16) into t; returns the last answer of
 * pp_opt_next (-1 at the end, PP_OPT_BAD) and leaves the parser in *p. */
static int parse(const char *line, target *t, pp_opt_parser *p, int *codes)
{
    static char buf[256];
    static char *argv[17];
    snprintf(buf, sizeof buf, "prog %s", line);
    int argc = 0;
    for (char *w = strtok(buf, " "); w && argc < 16; w = strtok(NULL, " "))
        argv[argc++] = w;
    argv[argc] = NULL;
    pp_opt_group g = {.opts = rows, .n = N_ROWS, .target = t};
    pp_opt_init(p, &g, 1, argc, argv);
    int c, k = 0;
    while ((c = pp_opt_next(p)) >= 0)
        if (c > 0 && codes)
            codes[k++] = c;
    return c;
}

Test(common_opt, rows_fill_their_fields_in_both_forms)
{
    target t = {.on = 1, .name = "dflt"};
    pp_opt_parser p;
    int codes[8] = {0};
    cr_assert_eq(parse("--n=3 --x 0.5 --seed 0x10 --flag --no-on --pick all --mode some "
                       "--name abc -h",
                       &t, &p, codes),
                 -1);
    cr_assert_eq(t.n, 3);
    cr_assert_float_eq(t.x, 0.5, 1e-12);
    cr_assert_eq(t.seed, 16);
    cr_assert(t.flag && !t.on);
    cr_assert_eq(t.pick, 2);
    cr_assert_str_eq(t.mode, "some");
    cr_assert_eq(t.mode, PICKS[1], "NAME stores the table's own string");
    cr_assert_str_eq(t.name, "abc");
    cr_assert_eq(codes[0], CODE_N, "a row with a code is applied, then handed back");
    cr_assert_eq(codes[1], CODE_HELP);
    memset(&t, 0, sizeof t);
    cr_assert_eq(parse("-n7 file", &t, &p, NULL), -1);
    cr_assert_eq(t.n, 7);
    cr_assert_str_eq(p.argv[optind], "file", "a word that is not an option stays after them");
}

Test(common_opt, the_first_bad_word_is_named_with_what_it_must_be)
{
    static const struct {
        const char *line;
        pp_opt_error error;
        const char *name, *want;
    } cases[] = {
        {"--n 0", PP_OPT_ERR_VALUE, "--n", "an integer >= 1"},
        {"--n=x", PP_OPT_ERR_VALUE, "--n", "an integer >= 1"},
        {"-n 99999999999", PP_OPT_ERR_VALUE, "-n", "an integer >= 1"},
        {"--x inf", PP_OPT_ERR_VALUE, "--x", "a finite number >= 0"},
        {"--x -1", PP_OPT_ERR_VALUE, "--x", "a finite number >= 0"},
        {"--seed -1", PP_OPT_ERR_VALUE, "--seed", "a non-negative integer"},
        {"--pick most", PP_OPT_ERR_VALUE, "--pick", "none, some or all"},
        {"--bogus", PP_OPT_ERR_UNKNOWN, "--bogus", ""},
        {"-q", PP_OPT_ERR_UNKNOWN, "-q", ""},
        {"--n", PP_OPT_ERR_MISSING, "--n", ""},
        {"--flag --name", PP_OPT_ERR_MISSING, "--name", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        target t = {0};
        pp_opt_parser p;
        cr_assert_eq(parse(cases[i].line, &t, &p, NULL), PP_OPT_BAD, "%s", cases[i].line);
        cr_assert_eq(p.error, cases[i].error, "%s", cases[i].line);
        cr_assert_str_eq(p.name, cases[i].name, "%s", cases[i].line);
        cr_assert_str_eq(p.want, cases[i].want, "%s", cases[i].line);
    }
}

Test(common_opt, help_is_the_rows_with_their_defaults)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    target dflt = {.n = 4, .x = 0.25, .pick = 1, .name = "dflt"};
    pp_opt_help(fp, rows, N_ROWS, &dflt);
    fclose(fp);
    cr_assert_str_eq(text, "numbers:\n"
                           "  --n N             a count (default 4)\n"
                           "  --x X             a rate\n"
                           "                    over two lines (default 0.25)\n"
                           "  --seed S          a seed\n"
                           "words:\n"
                           "  --flag            set it\n"
                           "  --no-on           clear it\n"
                           "  --pick P          how many (default some)\n"
                           "  --name NAME       a name (default dflt)\n");
    free(text);
}

Test(common_opt, value_checks_for_a_callers_own_options)
{
    int i;
    double d;
    cr_assert(pp_opt_int("12", 1, 100, &i) && i == 12);
    cr_assert_not(pp_opt_int("101", 1, 100, &i));
    cr_assert_not(pp_opt_int("3x", 1, 100, &i));
    cr_assert(pp_opt_double("1e-3", 0, 0, &d) && d == 1e-3);
    cr_assert_not(pp_opt_double("nan", 0, 0, &d));
    cr_assert_not(pp_opt_double("2", 0, 1, &d));
}
