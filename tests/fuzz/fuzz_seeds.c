/* fuzz_seeds.c — the well-formed inputs mutation starts from, for every format of
 * fuzz_targets.c: what the project's own writers produce (schedules of every registered
 * generator in the text, JSON and CSV forms; preset clusters; a checkpoint of a tiny pprun run)
 * and the recorded fixtures (profiles, PyTorch CSVs, hwloc topologies, a text). Hand-written model
 * and HuggingFace configs mirror tests/test_tuner_models.c. Does not mutate anything.
 */
#include "fuzz_seeds.h"
#include "fuzz_targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "pp_probe.h"
#include "pp_sched.h"

static void add(pp_fuzz_seeds *s, char *data, size_t len)
{
    if (!data || s->n == PP_FUZZ_MAX_SEEDS) {
        free(data);
        return;
    }
    s->data[s->n] = data;
    s->len[s->n] = len;
    s->n++;
}

static void add_text(pp_fuzz_seeds *s, const char *text)
{
    add(s, pp_strdup(text), strlen(text));
}

static void add_file(pp_fuzz_seeds *s, const char *path)
{
    char *data;
    size_t len;
    if (pp_file_read(path, &data, &len) == PP_OK)
        add(s, data, len);
}

static void add_fixture(pp_fuzz_seeds *s, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PP_FIXTURES_DIR, rel);
    add_file(s, path);
}

/* Every generator at D = 4, N = 8 (every rule holds), written by `form`. */
static void add_schedules(pp_fuzz_seeds *s, const char *form)
{
    int n;
    const pp_sched_desc *d = pp_sched_generators(&n);
    for (int i = 0; i < n; i++) {
        pp_sched_params p = {.ranks = 4, .microbatches = 8};
        pp_sched *sc = NULL;
        if (pp_sched_generate(d[i].name, &p, &sc) != PP_OK)
            continue;
        char *buf = NULL;
        size_t len = 0;
        FILE *fp = open_memstream(&buf, &len);
        pp_cost cost = {0};
        pp_sim_result sim = {0};
        pp_status st = PP_OK;
        if (!strcmp(form, "text"))
            st = pp_sched_write_text(sc, fp);
        else if (!strcmp(form, "csv"))
            st = pp_sched_write_csv(sc, fp);
        else if ((st = pp_cost_init_unit(&cost, sc, 2.0)) == PP_OK &&
                 (st = pp_sim_run(sc, &cost, 0, &sim)) == PP_OK)
            st = pp_sched_write_json(sc, &sim, fp);
        fclose(fp);
        pp_sim_result_fini(&sim);
        pp_cost_fini(&cost);
        pp_sched_destroy(sc);
        if (st == PP_OK)
            add(s, buf, len);
        else
            free(buf);
    }
}

static void add_cluster(pp_fuzz_seeds *s, const char *preset, int nodes)
{
    pp_cluster *c = NULL;
    char *text = NULL;
    if (pp_cluster_load_preset(preset, nodes, &c) == PP_OK && pp_cluster_to_json(c, &text) == PP_OK)
        add(s, text, strlen(text));
    pp_cluster_destroy(c);
}

/* A checkpoint of two steps of a one-layer tiny model, written by the built pprun. */
static void add_checkpoint(pp_fuzz_seeds *s, const char *pprun, const char *work)
{
    char path[1024], cmd[3072];
    snprintf(path, sizeof path, "%s/seed.ckpt", work);
    snprintf(cmd, sizeof cmd,
             "'%s' --model tiny --layers 1 --seq 8 --schedule gpipe --ranks 1 --microbatches 1 "
             "--steps 2 --save-every 1 --checkpoint '%s' --quiet >/dev/null 2>&1",
             pprun, path);
    int rc = system(cmd);
    if (rc == 0)
        add_file(s, path);
    remove(path);
}

static void remove_folder(const char *dir)
{
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        /* a leftover folder in the work directory: harmless */
    }
}

/* The sample checkpoint (pp_fuzz_st_sample): the single file, or the sharded one's index. */
static void add_checkpoint_sample(pp_fuzz_seeds *s, const char *work, int sharded)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/seed-safetensors.d", work);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/%s", dir,
             sharded ? "model.safetensors.index.json" : "seed.safetensors");
    if (pp_fuzz_st_sample(dir, sharded) == 0)
        add_file(s, path);
    remove_folder(dir);
}

