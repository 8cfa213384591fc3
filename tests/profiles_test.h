/* profiles_test.h — helpers shared by the profiles suite: a scratch directory, the test HTTP
 * store (tests/fixtures/store_server.py) started and stopped by the test, a fingerprint of a
 * directory tree (to show that a failure left the local store as it was), and running pptune
 * with its output captured. */
#ifndef PP_PROFILES_TEST_H
#define PP_PROFILES_TEST_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp_profile.h"
#include "pp_test_run.h"

#define FIX PP_FIXTURES_DIR "/profiles/"
#define PPTUNE PP_BINARY_DIR "/tuner/pptune"
#define STORE_SERVER PP_FIXTURES_DIR "/store_server.py"

static char pt_tmp_made[8][64];
static int pt_n_tmp;

static inline void pt_rmtree(const char *dir)
{
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        const char *nm = ents[i]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..")) {
            char path[1024];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, nm);
            if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
                pt_rmtree(path);
            else
                unlink(path);
        }
        free(ents[i]);
    }
    if (k >= 0)
        free(ents);
    rmdir(dir);
}

static void pt_cleanup(void)
{
    for (int i = 0; i < pt_n_tmp; i++)
        pt_rmtree(pt_tmp_made[i]);
}

/* A fresh directory under /tmp, removed when the test's process exits (Criterion runs each
 * test in its own process). PPTUNE_TEST_KEEP=1 keeps it for a post-mortem. */
static inline void pt_tmpdir(char *buf, size_t n)
{
    snprintf(buf, n, "/tmp/pptune-profiles-XXXXXX");
    cr_assert_not_null(mkdtemp(buf), "mkdtemp failed");
    const char *keep = getenv("PPTUNE_TEST_KEEP");
    if (pt_n_tmp < 8 && !(keep && *keep == '1')) {
        if (pt_n_tmp == 0)
            atexit(pt_cleanup);
        snprintf(pt_tmp_made[pt_n_tmp++], sizeof pt_tmp_made[0], "%s", buf);
    }
}

typedef struct {
    pid_t pid;
    int port;
    char url[128];
} pt_server;

/* Starts store_server.py with the given mode and extra arguments (NULL-terminated), reads the
 * port it reports. The server stops itself after 60 s even if the test dies. */
static inline void pt_server_start(pt_server *s, const char *root, const char *mode, ...)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    const char *argv[32] = {"python3", STORE_SERVER, "--mode",     mode,
                            "--root",  root,         "--lifetime", "60"};
    int argc = 8;
    va_list ap;
    va_start(ap, mode);
    for (const char *a; (a = va_arg(ap, const char *)) && argc < 30;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    FILE *fp = fdopen(fd[0], "r");
    char line[64] = "";
    cr_assert_not_null(fgets(line, sizeof line, fp), "store_server.py reported no port");
    fclose(fp);
    cr_assert_eq(sscanf(line, "PORT %d", &s->port), 1, "store_server.py said \"%s\"", line);
    s->pid = pid;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d/profiles", s->port);
}

static inline void pt_server_stop(pt_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* Appends "relative-path size sha256\n" for every file under dir, sorted by name, to out. */
static inline void pt_tree_walk(const char *dir, const char *rel, char *out, size_t n)
{
    struct dirent **ents;
    int k = scandir(dir, &ents, NULL, alphasort);
    if (k < 0)
        return;
    for (int i = 0; i < k; i++) {
        const char *nm = ents[i]->d_name;
        if (strcmp(nm, ".") && strcmp(nm, "..")) {
            char path[1024], r[1024];
            int lp = snprintf(path, sizeof path, "%s/%s", dir, nm);
            int lr = snprintf(r, sizeof r, "%s%s%s", rel, *rel ? "/" : "", nm);
            struct stat st;
            if (lp >= (int)sizeof path || lr >= (int)sizeof r) /* a path too long: listed so */
                snprintf(out + strlen(out), n - strlen(out), "(a path over 1 KiB under %s)\n",
                         dir);
            else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
                snprintf(out + strlen(out), n - strlen(out), "%s/\n", r);
                pt_tree_walk(path, r, out, n);
            } else {
                char *data = NULL, hex[65] = "";
                size_t len = 0;
                if (pp_file_read(path, &data, &len) == PP_OK)
                    pp_sha256_hex(data, len, hex);
                free(data);
                snprintf(out + strlen(out), n - strlen(out), "%s %zu %s\n", r, len, hex);
            }
        }
        free(ents[i]);
    }
    free(ents);
}

static inline void pt_tree(const char *dir, char *out, size_t n)
{
    out[0] = '\0';
    pt_tree_walk(dir, "", out, n);
}

/* Runs a shell command line through the suites' one runner (pp_test_run.h), with stderr joined to
 * stdout; copies what it printed into out (truncated to n - 1 bytes) and returns the exit status. */
static inline int pt_run(const char *cmd, char *out, size_t n)
{
    char *all;
    int code = pp_test_run_merged(cmd, &all);
    snprintf(out, n, "%s", all);
    free(all);
    return code;
}

/* Asserts that two files hold the same bytes. */
static inline void pt_assert_same_file(const char *a, const char *b)
{
    char *x, *y;
    size_t lx, ly;
    cr_assert_eq(pp_file_read(a, &x, &lx), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_file_read(b, &y, &ly), PP_OK, "%s", pp_err_msg());
    cr_assert(lx == ly && memcmp(x, y, lx) == 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

static inline void pt_copy(const char *from, const char *to)
{
    char *data;
    size_t len;
    cr_assert_eq(pp_file_read(from, &data, &len), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(pp_file_write_atomic(to, data, len), PP_OK, "%s", pp_err_msg());
    free(data);
}

#endif
