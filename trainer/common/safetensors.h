/*
 * safetensors.h - reading and writing the safetensors format (the
 * checkpoint, training-state and debug-dump files of sa1b-train).
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]},
 *  ..., "__metadata__": {"key": "value", ...}}, then the data block; offsets
 * are relative to the data block.  The writer pads the header with spaces to
 * a multiple of 8 and writes tensors in the order added, each 8-byte aligned,
 * into a temporary file renamed into place (never a half-written file); an
 * existing path that is not a regular file (a FIFO, a character device) is
 * opened and written in place instead, never replaced.
 *
 * The reader treats its input as untrusted: every length, offset, shape and
 * dtype is validated (no overflow, no out-of-bounds, no overlapping tensors,
 * sizes that match the shape) before a tensor is handed out.
 */
#ifndef SA1B_TRAINER_SAFETENSORS_H
#define SA1B_TRAINER_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

typedef enum tr_st_dtype { TR_ST_F32, TR_ST_I32, TR_ST_U8, TR_ST_F16, TR_ST_BF16, TR_ST_I64, TR_ST_F64,
                           TR_ST_U64, TR_ST_NDTYPE } tr_st_dtype;

#define TR_ST_MAX_DIMS 8

/* ---- writer ---- */
typedef struct tr_st_writer tr_st_writer;

tr_st_writer *tr_st_writer_new(void);
/* Adds a tensor; data must stay valid until tr_st_writer_write.  Names are
 * limited to printable ASCII without '"' or '\\' (<= 255 bytes).  0 or -1. */
int tr_st_writer_add(tr_st_writer *w, const char *name, tr_st_dtype dtype, int ndim, const int64_t *shape,
                     const void *data);
/* Adds a __metadata__ entry (same character rules). 0 or -1. */
int tr_st_writer_meta(tr_st_writer *w, const char *key, const char *value);
/* Writes path atomically: a new temporary path.tmp.PID.N (O_EXCL: no file
 * that exists is touched), fsync, rename; an existing path that is not a
 * regular file is written in place.  0 or -1 with err (write errors too). */
int tr_st_writer_write(tr_st_writer *w, const char *path, char *err, size_t err_len);
void tr_st_writer_free(tr_st_writer *w);

/* ---- reader ---- */
typedef struct tr_st_tensor {
    char *name;
    tr_st_dtype dtype;
    int ndim;
    int64_t shape[TR_ST_MAX_DIMS];
    uint64_t count;          /* elements */
    const uint8_t *data;     /* into the file buffer; not aligned in general */
    uint64_t offset;         /* of data in the file's data block */
    uint64_t n_bytes;
} tr_st_tensor;

typedef struct tr_st_file {
    uint8_t *owned;          /* buffer read by tr_st_load, freed by tr_st_close */
    tr_st_tensor *t;
    int n;
    char **meta_key, **meta_val;
    int n_meta;
} tr_st_file;

/* Parses buf[size] (not copied: it must outlive f).  0, or -1 with err
 * saying what was wrong and where. */
int tr_st_parse(tr_st_file *f, const uint8_t *buf, size_t size, char *err, size_t err_len);
/* Reads a whole file and parses it.  0 or -1 with err. */
int tr_st_load(tr_st_file *f, const char *path, char *err, size_t err_len);
const tr_st_tensor *tr_st_find(const tr_st_file *f, const char *name);
const char *tr_st_meta(const tr_st_file *f, const char *key);
/* The __metadata__ value of key in the file at path, read from its header
 * alone (the data block is not read) by tr_st_parse's reader, which refuses
 * the same headers: 1 and val, or 0 when path is not a readable regular
 * safetensors file (one tr_st_parse would refuse for its header) or has no
 * such key. */
int tr_st_peek_meta(const char *path, const char *key, char *val, size_t val_len);
/* Frees what the file holds; f may be zeroed or already closed. */
void tr_st_close(tr_st_file *f);

/* "F32" ... ; element size in bytes. */
const char *tr_st_dtype_name(tr_st_dtype d);
size_t tr_st_dtype_size(tr_st_dtype d);

#endif
