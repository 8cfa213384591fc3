/* fuzz_targets.c — one function per input format that runs the project's reader on a file the
 * way the program that reads it does (fuzz_targets.h). No mutation and no reporting here: the
 * drivers (mutate.c, the libFuzzer entry points) decide what to feed and what counts as a
 * finding.
 */
#include "fuzz_targets.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pp_probe.h"
#include "pp_profile.h"
#include "pp_rt.h"
#include "pp_sched.h"
#include "pp_tune.h"
#include "sched_json.h"

/* The sample checkpoint and dataset every run of these targets and their seeds share. */
int pp_fuzz_st_sample(const char *dir, int sharded)
{
    static float v[64];
    static const int64_t s1[] = {8}, s2[] = {4, 6}, s0[1] = {0}, se[] = {0, 3};
    for (int i = 0; i < 64; i++)
        v[i] = (float)i * 0.5f - 7.0f;
    pp_st_out t[] = {
        {"model.embed_tokens.weight", PP_ST_BF16, 2, s2, v},
        {"model.norm.weight", PP_ST_F32, 1, s1, v},
        {"lm_head.weight", PP_ST_F16, 2, s2, v + 8},
        {"scalar", PP_ST_F32, 0, s0, v},
        {"empty", PP_ST_BF16, 2, se, NULL},
    };
    pp_st_meta meta[] = {{"format", "pt"}};
    char path[1200];
    snprintf(path, sizeof path, "%s/seed.safetensors", dir);
    pp_status s = sharded ? pp_st_write_sharded(dir, t, 5, meta, 1, 48, NULL)
                          : pp_st_write(path, t, 5, meta, 1);
    return s == PP_OK ? 0 : -1;
}

pp_test_mmidx pp_fuzz_mmidx_sample(void)
{
    static const int32_t lens[] = {7, 1, 12, 1, 2, 9};
    static const int64_t ends[] = {1, 2, 3, 5, 6};
    int64_t tok[32];
    for (int i = 0; i < 32; i++)
        tok[i] = (31 * i + 5) % PP_FUZZ_MMIDX_VOCAB;
    return pp_test_mmidx_build(8, tok, lens, 6, ends, 5);
}

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

/* Every candidate's configuration as text and as a pprun line (what the board and the
 * launch line print from it). */
static void show_config(const pp_profile *p, const pp_config *c)
{
    char text[200], args[512];
    pp_profile_pprun_line l = {.model = p->model.name, .config = c, .seq = p->model.seq};
    fputs(pp_config_str(c, text, sizeof text), sink());
    fputs(pp_profile_pprun_args(&l, args, sizeof args), sink());
}

/* `pptune export`: parse, show each configuration, every export format (a format that cannot
 * express the configuration says so with PP_ERR_UNSUPPORTED: not a finding). */
static pp_status profile(const char *data, size_t len, const char *path)
{
    pp_profile *p = NULL;
    pp_status st = pp_profile_parse(data, len, path, &p);
    if (st == PP_OK && p->has_chosen)
        show_config(p, &p->chosen.config);
    for (int i = 0; st == PP_OK && i < p->n_runners_up; i++)
        show_config(p, &p->runners_up[i].config);
    static const char *const formats[] = {"megatron", "nemo", "pprun"};
    for (size_t i = 0; st == PP_OK && p->has_chosen && i < sizeof formats / sizeof formats[0];
         i++) {
        pp_status e = pp_profile_export(p, pp_profile_export_find(formats[i], NULL), sink());
        if (e != PP_ERR_UNSUPPORTED)
            st = e;
    }
    pp_profile_destroy(p);
    return st;
}

/* ---- exports read back by their targets' own parsers ----------------------------------------
 * One python3 running tests/fixtures/export/check.py --serve for the whole pass (a process per
 * mutant would cost the pass its time budget): each output goes to it as "FORMAT LENGTH\n" and
 * the bytes, and it answers one line, "ok" or why Python's ast, PyYAML or sh did not read the
 * output as one literal per field. Started on first use; where python3 (or PyYAML) cannot run,
 * the pass says so once and the exports are only run, not read back. */
static struct {
    pid_t pid;
    FILE *to, *from;
    int tried;
} checker;

