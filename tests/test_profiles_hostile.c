/* test_profiles_hostile.c — hostile strings in a profile and in its file's name: the reader
 * refuses what is not printable text (naming the field), and every exporter prints what it
 * accepts as data of its target, read back with the target's own parser
 * (tests/fixtures/export/check.py: Python's ast, PyYAML, sh -n). */
#include <jansson.h>

#include "profiles_test.h"

#define CHECK PP_FIXTURES_DIR "/export/check.py"
#define BASE FIX "llama3-70b-dgx-h100-x16.json"

/* Quotes, backslashes, shell and Python syntax, a comment sign and non-ASCII (2-, 3- and 4-byte
 * UTF-8): all printable, so the reader keeps it and the exporters must quote it. */
static const char HOSTILE_CLUSTER[] =
    "dgx\" + __import__(\"os\").system(\"touch PWNED\") + \"\\\\ 'x' $(touch PWNED) `touch "
    "PWNED` ; # \xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 \\n";
/* A file name may hold anything but '/' and NUL: a newline too. */
static const char HOSTILE_FILE[] =
    "pro\"file\nimport os; os.system(\"touch PWNED\")\n# 'x' \\ $(touch PWNED) \xc3\xa9.json";

/* BASE with cluster.name (and model.rope_scaling unless NULL) set, written to path. */
static void write_variant(const char *path, const char *cluster, const char *rope)
{
    json_error_t e;
    json_t *j = json_load_file(BASE, 0, &e);
    cr_assert_not_null(j, "%s", e.text);
    json_object_set_new(json_object_get(j, "cluster"), "name", json_string(cluster));
    if (rope)
        json_object_set_new(json_object_get(j, "model"), "rope_scaling", json_string(rope));
    cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
    json_decref(j);
}

Test(profiles_hostile, strings_that_are_not_printable_text_are_refused_naming_the_field)
{
    static const struct {
        const char *cluster, *rope, *field;
    } cases[] = {
        {"dgx\nimport os; os.system(\"touch PWNED\")\n#", NULL, "cluster.name"},
        {"dgx\r", NULL, "cluster.name"},
        {"dgx\x1b[2J", NULL, "cluster.name"},
        {"dgx\xc2\x9b" "2J", NULL, "cluster.name"},       /* C1 CSI */
        {"dgx\xe2\x80\xa8" "a: b", NULL, "cluster.name"}, /* U+2028, a YAML line break */
        {"dgx", "llama3\nimport os", "model.rope_scaling"},
        {"dgx", "llama3\" + x + \"", "model.rope_scaling"},
    };
    char dir[64], path[128], cmd[512], out[8192];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/p.json", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_variant(path, cases[i].cluster, cases[i].rope);
        snprintf(cmd, sizeof cmd, PPTUNE " export --format nemo2 %s", path);
        cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "case %zu: %s", i, out);
        char want[64];
        snprintf(want, sizeof want, "field \"%s\"", cases[i].field);
        cr_assert(strstr(out, want), "case %zu: %s", i, out);
        cr_assert(!strstr(out, "import torch"), "case %zu: the output was written: %s", i, out);
        for (const char *k = out; *k; k++) /* the message quotes it escaped */
            cr_assert((unsigned char)*k >= 0x20 || *k == '\n', "case %zu: raw control in %s", i,
                      out);
    }
    /* a string past the length limit */
    char *big = malloc(PP_TEXT_MAX + 2);
    memset(big, 'a', PP_TEXT_MAX + 1);
    big[PP_TEXT_MAX + 1] = '\0';
    write_variant(path, big, NULL);
    free(big);
    snprintf(cmd, sizeof cmd, PPTUNE " export --format nemo %s", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, "field \"cluster.name\""), "%s", out);
}

Test(profiles_hostile, every_exporter_quotes_what_it_prints_for_its_target)
{
    static const char *const formats[] = {"nemo2", "nemo", "torchtitan", "megatron", "pprun"};
    char dir[64], path[256], cmd[1024], out[8192];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/%s", dir, HOSTILE_FILE);
    write_variant(path, HOSTILE_CLUSTER, NULL);
    setenv("PP_HOSTILE_PATH", path, 1);
    setenv("PP_HOSTILE_CLUSTER", HOSTILE_CLUSTER, 1);
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
        const char *f = formats[i];
        /* the provenance comment (name and cluster) is in every target but Megatron's and
         * pprun's one line of flags */
        int prov = strcmp(f, "megatron") && strcmp(f, "pprun");
        snprintf(cmd, sizeof cmd,
                 "cd %s && " PPTUNE " export --format %s \"$PP_HOSTILE_PATH\" > out.txt && "
                 "python3 " CHECK " %s out.txt %s",
                 dir, f, f, prov ? "\"$PP_HOSTILE_PATH\" \"$PP_HOSTILE_CLUSTER\"" : "");
        cr_assert_eq(pt_run(cmd, out, sizeof out), 0, "--format %s: %s", f, out);
        cr_assert(strstr(out, "ok"), "--format %s: %s", f, out);
    }
    snprintf(path, sizeof path, "%s/PWNED", dir);
    cr_assert_neq(access(path, F_OK), 0);
}

