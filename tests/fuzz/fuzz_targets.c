/* fuzz_targets.c — one function per input format that runs the project's reader on a file the
 * way the program that reads it does (fuzz_targets.h). No mutation and no reporting here: the
 * drivers (mutate.c, the libFuzzer entry points) decide what to feed and what counts as a
 * finding.
 */
#include "fuzz_targets.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pp_probe.h"
#include "pp_profile.h"
#include "pp_rt.h"
#include "pp_sched.h"
#include "pp_tune.h"
#include "sched_json.h"

#if defined(__SANITIZE_ADDRESS__)
#define PP_FUZZ_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PP_FUZZ_LSAN 1
#endif
#endif
#ifdef PP_FUZZ_LSAN
#include <sanitizer/lsan_interface.h>
#endif

int pp_fuzz_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return close(fd);
}

/* A reader's output goes nowhere: the renderers and exporters still walk every field. */
static FILE *sink(void)
{
    static FILE *fp;
    if (!fp)
        fp = fopen("/dev/null", "w");
    return fp;
}

/* `pptune schedule --check FILE`: parse, check, simulate with unit costs, render. */
static pp_status sched_after_parse(pp_status st, pp_sched *s)
{
    pp_cost cost = {0};
    pp_sim_result sim = {0};
    if (st == PP_OK)
        st = pp_sched_check(s);
    if (st == PP_OK)
        st = pp_cost_init_unit(&cost, s, 2.0);
    if (st == PP_OK)
        st = pp_sim_run(s, &cost, 1, &sim);
    if (st == PP_OK)
        st = pp_sched_write_text(s, sink());
    if (st == PP_OK)
        st = pp_sched_write_json(s, &sim, sink());
    if (st == PP_OK)
        st = pp_sched_write_ascii(s, &sim, 80, sink());
    pp_sim_result_fini(&sim);
    pp_cost_fini(&cost);
    pp_sched_destroy(s);
    return st;
}

/* Each form's reader: text, the source's name for messages, the schedule out. */
typedef pp_status (*sched_reader)(const char *text, const char *source_name, pp_sched **out);

static pp_status sched_read(sched_reader read, const char *data, const char *path)
{
    pp_sched *s = NULL;
    pp_status st = read(data, path, &s);
    return sched_after_parse(st, s);
}

static pp_status sched_text(const char *data, size_t len, const char *path)
{
    (void)len;
    return sched_read(pp_sched_parse_text, data, path);
}

static pp_status sched_json(const char *data, size_t len, const char *path)
{
    (void)len;
    return sched_read(pp_sched_read_json, data, path);
}

static pp_status sched_csv(const char *data, size_t len, const char *path)
{
    (void)len;
    return sched_read(pp_sched_read_csv, data, path);
}

/* `pptune --cluster FILE`: read, then the tuner's view of the hardware. */
static pp_status cluster(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_cluster *c = NULL;
    pp_status st = pp_cluster_read(path, &c);
    if (st == PP_OK) {
        pp_tune_hw hw;
        st = pp_tune_hw_from_cluster(c, path, &hw);
        pp_cluster_print(c, sink());
    }
    pp_cluster_destroy(c);
    return st;
}

static pp_status model_json(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_tune_model m;
    return pp_tune_model_load_json(path, &m);
}

static pp_status model_hf(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_tune_model m;
    return pp_tune_model_load_hf(path, &m);
}

/* `pptune export`: parse, map the configuration, every export format (a format that cannot
 * express the configuration says so with PP_ERR_UNSUPPORTED: not a finding). */
static pp_status profile(const char *data, size_t len, const char *path)
{
    pp_profile *p = NULL;
    pp_status st = pp_profile_parse(data, len, path, &p);
    if (st == PP_OK && p->has_chosen) {
        pp_tune_config c;
        st = pp_tune_config_from_profile(&p->chosen.config, &c);
    }
    for (int i = 0; st == PP_OK && i < p->n_runners_up; i++) {
        pp_tune_config c;
        st = pp_tune_config_from_profile(&p->runners_up[i].config, &c);
    }
    static const pp_profile_export_format fmts[] = {
        PP_PROFILE_EXPORT_MEGATRON, PP_PROFILE_EXPORT_NEMO, PP_PROFILE_EXPORT_PPRUN};
    for (size_t i = 0; st == PP_OK && p->has_chosen && i < sizeof fmts / sizeof fmts[0]; i++) {
        pp_status e = pp_profile_export(p, fmts[i], sink());
        if (e != PP_ERR_UNSUPPORTED)
            st = e;
    }
    pp_profile_destroy(p);
    return st;
}

