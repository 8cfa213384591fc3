/* cmd_export.c — `pptune export --format F [--target T] PROFILE`: the chosen configuration as a
 * training framework's options, on stdout; the targets and what each runs are the rows of
 * profiles/export.c (pp_profile_export_targets). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_profile.h"

static void usage(void)
{
    char names[128];
    printf("usage: pptune export --format %s\n"
           "                    [--target T] [--runner-up K] PROFILE\n\n"
           "Prints the profile's chosen configuration as launch options:\n",
           pp_profile_export_names("|", names, sizeof names));
    pp_profile_export_help(stdout);
    printf("A configuration the target cannot run is refused with the reason (exit 2), naming\n"
           "the fastest runner-up in the profile that the target runs and the targets that\n"
           "run it.\n"
           "  --runner-up K  export the profile's K-th runner-up instead of its chosen\n"
           "            configuration (1 = the second fastest; the profile lists them)\n");
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
        {"runner-up", required_argument, NULL, 'R'},
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
            return pp_cmd_usage_error("export", "--runner-up \"%s\": expected a runner-up's "
                                                "number, 1 or more", runner);
    }
    pp_profile *p = NULL;
    pp_status st = pp_profile_read(file, &p);
    if (st == PP_OK && k > 0) {
        if (!p->has_chosen || k > p->n_runners_up) {
            fprintf(stderr, "pptune export: %s: --runner-up %ld: the profile has %d runner%s-up\n",
                    file, k, p->n_runners_up, p->n_runners_up == 1 ? "" : "s");
            pp_profile_destroy(p);
            return 2;
        }
        const pp_profile_candidate *r = &p->runners_up[k - 1];
        char text[160];
        fprintf(stderr,
                "pptune export: %s: runner-up #%ld, %s (predicted %.4g s per step; the chosen "
                "configuration: %.4g s)\n",
                file, k, pp_config_str(&r->config, text, sizeof text), r->step_time_s,
                p->chosen.step_time_s);
        p->chosen = *r; /* its strings live in the profile's document, as the chosen one's */
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
