/* store.c — where profiles live on disk: the local store's directory and the key that names a
 * profile in every store ("<fingerprint>/<model>.json").
 *
 * The key uses only characters that need no escaping in a path or a URL, and never "..", so a
 * hostile profile cannot make a store write outside its directory. This file does not read or
 * move profiles; profile_read.c and store_http.c do.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pp_profile.h"

pp_status pp_profile_store_dir(char **out)
{
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    char buf[1024];
    /* XDG Base Directory: an unset or empty XDG_DATA_HOME means $HOME/.local/share. */
    if (xdg && *xdg)
        snprintf(buf, sizeof buf, "%s/pptune/profiles", xdg);
    else if (home && *home)
        snprintf(buf, sizeof buf, "%s/.local/share/pptune/profiles", home);
    else
        return PP_ERR(PP_ERR_INVALID, "neither XDG_DATA_HOME nor HOME is set: name the profile "
                                      "file explicitly");
    *out = pp_strdup(buf);
    return *out ? PP_OK : PP_ERR_NOMEM;
}

static int key_char_ok(char c, int colon_ok)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || (colon_ok && c == ':');
}

int pp_profile_model_name_ok(const char *name)
{
    if (!name || !*name || strlen(name) > 100 || !strcmp(name, ".") || !strcmp(name, ".."))
        return 0;
    for (const char *c = name; *c; c++)
        if (!key_char_ok(*c, 0))
            return 0;
    return 1;
}

void pp_profile_model_name_sanitize(char *name)
{
    for (char *c = name; *c; c++)
        if (!key_char_ok(*c, 0))
            *c = '_';
}

static pp_status check_part(const char *what, const char *s, int colon_ok)
{
    if (!s || !*s)
        return PP_ERR(PP_ERR_INVALID, "store key: the %s is empty", what);
    if (!strcmp(s, ".") || !strcmp(s, ".."))
        return PP_ERR(PP_ERR_INVALID, "store key: the %s \"%s\" is not a name", what, s);
    if (strlen(s) > 100)
        return PP_ERR(PP_ERR_INVALID, "store key: the %s is longer than 100 characters", what);
    for (const char *c = s; *c; c++)
        if (!key_char_ok(*c, colon_ok))
            return PP_ERR(PP_ERR_INVALID,
                          "store key: the %s \"%s\" has the character '%c'; expected letters, "
                          "digits and . _ -%s only",
                          what, s, *c, colon_ok ? " :" : "");
    return PP_OK;
}

pp_status pp_profile_store_key(const char *fingerprint, const char *model, char *buf, size_t n)
{
    PP_TRY(check_part("cluster fingerprint", fingerprint, 1));
    PP_TRY(check_part("model name", model, 0));
    int len = snprintf(buf, n, "%s/%s.json", fingerprint, model);
    if (len < 0 || (size_t)len >= n)
        return PP_ERR(PP_ERR_INVALID, "store key: buffer of %zu bytes too small", n);
    /* ':' is legal in both paths and URLs but awkward in both (Windows shares, URL schemes). */
    for (char *c = buf; *c; c++)
        if (*c == ':')
            *c = '-';
    return PP_OK;
}

static pp_status mkdir_one(const char *path)
{
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return PP_ERR(PP_ERR_IO, "cannot create the store directory %s: %s", path, strerror(errno));
    return PP_OK;
}

/* mkdir -p of every directory above the file `path`. */
static pp_status mkdirs_for(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        pp_status st = mkdir_one(path);
        *p = '/';
        PP_TRY(st);
    }
    return PP_OK;
}

pp_status pp_profile_store_path(const char *dir, const char *fingerprint, const char *model,
                                char **out)
{
    char key[256];
    PP_TRY(pp_profile_store_key(fingerprint, model, key, sizeof key));
    size_t n = strlen(dir) + strlen(key) + 2;
    char *path = malloc(n);
    if (!path)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for a store path");
    snprintf(path, n, "%s/%s", dir, key);
    *out = path;
    return PP_OK;
}

pp_status pp_profile_store_mkdirs(const char *path)
{
    char *copy = pp_strdup(path);
    if (!copy)
        return PP_ERR_NOMEM;
    pp_status st = mkdirs_for(copy);
    free(copy);
    PP_TRY(st);
    return PP_OK;
}
