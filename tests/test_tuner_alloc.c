/* test_tuner_alloc.c — the allocation trials run in: a Slurm job's variables and an Open MPI
 * host file become nodes and ranks; bad ones are one message naming the variable or the file
 * and line; the launcher's words for a trial (srun job step, mpirun over the host file). The
 * real launches are the slurm suite's (tests/slurm/test_slurm.sh). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_tune.h"

static void no_slurm(void)
{
    const char *vars[] = {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES",
                          "SLURM_NTASKS", "SLURM_JOB_CPUS_PER_NODE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

static char *hostfile(const char *text)
{
    char *path = strdup("/tmp/pptune_hosts_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static char *joined(char **argv, int n, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t k = strlen(buf);
        snprintf(buf + k, len - k, "%s%s", i ? " " : "", argv[i]);
    }
    return buf;
}

Test(tuner_alloc, outside_any_allocation_trials_stay_on_this_machine)
{
    no_slurm();
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_OK);
    cr_assert_str_empty(a.launcher);
    char store[12][PP_PROFILE_PPRUN_ARG_LEN], *argv[12];
    int nodes;
    cr_assert_eq(pp_tune_alloc_argv(&a, 4, 60, 12, store, argv, &nodes), 0);
}

Test(tuner_alloc, a_slurm_job_is_its_nodes_and_tasks_and_trials_are_srun_steps)
{
    no_slurm();
    setenv("SLURM_JOB_ID", "42", 1);
    setenv("SLURM_JOB_NODELIST", "n[1-4]", 1);
    setenv("SLURM_JOB_NUM_NODES", "4", 1);
    setenv("SLURM_JOB_CPUS_PER_NODE", "2(x4)", 1);
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(a.launcher, "srun");
    cr_assert_str_eq(a.nodes, "n[1-4]");
    cr_assert_str_eq(a.job, "42");
    cr_assert_eq(a.n_nodes, 4);
    cr_assert_eq(a.slots, 8);
    char store[12][PP_PROFILE_PPRUN_ARG_LEN], *argv[12], buf[512];
    int nodes;
    int n = pp_tune_alloc_argv(&a, 4, 90, 12, store, argv, &nodes);
    cr_assert_eq(nodes, 2, "4 ranks at 2 per node: 2 nodes, got %d", nodes);
    cr_assert_str_eq(joined(argv, n, buf, sizeof buf),
                     "srun --nodes=2 --ntasks=4 --ntasks-per-node=2 --kill-on-bad-exit=1 "
                     "--time=2 --mpi=pmix --quiet");
    cr_assert_eq(pp_tune_alloc_argv(&a, 9, 90, 12, store, argv, &nodes), -1,
                 "9 ranks do not fit in 8");
    setenv("SLURM_NTASKS", "4", 1); /* --ntasks given: the job's ranks */
    cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_OK);
    cr_assert_eq(a.slots, 4);
    no_slurm();
}

Test(tuner_alloc, bad_slurm_variables_are_named)
{
    no_slurm();
    setenv("SLURM_JOB_ID", "7", 1);
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "SLURM_JOB_NODELIST"), "%s", pp_err_msg());
    pp_err_clear();
    setenv("SLURM_JOB_NODELIST", "n1", 1);
    setenv("SLURM_JOB_NUM_NODES", "1", 1);
    setenv("SLURM_JOB_CPUS_PER_NODE", "2(x", 1);
    cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "SLURM_JOB_CPUS_PER_NODE=\"2(x\""), "%s", pp_err_msg());
    pp_err_clear();
    no_slurm();
}

