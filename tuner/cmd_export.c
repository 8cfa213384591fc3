/* cmd_export.c — `pptune export --format megatron|nemo|pprun PROFILE`: the chosen configuration
 * as a training framework's options, on stdout (flags on one line; NeMo as YAML). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_profile.h"

static void usage(void)
{
    printf("usage: pptune export --format megatron|nemo|nemo2|torchtitan|pprun\n"
           "                    [--target bitpipe-fork] [--runner-up K] PROFILE\n\n"
           "Prints the profile's chosen configuration as launch options:\n"
           "  megatron  Megatron-LM flags on one line: layout (tensor, pipeline, virtual\n"
           "            pipeline and its micro-batch group, uneven first/last stage), batch,\n"
           "            the model (sizes, attention, MLP, norm, positions, head, biases),\n"
           "            precision and memory options; --target bitpipe-fork for a BitPipe\n"
           "            profile on that fork of Megatron (upstream has no BitPipe)\n"
           "  nemo      NeMo 1 megatron_gpt_config.yaml keys (trainer.*, model.*), the model\n"
           "  nemo2     NeMo 2.0 Python: llm.GPTConfig, nl.MegatronStrategy, nl.Trainer\n"
           "  torchtitan  --parallelism.* / --training.* overrides and the `pptune schedule\n"
           "            --format csv` command writing the schedule they load\n"
           "  pprun     pprun's flags on one line (backend, precision, --tp)\n"
           "A configuration the target cannot run (the zero-bubble family and Chimera in\n"
           "Megatron-LM and NeMo, BitPipe in upstream Megatron-LM) is refused with the reason\n"
           "(exit 2), naming the fastest runner-up in the profile that the target runs.\n"
           "  --runner-up K  export the profile's K-th runner-up instead of its chosen\n"
           "            configuration (1 = the second fastest; the profile lists them)\n");
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
    if (!format || !file)
        return pp_cmd_usage_error("export", "expected --format megatron|nemo|nemo2|torchtitan|pprun PROFILE");
    pp_profile_export_format fmt;
    pp_status st = pp_profile_export_format_parse(format, &fmt);
    if (st != PP_OK)
        return pp_cmd_usage_error("export", "%s", pp_err_text());
    if (target && (strcmp(target, "bitpipe-fork") != 0 || fmt != PP_PROFILE_EXPORT_MEGATRON))
        return pp_cmd_usage_error("export", "--target \"%s\": expected bitpipe-fork, with "
                                            "--format megatron", target);
    if (target)
        fmt = PP_PROFILE_EXPORT_MEGATRON_BITPIPE;
    long k = 0;
    if (runner) {
        char *end;
        k = strtol(runner, &end, 10);
        if (*runner == '\0' || *end != '\0' || k < 1 || k > 1000)
            return pp_cmd_usage_error("export", "--runner-up \"%s\": expected a runner-up's "
                                                "number, 1 or more", runner);
    }
    pp_profile *p = NULL;
    st = pp_profile_read(file, &p);
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
                file, k, pp_profile_config_str(&r->config, text, sizeof text), r->step_time_s,
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
