/* cmd_export.c — `pptune export --format F [--target T] PROFILE`: the chosen configuration as a
 * training framework's options, on stdout; the targets and what each runs are the rows of
 * profiles/export.c (pp_profile_export_targets). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_profile.h"
#include "pp_tune.h"

static void usage(void)
{
    char names[128];
    printf("usage: pptune export --format %s\n"
           "                    [--target T] [--rank K] PROFILE\n\n"
           "Prints the profile's chosen configuration as launch options:\n",
           pp_profile_export_names("|", names, sizeof names));
    pp_profile_export_help(stdout);
    printf("A configuration the target cannot run is refused with the reason (exit 2), naming\n"
           "the fastest configuration of the profile's leaderboard that the target runs and\n"
           "the targets that run it.\n"
           "  --rank K  export the leaderboard's #K instead of its chosen configuration (#1);\n"
           "            the same numbering as the search's leaderboard and the refusals\n");
}

char *pp_cmd_export_summary(char *buf, size_t n)
{
    int k, m = 0, len = snprintf(buf, n, "a profile as");
    const pp_export_target *t = pp_profile_export_targets(&k);
    for (int i = 0; i < k; i++)
        m += t[i].output != NULL;
    for (int i = 0, j = 0; i < k && len >= 0 && (size_t)len < n; i++)
        if (t[i].output)
            len += snprintf(buf + len, n - (size_t)len, "%s %s", j++ == 0 ? "" : j == m ? " or" : ",",
                            t[i].output);
    return buf;
}

int pp_cmd_export(int argc, char **argv)
{
    const char *format = NULL, *file = NULL, *target = NULL, *runner = NULL;
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"format", required_argument, NULL, 'f'}, /* long only: 'f' is not among the short */
        {"target", required_argument, NULL, 'T'},
        {"rank", required_argument, NULL, 'R'},
        {0},
    };
    pp_cli cli;
    pp_cli_init(&cli, "export", argc, argv, "h", longopts);
    for (int c; (c = pp_cli_next(&cli)) != -1;) {
        if (c == PP_CLI_BAD)
            return 2;
        if (c == 'h') {
            usage();
            return 0;
        }
        *(c == 'T' ? &target : c == 'R' ? &runner : &format) = cli.arg;
    }
    for (int i = optind; i < argc; i++) {
        const char *o = argv[i];
        if (!file) {
            file = o;
        } else {
            return pp_cmd_usage_error("export", "expected one profile, got a second: \"%s\"", o);
        }
    }
    char names[128];
    if (!format || !file)
        return pp_cmd_usage_error("export", "expected --format %s PROFILE",
                                  pp_profile_export_names("|", names, sizeof names));
    const pp_export_target *fmt = pp_profile_export_find(format, target);
    if (!fmt)
        return pp_cmd_usage_error("export", "%s", pp_err_text());
    long k = 0;
    if (runner) {
        char *end;
        k = strtol(runner, &end, 10);
        if (*runner == '\0' || *end != '\0' || k < 1 || k > 1000)
            return pp_cmd_usage_error("export", "--rank \"%s\": expected a leaderboard "
                                                "number, 1 or more", runner);
    }
    pp_profile *p = NULL;
    pp_status st = pp_profile_read(file, &p);
    if (st == PP_OK && k > 1) {
        /* the leaderboard's #K: #1 is the chosen configuration, #K the runner-up K - 1 */
        if (!p->has_chosen || k > p->n_runners_up + 1) {
            fprintf(stderr, "pptune export: %s: --rank %ld: the profile's leaderboard has #1 to "
                            "#%d\n",
                    file, k, p->has_chosen ? p->n_runners_up + 1 : 0);
            pp_profile_destroy(p);
            return 2;
        }
        const pp_profile_candidate *r = &p->runners_up[k - 2];
        char text[160], s1[16], s2[16];
        fprintf(stderr, "pptune export: %s: #%ld, %s (predicted %s s per step; #1: %s s)\n", file,
                k, pp_config_str(&r->config, text, sizeof text),
                pp_fmt_seconds(r->step_time_s, s1, sizeof s1),
                pp_fmt_seconds(p->chosen.step_time_s, s2, sizeof s2));
        p->chosen = *r; /* its strings live in the profile's document, as the chosen one's */
    }
    if (st == PP_OK && fmt->pprun_model && p->has_chosen &&
        pp_tune_pprun_profile_model(p, NULL) != PP_OK) {
        /* never a line pprun rejects (the search's launch line asks the same) */
        fprintf(stderr, "pptune export: %s: %s\n", file, pp_err_text());
        pp_profile_destroy(p);
        return 2;
    }
    if (st == PP_OK)
        st = pp_profile_export(p, fmt, stdout);
    pp_profile_destroy(p);
    if (st == PP_ERR_UNSUPPORTED) {
        pp_cmd_fail("export", st);
        return 2;
    }
    return st == PP_OK ? 0 : pp_cmd_fail("export", st);
}
