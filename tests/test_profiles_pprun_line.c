/* test_profiles_pprun_line.c — the one builder of pprun's command line (trials, the profile's
 * launch line, export): its order, the registry deciding --chunks/--group, backend and
 * precision flags, the model as --model or --model-config, and the argv and string forms
 * agreeing. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "pp_profile.h"

Test(profiles_pprun_line, interleaved_on_gpus_names_chunks_group_backend_and_precision)
{
    pp_config c = {.schedule = "interleaved",
                   .p = 4,
                   .v = 2,
                   .G = 8,
                   .b = 1,
                   .d = 2,
                   .t = 1,
                   .N = 16,
                   .uneven = 1};
    pp_profile_pprun_line l = {
        .model = "tiny", .config = &c, .seq = 64, .backend = "cuda", .precision = PP_PREC_BF16};
    char buf[512];
    cr_assert_str_eq(pp_profile_pprun_args(&l, buf, sizeof buf),
                     "--model tiny --schedule interleaved --ranks 4 --microbatches 16 "
                     "--micro-batch-size 1 --chunks 2 --group 8 --dp 2 --seq 64 --uneven "
                     "--backend cuda --precision bf16");
}

Test(profiles_pprun_line, fixed_chunk_schedules_take_no_chunks_and_cpu_is_the_default)
{
    const char *kinds[] = {"gpipe", "1f1b", "chimera", "bitpipe"};
    for (int i = 0; i < 4; i++) {
        pp_config c = {.schedule = kinds[i], .p = 2, .v = 1, .b = 4, .d = 1, .t = 1, .N = 8};
        pp_profile_pprun_line l = {.model = "small", .config = &c, .seq = 128};
        char buf[512], want[512];
        snprintf(want, sizeof want,
                 "--model small --schedule %s --ranks 2 --microbatches 8 --micro-batch-size 4 "
                 "--dp 1 --seq 128",
                 kinds[i]);
        cr_assert_str_eq(pp_profile_pprun_args(&l, buf, sizeof buf), want);
    }
}

Test(profiles_pprun_line, argv_and_string_forms_agree)
{
    pp_config c = {
        .schedule = "interleaved", .p = 2, .v = 3, .G = 2, .b = 2, .d = 4, .t = 1, .N = 4};
    pp_profile_pprun_line l = {.model = "gpt-125m", .config = &c, .seq = 2048, .backend = "cuda"};
    char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN],
        *argv[PP_PROFILE_PPRUN_MAX_ARGS];
    int n = pp_profile_pprun_argv(&l, store, argv);
    char joined[512] = "", buf[512];
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(joined, " ");
        strcat(joined, argv[i]);
    }
    cr_assert_str_eq(pp_profile_pprun_args(&l, buf, sizeof buf), joined);
    cr_assert_str_eq(argv[n - 2], "--backend");
    cr_assert_str_eq(argv[n - 1], "cuda", "fp32 on CUDA: no --precision flag");
}

/* Every option the builder can emit at once (tunable chunks, t > 1, an uneven split, CUDA, bf16):
 * the whole line fits the store, ending in the precision (a store one argument too small cut the
 * line and, before the bound, wrote past the store). */
Test(profiles_pprun_line, the_longest_line_fits_the_store)
{
    pp_config c = {.schedule = "interleaved",
                   .p = 2,
                   .v = 7,
                   .G = 2,
                   .b = 1,
                   .d = 64,
                   .t = 2,
                   .N = 16,
                   .uneven = 1,
                   .first_layers = 3,
                   .last_layers = 3,
                   .sequence_parallel = 1,
                   .recompute = PP_RECOMPUTE_FULL,
                   .recompute_layers = 2,
                   .shard = PP_SHARD_OPTIMIZER};
    pp_profile_pprun_line l = {
        .model = "gpt-13b", .config = &c, .seq = 2048, .backend = "cuda", .precision = PP_PREC_BF16};
    char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN],
        *argv[PP_PROFILE_PPRUN_MAX_ARGS];
    int n = pp_profile_pprun_argv(&l, store, argv);
    cr_assert_lt(n, PP_PROFILE_PPRUN_MAX_ARGS, "%d arguments fill the store of %d", n,
                 PP_PROFILE_PPRUN_MAX_ARGS);
    cr_assert_str_eq(argv[0], "--model");
    cr_assert_str_eq(argv[n - 2], "--precision");
    cr_assert_str_eq(argv[n - 1], "bf16");
}

