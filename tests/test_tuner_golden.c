/* test_tuner_golden.c — the README's commands print what they printed when their outputs were
 * recorded (tests/fixtures/golden/): every leaderboard row and figure of the searches, the
 * memory tables, --explain, the schedules in each format, simulate, and the exports of the main
 * job's profile, with their exit codes and error messages. A refactoring that changes any figure
 * fails here; a change that means to change them re-records them with capture.sh and says why.
 * Each case runs through the same run-case.sh that recorded it (one normalisation: wall time,
 * schedule-cache count and the temporary profile's path are not compared). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_test_run.h"

#define PPTUNE PP_BINARY_DIR "/tuner/pptune"
#define GOLDEN PP_FIXTURES_DIR "/golden"

/* The first line where a and b differ, as "line N:\n  recorded: ...\n  now:      ...". */
static void first_difference(const char *a, const char *b, char *msg, size_t n)
{
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    int wa = (int)strcspn(la, "\n"), wb = (int)strcspn(lb, "\n");
    snprintf(msg, n, "line %d:\n  recorded: %.*s\n  now:      %.*s", line, wa, la, wb, lb);
}

static void compare(const char *dir, const char *name, const char *ext)
{
    char want_path[512], got_path[512];
    snprintf(want_path, sizeof want_path, GOLDEN "/%s.%s", name, ext);
    snprintf(got_path, sizeof got_path, "%s/%s.%s", dir, name, ext);
    cr_assert(access(want_path, R_OK) == 0, "no recorded %s (run capture.sh)", want_path);
    char *want = pp_test_slurp(want_path), *got = pp_test_slurp(got_path);
    if (strcmp(want, got) != 0) {
        char msg[2048];
        first_difference(want, got, msg, sizeof msg);
        cr_expect_fail("pptune %s (%s) differs from %s at %s", name, ext, want_path, msg);
    }
    free(want);
    free(got);
}

Test(tuner_golden, readme_commands_print_the_recorded_outputs, .timeout = 600)
{
    char dir[] = "/tmp/pp_golden_XXXXXX";
    cr_assert(mkdtemp(dir));
    pp_test_run_result r = pp_test_run(PPTUNE " --model gpt-13b --nodes 32 -o %s/profile.json", dir);
    cr_assert_eq(r.code, 0, "the main job failed: %s", r.err);
    pp_test_run_done(&r);

    FILE *fp = fopen(GOLDEN "/cases.txt", "r");
    cr_assert(fp, "cannot read " GOLDEN "/cases.txt");
    char line[1024];
    int cases = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#' || !strchr(line, '|'))
            continue;
        char *bar = strchr(line, '|');
        *bar = '\0';
        char name[128];
        cr_assert_eq(sscanf(line, "%127s", name), 1);
        bar[strcspn(bar + 1, "\n") + 1] = '\0';
        r = pp_test_run(GOLDEN "/run-case.sh " PPTUNE " %s/profile.json %s %s %s", dir, dir, name,
                        bar + 1);
        cr_assert_eq(r.code, 0, "run-case.sh %s failed: %s", name, r.err);
        pp_test_run_done(&r);
        compare(dir, name, "out");
        compare(dir, name, "err");
        compare(dir, name, "rc");
        cases++;
    }
    fclose(fp);
    cr_assert_geq(cases, 15, "cases.txt lists only %d cases", cases);
    r = pp_test_run("rm -rf %s", dir);
    pp_test_run_done(&r);
}