Test(tuner_alloc, a_host_file_is_its_hosts_and_slots_and_trials_are_mpirun)
{
    no_slurm();
    char *path = hostfile("# two nodes\n127.0.0.2 slots=2\n\n127.0.0.3 slots=2 max_slots=4\n");
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(path, &a), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(a.launcher, "mpirun");
    cr_assert_str_eq(a.nodes, "127.0.0.2,127.0.0.3");
    cr_assert_eq(a.n_nodes, 2);
    cr_assert_eq(a.slots, 4);
    char store[12][PP_PROFILE_PPRUN_ARG_LEN], *argv[12], buf[512], want[512];
    int nodes;
    int n = pp_tune_alloc_argv(&a, 4, 60, 12, store, argv, &nodes);
    snprintf(want, sizeof want, "mpirun --hostfile %s -np 4 --map-by ppr:2:node", path);
    cr_assert_str_eq(joined(argv, n, buf, sizeof buf), want);
    cr_assert_eq(nodes, 2);
    unlink(path);
    free(path);
}

Test(tuner_alloc, a_bad_host_file_names_the_file_and_line)
{
    char *path = hostfile("127.0.0.2 slots=2\n127.0.0.3 slots=two\n");
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(path, &a), PP_ERR_INVALID);
    char want[128];
    snprintf(want, sizeof want, "%s:2: expected \"HOST [slots=N]\"", path);
    cr_assert(strstr(pp_err_msg(), want), "%s", pp_err_msg());
    pp_err_clear();
    unlink(path);
    free(path);
    cr_assert_eq(pp_tune_alloc_detect("/nonexistent/hosts", &a), PP_ERR_NOTFOUND);
    cr_assert(strstr(pp_err_msg(), "/nonexistent/hosts"), "%s", pp_err_msg());
    pp_err_clear();
}

/* Issue 30: a comment longer than the old 511-byte line buffer became a host; 2,049 lines of
 * slots=1048576 wrapped the slot sum; /dev/zero (and a FIFO) was read forever. */
/* A host file of `text` is refused (PP_ERR_INVALID) with `want` in the message (NULL: any). */
static void hostfile_refused(const char *text, const char *want)
{
    char *path = hostfile(text);
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(path, &a), PP_ERR_INVALID, "%.60s", text);
    cr_assert(!want || strstr(pp_err_msg(), want), "%s", pp_err_msg());
    pp_err_clear();
    unlink(path);
    free(path);
}

Test(tuner_alloc, host_files_are_bounded, .timeout = 20)
{
    no_slurm();
    pp_tune_alloc a;
    /* a long comment is a comment, however long its line */
    char text[2048];
    memset(text, 'x', sizeof text);
    memcpy(text, "# ", 2);
    memcpy(text + 1000, "evilhost slots=9 ", 17);
    snprintf(text + 1900, sizeof text - 1900, "\n127.0.0.2 slots=2\n");
    char *path = hostfile(text);
    cr_assert_eq(pp_tune_alloc_detect(path, &a), PP_OK, "%s", pp_err_msg());
    cr_assert_str_eq(a.nodes, "127.0.0.2");
    cr_assert_eq(a.slots, 2);
    unlink(path);
    free(path);
    /* a line past the bound is refused, not split */
    static char huge[8192];
    memset(huge, 'h', sizeof huge - 2);
    huge[sizeof huge - 2] = '\n';
    hostfile_refused(huge, ":1: a line of");
    /* slots that would wrap an int: refused with the bound */
    static char many[2100 * 24];
    size_t k = 0;
    for (int i = 0; i < 2100; i++)
        k += (size_t)snprintf(many + k, sizeof many - k, "h%d slots=1048576\n", i % 10);
    hostfile_refused(many, "slots in all");
    hostfile_refused("h1 slots=99999999999999999999\n", "slots=N");
    /* not a regular file: refused at once */
    cr_assert_eq(pp_tune_alloc_detect("/dev/zero", &a), PP_ERR_INVALID);
    cr_assert(strstr(pp_err_msg(), "not a regular file"), "%s", pp_err_msg());
    pp_err_clear();
    char fifo[] = "/tmp/pptune_hosts_fifo_XXXXXX";
    close(mkstemp(fifo));
    unlink(fifo);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(pp_tune_alloc_detect(fifo, &a), PP_ERR_INVALID);
    pp_err_clear();
    unlink(fifo);
}