/* The configuration's flags are its axis rows: a configuration that sets every axis carries
 * every flag on the line, and `pprun --help` (generated from the same rows) lists each. */
Test(profiles_pprun_line, every_axis_flag_is_on_the_line_and_in_pprun_help)
{
    pp_config c = {.schedule = "interleaved", .p = 2, .v = 2, .G = 2, .b = 1, .d = 2, .t = 2,
                   .N = 4, .uneven = 1, .first_layers = 1, .last_layers = 1,
                   .sequence_parallel = 1, .recompute = PP_RECOMPUTE_FULL,
                   .recompute_layers = 1, .shard = PP_SHARD_OPTIMIZER};
    pp_config c2 = c; /* cp runs without recomputation and sharding: a second line */
    c2.recompute = PP_RECOMPUTE_NONE, c2.recompute_layers = 0, c2.shard = PP_SHARD_NONE, c2.cp = 2;
    pp_config c3 = c2; /* expert parallelism runs without tp and cp: a third */
    c3.t = 1, c3.cp = 1, c3.sequence_parallel = 0, c3.ep = 2;
    pp_profile_pprun_line l = {.model = "tiny", .config = &c, .seq = 64};
    pp_profile_pprun_line l2 = {.model = "tiny", .config = &c2, .seq = 64};
    pp_profile_pprun_line l3 = {.model = "tiny", .config = &c3, .seq = 64};
    char line1[512], line2[512], line3[512], line[1600];
    pp_profile_pprun_args(&l, line1, sizeof line1);
    pp_profile_pprun_args(&l2, line2, sizeof line2);
    pp_profile_pprun_args(&l3, line3, sizeof line3);
    snprintf(line, sizeof line, "%s %s %s", line1, line2, line3);
    FILE *fp = popen(PP_BINARY_DIR "/runtime/pprun --help", "r");
    cr_assert_not_null(fp);
    char help[16384];
    size_t len = fread(help, 1, sizeof help - 1, fp);
    help[len] = '\0';
    cr_assert_eq(pclose(fp), 0);
    int n, flags = 0;
    const pp_config_axis *axes = pp_config_axes(&n);
    for (int i = 0; i < n; i++) {
        if (!axes[i].flag)
            continue;
        char word[64];
        snprintf(word, sizeof word, "%s ", axes[i].flag);
        cr_assert(strstr(line, word) || !strcmp(line + strlen(line) - strlen(axes[i].flag),
                                                axes[i].flag),
                  "%s is not on %s", axes[i].flag, line);
        snprintf(word, sizeof word, "\n  %s", axes[i].flag);
        cr_assert(strstr(help, word), "pprun --help lacks %s", axes[i].flag);
        flags++;
    }
    cr_assert_geq(flags, 15);
}

/* pprun runs recomputation, optimizer and gradient sharding and context parallelism, together
 * too and in bf16 too, not gradient sharding with a schedule whose pipes share layers
 * (chimera): a configuration with that is named (the builder leaves it out, so its line would
 * train another configuration); the others are not. */