static int checker_start(void)
{
    if (checker.tried)
        return checker.to != NULL;
    checker.tried = 1;
    int in[2], out[2];
    if (pipe(in) != 0)
        return 0;
    if (pipe(out) != 0) {
        close(in[0]), close(in[1]);
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        execlp("python3", "python3", PP_FIXTURES_DIR "/export/check.py", "--serve", (char *)NULL);
        _exit(127);
    }
    close(in[0]), close(out[1]);
    if (pid < 0) {
        close(in[1]), close(out[0]);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN); /* a checker that died is said by its missing answer */
    checker.pid = pid;
    checker.to = fdopen(in[1], "w");
    checker.from = fdopen(out[0], "r");
    return checker.to && checker.from;
}

/* NULL when the checker read text as its target's; else its reason (static). */
static const char *checker_verdict(const char *format, const char *text, size_t len)
{
    static char line[400];
    if (!checker_start()) {
        static int said;
        if (!said++)
            fprintf(stderr, "fuzz export-*: python3 with PyYAML cannot run here: the exports are "
                            "run but not read back by their targets' parsers\n");
        return NULL;
    }
    fprintf(checker.to, "%s %zu\n", format, len);
    fwrite(text, 1, len, checker.to);
    if (fflush(checker.to) != 0 || !fgets(line, sizeof line, checker.from))
        return "the checker (tests/fixtures/export/check.py --serve) stopped answering";
    line[strcspn(line, "\n")] = '\0';
    return strcmp(line, "ok") ? line : NULL;
}

/* `pptune export --format FORMAT`: parse, export, and the output read back by check.py. A
 * refusal (exit 2: invalid, unsupported) is an answer; an output its target's parser does not
 * read as one literal per field is a finding (PP_ERR_IO here). */
static pp_status export_read_back(const char *format, const char *data, size_t len,
                                  const char *path)
{
    pp_profile *p = NULL;
    PP_TRY(pp_profile_parse(data, len, path, &p));
    pp_status st = PP_OK;
    if (p->has_chosen) {
        char *text = NULL;
        size_t n = 0;
        FILE *m = open_memstream(&text, &n);
        st = m ? pp_profile_export(p, pp_profile_export_find(format, NULL), m) : PP_ERR_NOMEM;
        if (m)
            fclose(m);
        const char *why = st == PP_OK ? checker_verdict(format, text, n) : NULL;
        if (why)
            st = PP_ERR(PP_ERR_IO, "--format %s: the output does not read as %s: %s", format,
                        !strcmp(format, "nemo2") ? "Python" : !strcmp(format, "nemo") ? "YAML"
                                                                                      : "sh words",
                        why);
        free(text);
    }
    pp_profile_destroy(p);
    return st;
}

static pp_status export_megatron(const char *data, size_t len, const char *path)
{
    return export_read_back("megatron", data, len, path);
}

static pp_status export_nemo(const char *data, size_t len, const char *path)
{
    return export_read_back("nemo", data, len, path);
}

static pp_status export_nemo2(const char *data, size_t len, const char *path)
{
    return export_read_back("nemo2", data, len, path);
}

static pp_status export_torchtitan(const char *data, size_t len, const char *path)
{
    return export_read_back("torchtitan", data, len, path);
}

