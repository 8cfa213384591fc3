/* model_source.c — the file a profile's model was read from (model.source, profile 1.4): its
 * SHA-256, and whether it is still the file pptune read. pprun trains a config.json model by
 * reading that file again (`--model-config PATH`, or `--profile`), so a file changed since the
 * search would train another model than the one tuned: the search's launch line, `pptune export
 * --format pprun` and `pprun --profile` refuse it with this one message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_profile.h"

pp_status pp_profile_file_sha256(const char *path, char hex[65])
{
    char *text = NULL;
    size_t len = 0;
    PP_TRY(pp_file_read(path, &text, &len));
    pp_sha256_hex(text, len, hex);
    free(text);
    return PP_OK;
}

pp_status pp_profile_model_config_check(const char *who, const char *path, const char *sha256)
{
    char now[65];
    pp_status st = pp_profile_file_sha256(path, now);
    if (st != PP_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", pp_err_text());
        return PP_ERR(st,
                      "%s: the model's config.json %s cannot be read (%s): pprun reads it to "
                      "train the model (on every node of a launch: a path on a shared file "
                      "system)",
                      who, path, why);
    }
    if (sha256 && strcmp(now, sha256) != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: the model's config.json %s changed since pptune read it (SHA-256 now "
                      "%s, recorded %s): pprun would train another model than the one tuned; "
                      "restore the file, or tune again (pptune --model-config %s)",
                      who, path, now, sha256, path);
    return PP_OK;
}
