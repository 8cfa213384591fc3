/* cmd_diff.c — `pptune diff OLD NEW`: what changed between two profiles, and an exit code a CI
 * job acts on: 0 no regression, 3 throughput dropped by more than --threshold, 1/2 errors. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_profile.h"

#define DIFF_REGRESSION 3

static void usage(void)
{
    printf("usage: pptune diff OLD.json NEW.json [--threshold PCT] [--quiet]\n\n"
           "Compares the chosen configurations of two profiles: configuration, predicted and\n"
           "measured throughput and step time, peak memory per rank. Throughput is compared on\n"
           "measured figures when both were trialled, else on predicted ones.\n\n"
           "  --threshold PCT   largest tolerated drop of throughput, percent (default 5)\n"
           "  --quiet           print nothing; only the exit code\n\n"
           "exit status: 0 no regression, 3 throughput dropped by more than PCT %%,\n"
           "             1 a file could not be read, 2 bad usage or an invalid profile\n");
}

int pp_cmd_diff(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL};
    int n_files = 0, quiet = 0;
    double pct = 5.0;
    enum { THRESHOLD = PP_CLI_LOCAL, QUIET };
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"threshold", required_argument, NULL, THRESHOLD},
        {"quiet", no_argument, NULL, QUIET},
        {0},
    };
    pp_cli p;
    pp_cli_init(&p, "diff", argc, argv, "h", longopts);
    for (int c; (c = pp_cli_next(&p)) != -1;) {
        if (c == PP_CLI_BAD)
            return 2;
        if (c == 'h') {
            usage();
            return 0;
        } else if (c == THRESHOLD) {
            if (!pp_cmd_parse_double("diff", p.name, p.arg, 0, &pct))
                return 2;
        } else if (c == QUIET) {
            quiet = 1;
        }
    }
    for (int i = optind; i < argc; i++) {
        const char *o = argv[i];
        if (n_files < 2) {
            files[n_files++] = o;
        } else {
            return pp_cmd_usage_error("diff", "expected two profiles, got a third: \"%s\"", o);
        }
    }
    if (n_files != 2)
        return pp_cmd_usage_error("diff", "expected two profiles: OLD.json NEW.json");
    pp_profile *a = NULL, *b = NULL;
    pp_status st = pp_profile_read(files[0], &a);
    if (st == PP_OK)
        st = pp_profile_read(files[1], &b);
    pp_profile_diff d;
    if (st == PP_OK)
        st = pp_profile_diff_run(a, b, pct / 100, quiet ? NULL : stdout, &d);
    pp_profile_destroy(a);
    pp_profile_destroy(b);
    if (st != PP_OK)
        return pp_cmd_fail("diff", st);
    return d.regression ? DIFF_REGRESSION : 0;
}