/* `pptune search --hostfile FILE`: the Open MPI host file read into an allocation. */
static pp_status hostfile(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    pp_tune_alloc a;
    return pp_tune_alloc_detect(path, &a);
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

/* ---- safetensors (pp_rt_safetensors.h) and Megatron datasets: the readers behind a weight
 * loader and `pprun --data PREFIX` ---- */

/* Every tensor of the checkpoint as a loader takes it: the shape check, then the values
 * (fp32 for float dtypes, raw bytes otherwise). Sizes are the file's own, checked by the
 * reader against the file's length, so the buffers are bounded by the input. */
static pp_status st_walk(const char *path)
{
    pp_st *st = NULL;
    pp_status s = pp_st_open(path, &st);
    for (size_t i = 0; s == PP_OK && i < pp_st_count(st); i++) {
        const pp_st_tensor *t = pp_st_at(st, i);
        s = pp_st_expect(st, t->name, t->ndim, t->shape, NULL);
        void *buf = malloc(t->numel * 4 + 8 > t->nbytes ? t->numel * 4 + 8 : t->nbytes + 8);
        if (s == PP_OK && !buf)
            s = PP_ERR_NOMEM;
        else if (s == PP_OK && pp_st_dtype_is_float(t->dtype))
            s = pp_st_load_f32(st, t, buf);
        else if (s == PP_OK)
            s = pp_st_read_raw(st, t, buf);
        free(buf);
    }
    if (s == PP_OK && pp_st_count(st) > 0) { /* and a wrong shape is refused */
        int64_t shape[1] = {-1};
        s = pp_st_expect(st, pp_st_at(st, 0)->name, 1, shape, NULL) == PP_ERR_INVALID
                ? PP_OK
                : PP_ERR(PP_ERR_IO, "a wrong shape was accepted");
    }
    pp_st_destroy(st);
    return s;
}

static pp_status safetensors(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    return st_walk(path);
}

/* The index is the input; the shards it names in the seed are written (once per process and
 * folder: the readers never change them) beside a copy of it in a folder of the input's own,
 * "<path>.d", which is left for the next input. */
static pp_status safetensors_index(const char *data, size_t len, const char *path)
{
    static char ready[1100];
    char dir[1100], index[1200];
    snprintf(dir, sizeof dir, "%s.d", path);
    snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
    if (strcmp(ready, dir)) {
        mkdir(dir, 0700);
        if (pp_fuzz_st_sample(dir, 1) != 0)
            return PP_ERR(PP_ERR_IO, "cannot write the shards into %s", dir);
        snprintf(ready, sizeof ready, "%s", dir);
    }
    if (pp_fuzz_write_file(index, data, len) != 0)
        return PP_ERR(PP_ERR_IO, "cannot write %s", index);
    return st_walk(index);
}

/* A dataset's file is the input, its partner the seed's: `pprun --data PREFIX` opens the pair
 * and draws batches in order and shuffled. */
static pp_status megatron(const char *path, const char *input_ext, const char *other_ext)
{
    char prefix[1100], other[1200];
    size_t n = strlen(path) - strlen(input_ext);
    snprintf(prefix, sizeof prefix, "%.*s", (int)n, path);
    snprintf(other, sizeof other, "%s%s", prefix, other_ext);
    pp_test_mmidx m = pp_fuzz_mmidx_sample();
    int wrote = !strcmp(other_ext, ".bin") ? pp_fuzz_write_file(other, m.bin, m.bin_len)
                                           : pp_fuzz_write_file(other, m.idx, m.idx_len);
    pp_test_mmidx_free(&m);
    pp_status s = wrote == 0 ? PP_OK : PP_ERR(PP_ERR_IO, "cannot write %s", other);
    for (int shuffle = 0; s == PP_OK && shuffle < 2; shuffle++) {
        pp_rt_data *d = NULL;
        s = pp_rt_data_open(prefix, PP_FUZZ_MMIDX_VOCAB, 7, shuffle, &d);
        int32_t batch[3 * 9];
        for (int i = 0; s == PP_OK && i < 4; i++)
            s = pp_rt_data_next(d, 3, 8, batch);
        pp_rt_data_destroy(d);
    }
    remove(other);
    return s;
}

static pp_status megatron_idx(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    return megatron(path, ".idx", ".bin");
}

static pp_status megatron_bin(const char *data, size_t len, const char *path)
{
    (void)data, (void)len;
    return megatron(path, ".bin", ".idx");
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
    {"safetensors", ".safetensors", safetensors, 0, NULL, 1},
    {"safetensors-index", ".json", safetensors_index, 0, NULL, 1},
    {"megatron-idx", ".idx", megatron_idx, 0, NULL, 1},
    {"megatron-bin", ".bin", megatron_bin, 0, NULL, 1},
    /* last, so that a slow machine's time cap cuts these rather than the readers above; cost 6
     * and 4 (200 and 300 mutants) to keep the pass in its budget: the profile target above
     * already runs every reader of a profile on the full count */
    {"export-megatron", ".json", export_megatron, 1, NULL, 6},
    {"export-nemo", ".json", export_nemo, 1, NULL, 6},
    {"export-nemo2", ".json", export_nemo2, 1, NULL, 6},
    {"export-torchtitan", ".json", export_torchtitan, 1, NULL, 6},
    {"hostfile", ".hosts", hostfile, 0, NULL, 4},
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
