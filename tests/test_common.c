/* test_common.c — the error trail, atomic files, FNV-1a and host grouping every module uses. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pp_backends.h"
#include "pp_common.h"

/* rm -rf of a test's own temporary folder. */
static void rmtree(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static pp_status inner(void) { return PP_ERR(PP_ERR_PARSE, "model.json: \"num_layers\" must be positive, got %d", -3); }
static pp_status outer(void)
{
    PP_TRY(inner());
    return PP_OK;
}

Test(common, error_message_keeps_text_and_trail)
{
    cr_assert_eq(outer(), PP_ERR_PARSE);
    cr_assert_str_eq(pp_err_text(), "model.json: \"num_layers\" must be positive, got -3");
    cr_assert(strstr(pp_err_msg(), "test_common.c:") != NULL, "trail missing: %s", pp_err_msg());
    cr_assert(strstr(pp_err_msg(), " < ") != NULL, "no propagation step in: %s", pp_err_msg());
    pp_err_clear();
    cr_assert_str_eq(pp_err_msg(), "");
}

/* How a plugin's message crosses into the host's copy of common/ (probes/plugin.c): verbatim,
 * trail included, and the trail still grows from there. */
Test(common, restored_message_keeps_text_and_trail)
{
    cr_assert_eq(pp_err_restore(PP_ERR_DEVICE, "cudaMalloc failed [probes/gpu.cu:7 < probes/gpu.cu:9]",
                                strlen("cudaMalloc failed")),
                 PP_ERR_DEVICE);
    cr_assert_str_eq(pp_err_text(), "cudaMalloc failed");
    pp_err_trace(PP_ERR_DEVICE, "probes/plugin.c", 3);
    cr_assert_str_eq(pp_err_msg(),
                     "cudaMalloc failed [probes/gpu.cu:7 < probes/gpu.cu:9 < probes/plugin.c:3]");
}

Test(common, atomic_write_replaces_whole_file)
{
    char dir[] = "/tmp/pp_test_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/out.json", dir);
    cr_assert_eq(pp_file_write_atomic(path, "old", 3), PP_OK);
    pp_afile af;
    cr_assert_eq(pp_afile_open(&af, path), PP_OK);
    fputs("new content", af.fp);
    /* until commit the old file is intact */
    char *data;
    size_t n;
    cr_assert_eq(pp_file_read(path, &data, &n), PP_OK);
    cr_assert_str_eq(data, "old");
    free(data);
    cr_assert_eq(pp_afile_commit(&af), PP_OK);
    cr_assert_eq(pp_file_read(path, &data, &n), PP_OK);
    cr_assert_str_eq(data, "new content");
    cr_assert_eq(n, 11);
    free(data);
    /* abort leaves the committed file and no temporary behind */
    cr_assert_eq(pp_afile_open(&af, path), PP_OK);
    fputs("partial", af.fp);
    pp_afile_abort(&af);
    cr_assert_eq(pp_file_read(path, &data, &n), PP_OK);
    cr_assert_str_eq(data, "new content");
    free(data);
    remove(path);
    cr_assert_eq(rmdir(dir), 0, "directory not empty: a temporary file was left behind");
}

Test(common, atomic_write_into_missing_directory_fails_clearly)
{
    pp_status st = pp_file_write_atomic("/nonexistent-dir/x.json", "x", 1);
    cr_assert_eq(st, PP_ERR_IO);
    cr_assert(strstr(pp_err_text(), "/nonexistent-dir/x.json") != NULL, "%s", pp_err_text());
}

Test(common, read_missing_file_names_it)
{
    char *d;
    cr_assert_eq(pp_file_read("/nonexistent.txt", &d, NULL), PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_text(), "/nonexistent.txt") != NULL);
}

/* ---- hostile folders and destinations (issue 18: planted links, device nodes, stale files) --- */

static void make_dir(char *dir)
{
    cr_assert_not_null(mkdtemp(dir));
}

