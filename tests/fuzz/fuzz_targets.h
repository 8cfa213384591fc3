/* fuzz_targets.h — the readers the fuzzers drive, one entry per input format, shared by the
 * bounded mutation pass of CI (mutate.c) and the libFuzzer targets (*_fuzz.c).
 *
 * A target takes one input twice: its bytes (NUL-terminated) and a file that holds the same
 * bytes, so readers that open a path (cluster, model, HF config, checkpoint, data, hwloc XML)
 * and readers that parse text (schedule, profile) are driven alike. It runs what a user's
 * command runs on such a file (read, validate, and the next step that consumes the result:
 * check and simulate a schedule, export a profile, turn a cluster into the tuner's hardware) and
 * returns the reader's status. The program would exit 0 or 2 on it exactly when
 * pp_fuzz_status_ok says so; anything else is a finding.
 */
#ifndef PP_FUZZ_TARGETS_H
#define PP_FUZZ_TARGETS_H

#include <stddef.h>

#include "megatron_mirror.h"
#include "pp_common.h"

typedef struct {
    const char *name; /* "sched-text", "cluster", ... (the format, as messages name it) */
    const char *ext;  /* the file name's ending the reader sees (".json", ".csv", ...) */
    pp_status (*run)(const char *data, size_t len, const char *path);
    int may_be_unsupported; /* 1: PP_ERR_UNSUPPORTED is a documented answer (a newer profile) */
    /* optional: makes a mutant pass the format's whole-file checksum, so mutation reaches the
     * fields behind it (the checkpoint's trailing FNV-1a); NULL where there is none */
    void (*fixup)(char *data, size_t len);
    int cost; /* >= 1: an input costs about this many of the others (hwloc loads a whole
               * topology); the CI pass runs count / cost mutants of it */
} pp_fuzz_target;

/* The targets, terminated by a row with name NULL. */
extern const pp_fuzz_target pp_fuzz_targets[];
/* The named target, or NULL. */
const pp_fuzz_target *pp_fuzz_target_find(const char *name);

/* 1 when st is an answer a well-behaved reader may give to hostile bytes: PP_OK, or one of the
 * bad-input kinds (exit 2: invalid, parse, not found, check, deadlock) with a message that is
 * not empty. 0 for anything else (exit 1 kinds such as NOMEM or IO, an empty message). */
int pp_fuzz_status_ok(const pp_fuzz_target *t, pp_status st);

/* One libFuzzer input (the *_fuzz.c entry points): runs the named targets (a comma-separated
 * list: "sched-text,sched-json,sched-csv") on the bytes, through a temporary file of this
 * process for the readers that open a path, and aborts with a one-line message on a status
 * pp_fuzz_status_ok refuses, so that libFuzzer keeps the input. Returns 0. */
int pp_fuzz_one(const char *targets, const unsigned char *data, size_t size);

/* The sample checkpoint of the safetensors targets, written into dir (which exists): one file
 * dir/seed.safetensors, or (sharded) shards and model.safetensors.index.json; 0 on success. */
int pp_fuzz_st_sample(const char *dir, int sharded);

/* The sample Megatron dataset of the megatron targets (uint16 ids below PP_FUZZ_MMIDX_VOCAB,
 * six sequences in five documents), in memory; pp_test_mmidx_free releases it. */
#define PP_FUZZ_MMIDX_VOCAB 50257
pp_test_mmidx pp_fuzz_mmidx_sample(void);

/* Writes len bytes to path (plain write, truncating). 0 on success. */
int pp_fuzz_write_file(const char *path, const void *data, size_t len);

#endif
