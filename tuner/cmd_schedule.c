/* cmd_schedule.c — `pptune schedule`: generate one schedule and print its per-rank actions.
 * (Minimal first version; formats, --check and simulation come with the renderers.) */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "pp_sched.h"

int pp_cmd_schedule(int argc, char **argv)
{
    const char *kind = "1f1b";
    pp_sched_params p = {.ranks = 4, .microbatches = 8};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--kind") && v) {
            kind = v;
            i++;
        } else if (!strcmp(a, "--ranks")) {
            if (!pp_cmd_parse_int("schedule", a, v, 1, &p.ranks))
                return 2;
            i++;
        } else if (!strcmp(a, "--microbatches")) {
            if (!pp_cmd_parse_int("schedule", a, v, 1, &p.microbatches))
                return 2;
            i++;
        } else {
            return pp_cmd_usage_error("schedule", "unknown option \"%s\"", a);
        }
    }
    pp_sched *s;
    pp_status st = pp_sched_generate(kind, &p, &s);
    if (st != PP_OK)
        return pp_cmd_fail("schedule", st);
    char buf[96];
    for (int r = 0; r < s->ranks; r++) {
        printf("rank %d:", r);
        for (int i = 0; i < s->n_ops[r]; i++)
            printf(" [%s]", pp_action_str(s, &s->ops[r][i], buf, sizeof buf));
        printf("\n");
    }
    pp_sched_destroy(s);
    return 0;
}