static int count_entries(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(common, atomic_write_never_follows_a_planted_link)
{
    char dir[] = "/tmp/pp_test_XXXXXX", victim_dir[] = "/tmp/pp_victim_XXXXXX";
    make_dir(dir);
    make_dir(victim_dir);
    char victim[256], path[256], link[512];
    snprintf(victim, sizeof victim, "%s/precious", victim_dir);
    cr_assert_eq(pp_file_write_atomic(victim, "keep me", 7), PP_OK);
    snprintf(path, sizeof path, "%s/profile.json", dir);
    /* the old writer's name for pid p was PATH.tmp.<p>: plant links for every pid near ours */
    for (int d = 0; d < 64; d++) {
        snprintf(link, sizeof link, "%s.tmp.%ld", path, (long)getpid() + d);
        cr_assert_eq(symlink(victim, link), 0);
    }
    cr_assert_eq(pp_file_write_atomic(path, "new", 3), PP_OK);
    char *data;
    cr_assert_eq(pp_file_read(victim, &data, NULL), PP_OK);
    cr_assert_str_eq(data, "keep me", "the victim behind a planted link was written");
    free(data);
    cr_assert_eq(pp_file_read(path, &data, NULL), PP_OK);
    cr_assert_str_eq(data, "new");
    free(data);
    /* a link at the destination itself: replaced by the file, its target untouched */
    char dest[256];
    snprintf(dest, sizeof dest, "%s/dest.json", dir);
    cr_assert_eq(symlink(victim, dest), 0);
    cr_assert_eq(pp_file_write_atomic(dest, "mine", 4), PP_OK);
    cr_assert_eq(pp_file_read(victim, &data, NULL), PP_OK);
    cr_assert_str_eq(data, "keep me");
    free(data);
    struct stat st;
    cr_assert_eq(lstat(dest, &st), 0);
    cr_assert(S_ISREG(st.st_mode), "the destination link was followed, not replaced");
    cr_assert_eq(st.st_mode & 0777, 0644 & ~(mode_t)umask(umask(0)), "mode %o", st.st_mode);
    rmtree(dir);
    rmtree(victim_dir);
}

Test(common, atomic_write_keeps_device_nodes_and_refuses_directories)
{
    /* /dev/null is written through, never replaced by a regular file (as root, the old rename
     * did exactly that) */
    cr_assert_eq(pp_file_write_atomic("/dev/null", "discarded", 9), PP_OK);
    struct stat st;
    cr_assert_eq(stat("/dev/null", &st), 0);
    cr_assert(S_ISCHR(st.st_mode), "/dev/null is no longer a device");
    /* a pipe is written through */
    char dir[] = "/tmp/pp_test_XXXXXX";
    make_dir(dir);
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) { /* the reader */
        char *got;
        size_t n;
        _exit(pp_file_read(fifo, &got, &n) == PP_OK && n == 5 && !memcmp(got, "piped", 5) ? 0
                                                                                         : 1);
    }
    cr_assert_eq(pp_file_write_atomic(fifo, "piped", 5), PP_OK, "%s", pp_err_msg());
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the FIFO's reader got other bytes");
    cr_assert_eq(stat(fifo, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode));
    close(fds[0]);
    close(fds[1]);
    /* a directory is refused with its name */
    cr_assert_eq(pp_file_write_atomic(dir, "x", 1), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "is a directory"), "%s", pp_err_text());
    rmtree(dir);
}

Test(common, stale_temporaries_of_dead_writers_go_and_live_ones_stay)
{
    char dir[] = "/tmp/pp_test_XXXXXX";
    make_dir(dir);
    char path[256], dead[300], alive[300], other[300], glob_like[300];
    snprintf(path, sizeof path, "%s/p.json", dir);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0); /* a pid that is now dead */
    snprintf(dead, sizeof dead, "%s.tmp.%ld.0123456789abcdef", path, (long)child);
    snprintf(alive, sizeof alive, "%s.tmp.%ld.fedcba9876543210", path, (long)getppid());
    snprintf(other, sizeof other, "%s/q.json.tmp.%ld", dir, (long)child);
    snprintf(glob_like, sizeof glob_like, "%s/p.jsonX.tmp.%ld", dir, (long)child);
    const char *files[] = {dead, alive, other, glob_like};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pp_file_write_atomic(files[i], "x", 1), PP_OK);
    cr_assert_eq(pp_file_write_atomic(path, "p", 1), PP_OK);
    cr_assert_neq(access(dead, F_OK), 0, "a dead writer's temporary was left");
    cr_assert_eq(access(alive, F_OK), 0, "a live writer's temporary was removed");
    cr_assert_eq(access(other, F_OK), 0, "another file's temporary was removed");
    cr_assert_eq(access(glob_like, F_OK), 0, "a name the prefix only resembles was removed");
    cr_assert_eq(count_entries(dir), 4);
    rmtree(dir);
}