/* Issue 30: 9223372036854775807(x2) wrapped the signed sum (the check after it was optimised
 * away) and the search ran with "-2 ranks" until it ran out of memory. */
Test(tuner_alloc, slurm_counts_are_overflow_checked)
{
    static const char *const bad[] = {"9223372036854775807(x2)", "2(x9223372036854775807)",
                                      "99999999999999999999", "16777216(x2)", "-2", "2(x-1)",
                                      "2,", " 2", "0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        no_slurm();
        setenv("SLURM_JOB_ID", "7", 1);
        setenv("SLURM_JOB_NODELIST", "n1", 1);
        setenv("SLURM_JOB_NUM_NODES", "1", 1);
        setenv("SLURM_JOB_CPUS_PER_NODE", bad[i], 1);
        pp_tune_alloc a;
        cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_ERR_INVALID, "%s: slots %d", bad[i],
                     a.slots);
        cr_assert(strstr(pp_err_msg(), "SLURM_JOB_CPUS_PER_NODE"), "%s", pp_err_msg());
        pp_err_clear();
    }
    static const char *const bad_n[] = {"9223372036854775807", "4294967297", "+1", "1 "};
    for (size_t i = 0; i < sizeof bad_n / sizeof bad_n[0]; i++) {
        no_slurm();
        setenv("SLURM_JOB_ID", "7", 1);
        setenv("SLURM_JOB_NODELIST", "n1", 1);
        setenv("SLURM_JOB_NUM_NODES", "1", 1);
        setenv("SLURM_NTASKS", bad_n[i], 1);
        pp_tune_alloc a;
        cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_ERR_INVALID, "%s", bad_n[i]);
        pp_err_clear();
    }
    no_slurm();
    setenv("SLURM_JOB_ID", "7", 1);
    setenv("SLURM_JOB_NODELIST", "n[1-4]", 1);
    setenv("SLURM_JOB_NUM_NODES", "4", 1);
    setenv("SLURM_JOB_CPUS_PER_NODE", "4,2(x3)", 1);
    pp_tune_alloc a;
    cr_assert_eq(pp_tune_alloc_detect(NULL, &a), PP_OK, "%s", pp_err_msg());
    cr_assert_eq(a.slots, 10);
    no_slurm();
}

/* A stand-in srun on PATH (first) that runs body: what a real one writes in that case. */
typedef struct {
    char dir[64], path[128], old_path[4096];
} fake_srun;

static void fake_srun_install(fake_srun *f, const char *body)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/pptune_srun_XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/srun", f->dir);
    FILE *fp = fopen(f->path, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "#!/bin/sh\n%s\n", body);
    fclose(fp);
    chmod(f->path, 0755);
    snprintf(f->old_path, sizeof f->old_path, "%s",
             getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char new_path[4300];
    snprintf(new_path, sizeof new_path, "%s:%s", f->dir, f->old_path);
    setenv("PATH", new_path, 1);
}

static void fake_srun_remove(fake_srun *f)
{
    setenv("PATH", f->old_path, 1);
    unlink(f->path);
    rmdir(f->dir);
}

static pp_tune_trial_result fake_srun_trial(const char *body)
{
    fake_srun f;
    fake_srun_install(&f, body);
    static pp_tune_model m;
    cr_assert_eq(pp_tune_model_preset("tiny", &m), PP_OK);
    static pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 1, .N = 4};
    pp_tune_alloc a = {.launcher = "srun", .nodes = "n[1-2]", .n_nodes = 2, .slots = 2};
    pp_tune_trial_params tp = {.model = &m, .cfg = &c, .pprun = "/bin/true", .steps = 3,
                               .timeout_s = 20, .alloc = &a};
    pp_tune_trial_result r;
    cr_assert_eq(pp_tune_trial(&tp, &r), PP_OK, "%s", pp_err_msg());
    fake_srun_remove(&f);
    return r;
}

