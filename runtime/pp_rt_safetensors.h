/* pp_rt_safetensors.h — HuggingFace safetensors checkpoints: read (one file, or a sharded
 * checkpoint with its model.safetensors.index.json) and write (one file, or shards and their
 * index as transformers names them). Part of the runtime's public headers; stands alone.
 *
 * The format (huggingface/safetensors, README "Format" and safetensors/src/tensor.rs): 8 bytes
 * N, little-endian u64; N bytes of UTF-8 JSON {"NAME": {"dtype": "BF16", "shape": [4096, 14336],
 * "data_offsets": [BEGIN, END]}, ..., "__metadata__": {"key": "value"}} padded with spaces;
 * then the tensors' raw little-endian bytes, row-major, BEGIN/END relative to the first byte
 * after the header. The reader refuses what the reference implementation refuses: a header
 * longer than 100,000,000 bytes (before allocating it), one that runs past the file, JSON that
 * is not an object, duplicate names, an unknown dtype, offsets that overlap, leave holes or do
 * not end at the file's end, a byte count that is not shape x element size, sizes that
 * overflow; and, where the reference is lenient, the JSON schema's rules (docs/
 * safetensors.schema.json: no keys besides dtype, shape, data_offsets; string metadata).
 *
 * Lifecycle: pp_st_open → pp_st_find / pp_st_expect / pp_st_at → pp_st_load_f32 … →
 * pp_st_destroy. Errors are pp_status with a message naming the file and the tensor:
 *
 *     ckpt/model-00002-of-00004.safetensors: tensor model.layers.3.mlp.up_proj.weight: shape
 *     [14336, 4096] expected [11008, 4096]
 *
 * The files are read with positioned reads (never mapped): a file that shrinks while it is read
 * gives PP_ERR_IO, not a signal. Only regular files are opened (a FIFO or device is refused).
 */
#ifndef PP_RT_SAFETENSORS_H
#define PP_RT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "pp_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The element types, named as in the header ("F32", "BF16", ...). The order is the reference
 * writer's alignment order (safetensors' Dtype enum), which the writer sorts by. */
typedef enum {
    PP_ST_BOOL,
    PP_ST_U8,
    PP_ST_I8,
    PP_ST_F8_E5M2,
    PP_ST_F8_E4M3,
    PP_ST_I16,
    PP_ST_U16,
    PP_ST_F16,
    PP_ST_BF16,
    PP_ST_I32,
    PP_ST_U32,
    PP_ST_F32,
    PP_ST_F64,
    PP_ST_I64,
    PP_ST_U64,
    PP_ST_N_DTYPES
} pp_st_dtype;

/* "F32", "BF16", ...; "?" outside the enum. */
const char *pp_st_dtype_name(pp_st_dtype d);
/* Bytes per element; 0 outside the enum. */
size_t pp_st_dtype_size(pp_st_dtype d);
/* The dtype named s into *out: 1, or 0 for a name safetensors does not define here. */
int pp_st_dtype_parse(const char *s, pp_st_dtype *out);
/* 1 when tensors of d can be loaded as fp32 (F32, BF16, F16) / written from fp32 (the same). */
int pp_st_dtype_is_float(pp_st_dtype d);

/* fp32 <-> bf16 / f16 bit patterns. To fp32: exact. From fp32: round to nearest, ties to even
 * (what PyTorch's and NumPy's conversions do), overflow to infinity; a NaN stays a NaN (bf16:
 * 0x7FC0, as PyTorch's c10::BFloat16 round_to_nearest_even; f16: the payload's top 10 bits,
 * at least 1, as NumPy's npy_floatbits_to_halfbits). */
float pp_st_bf16_to_f32(uint16_t h);
uint16_t pp_st_f32_to_bf16(float f);
float pp_st_f16_to_f32(uint16_t h);
uint16_t pp_st_f32_to_f16(float f);

#define PP_ST_MAX_DIMS 8            /* dimensions of one tensor this reader takes */
#define PP_ST_MAX_HEADER 100000000u /* bytes: the reference implementation's MAX_HEADER_SIZE */

/* One tensor of an open checkpoint. Every pointer is owned by the pp_st and valid until
 * pp_st_destroy. */
typedef struct {
    const char *name;
    pp_st_dtype dtype;
    int ndim;                      /* 0: a scalar */
    int64_t shape[PP_ST_MAX_DIMS]; /* ndim entries, each >= 0 */
    uint64_t numel;                /* product of the shape (1 for a scalar) */
    uint64_t nbytes;               /* numel * dtype size */
    const char *file;              /* the file that holds it, as opened (dir/shard name) */
} pp_st_tensor;

typedef struct pp_st pp_st;