Test(common, reads_are_bounded_and_refuse_devices)
{
    char *d;
    cr_assert_eq(pp_file_read("/dev/zero", &d, NULL), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "/dev/zero: not a regular file"), "%s", pp_err_text());
    cr_assert_eq(pp_file_read("/tmp", &d, NULL), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "a directory"), "%s", pp_err_text());
    char dir[] = "/tmp/pp_test_XXXXXX";
    make_dir(dir);
    char path[256];
    snprintf(path, sizeof path, "%s/big", dir);
    char buf[4096] = {0};
    FILE *fp = fopen(path, "wb");
    for (int i = 0; i < 600; i++) /* 2.4 MB */
        fwrite(buf, 1, sizeof buf, fp);
    fclose(fp);
    cr_assert_eq(pp_file_read_max(path, (size_t)2 << 20, &d, NULL), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "more than the 2 MiB this reader accepts"), "%s",
              pp_err_text());
    size_t n;
    cr_assert_eq(pp_file_read_max(path, (size_t)3 << 20, &d, &n), PP_OK);
    cr_assert_eq(n, (size_t)600 * 4096);
    free(d);
    rmtree(dir);
}

/* Issue 30: `mkfifo f; pptune --model-file f` waited for a writer for good. A FIFO nobody
 * writes is refused after PP_FILE_PIPE_WAIT_S; one that is written (a pipe with a writer, as
 * `--model-file <(...)` gives) is read. */
Test(common, a_fifo_without_a_writer_is_refused_not_waited_on, .timeout = 30)
{
    char dir[] = "/tmp/pp_test_XXXXXX";
    make_dir(dir);
    char path[256];
    snprintf(path, sizeof path, "%s/fifo", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    char *d = NULL;
    double t0 = pp_now();
    cr_assert_eq(pp_file_read(path, &d, NULL), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_text(), "gave nothing for"), "%s", pp_err_text());
    cr_assert(pp_now() - t0 < PP_FILE_PIPE_WAIT_S + 3, "waited %.1f s", pp_now() - t0);
    pp_err_clear();
    pid_t w = fork();
    cr_assert(w >= 0);
    if (w == 0) {
        FILE *fp = fopen(path, "w");
        if (fp) {
            fputs("{\"a\": 1}", fp);
            fclose(fp);
        }
        _exit(0);
    }
    size_t n = 0;
    cr_assert_eq(pp_file_read(path, &d, &n), PP_OK, "%s", pp_err_text());
    cr_assert_str_eq(d, "{\"a\": 1}");
    free(d);
    waitpid(w, NULL, 0);
    rmtree(dir);
}

/* Published FNV-1a 64 test vectors (Fowler, Noll, Vo): the cluster fingerprint and the
 * checkpoint hashes depend on these exact values. */