Test(tuner_alloc, a_failed_step_is_classified_from_what_its_ranks_and_srun_said)
{
    pp_tune_trial_result r = fake_srun_trial(
        "echo 'srun: error: Node failure on n2' >&2\necho 'srun: error: n2: task 1: Killed' >&2\n"
        "exit 1");
    cr_assert_str_eq(r.status, "node-lost", "%s: %s", r.status, r.detail);
    cr_assert_str_eq(r.lost_node, "n2");
    cr_assert_str_eq(r.where, "srun on 2 nodes of n[1-2]");
    r = fake_srun_trial("echo 'pprun: rank 1: cannot allocate 4096 MiB: out of memory' >&2\n"
                        "echo 'srun: error: n2: task 1: Exited with exit code 1' >&2\nexit 1");
    cr_assert_str_eq(r.status, "oom", "%s: %s", r.status, r.detail);
    cr_assert(strstr(r.detail, "pprun: rank 1: cannot allocate"), "%s", r.detail);
    r = fake_srun_trial("echo 'MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD' "
                        ">&2\nexit 1");
    cr_assert_str_eq(r.status, "mpi", "%s: %s", r.status, r.detail);
    r = fake_srun_trial("echo 'srun: error: n1: task 0: Segmentation fault' >&2\nexit 139");
    cr_assert_str_eq(r.status, "crash", "%s: %s", r.status, r.detail);
    cr_assert(strstr(r.detail, "exit 139: srun: error: n1: task 0: Segmentation fault"), "%s",
              r.detail);
}

Test(tuner_alloc, a_lost_node_is_excluded_from_the_later_steps)
{
    char node[64];
    cr_assert_eq(pp_tune_alloc_lost_node("srun: error: n1: task 0: Killed\n", node, sizeof node), 0);
    cr_assert_eq(pp_tune_alloc_lost_node("x\nsrun: error: Node failure on n3\nsrun: ...", node,
                                         sizeof node),
                 1);
    cr_assert_str_eq(node, "n3");
    pp_tune_alloc a = {.launcher = "srun", .nodes = "n[1-4]", .n_nodes = 4, .slots = 8};
    cr_assert_eq(pp_tune_alloc_lose(&a, "n3"), 1);
    cr_assert_eq(pp_tune_alloc_lose(&a, "n3"), 0, "already out");
    cr_assert_eq(a.n_nodes, 3);
    cr_assert_eq(a.slots, 6);
    char store[12][PP_PROFILE_PPRUN_ARG_LEN], *argv[12], buf[512];
    int nodes, n = pp_tune_alloc_argv(&a, 6, 60, 12, store, argv, &nodes);
    cr_assert_eq(nodes, 3);
    cr_assert(strstr(joined(argv, n, buf, sizeof buf), "--nodes=3 --ntasks=6 --ntasks-per-node=2 "
                                                         "--kill-on-bad-exit=1 --time=2 "
                                                         "--exclude=n3 "),
              "%s", buf);
    cr_assert_eq(pp_tune_alloc_argv(&a, 8, 60, 12, store, argv, &nodes), -1, "8 > 6 slots now");
    cr_assert_eq(pp_tune_alloc_lose(&a, "n1"), 1);
    n = pp_tune_alloc_argv(&a, 2, 60, 12, store, argv, &nodes);
    cr_assert(strstr(joined(argv, n, buf, sizeof buf), "--exclude=n3,n1 "), "%s", buf);
    pp_tune_alloc h = {.launcher = "mpirun", .hostfile = "/h", .n_nodes = 2, .slots = 4};
    cr_assert_eq(pp_tune_alloc_lose(&h, "a"), 0, "mpirun cannot exclude a host");
}

