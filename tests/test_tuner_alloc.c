/* test_tuner_alloc.c — the allocation trials run in: a Slurm job's variables and an Open MPI
 * host file become nodes and ranks; bad ones are one message naming the variable or the file
 * and line; the launcher's words for a trial (srun job step, mpirun over the host file). The
 * real launches are the slurm suite's (tests/slurm/test_slurm.sh). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    cr_assert_eq(pp_tune_alloc_detect("/nonexistent/hosts", &a), PP_ERR_IO);
    cr_assert(strstr(pp_err_msg(), "/nonexistent/hosts"), "%s", pp_err_msg());
    pp_err_clear();
}