Test(common, fnv1a_matches_published_vectors)
{
    cr_assert_eq(pp_fnv1a_str(PP_FNV1A_BASIS, ""), 0xcbf29ce484222325ull);
    cr_assert_eq(pp_fnv1a_str(PP_FNV1A_BASIS, "a"), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(pp_fnv1a_str(PP_FNV1A_BASIS, "foobar"), 0x85944171f73967e8ull);
    uint64_t h = pp_fnv1a(PP_FNV1A_BASIS, "foo", 3);
    cr_assert_eq(pp_fnv1a(h, "bar", 3), 0x85944171f73967e8ull, "piecewise equals whole");
}

/* Host names as MPI_Allgather leaves them: nodes numbered in order of first appearance, each
 * rank's host-local rank counting the lower ranks on its host. */
Test(common, launch_hosts_groups_ranks_by_host)
{
    char hosts[5][8] = {"b", "a", "b", "c", "a"};
    int node[5], local[5];
    cr_assert_eq(pp_launch_hosts(&hosts[0][0], sizeof hosts[0], 5, node, local), 3);
    const int want_node[5] = {0, 1, 0, 2, 1}, want_local[5] = {0, 0, 1, 0, 1};
    for (int r = 0; r < 5; r++) {
        cr_expect_eq(node[r], want_node[r], "rank %d node %d", r, node[r]);
        cr_expect_eq(local[r], want_local[r], "rank %d local %d", r, local[r]);
    }
    cr_assert_eq(pp_launch_hosts(&hosts[0][0], sizeof hosts[0], 5, NULL, local), 3);
    cr_expect_eq(local[4], 1);
}

Test(common, grouped_integers_read_like_the_readme)
{
    char b[32];
    cr_assert_str_eq(pp_fmt_grouped(1581229.4, b, sizeof b), "1,581,229");
    cr_assert_str_eq(pp_fmt_grouped(999, b, sizeof b), "999");
    cr_assert_str_eq(pp_fmt_grouped(1000, b, sizeof b), "1,000");
    cr_assert_str_eq(pp_fmt_grouped(0.4, b, sizeof b), "0");
    cr_assert_str_eq(pp_fmt_grouped(-12345, b, sizeof b), "-12,345");
    char small[4];
    cr_assert_str_eq(pp_fmt_grouped(123456, small, sizeof small), "123", "truncated, terminated");
}

Test(common, launch_node_name_in_a_slurm_step_is_slurmd_nodename)
{
    /* four slurmd on one host share its host name: only the job's node names tell them apart */
    char name[64], host[64] = "";
    setenv("SLURMD_NODENAME", "n3", 1);
    pp_launch_node_name(name, sizeof name);
    cr_assert_str_eq(name, "n3");
    unsetenv("SLURMD_NODENAME");
    pp_launch_node_name(name, sizeof name);
    gethostname(host, sizeof host - 1);
    cr_assert_str_eq(name, host);
}

/* One formatter per quantity (issue 31, item 4): the same figure reads the same in every
 * command; seconds keep 4 significant digits ("1.520" beside "1.501", not "1.52"), memory is
 * in binary units with its unit, down to MiB and KiB, parameters with B/M/K. */
Test(common, one_formatter_per_quantity)
{
    char b[32];
    cr_expect_str_eq(pp_fmt_seconds(1.52, b, sizeof b), "1.520");
    cr_expect_str_eq(pp_fmt_seconds(1.50149, b, sizeof b), "1.501");
    cr_expect_str_eq(pp_fmt_seconds(0.0123449, b, sizeof b), "0.01234");
    cr_expect_str_eq(pp_fmt_seconds(123.456, b, sizeof b), "123.5");
    cr_expect_str_eq(pp_fmt_seconds(12345.6, b, sizeof b), "12346");
    cr_expect_str_eq(pp_fmt_seconds(0, b, sizeof b), "0");
    cr_expect_str_eq(pp_fmt_seconds(1.201e-6, b, sizeof b), "0.0000012", "no exponent");
    cr_expect_str_eq(pp_fmt_bytes(71.53e9, b, sizeof b), "66.6 GiB");
    cr_expect_str_eq(pp_fmt_bytes(1.71 * 1073741824.0, b, sizeof b), "1.71 GiB");
    cr_expect_str_eq(pp_fmt_bytes(512 * 1048576.0, b, sizeof b), "512 MiB");
    cr_expect_str_eq(pp_fmt_bytes(3 * 1024.0, b, sizeof b), "3.00 KiB");
    cr_expect_str_eq(pp_fmt_bytes(12, b, sizeof b), "12 B");
    cr_expect_str_eq(pp_fmt_bytes(0.5 * 1073741824.0, b, sizeof b), "512 MiB",
                     "below 1 GiB in MiB, never a fraction of a GiB");
    cr_expect_str_eq(pp_fmt_params(13e9, b, sizeof b), "13.0 B");
    cr_expect_str_eq(pp_fmt_params(405.8e9, b, sizeof b), "406 B");
    cr_expect_str_eq(pp_fmt_params(61100, b, sizeof b), "61.1 K");
    cr_expect_str_eq(pp_fmt_params(8.03e6, b, sizeof b), "8.03 M");
    cr_expect_str_eq(pp_fmt_params(512, b, sizeof b), "512");
    cr_expect_str_eq(pp_fmt_grouped(1.38e6, b, sizeof b), "1,380,000");
}

/* Long lines wrap at spaces to the width, continuation lines indented (item 9). */
Test(common, text_wraps_to_the_width)
{
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);
    cr_assert_not_null(fp);
    pp_fputs_wrapped(fp, "aaaa bbbb cccc dddd\nee ffff", 10, 2);
    fclose(fp);
    cr_expect_str_eq(out, "aaaa bbbb\n  cccc\n  dddd\nee ffff");
    free(out);
}

/* The backend rows (common/backends.c, one file per row in the backends' folders, listed by
 * CMake in pp_backend_list.h): what the plan, the executor, pprun and the tuner ask instead of a
 * backend's name. A row file whose list entry, kind or name disagrees with the others fails
 * here (a missing row or maker fails the link). */