Test(tuner_alloc, a_probe_of_every_node_is_one_rank_per_node)
{
    pp_tune_alloc a = {.launcher = "srun", .nodes = "n[1-4]", .n_nodes = 4, .slots = 8};
    char store[12][PP_PROFILE_PPRUN_ARG_LEN], *argv[12], buf[512];
    int n = pp_tune_alloc_argv_per_node(&a, 900, 12, store, argv);
    cr_assert_str_eq(joined(argv, n, buf, sizeof buf),
                     "srun --nodes=4 --ntasks=4 --ntasks-per-node=1 --kill-on-bad-exit=1 "
                     "--time=16 --mpi=pmix --quiet");
    pp_tune_alloc h = {.launcher = "mpirun", .hostfile = "/h", .n_nodes = 2, .slots = 4};
    n = pp_tune_alloc_argv_per_node(&h, 60, 12, store, argv);
    cr_assert_str_eq(joined(argv, n, buf, sizeof buf),
                     "mpirun --hostfile /h -np 2 --map-by ppr:1:node");
}

Test(tuner_alloc, the_dp_allreduce_is_probed_and_scaled_by_the_ring_formula)
{
    cr_assert_float_eq(pp_tune_ring_factor(1), 0.0, 1e-12);
    cr_assert_float_eq(pp_tune_ring_factor(2), 1.0, 1e-12);
    cr_assert_float_eq(pp_tune_ring_factor(8), 1.75, 1e-12);
    fake_srun f;
    /* what `srun ... pptune probe --allreduce B --json --quick` prints on rank 0; the words it
     * was given go to a file beside it */
    fake_srun_install(&f, "echo \"$*\" > \"$(dirname \"$0\")/args\"\n"
                          "echo '{\"ranks\": 2, \"nodes\": 2, \"bytes\": 4000, \"seconds\": 0.004}'");
    pp_tune_alloc a = {.launcher = "srun", .nodes = "n[1-2]", .n_nodes = 2, .slots = 2};
    pp_tune_dp_probe dp;
    cr_assert_eq(pp_tune_dp_allreduce_probe(&a, "/x/pptune", 4000, 8, 2, 30, &dp), PP_OK, "%s",
                 pp_err_msg());
    cr_assert_eq(dp.ranks, 2);
    cr_assert_float_eq(dp.probed_s, 0.004, 1e-12);
    cr_assert_float_eq(dp.full_s, 0.004 * 1.75, 1e-12, "ring(8)/ring(2)");
    cr_assert_float_eq(dp.run_s, 0.004, 1e-12, "the trial's own d=2 all-reduce");
    char args[300] = "", path[160];
    snprintf(path, sizeof path, "%s/args", f.dir);
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp);
    cr_assert_not_null(fgets(args, sizeof args, fp));
    fclose(fp);
    unlink(path);
    cr_assert(strstr(args, "--nodes=2 --ntasks=2 ") &&
                  strstr(args, "/x/pptune probe --allreduce 4000 --json --quick"),
              "%s", args);
    fake_srun_remove(&f);
    /* a failed step: an error naming the probe and srun's last line */
    fake_srun_install(&f, "echo 'srun: error: n2: task 1: Exited with exit code 1' >&2; exit 1");
    cr_assert_eq(pp_tune_dp_allreduce_probe(&a, "/x/pptune", 4000, 8, 1, 30, &dp), PP_ERR_DEVICE);
    cr_assert(strstr(pp_err_msg(), "all-reduce probe (srun): exit 1: srun: error: n2: task 1"),
              "%s", pp_err_msg());
    pp_err_clear();
    fake_srun_remove(&f);
    pp_tune_alloc one = {.launcher = "srun", .nodes = "n1", .n_nodes = 1, .slots = 1};
    cr_assert_eq(pp_tune_dp_allreduce_probe(&one, "/x/pptune", 4000, 4, 1, 30, &dp),
                 PP_ERR_UNSUPPORTED);
    pp_err_clear();
}