void pp_fuzz_seeds_load(const char *format, const char *pprun, const char *work, pp_fuzz_seeds *s)
{
    memset(s, 0, sizeof *s);
    if (!strcmp(format, "sched-text")) {
        add_schedules(s, "text");
    } else if (!strcmp(format, "sched-json")) {
        add_schedules(s, "json");
    } else if (!strcmp(format, "sched-csv")) {
        add_schedules(s, "csv");
        add_fixture(s, "pytorch/interleaved_2rank_4stage_comms.csv");
        add_fixture(s, "pytorch/interleaved_2rank_4stage_compute.csv");
        add_fixture(s, "pytorch/dualpipev_4rank_10mb.csv"); /* I, W, OVERLAP_F_B */
        /* torch 2.15's own dumps: WAIT_SEND_*, WAIT_REDUCE_GRAD, pairs with communication */
        add_fixture(s, "pytorch/torch-2.15_dualpipev_2rank_4mb_comms.csv");
        add_fixture(s, "pytorch/torch-2.15_zbv_2rank_4mb_comms.csv");
    } else if (!strcmp(format, "cluster")) {
        add_cluster(s, "dgx-h100", 2);
        add_cluster(s, "hgx-h200", 1);
    } else if (!strcmp(format, "model")) {
        add_text(s, "{\"format\": \"pptune-model\", \"version\": 1, \"name\": \"mini\", "
                    "\"layers\": 4, \"hidden\": 64, \"heads\": 4, \"vocab\": 100, \"seq\": 16}");
        add_text(s, "{\"format\": \"pptune-model\", \"version\": 1, \"name\": \"gated\",\n"
                    " \"layers\": 32, \"hidden\": 4096, \"heads\": 32, \"kv_heads\": 8,\n"
                    " \"ffn\": 14336, \"vocab\": 128256, \"seq\": 8192, \"global_batch\": 512,\n"
                    " \"gated_mlp\": true, \"tied_embed\": false}\n");
    } else if (!strcmp(format, "hf")) {
        add_text(s, "{\"model_type\": \"llama\", \"num_hidden_layers\": 32, "
                    "\"hidden_size\": 4096, \"num_attention_heads\": 32, "
                    "\"num_key_value_heads\": 8, \"intermediate_size\": 14336, "
                    "\"vocab_size\": 128256, \"max_position_embeddings\": 8192, "
                    "\"hidden_act\": \"silu\", \"tie_word_embeddings\": false}");
        add_text(s, "{\"model_type\": \"gpt2\", \"n_layer\": 12, \"n_embd\": 768, "
                    "\"n_head\": 12, \"vocab_size\": 50257, \"n_positions\": 1024}");
    } else if (!strcmp(format, "profile")) {
        add_fixture(s, "profiles/gpt-13b-dgx-h100-x32.json");
        add_fixture(s, "profiles/tiny-local.json");
    } else if (!strncmp(format, "export-", 7)) { /* 1.1 profiles: the exporters build models */
        add_fixture(s, "profiles/gpt-13b-dgx-h100-x32-v1.1.json");
        add_fixture(s, "profiles/llama3-70b-dgx-h100-x16.json");
        add_fixture(s, "profiles/hostile-strings.json"); /* quotes, backslashes, non-ASCII */
    } else if (!strcmp(format, "hostfile")) {
        add_text(s, "# two nodes\n127.0.0.2 slots=2\n\n127.0.0.3 slots=2 max_slots=4\n");
        add_text(s, "node1 slots=8 # a comment\r\nnode2\tslots=8\nnode3\n");
    } else if (!strcmp(format, "checkpoint")) {
        if (pprun)
            add_checkpoint(s, pprun, work);
    } else if (!strcmp(format, "data")) {
        add_fixture(s, "text/prose.txt");
    } else if (!strcmp(format, "safetensors") || !strcmp(format, "safetensors-index")) {
        add_checkpoint_sample(s, work, !strcmp(format, "safetensors-index"));
    } else if (!strcmp(format, "megatron-idx") || !strcmp(format, "megatron-bin")) {
        pp_test_mmidx m = pp_fuzz_mmidx_sample();
        int idx = !strcmp(format, "megatron-idx");
        char *copy = malloc((idx ? m.idx_len : m.bin_len) + 1);
        if (copy) {
            memcpy(copy, idx ? m.idx : m.bin, idx ? m.idx_len : m.bin_len);
            copy[idx ? m.idx_len : m.bin_len] = '\0';
        }
        add(s, copy, idx ? m.idx_len : m.bin_len);
        pp_test_mmidx_free(&m);
    } else if (!strcmp(format, "hwloc")) {
        add_fixture(s, "hwloc/power8gpudistances.xml");
        add_fixture(s, "hwloc/24em64t-2n6c2t-pci.xml");
    }
}

void pp_fuzz_seeds_fini(pp_fuzz_seeds *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->data[i]);
    memset(s, 0, sizeof *s);
}
