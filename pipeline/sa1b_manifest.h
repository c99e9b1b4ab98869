/*
 * sa1b_manifest.h - a manifest: the list of a data set's shard files with
 * each file's size, CRC32C and image and mask counts (a JSON document that
 * `sa1b-inspect --manifest` writes), read instead of a glob by the loader
 * and checked against the files by `sa1b-verify --manifest`.
 *
 * Implements: the manifest of man/sa1b-shard.5 (subsection "Manifest"):
 *
 *   {"sa1b_manifest": 1, "images": N, "masks": M, "bytes": B,
 *    "shards": [{"file": "out/sa_000000.shard", "bytes": 123456,
 *                "crc32c": "89abcdef", "images": 8, "masks": 40, ...}, ...]}
 *
 * Keys other than these are allowed and ignored (the writer adds the
 * shard's sizes, format and provenance).  A relative "file" is relative to
 * the folder of the manifest.  The reader treats the document as hostile:
 * any wrong type, missing key, value out of range, empty or duplicate file,
 * a file name with a NUL, totals that disagree with the rows, or more than
 * SA1B_MANIFEST_MAX_SHARDS rows is refused with one message naming the row
 * and the key.
 */
#ifndef SA1B_MANIFEST_H
#define SA1B_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SA1B_MANIFEST_VERSION 1
#define SA1B_MANIFEST_MAX_SHARDS 10000000u
#define SA1B_MANIFEST_MAX_BYTES (1u << 30) /* largest manifest file read */

typedef struct sa1b_manifest_shard {
    const char *file;    /* as written in the manifest */
    const char *path;    /* file, relative ones joined to the manifest's folder */
    uint64_t bytes;      /* file size */
    uint32_t crc32c;     /* of the whole file */
    uint64_t images, masks;
} sa1b_manifest_shard;

typedef struct sa1b_manifest {
    sa1b_manifest_shard *shards; /* [n_shards], in the manifest's order */
    size_t n_shards;
    uint64_t images, masks, bytes; /* totals */
} sa1b_manifest;

/* Reads and validates the manifest file at path; *out is freed with
 * sa1b_manifest_free.  SA1B_EIO when it cannot be read, SA1B_EFORMAT or
 * SA1B_ERANGE when it is not a valid manifest; messages name the row
 * ("shards[3]: \"crc32c\" is not 8 hex digits"), not the file. */
int sa1b_manifest_read(sa1b_manifest **out, const char *path, sa1b_error *err);

/* The same from memory: relative files are joined to dir ("" or NULL:
 * kept as they are).  For the fuzz target. */
int sa1b_manifest_parse(sa1b_manifest **out, const char *text, size_t len, const char *dir,
                        sa1b_error *err);

void sa1b_manifest_free(sa1b_manifest *m); /* NULL: no-op */

/* 1 when a data argument names a manifest rather than a glob: it ends in
 * ".json". */
int sa1b_manifest_is_name(const char *arg);

/* Size and CRC32C (sa1b_crc32c) of a whole file, read in chunks. */
int sa1b_file_crc32c(const char *path, uint64_t *bytes, uint32_t *crc, sa1b_error *err);

#ifdef __cplusplus
}
#endif
#endif
