/* test_cuda_nccl.c — pprun --backend cuda with ranks as processes, talking over the NCCL
 * transport (runtime/cuda/transport_nccl.cu): under `mpirun -np 2` and `-np 4` (dp 2) the
 * per-step losses, gradient norms and the checksum of every parameter after the last step must
 * equal, bit for bit, `pprun --backend cuda --transport thread` (ranks as threads, messages
 * staged through the host): the same kernels, and all-reduces that sum in group order in both.
 * Also: every rank counts the NCCL transport's message buffers (comm), the device memory is all
 * freed by the end, and more processes on a node than it has GPUs fail with one line, exit 2.
 *
 * Part of the cuda_emu suite (pprun_emu on the CPU emulation of CUDA, whose NCCL is MPI:
 * tests/cuda_emu/nccl_emu.cpp; PP_CUDA_EMU_DEVICES=4 gives each local rank a device) and of the
 * cuda suite (the real pprun, real NCCL). What runs where: under the emulation, all of it; on a
 * real machine it skips, one line, without mpirun, without MPI in pprun, or with fewer GPUs than
 * processes; the "freed by the end" check reads the emulation's report (PP_CUDA_EMU_CHECK_FREED)
 * and checks nothing on a GPU. No GPU has run this file.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_rt.h"
#include "pp_test_run.h"
#include "pprun_json.h"

#define MPIRUN "mpirun --oversubscribe --allow-run-as-root"
#define LSAN_SUPP PP_FIXTURES_DIR "/lsan_openmpi.supp"

/* Skips the test (one line) unless mpirun exists, pprun has MPI and this node has `devices`
 * GPUs (emulated: PP_CUDA_EMU_DEVICES says so). As test_runtime_mpi.c for ASan builds. */
static void need_mpi_gpus(int devices)
{
    setenv("PP_CUDA_EMU_DEVICES", "4", 1); /* read by the emulation only */
    setenv("PP_CUDA_EMU_CHECK_FREED", "1", 1);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
    setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 1);
    pp_test_add_option("ASAN_OPTIONS", "fast_unwind_on_malloc=0");
    pp_test_add_option("LSAN_OPTIONS", "suppressions=" LSAN_SUPP ":print_suppressions=0");
    if (pp_cuda_device_count() < devices)
        cr_skip_test("skipped: fewer than %d CUDA devices (the NCCL transport needs one per "
                     "process)",
                     devices);
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("skipped: mpirun not found (the NCCL transport boots over Open MPI)");
    pp_test_run_result r = pp_test_run(PP_TEST_PPRUN " --transport mpi --ranks 1 --steps 1 --quiet");
    int without = strstr(r.err, "built without MPI") != NULL;
    pp_test_run_done(&r);
    if (without)
        cr_skip_test("skipped: pprun was built without MPI (no NCCL transport to boot)");
}

/* pprun ARGS --backend cuda --json as threads and under mpirun -np NP (NCCL): the same steps. */
static void same_as_threads(const char *args, int np)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, PP_TEST_PPRUN " %s --backend cuda --transport thread --json --quiet",
             args);
    pp_test_run_result t = pp_test_run("%s", cmd);
    cr_assert_eq(t.code, 0, "%s: exit %d: %s", cmd, t.code, t.err);
    snprintf(cmd, sizeof cmd,
             MPIRUN " -np %d " PP_TEST_PPRUN " %s --backend cuda --transport mpi --json --quiet", np,
             args);
    /* Sanitizer builds: no leak check in the MPI ranks. At their exit LeakSanitizer, applying
     * the Open MPI suppressions, hung in its symbolizer (an ASan report inside its own readlink,
     * then a deadlock on the symbolizer's lock) in processes holding the emulation's device
     * arena; the thread runs above keep the leak check, and device memory is checked by the
     * emulation's own report (PP_CUDA_EMU_CHECK_FREED). No effect without ASan. */
    const char *asan = getenv("ASAN_OPTIONS");
    char *saved = asan ? strdup(asan) : NULL;
    pp_test_add_option("ASAN_OPTIONS", "detect_leaks=0");
    pp_test_run_result m = pp_test_run("%s", cmd);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
    cr_assert_eq(m.code, 0, "%s: exit %d: %s", cmd, m.code, m.err);
    cr_assert(!strstr(m.err, "never freed"), "%s: device memory left at exit:\n%s", cmd, m.err);
    json_t *jt = pp_test_parse_json(t.out, "threads"), *jm = pp_test_parse_json(m.out, cmd);

    cr_assert_str_eq(json_string_value(json_object_get(jm, "transport")), "nccl");
    cr_assert_eq(json_integer_value(json_object_get(jm, "processes")), np);
    pp_test_expect_same_training(jt, jm, args, "NCCL");

    /* the NCCL transport's messages are device buffers the backend counts as comm, and every
     * rank has some (the thread transport's staging is comm too: at least as much here) */
    json_t *rt = json_object_get(jt, "ranks"), *rm = json_object_get(jm, "ranks");
    cr_assert_eq(json_array_size(rm), (size_t)np);
    for (size_t g = 0; g < json_array_size(rm); g++) {
        json_t *pt = json_object_get(json_array_get(rt, g), "peak_bytes");
        json_t *pm = json_object_get(json_array_get(rm, g), "peak_bytes");
        const char *cats[] = {"weights", "grads", "optim"};
        for (int c = 0; c < 3; c++)
            cr_assert_eq(json_integer_value(json_object_get(pm, cats[c])),
                         json_integer_value(json_object_get(pt, cats[c])),
                         "pprun %s: rank %zu %s bytes differ between threads and NCCL", args, g,
                         cats[c]);
        cr_assert_gt(json_integer_value(json_object_get(pm, "comm")), 0,
                     "pprun %s: rank %zu counts no NCCL message buffers", args, g);
    }
    json_decref(jt);
    json_decref(jm);
    pp_test_run_done(&t);
    pp_test_run_done(&m);
}