Test(common, backend_rows_are_the_generated_list)
{
    cr_assert_eq(PP_RT_BACKEND_CPU, 0, "zeroed parameters run the reference backend");
    cr_assert_str_eq(pp_backend_row_of(PP_RT_BACKEND_CPU)->name, "cpu");
    cr_assert_str_eq(pp_backend_row_of(PP_RT_BACKEND_CUDA)->name, "cuda");
    cr_assert_str_eq(pp_backend_row_of(PP_RT_BACKEND_CPU_STAGED)->name, "cpu-staged");
    const char *const *choices = pp_backend_choices();
    int n_choices = 0, n_default = 0;
    for (int k = 0; k < PP_RT_BACKEND__COUNT; k++) {
        const pp_backend_row *r = pp_backend_row_of(k);
        cr_assert(r && r->name && r->device_kind && r->help, "kind %d: a row with a name, a "
                  "device kind and a help line", k);
        cr_assert_eq(pp_backend_kind(r), k, "%s: kind %d", r->name, pp_backend_kind(r));
        cr_assert_eq(pp_backend_row_named(r->name), r, "%s: a second row has its name", r->name);
        cr_assert(pp_backend_row_has_precision(r, PP_PREC_FP32), "%s computes in fp32", r->name);
        cr_assert(r->attn_scratch, "%s: the plan needs its attention scratch", r->name);
        cr_assert(!r->choice || strlen(r->name) + 2 + strlen(r->help) <= 52,
                  "%s: its pprun --help line is longer than 80 columns", r->name);
        n_default += r->pprun_default;
        if (r->choice) /* the choices: the rows with `choice`, in kind order */
            cr_assert_str_eq(choices[n_choices++], r->name);
    }
    cr_assert_null(choices[n_choices]);
    cr_assert_geq(n_choices, 2, "pprun offers cpu and cuda at least");
    cr_assert_eq(n_default, 1, "one backend is pprun's default");
    cr_assert(pp_backend_row_default()->pprun_default && pp_backend_row_default()->choice);
    cr_assert_null(pp_backend_row_of(PP_RT_BACKEND__COUNT));
    cr_assert_null(pp_backend_row_of(-1));
    cr_assert_eq(pp_backend_kind(NULL), -1);
    cr_assert_null(pp_backend_row_named("rocm"));
}

Test(common, backend_rows_answer_what_the_callers_ask)
{
    const pp_backend_row *gpu = pp_backend_row_for_device("gpu"), *cpu = pp_backend_row_for_device("cpu");
    cr_assert(gpu && cpu);
    cr_assert_str_eq(gpu->name, "cuda");
    cr_assert_str_eq(cpu->name, "cpu");
    /* the pprun line omits pprun's default backend and names the others */
    cr_assert_null(pp_backend_row_flag(cpu));
    cr_assert_str_eq(pp_backend_row_flag(gpu), "cuda");
    cr_assert(gpu->device_memory && gpu->staged && !cpu->device_memory && !cpu->staged);
    cr_assert(pp_backend_row_has_precision(gpu, PP_PREC_BF16));
    cr_assert(!pp_backend_row_has_precision(cpu, PP_PREC_BF16), "the CPU backend is fp32 only");
    const pp_backend_row *staged = pp_backend_row_of(PP_RT_BACKEND_CPU_STAGED);
    cr_assert(staged->staged && !staged->device_memory && !staged->choice);
    /* kernel scratch: the CUDA backend's and the CPU kernel threads' (their attention scratch);
     * a GEMM-library workspace: the CUDA backend's (cuBLAS), none on the CPU */
    cr_assert(gpu->kernel_scratch && gpu->library_workspace > 0);
    cr_assert(cpu->kernel_scratch && cpu->library_workspace == 0);
}

/* The one grow-by-doubling (pp_grow) and its bounded form (pp_grow_max: the capped byte
 * buffers of a child's output, an HTTP body, a file read whole). */
Test(common, grow_doubles_and_the_bounded_form_stops_at_its_bound)
{
    int *a = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < 100; i++) {
        cap = pp_grow(&a, i, cap, sizeof *a, 8);
        cr_assert_gt(cap, i);
        a[i] = (int)i;
    }
    cr_assert_eq(cap, 128, "8, 16, ... 128: got %zu", cap);
    for (size_t i = 0; i < 100; i++)
        cr_assert_eq(a[i], (int)i, "element %zu moved", i);
    free(a);
    char *b = NULL;
    size_t bc = 0;
    bc = pp_grow_max(&b, 10, bc, 1, 16, 40);
    cr_assert_eq(bc, 16);
    bc = pp_grow_max(&b, 20, bc, 1, 16, 40);
    cr_assert_eq(bc, 32);
    bc = pp_grow_max(&b, 33, bc, 1, 16, 40);
    cr_assert_eq(bc, 40, "doubling to 64 goes past the bound 40: got %zu", bc);
    memset(b, 'x', bc);
    cr_assert_eq(pp_grow_max(&b, 40, bc, 1, 16, 40), 0, "element 40 of at most 40");
    cr_assert(strstr(pp_err_msg(), "element 40 of a buffer of at most 40"), "%s", pp_err_msg());
    cr_assert_eq(b[39], 'x', "the buffer is intact after a refusal");
    free(b);
}