Test(profiles_pprun_line, settings_pprun_cannot_run_are_named)
{
    pp_config c;
    pp_config_defaults(&c);
    c.schedule = "1f1b", c.p = 2, c.v = 1, c.b = 1, c.d = 2, c.t = 2, c.N = 4;
    c.sequence_parallel = 1; /* pprun runs it */
    c.recompute = PP_RECOMPUTE_FULL, c.recompute_layers = 3, c.shard = PP_SHARD_OPTIMIZER;
    char buf[128];
    cr_assert_null(pp_profile_pprun_unrun(&c, PP_PREC_FP32, buf, sizeof buf), "%s", buf);
    char line[512];
    pp_profile_pprun_line l = {.model = "tiny", .config = &c, .seq = 64};
    pp_profile_pprun_args(&l, line, sizeof line);
    cr_assert(strstr(line, " --shard optimizer ") && strstr(line, " --recompute full ") &&
                  strstr(line, " --recompute-layers 3"),
              "%s", line);
    c.shard = PP_SHARD_GRADIENTS;
    cr_assert_null(pp_profile_pprun_unrun(&c, PP_PREC_FP32, buf, sizeof buf), "%s", buf);
    pp_profile_pprun_args(&l, line, sizeof line);
    cr_assert(strstr(line, " --shard gradients "), "%s", line);
    c.schedule = "chimera";
    cr_assert_str_eq(pp_profile_pprun_unrun(&c, PP_PREC_FP32, buf, sizeof buf),
                     "shard gradients with a schedule whose pipes share layers");
    c.schedule = "1f1b";
    c.shard = PP_SHARD_OPTIMIZER; /* in bf16 too (CUDA's bf16 weight copies rewritten) */
    cr_assert_null(pp_profile_pprun_unrun(&c, PP_PREC_BF16, buf, sizeof buf), "%s", buf);
    pp_profile_pprun_args(&l, line, sizeof line);
    cr_assert(strstr(line, " --shard optimizer "), "%s", line);
    c.cp = 2; /* pprun runs it with recomputation and sharding (over d x cp) */
    cr_assert_null(pp_profile_pprun_unrun(&c, PP_PREC_FP32, buf, sizeof buf), "%s", buf);
    pp_profile_pprun_args(&l, line, sizeof line);
    cr_assert(strstr(line, " --recompute full ") && strstr(line, " --recompute-layers 3") &&
                  strstr(line, " --cp 2 ") && strstr(line, " --shard optimizer "),
              "%s", line);
    /* and in bf16 (the CUDA ring attention's products on bf16 operands) */
    cr_assert_null(pp_profile_pprun_unrun(&c, PP_PREC_BF16, buf, sizeof buf), "%s", buf);
    pp_config_defaults(&c); /* the defaults: none on the line; cp alone runs */
    c.schedule = "1f1b", c.p = 2, c.v = 1, c.b = 1, c.d = 2, c.t = 1, c.N = 4, c.cp = 2;
    cr_assert_null(pp_profile_pprun_unrun(&c, PP_PREC_FP32, buf, sizeof buf), "%s", buf);
    pp_profile_pprun_args(&l, line, sizeof line);
    cr_assert(!strstr(line, "--recompute") && !strstr(line, "--shard") && strstr(line, " --cp 2 "),
              "%s", line);
}

/* A config.json model is --model-config with its path whole (longer than one stored word) in
 * both forms, quoted as one shell word; pprun takes one model: --model with --model-config is
 * refused (exit 2, both named), not one of them silently trained. */
Test(profiles_pprun_line, a_config_json_model_is_model_config_with_its_whole_path)
{
    pp_config c = {.schedule = "1f1b", .p = 2, .v = 1, .b = 1, .d = 1, .t = 1, .N = 4};
    char path[PP_PROFILE_PPRUN_PATH_MAX];
    snprintf(path, sizeof path, "/shared/models/%0*d/My Llama/config.json", 100, 7);
    pp_profile_pprun_line l = {.model = "config", .model_config = path, .config = &c, .seq = 64};
    char store[PP_PROFILE_PPRUN_MAX_ARGS][PP_PROFILE_PPRUN_ARG_LEN];
    char *argv[PP_PROFILE_PPRUN_MAX_ARGS];
    int n = pp_profile_pprun_argv(&l, store, argv);
    cr_assert(n > 2);
    cr_assert_str_eq(argv[0], "--model-config");
    cr_assert_str_eq(argv[1], path);
    char line[PP_PROFILE_PPRUN_LINE_LEN], want[PP_PROFILE_PPRUN_LINE_LEN];
    snprintf(want, sizeof want, "--model-config '%s' --schedule 1f1b", path);
    cr_assert(!strncmp(pp_profile_pprun_args(&l, line, sizeof line), want, strlen(want)),
              "%s", line);
    cr_assert_null(strstr(line, "--model "), "%s", line);

    FILE *fp = popen(PP_BINARY_DIR "/runtime/pprun --model tiny --model-config /nonexistent.json "
                                   "--steps 1 2>&1",
                     "r");
    cr_assert_not_null(fp);
    char err[1024];
    size_t len = fread(err, 1, sizeof err - 1, fp);
    err[len] = '\0';
    int st = pclose(fp);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "exit %d: %s", st, err);
    cr_assert(strstr(err, "--model tiny and --model-config /nonexistent.json: give one model"),
              "%s", err);
}
