/* pp_test_dir.h — a fresh folder under /tmp for a suite's files, made before each test and
 * removed with what is in it after (Criterion's .init / .fini of the suite), for the suites
 * that write files through the library. Header-only (static inline). */
#ifndef PP_TEST_DIR_H
#define PP_TEST_DIR_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* PP_TEST_DIR(name): defines the folder g_dir (a char[64], "/tmp/name_XXXXXX" made anew for
 * each test) and its init and fini, name_dir_make and name_dir_remove. */
#define PP_TEST_DIR(name)                                                                          \
    static char g_dir[64];                                                                         \
    static void name##_dir_make(void)                                                              \
    {                                                                                              \
        snprintf(g_dir, sizeof g_dir, "/tmp/" #name "_XXXXXX");                                    \
        cr_assert(mkdtemp(g_dir), "cannot make a folder under /tmp");                              \
    }                                                                                              \
    static void name##_dir_remove(void)                                                            \
    {                                                                                              \
        char cmd_[128];                                                                            \
        snprintf(cmd_, sizeof cmd_, "rm -rf '%s'", g_dir);                                         \
        cr_assert_eq(system(cmd_), 0);                                                             \
    }

/* dir/name in one of 8 static buffers used in turn (a test may hold up to 8 paths at once). */
static inline char *pp_test_path_in(const char *dir, const char *name)
{
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

#endif
