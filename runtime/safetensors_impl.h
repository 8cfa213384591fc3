/* safetensors_impl.h — the reader's private state, shared by safetensors_read.c (one file's
 * header and the tensor data) and safetensors_open.c (single file, folder or sharded index).
 */
#ifndef PP_SAFETENSORS_IMPL_H
#define PP_SAFETENSORS_IMPL_H

#include "pp_rt_safetensors.h"

typedef struct {
    char *path;          /* as opened: the folder joined with the shard's name */
    int fd;              /* -1 once closed */
    uint64_t size;       /* bytes of the file */
    uint64_t data_start; /* 8 + header length: where BEGIN offsets count from */
    char **meta;         /* __metadata__: key, value, key, value, ... */
    size_t n_meta;       /* pairs */
} st_file;

typedef struct {
    pp_st_tensor t; /* first, so a pp_st_tensor * the caller holds leads back to its entry */
    uint64_t begin; /* of its bytes, from the file's data_start */
    int file;       /* index into files */
} st_entry;

struct pp_st {
    char *source; /* the path given to pp_st_open, for messages about the whole checkpoint */
    st_file *files;
    int n_files;
    st_entry *e; /* sorted by name once opened (st_finish) */
    size_t n, cap;
};

/* Opens path, checks and parses its header and appends the file and its tensors to st. */
pp_status st_add_file(pp_st *st, const char *path);
/* Sorts the tensors by name and refuses a name held twice. */
pp_status st_finish(pp_st *st);
/* The entry named name (st finished), or NULL. */
st_entry *st_lookup(const pp_st *st, const char *name);
/* s for a message: control characters as \xNN, cut to about n-4 characters with "...". */
const char *st_show(const char *s, char *buf, size_t n);

#endif