/* Opens a checkpoint into *out: path is a .safetensors file; an index JSON (a name ending in
 * ".json", e.g. model.safetensors.index.json, whose "weight_map" names each tensor's shard,
 * read relative to the index's folder); or a folder holding model.safetensors or else
 * model.safetensors.index.json (what transformers' save_pretrained writes, looked for in the
 * order of its from_pretrained). A sharded checkpoint
 * reads as one: every tensor of the weight map must be in the shard it names and every
 * tensor of a shard in the map. Every header is parsed and checked now; no tensor data is
 * read. Returns PP_OK; PP_ERR_NOTFOUND (no such file); PP_ERR_PARSE (malformed, the message
 * names the file, tensor and field); PP_ERR_INVALID (not a regular file, too large a header);
 * PP_ERR_IO; PP_ERR_NOMEM. On error *out is NULL. Free with pp_st_destroy. */
pp_status pp_st_open(const char *path, pp_st **out);
/* Closes the files and frees everything. NULL is a no-op. */
void pp_st_destroy(pp_st *st);

/* Number of tensors (all shards together). */
size_t pp_st_count(const pp_st *st);
/* Tensor i in 0..count-1, in name order (strcmp); NULL past the end. */
const pp_st_tensor *pp_st_at(const pp_st *st, size_t i);
/* The tensor of that name, or NULL. */
const pp_st_tensor *pp_st_find(const pp_st *st, const char *name);
/* The value of key in the header's "__metadata__" (a sharded checkpoint: its first shard's,
 * in name order), or NULL. */
const char *pp_st_metadata(const pp_st *st, const char *key);

/* The tensor `name` with exactly this shape (ndim entries) into *out (may be NULL): the check a
 * loader makes before it copies. PP_ERR_NOTFOUND naming the checkpoint and the tensor when it
 * is absent; PP_ERR_INVALID when the shape differs, "FILE: tensor NAME: shape [a, b] expected
 * [c, d]". */
pp_status pp_st_expect(const pp_st *st, const char *name, int ndim, const int64_t *shape,
                       const pp_st_tensor **out);
/* Elements [first, first + count) of t (row-major), converted to fp32 into dst (count
 * floats, the caller's): a row range of a matrix is one call, a column slice one per row.
 * PP_ERR_INVALID for a dtype that is not F32/BF16/F16 or a range past numel (messages name the
 * tensor); PP_ERR_IO when the file cannot be read. */
pp_status pp_st_load_f32_range(const pp_st *st, const pp_st_tensor *t, uint64_t first,
                               uint64_t count, float *dst);
/* All of t as fp32 into dst (t->numel floats). */
pp_status pp_st_load_f32(const pp_st *st, const pp_st_tensor *t, float *dst);
/* pp_st_expect, then pp_st_load_f32: the one call a weight loader makes per parameter. */
pp_status pp_st_load_named_f32(const pp_st *st, const char *name, int ndim, const int64_t *shape,
                               float *dst);
/* t's bytes as stored (t->nbytes, little-endian) into dst. */
pp_status pp_st_read_raw(const pp_st *st, const pp_st_tensor *t, void *dst);

/* ---- writing ---- */

/* One tensor to write: fp32 values stored as dtype (F32, BF16 or F16; rounded to nearest
 * even). name, shape and data are the caller's and only read. */
typedef struct {
    const char *name;     /* UTF-8, unique within one write */
    pp_st_dtype dtype;    /* as stored */
    int ndim;             /* 0..PP_ST_MAX_DIMS */
    const int64_t *shape; /* ndim entries >= 0 */
    const float *data;    /* product(shape) values, row-major */
} pp_st_out;

/* A "__metadata__" entry (transformers expects {"format": "pt"}). */
typedef struct {
    const char *key, *value;
} pp_st_meta;

/* Writes the n tensors into one safetensors file at path, atomically (pp_afile: a temporary
 * beside it, then a rename). The layout is the reference writer's: tensors sorted by dtype
 * alignment (largest first) then name, the header compact JSON as serde_json prints it padded
 * with spaces to a multiple of 8 bytes; with at most one metadata entry the file is byte for
 * byte what safetensors' own save_file writes for the same tensors. PP_ERR_INVALID for a
 * duplicate name, a dtype that is not F32/BF16/F16, a bad shape or a header past the limit. */
pp_status pp_st_write(const char *path, const pp_st_out *t, int n, const pp_st_meta *meta,
                      int n_meta);

/* Writes the n tensors into folder dir (which must exist) as transformers' save_pretrained
 * does: in the given order, a new shard whenever the next tensor would take the current one
 * past max_shard_bytes (a larger tensor alone in a shard of its own), named
 * model-00001-of-00004.safetensors ...; and model.safetensors.index.json {"metadata":
 * {"total_size": bytes of all tensors}, "weight_map": {name: shard}} (indent 2, sorted keys),
 * written last. One shard: model.safetensors and no index. Shards of an earlier save that this
 * one does not write (model-*-of-*.safetensors, a stale index) are removed afterwards. Each
 * file is written atomically. *n_shards (may be NULL) gets the number of files. */
pp_status pp_st_write_sharded(const char *dir, const pp_st_out *t, int n, const pp_st_meta *meta,
                              int n_meta, uint64_t max_shard_bytes, int *n_shards);

#ifdef __cplusplus
}
#endif
#endif