Test(tuner_alloc, nodes_that_differ_are_named)
{
    pp_cluster *c;
    cr_assert_eq(pp_cluster_load_preset("dgx-h100", 2, &c), PP_OK);
    char msg[300];
    cr_assert_eq(pp_tune_nodes_differ(c, PP_TUNE_NODES_TOLERANCE, msg, sizeof msg), 0, "%s", msg);
    pp_tune_hw alike;
    cr_assert_eq(pp_tune_hw_from_cluster(c, "test", &alike), PP_OK, "%s", pp_err_msg());
    snprintf(c->nodes[1].hostname, sizeof c->nodes[1].hostname, "n2");
    c->devices[c->nodes[1].first_device + 3].gemm_flops *= 0.5; /* one slow GPU on n2 */
    cr_assert_eq(pp_tune_nodes_differ(c, PP_TUNE_NODES_TOLERANCE, msg, sizeof msg), 1);
    cr_assert(strstr(msg, "GEMM") && strstr(msg, "on n2") && strstr(msg, "on node 0"), "%s", msg);
    pp_tune_hw hw;
    cr_assert_eq(pp_tune_hw_from_cluster(c, "test", &hw), PP_OK, "%s", pp_err_msg());
    double slow = c->devices[c->nodes[1].first_device + 3].gemm_flops;
    cr_assert(hw.gemm_flops <= slow * (1 + 1e-9) && hw.gemm_flops < alike.gemm_flops,
              "planned with the slowest device: %g, the slowed one %g, alike %g", hw.gemm_flops,
              slow, alike.gemm_flops);
    pp_cluster_destroy(c);
}

Test(tuner_alloc, every_node_probed_in_one_step_and_a_failed_step_tried_once_more)
{
    pp_cluster *c;
    cr_assert_eq(pp_cluster_load_preset("dgx-h100", 2, &c), PP_OK);
    snprintf(c->nodes[0].hostname, sizeof c->nodes[0].hostname, "n1");
    snprintf(c->nodes[1].hostname, sizeof c->nodes[1].hostname, "n2");
    char *json;
    cr_assert_eq(pp_cluster_to_json(c, &json), PP_OK);
    pp_cluster_destroy(c);
    char jpath[] = "/tmp/pptune_nodes_XXXXXX";
    int fd = mkstemp(jpath);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, json, strlen(json)), (ssize_t)strlen(json));
    close(fd);
    free(json);
    /* srun whose first step loses a rank (as Open MPI's TCP start-up did here under load) and
     * whose second prints rank 0's gathered description */
    char body[512];
    snprintf(body, sizeof body,
             "m=\"$(dirname \"$0\")/tried\"\n"
             "if [ ! -e \"$m\" ]; then : > \"$m\"; echo 'srun: error: n2: task 1: Segmentation "
             "fault' >&2; exit 139; fi\ncat %s",
             jpath);
    fake_srun f;
    fake_srun_install(&f, body);
    pp_tune_alloc a = {.launcher = "srun", .nodes = "n[1-2]", .n_nodes = 2, .slots = 16};
    char source[300];
    cr_assert_eq(pp_tune_probe_nodes(&a, "/x/pptune", 1, 30, &c, source, sizeof source), PP_OK,
                 "%s", pp_err_msg());
    cr_assert_eq(c->n_nodes, 2);
    cr_assert_str_eq(source, "probed: 2 nodes of the allocation, one srun rank each, quick (n1, "
                             "n2); second attempt, the first failed: the probe of every node "
                             "(srun): exit 139: srun: error: n2: task 1: Segmentation fault");
    pp_cluster_destroy(c);
    /* failing twice is an error naming the step */
    char tried[160];
    snprintf(tried, sizeof tried, "%s/tried", f.dir);
    unlink(tried);
    fake_srun_remove(&f);
    fake_srun_install(&f, "echo 'srun: error: n2: task 1: Segmentation fault' >&2; exit 139");
    cr_assert_eq(pp_tune_probe_nodes(&a, "/x/pptune", 1, 30, &c, source, sizeof source),
                 PP_ERR_DEVICE);
    cr_assert(strstr(pp_err_msg(), "the probe of every node (srun): exit 139"), "%s", pp_err_msg());
    cr_assert_null(c);
    pp_err_clear();
    fake_srun_remove(&f);
    unlink(jpath);
}