/* p = 5, v = 858993460: p x v wraps a 32-bit int to 4 (issue 30: a 5-stage, 10-layers-per-stage
 * layout of a 40-layer model, exit 0). The reader refuses the profile, and an exporter given
 * such a configuration all the same refuses it and prints nothing. */
Test(profiles_hostile, stage_counts_that_wrap_32_bits_are_refused)
{
    char dir[64], path[128], cmd[512], out[8192];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/wrap.json", dir);
    json_error_t e;
    json_t *j = json_load_file(FIX "gpt-13b-dgx-h100-x32-v1.1.json", 0, &e);
    cr_assert_not_null(j);
    json_t *c = json_object_get(json_object_get(j, "chosen"), "config");
    json_object_set_new(c, "p", json_integer(5));
    json_object_set_new(c, "v", json_integer(858993460));
    cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
    json_decref(j);
    static const char *const formats[] = {"megatron", "nemo", "nemo2", "torchtitan"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, PPTUNE " export --format %s %s", formats[i], path);
        cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s: %s", formats[i], out);
        cr_assert(strstr(out, "pipeline stages"), "%s: %s", formats[i], out);
    }
    pp_profile *p;
    cr_assert_eq(pp_profile_read(FIX "gpt-13b-dgx-h100-x32-v1.1.json", &p), PP_OK, "%s",
                 pp_err_msg());
    p->chosen.config.p = 5;
    p->chosen.config.v = 858993460;
    for (size_t i = 0; i < 4; i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&text, &len);
        pp_status st = pp_profile_export(p, pp_profile_export_find(formats[i], NULL), fp);
        fclose(fp);
        cr_assert_neq(st, PP_OK, "%s exported: %s", formats[i], text);
        cr_assert(!strstr(text, "pipeline-model-parallel-size 5") &&
                      !strstr(text, "pipeline_model_parallel_size"),
                  "%s printed: %s", formats[i], text);
        free(text);
    }
    pp_profile_destroy(p);
}

/* Issue 30: escape sequences in a profile reached the terminal through `pptune diff`; a file
 * that is not JSON had jansson's quotation of it printed raw. Now the field is refused with its
 * value escaped, and a parse error quotes at most 16 bytes, escaped. */
/* `pptune diff BASE path`: exit 2, the message has `want`, no raw escape (C0 or C1) and not
 * `never` (NULL: no such check). */
static void diff_refused_cleanly(const char *path, const char *want, const char *never)
{
    char cmd[512], out[8192];
    snprintf(cmd, sizeof cmd, PPTUNE " diff " BASE " %s", path);
    cr_assert_eq(pt_run(cmd, out, sizeof out), 2, "%s", out);
    cr_assert(strstr(out, want), "%s", out);
    cr_assert_null(strchr(out, '\x1b'), "a raw escape: %s", out);
    cr_assert_null(strstr(out, "\xc2\x9b"), "a raw C1 escape: %s", out);
    cr_assert(!never || !strstr(out, never), "more than a short prefix: %s", out);
}

Test(profiles_hostile, diff_prints_no_terminal_escapes)
{
    char dir[64], path[128];
    pt_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/esc.json", dir);
    static const char *const fields[] = {"name", "device"};
    for (int i = 0; i < 2; i++) {
        json_error_t e;
        json_t *j = json_load_file(BASE, 0, &e);
        json_object_set_new(json_object_get(j, "cluster"), fields[i],
                            json_string("x\x1b]0;pwned\x07\x1b[2J\xc2\x9b" "31m"));
        cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
        json_decref(j);
        diff_refused_cleanly(path, "cluster.", NULL);
    }
    FILE *fp = fopen(path, "w");
    fprintf(fp, "{\"schema\": \x1b[2Jpwned-and-a-long-secret-tail-that-is-not-shown}");
    fclose(fp);
    diff_refused_cleanly(path, "not valid JSON", "secret-tail");
}
