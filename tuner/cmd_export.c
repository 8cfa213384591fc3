/* cmd_export.c — `pptune export --format megatron|nemo|pprun PROFILE`: the chosen configuration
 * as a training framework's options, on stdout (flags on one line; NeMo as YAML). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "pp_profile.h"

static void usage(void)
{
    printf("usage: pptune export --format megatron|nemo|nemo2|torchtitan|pprun\n"
           "                    [--target bitpipe-fork] PROFILE\n\n"
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
           "A configuration the target cannot run (Chimera in Megatron-LM, BitPipe in upstream\n"
           "Megatron-LM) is refused with the reason (exit 2).\n");
}

int pp_cmd_export(int argc, char **argv)
{
    const char *format = NULL, *file = NULL, *target = NULL;
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"format", required_argument, NULL, 'f'}, /* long only: 'f' is not among the short */
        {"target", required_argument, NULL, 'T'},
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
        *(c == 'T' ? &target : &format) = cli.arg;
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
    pp_profile *p = NULL;
    st = pp_profile_read(file, &p);
    if (st == PP_OK)
        st = pp_profile_export(p, fmt, stdout);
    pp_profile_destroy(p);
    if (st == PP_ERR_UNSUPPORTED) {
        pp_cmd_fail("export", st);
        return 2;
    }
    return st == PP_OK ? 0 : pp_cmd_fail("export", st);
}