/* `pprun --resume`: the file is read and verified whole (no executor). */
static pp_status checkpoint(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_rt_ckpt ck = {.config = "fuzz"};
    return pp_rt_checkpoint_load(NULL, path, 0, &ck);
}

/* The checkpoint's last 8 bytes are the FNV-1a 64 of everything before them
 * (runtime/checkpoint.c). */
static void checkpoint_fixup(char *data, size_t len)
{
    if (len < 16)
        return;
    uint64_t h = pp_fnv1a(PP_FNV1A_BASIS, data, len - 8);
    memcpy(data + len - 8, &h, 8);
}

/* `pprun --data FILE`: open the stream and draw a few batches. */
static pp_status data_text(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_rt_data *d = NULL;
    pp_status st = pp_rt_data_open_text(path, 7, &d);
    int32_t batch[2 * 17];
    for (int i = 0; st == PP_OK && i < 4; i++)
        st = pp_rt_data_next(d, 2, 16, batch);
    pp_rt_data_destroy(d);
    return st;
}

/* `pptune probe --topology FILE`. hwloc's XML plugin (libxml2, unloaded again when the
 * topology is destroyed, so LeakSanitizer cannot name it or match a suppression) leaks on some
 * malformed files, e.g. an unknown encoding="..."; what this call allocates is therefore left
 * out of leak checks. Memory errors are still caught. */
static pp_status hwloc_xml(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_topo *t = NULL;
#ifdef PP_FUZZ_LSAN
    __lsan_disable();
#endif
    pp_status st = pp_probe_topology(path, &t);
    pp_topo_destroy(t);
#ifdef PP_FUZZ_LSAN
    __lsan_enable();
#endif
    return st;
}

const pp_fuzz_target pp_fuzz_targets[] = {
    {"sched-text", ".txt", sched_text, 0, NULL, 1},
    {"sched-json", ".json", sched_json, 0, NULL, 1},
    {"sched-csv", ".csv", sched_csv, 0, NULL, 1},
    {"cluster", ".json", cluster, 0, NULL, 1},
    {"model", ".json", model_json, 0, NULL, 1},
    {"hf", ".json", model_hf, 0, NULL, 1},
    {"profile", ".json", profile, 1, NULL, 1},
    {"checkpoint", ".ckpt", checkpoint, 0, checkpoint_fixup, 1},
    {"data", ".txt", data_text, 0, NULL, 1},
    {"hwloc", ".xml", hwloc_xml, 0, NULL, 8},
    {NULL, NULL, NULL, 0, NULL, 0},
};

const pp_fuzz_target *pp_fuzz_target_find(const char *name)
{
    for (const pp_fuzz_target *t = pp_fuzz_targets; t->name; t++)
        if (!strcmp(t->name, name))
            return t;
    return NULL;
}

int pp_fuzz_status_ok(const pp_fuzz_target *t, pp_status st)
{
    switch (st) {
    case PP_OK:
        return 1;
    case PP_ERR_UNSUPPORTED:
        if (!t->may_be_unsupported)
            return 0;
        /* fall through */
    case PP_ERR_INVALID:
    case PP_ERR_PARSE:
    case PP_ERR_NOTFOUND:
    case PP_ERR_CHECK:
    case PP_ERR_DEADLOCK:
        return pp_err_text()[0] != '\0';
    default:
        return 0;
    }
}

int pp_fuzz_one(const char *targets, const unsigned char *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        abort();
    memcpy(text, data, size);
    text[size] = '\0';
    char names[256];
    snprintf(names, sizeof names, "%s", targets);
    for (char *save = NULL, *n = strtok_r(names, ",", &save); n; n = strtok_r(NULL, ",", &save)) {
        const pp_fuzz_target *t = pp_fuzz_target_find(n);
        if (!t)
            abort();
        char path[256];
        snprintf(path, sizeof path, "%s/pp_fuzz.%d%s", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                 (int)getpid(), t->ext);
        if (pp_fuzz_write_file(path, data, size) != 0)
            abort();
        pp_err_clear();
        pp_status st = t->run(text, size, path);
        unlink(path);
        if (!pp_fuzz_status_ok(t, st)) {
            fprintf(stderr, "fuzz %s: status %s, message \"%s\"\n", t->name, pp_status_name(st),
                    pp_err_text());
            abort();
        }
    }
    free(text);
    return 0;
}