/* The tiny model with 8 layers, so that interleaved and bitpipe have stages to spread. */
#define COMMON "--model tiny --layers 8 --microbatches 4 --seq 16 --steps 3 --seed 11 --ranks 2"

#define SCHEDULE_TESTS(name, sched)                                                               \
    Test(cuda_nccl, name##_np2_equals_threads, .timeout = 300)                                    \
    {                                                                                             \
        need_mpi_gpus(2);                                                                         \
        same_as_threads(COMMON " --schedule " sched, 2);                                          \
    }                                                                                             \
    Test(cuda_nccl, name##_np4_dp2_equals_threads, .timeout = 300)                                \
    {                                                                                             \
        need_mpi_gpus(4);                                                                         \
        same_as_threads(COMMON " --dp 2 --schedule " sched, 4);                                   \
    }

SCHEDULE_TESTS(gpipe, "gpipe")
SCHEDULE_TESTS(one_f_one_b, "1f1b")
SCHEDULE_TESTS(interleaved, "interleaved --chunks 2")
SCHEDULE_TESTS(chimera, "chimera")
SCHEDULE_TESTS(bitpipe, "bitpipe")

/* Tensor parallelism over NCCL: t2 x p2, 4 processes (one per tensor and pipeline rank); the
 * tensor-parallel all-reduces go through the NCCL transport's group all-reduce, summed in
 * group order: bit for bit the threads' run. */
Test(cuda_nccl, tp2_np4_equals_threads, .timeout = 300)
{
    need_mpi_gpus(4);
    same_as_threads(COMMON " --schedule 1f1b --tp 2", 4);
}

/* The same with sequence parallelism: its all-gathers and reduce-scatters on device buffers
 * through the NCCL transport's star collectives, summed in group order: bit for bit the
 * threads' run (whose collectives are staged through host memory). */
Test(cuda_nccl, tp2_sp_np4_equals_threads, .timeout = 300)
{
    need_mpi_gpus(4);
    same_as_threads(COMMON " --schedule 1f1b --tp 2 --sequence-parallel", 4);
}

/* Gradient sharding (ZeRO-2) over NCCL: each micro-batch's reduce-scatter of a stage's whole
 * gradient on device buffers, the shards' AdamW and the parameters' all-gather: bit for bit
 * the threads' run, the same gradient and optimizer bytes. */
Test(cuda_nccl, shard_gradients_np4_dp2_equals_threads, .timeout = 300)
{
    need_mpi_gpus(4);
    same_as_threads(COMMON " --dp 2 --schedule 1f1b --shard gradients", 4);
}

/* The optimizer sharded in bf16 over NCCL: the shards' AdamW, the parameters' all-gather on
 * device buffers and each tensor's bf16 copy rewritten from the gathered parameters: bit for
 * bit the threads' run, the same weight bytes (the copies included). */
Test(cuda_nccl, shard_optimizer_bf16_np4_dp2_equals_threads, .timeout = 300)
{
    need_mpi_gpus(4);
    same_as_threads(COMMON " --dp 2 --schedule 1f1b --shard optimizer --precision bf16", 4);
}

/* Two processes on a node with one GPU: one clear line from rank 0, exit 2, no hang (the rank
 * without a device used to return alone and leave rank 0 waiting in the id exchange). */
/* All-gather, reduce-scatter and the all-to-all of expert parallelism over NCCL (device buffers,
 * tests/tp_coll_mpi.c --nccl; the all-to-all's blocks also checked element by element) give
 * the MPI transport's bits (host buffers), which test_runtime_mpi.c holds to the threads'. */
Test(cuda_nccl, tp_collectives_equal_mpi_bit_for_bit, .timeout = 300)
{
    need_mpi_gpus(4);
    pp_test_run_result m = pp_test_run(MPIRUN " -np 4 " PP_TEST_TP_COLL);
    cr_assert_eq(m.code, 0, "tp_coll (MPI): exit %d: %s", m.code, m.err);
    /* no leak check in ranks holding the emulation's device arena: same_as_threads says why
     * (this test runs in a process of its own: the option stays here) */
    pp_test_add_option("ASAN_OPTIONS", "detect_leaks=0");
    pp_test_run_result n = pp_test_run(MPIRUN " -np 4 " PP_TEST_TP_COLL " --nccl");
    cr_assert_eq(n.code, 0, "tp_coll --nccl: exit %d: %s", n.code, n.err);
    cr_assert(!strstr(n.err, "never freed"), "device memory left at exit:\n%s", n.err);
    for (int r = 0; r < 4; r++) {
        char key[16];
        snprintf(key, sizeof key, "rank %d ", r);
        const char *a = strstr(m.out, key), *b = strstr(n.out, key);
        cr_assert(a && b, "rank %d missing: MPI:\n%s\nNCCL:\n%s", r, m.out, n.out);
        size_t len = strcspn(a, "\n");
        cr_assert(strncmp(a, b, len) == 0 && strcspn(b, "\n") == len,
                  "rank %d: NCCL %.*s, MPI %.*s", r, (int)strcspn(b, "\n"), b, (int)len, a);
    }
    pp_test_run_done(&m);
    pp_test_run_done(&n);
}

Test(cuda_nccl, more_processes_than_gpus_fails_with_one_line, .timeout = 120)
{
    need_mpi_gpus(2);
    setenv("PP_CUDA_EMU_DEVICES", "1", 1);
    setenv("CUDA_VISIBLE_DEVICES", "0", 1); /* the same on a real machine */
    pp_test_add_option("ASAN_OPTIONS", "detect_leaks=0"); /* as in same_as_threads */
    pp_test_run_result r = pp_test_run(MPIRUN " -np 2 " PP_TEST_PPRUN " " COMMON
                                              " --backend cuda --transport mpi --quiet");
    cr_assert_eq(r.code, 2, "exit %d, stderr:\n%s", r.code, r.err);
    int lines = 0;
    for (const char *p = r.err; (p = strstr(p, "pprun: ")); p++)
        lines++;
    cr_assert_eq(lines, 1, "expected one pprun line, got %d:\n%s", lines, r.err);
    cr_assert(strstr(r.err, "rank 1's device 1 (its local rank) does not exist"),
              "the line does not name the rank and device:\n%s", r.err);
    cr_assert(strstr(r.err, "start at most"), "the line does not say what to do:\n%s", r.err);
    pp_test_run_done(&r);
}

/* A rank that stops (SIGSTOP: a frozen process or node) cannot hang its peers inside the NCCL
 * transport: its waits poll with a deadline (pprun --watchdog), abort the communicators and fail
 * naming the stopped rank; the job ends. Before, a receive blocked in cudaStreamSynchronize
 * (under the emulation, until its own 60 s deadlock abort; on a GPU, forever). As the MPI
 * transport's test in test_runtime_mpi.c; the message must be the NCCL transport's. */
Test(cuda_nccl, a_stopped_rank_ends_the_job_with_its_name, .timeout = 240)
{
    need_mpi_gpus(2);
    pp_test_add_option("ASAN_OPTIONS", "detect_leaks=0"); /* as same_as_threads: MPI ranks */
    pp_test_run_result r = pp_test_run_stopping_rank1_seeded(
        MPIRUN " -np 2 " PP_TEST_PPRUN " --backend cuda --transport mpi --model tiny --ranks 2 "
               "--steps 1000000 --seq 16 --seed $((%ld + 1)) --watchdog 3",
        5252520);
    cr_assert_null(strstr(r.out, "NO VICTIM"), "training never started:\n%s", r.err);
    cr_assert(strstr(r.out, "exit 0") == NULL, "the job ended normally: %s\n%s", r.out, r.err);
    cr_assert(strstr(r.err, "for rank 1 (an NCCL"), "the NCCL transport does not name the stopped "
              "rank:\n%s", r.err);
    cr_assert(strstr(r.err, "without progress"), "%s", r.err);
    cr_assert_null(strstr(r.out, "LEFT RUNNING"), "a process of the job was left running: %s",
                   r.out);
    pp_test_run_done(&r);
}
