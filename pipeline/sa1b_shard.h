/*
 * sa1b_shard.h - the shard file: a streaming writer and a validating,
 * memory-mapped, zero-copy reader.
 *
 * Implements: the format of man/sa1b-shard.5 (the normative spec; summary
 * here).  One file, little-endian, every structure 8-byte aligned and every
 * payload 64-byte aligned:
 *
 *   [header 256 B][provenance JSON + NUL][payloads: per image the image
 *   (raw RGB S*S*3 or JPEG) then its masks (R*R bits each, LSB-first
 *   row-major, one mask per mask_stride bytes)][names table][index table:
 *   n_images rows of 96 B][mask table: n_masks rows of 80 B][footer 64 B]
 *
 * That is version 1 (packed masks, the default).  Version 2 stores each
 * mask as varint runs (row-major, see sa1b_shard_encode_runs), the masks of
 * an image side by side; everything else is the same.
 *
 * Magic "SA1BSHRD" and the version open both the header (offset 0) and the
 * footer (last 64 bytes).  The header holds counts, the offset of every
 * table and a CRC32C of each table and of itself; the footer repeats the
 * counts and the header's CRC.  Each index row holds the CRC32C of the
 * image payload and of the image's mask block (checked on demand).
 *
 * The writer streams payloads to "<path>.tmp-XXXXXX" (memory: the rows
 * only), writes the tables, the footer and finally the header, fsyncs and
 * renames: a killed run leaves a temp file whose header is all zeros, never
 * a file that opens.  The reader validates the whole structure at open
 * (magic, version, CRCs of header/footer/tables, every offset, length and
 * count against the file size, 64-bit overflow-safe) so that the accessors
 * below never read outside the file; errors name the byte offset and the
 * structure ("index row 12 at offset 4096: payload offset 9999999 beyond
 * file size 8192").
 */
#ifndef SA1B_SHARD_H
#define SA1B_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- format constants (see sa1b-shard(5)) ------------------------------- */
#define SA1B_SHARD_MAGIC "SA1BSHRD" /* 8 bytes, no NUL, at offset 0 and at file end - 64 */
#define SA1B_SHARD_VERSION 1u     /* packed masks (the default) */
#define SA1B_SHARD_VERSION_RLE 2u /* run-length masks */
#define SA1B_SHARD_HEADER_SIZE 256u
#define SA1B_SHARD_FOOTER_SIZE 64u
#define SA1B_SHARD_INDEX_ROW_SIZE 96u
#define SA1B_SHARD_MASK_ROW_SIZE 80u
#define SA1B_SHARD_ALIGN 64u
#define SA1B_SHARD_MAX_IMAGE_SIZE 16384u /* largest S accepted */

enum { SA1B_SHARD_RAW = 0, SA1B_SHARD_JPEG = 1 }; /* image payload format */
/* mask format: bit-packed at a fixed stride (version 1), runs at R x R
 * (version 2), or each annotation's own runs at its image's size (version 2,
 * mask size 0: readers resample them to the R they want) */
enum { SA1B_SHARD_PACKED = 0, SA1B_SHARD_RLE = 1, SA1B_SHARD_RLE_SOURCE = 2 };

/* ---- writer ------------------------------------------------------------- */

typedef struct sa1b_shard_params {
    uint32_t image_size;    /* S: images are S x S x 3 RGB letterboxed, 1..16384 */
    uint32_t mask_size;     /* R: masks are R x R bits, letterboxed the same way, 1..S;
                               0 with SA1B_SHARD_RLE_SOURCE */
    int image_format;       /* SA1B_SHARD_RAW or SA1B_SHARD_JPEG */
    const char *provenance; /* JSON text (tool version, source tar, all options), stored
                               verbatim; NULL stores "{}" */
    int mask_format;        /* SA1B_SHARD_PACKED (0: version 1), SA1B_SHARD_RLE or
                               SA1B_SHARD_RLE_SOURCE (version 2) */
} sa1b_shard_params;

typedef struct sa1b_shard_mask_in {
    int64_t id;             /* SA-1B annotation id */
    float area, bbox[4];    /* shard coordinates: pixels of the S x S image (source values
                               scaled by the letterbox scale); bbox [x, y, w, h] */
    int64_t orig_area;      /* as in the source JSON */
    float orig_bbox[4];     /* as in the source JSON */
    float predicted_iou, stability_score;
    float point[2];         /* point_coords[0] scaled to S x S pixels; NaN when absent */
    const uint8_t *bits;    /* [R*R] bytes, 0 or nonzero, row-major; the writer bit-packs
                               (or codes as runs) */
    size_t data_len;        /* sa1b_shard_writer_add_packed on an RLE writer: bits holds
                               data_len bytes made by sa1b_shard_encode_runs (source
                               size: by sa1b_shard_encode_coco_runs) */
} sa1b_shard_mask_in;

typedef struct sa1b_shard_sample_in {
    int64_t image_id;
    uint32_t orig_w, orig_h; /* source image size in pixels, both >= 1 */
    float scale;             /* S / max(orig_w, orig_h), finite and > 0 */
    const char *file_name;   /* e.g. "sa_1.jpg" (NULL: ""), stored without embedded NULs */
    const uint8_t *image;    /* raw: S*S*3 bytes RGB row-major; jpeg: the encoded bytes */
    size_t image_len;
    uint32_t n_masks;
    const sa1b_shard_mask_in *masks; /* [n_masks] */
} sa1b_shard_sample_in;

typedef struct sa1b_shard_writer sa1b_shard_writer;

/* Creates "<path>.tmp-XXXXXX" in path's directory (mode 0666 minus umask)
 * and writes a zeroed header and the provenance.  Validates p (EINVAL). */
int sa1b_shard_writer_open(sa1b_shard_writer **w, const char *path, const sa1b_shard_params *p,
                           sa1b_error *err);

/* Appends one sample: streams the image payload and the packed masks to
 * the file, keeps only the index and mask rows in memory.  Validates s
 * (EINVAL: raw payload length != S*S*3, empty jpeg, bad scale or size). */
int sa1b_shard_writer_add(sa1b_shard_writer *w, const sa1b_shard_sample_in *s, sa1b_error *err);

/* The same with every mask's bits already in stored form: m->bits points
 * to sa1b_shard_mask_stride(R) bytes made by sa1b_shard_pack_mask (or, on
 * an RLE writer, to m->data_len bytes made by sa1b_shard_encode_runs),
 * which are written as they are.  Lets the threads that make the masks pack them
 * (sa1b-shard's workers) instead of the one thread that writes. */
int sa1b_shard_writer_add_packed(sa1b_shard_writer *w, const sa1b_shard_sample_in *s,
                                 sa1b_error *err);

/* The same with the checksums given: image_crc must be
 * sa1b_crc32c(0, s->image, s->image_len) and masks_crc the CRC32C of the
 * masks' stored bytes in order (the sa1b_shard_mask_stride(R) bytes of
 * each, or on an RLE writer the data_len bytes of each), which is what
 * the sample's index row keeps; both are stored as they are (a wrong one
 * makes the shard fail verification).  Lets the thread that made the
 * payload and the masks checksum them while their bytes are in cache
 * (sa1b_prep_out's image_crc and masks_crc), instead of the writer
 * reading them once more. */
int sa1b_shard_writer_add_packed_crc(sa1b_shard_writer *w, const sa1b_shard_sample_in *s,
                                     uint32_t image_crc, uint32_t masks_crc, sa1b_error *err);

/* Bytes between two stored masks of side R: ceil(R*R / 8) rounded up to 64. */
uint64_t sa1b_shard_mask_stride(uint32_t R);

/* Packs an R x R mask of bytes (0 or nonzero, row-major) into its stored
 * form, out[sa1b_shard_mask_stride(R)]: bit k of the row-major mask in
 * byte k/8 at bit k%8 (LSB first), the padding zero. */
void sa1b_shard_pack_mask(const uint8_t *bytes, uint32_t R, uint8_t *out);

/* Bytes that sa1b_shard_encode_runs may write for side R: R*R + 6 (a run
 * of length v >= 1 takes at most v bytes). */
uint64_t sa1b_shard_runs_bound(uint32_t R);

/* Codes an R x R mask of bytes (0 or nonzero, row-major) as runs
 * (sa1b-shard(5), version 2) into out[sa1b_shard_runs_bound(R)]; returns
 * the bytes written. */
size_t sa1b_shard_encode_runs(const uint8_t *bytes, uint32_t R, uint8_t *out);

/* Codes the n COCO runs cnts of a mask at its source size (column-major,
 * the first run background, as sa1b_rle holds them) in the same varints
 * into out[5 * (n + 1)], empty runs after the first merged away (so that
 * the coding stays canonical); returns the bytes written.  This is how
 * SA1B_SHARD_RLE_SOURCE shards store masks: the annotation's own runs. */
size_t sa1b_shard_encode_coco_runs(const uint32_t *cnts, size_t n, uint8_t *out);

/* Parses len bytes of runs of an R x R mask into runs[] (cap entries; len
 * entries always suffice) and *n_runs, validating everything: varints
 * well-formed, no empty run after the first, no run past R*R, the sum
 * exactly R*R, no bytes left over.  SA1B_EFORMAT with a message saying
 * which ("run 5 of length 70000 overruns the 65536 cells (sum 70120)"). */
int sa1b_shard_parse_runs(const uint8_t *data, size_t len, uint32_t R, uint32_t *runs,
                          size_t cap, size_t *n_runs, sa1b_error *err);

/* Images and bytes written so far (for progress reports). */
uint64_t sa1b_shard_writer_images(const sa1b_shard_writer *w);
uint64_t sa1b_shard_writer_bytes(const sa1b_shard_writer *w);

/* The writer's temporary file, "<path>.tmp-XXXXXX": a program that removes
 * temporaries when it is killed registers it.  The writer holds an fcntl
 * write lock on it while it is open, so a temporary that no process has
 * locked is stale (its writer is gone). */
const char *sa1b_shard_writer_temp_path(const sa1b_shard_writer *w);

/* Replaces the provenance given at open with one known only at the end
 * (sa1b-shard adds the input's size and checksum): finish stores it after
 * the mask table and points the header there; the first provenance's bytes
 * (after the header) become zeros.  0, or SA1B_EINVAL / SA1B_ENOMEM. */
int sa1b_shard_writer_set_provenance(sa1b_shard_writer *w, const char *provenance, sa1b_error *err);

/* Writes names, index and mask tables, the footer, then the header; fsyncs,
 * renames the temp file to path, fsyncs the directory.  Frees w whatever
 * happens (on failure the temp file is removed). */
int sa1b_shard_writer_finish(sa1b_shard_writer *w, sa1b_error *err);

/* Removes the temp file and frees w.  NULL is a no-op. */
void sa1b_shard_writer_abort(sa1b_shard_writer *w);

/* ---- reader ------------------------------------------------------------- */

typedef struct sa1b_shard sa1b_shard; /* an mmap'ed, fully validated shard */

typedef struct sa1b_shard_info {
    uint32_t version;
    uint32_t image_size;       /* S */
    uint32_t mask_size;        /* R */
    int image_format;          /* SA1B_SHARD_RAW or SA1B_SHARD_JPEG */
    uint64_t n_images, n_masks;
    uint64_t file_size;        /* bytes */
    const char *provenance;    /* JSON text, NUL-terminated inside the map */
    size_t provenance_len;     /* bytes without the NUL */
    uint32_t mask_bytes;       /* ceil(R*R / 8): packed bits of one mask (0 for RLE) */
    uint32_t mask_stride;      /* mask_bytes rounded up to 64: distance between masks
                                  (0 for RLE) */
    int mask_format;           /* SA1B_SHARD_PACKED (version 1), SA1B_SHARD_RLE or
                                  SA1B_SHARD_RLE_SOURCE (2; then mask_size is 0) */
} sa1b_shard_info;

/* One image's row: a view into the map (valid until sa1b_shard_close).
 * (The type is named *_view because sa1b_shard_image is the accessor.) */
typedef struct sa1b_shard_image_view {
    uint64_t index;            /* 0-based position in the shard */
    int64_t image_id;
    uint32_t orig_w, orig_h;   /* source image size */
    float scale;               /* S / max(orig_w, orig_h) */
    const char *file_name;     /* NUL-terminated, inside the map */
    size_t file_name_len;
    const uint8_t *payload;    /* image bytes inside the map (64-byte aligned in the file) */
    uint64_t payload_offset, payload_len;
    uint32_t payload_crc;      /* stored CRC32C of the image payload */
    const uint8_t *mask_data;  /* start of this image's masks block */
    uint64_t masks_offset, masks_len; /* packed: masks_len = n_masks * mask_stride */
    uint32_t masks_crc;        /* stored CRC32C of the masks block */
    uint32_t n_masks;
    uint64_t first_mask;       /* index of its first row in the mask table */
} sa1b_shard_image_view;

/* One mask's row: a view into the map. */
typedef struct sa1b_shard_mask_view {
    uint64_t index;            /* row in the mask table (first_mask + j) */
    uint64_t image_index;
    int64_t id;                /* SA-1B annotation id */
    float area, bbox[4];       /* shard coordinates */
    int64_t orig_area;
    float orig_bbox[4];        /* source coordinates */
    float predicted_iou, stability_score;
    float point[2];            /* shard coordinates; NaN when absent */
    const uint8_t *bits;       /* the stored mask inside the map: mask_bytes of packed
                                  bits, or data_len bytes of runs (RLE) */
    uint64_t data_offset;
    uint64_t data_len;         /* stored bytes: mask_bytes, or the runs' length */
} sa1b_shard_mask_view;

/* Maps and validates the file (read-only).  Errors: SA1B_EIO (open, stat,
 * mmap; errno text), SA1B_EFORMAT (not a shard, inconsistent structure),
 * SA1B_ETRUNC (shorter than the header says), SA1B_ECHECKSUM (header,
 * footer or table CRC), SA1B_EUNSUPPORTED (newer version), SA1B_ERANGE
 * (absurd sizes).  The message names offset and structure.  Payload CRCs are
 * not checked here (see sa1b_shard_verify_image).  As with any mmap, a file
 * truncated by someone else while it is open raises SIGBUS on access:
 * shards are written once, under a temporary name, and never modified. */
int sa1b_shard_open(sa1b_shard **s, const char *path, sa1b_error *err);

/* Same validation on len bytes in memory, not copied: data must stay valid
 * and unchanged until sa1b_shard_close. */
int sa1b_shard_open_memory(sa1b_shard **s, const void *data, size_t len, sa1b_error *err);

/* Unmaps and frees.  NULL is a no-op. */
void sa1b_shard_close(sa1b_shard *s);

/* Header values; valid until sa1b_shard_close. */
const sa1b_shard_info *sa1b_shard_get_info(const sa1b_shard *s);

/* File offsets of the index table and of the mask table (for tools that
 * report where things are). */
uint64_t sa1b_shard_index_offset(const sa1b_shard *s);
uint64_t sa1b_shard_mask_table_offset(const sa1b_shard *s);

/* Image i (0-based): metadata and zero-copy payload pointers.  SA1B_ERANGE
 * when i >= n_images. */
int sa1b_shard_image(const sa1b_shard *s, uint64_t i, sa1b_shard_image_view *out, sa1b_error *err);

/* Mask j of image i.  SA1B_ERANGE when out of range. */
int sa1b_shard_mask(const sa1b_shard *s, uint64_t i, uint32_t j, sa1b_shard_mask_view *out,
                    sa1b_error *err);

/* Unpacks m's bits into out[R*R] bytes of 0/1, row-major.  On an RLE
 * shard it decodes the runs (a source-size mask into out[orig_h * orig_w],
 * as sa1b_shard_decode_mask); runs that do not validate give an all-zero
 * mask (sa1b_shard_decode_mask says why). */
void sa1b_shard_unpack_mask(const sa1b_shard *s, const sa1b_shard_mask_view *m, uint8_t *out);

/* The same for every format, with an error for runs that do not validate
 * (SA1B_EFORMAT naming the mask and its offset; out is then all zero).  A
 * SA1B_SHARD_RLE_SOURCE mask comes at its source size: out[orig_h * orig_w]
 * row-major (orig_w, orig_h of its image). */
int sa1b_shard_decode_mask(const sa1b_shard *s, const sa1b_shard_mask_view *m, uint8_t *out,
                           sa1b_error *err);

/* Mask m at R x R as sa1b-shard makes masks: letterboxed (content
 * round(w R / L) x round(h R / L), L = max(w, h), top left, zero around)
 * and, for a source-size mask, resampled straight from its runs with mode
 * 0 (area: a cell is set when at least half of the pixels it covers are)
 * or 1 (nearest: the pixel under the cell centre), SA1B_MASK_AREA and
 * SA1B_MASK_NEAREST of sa1b_prep.h, the very bytes a packed shard made at
 * R with that mode holds.  Other shards give their masks when R is theirs
 * (mode unused), SA1B_EINVAL otherwise.  out[R * R]. */
int sa1b_shard_resample_mask(const sa1b_shard *s, const sa1b_shard_mask_view *m, uint32_t R,
                             int mode, uint8_t *out, sa1b_error *err);

/* First image with this image_id (linear search); SA1B_ERANGE when absent. */
int sa1b_shard_find_image(const sa1b_shard *s, int64_t image_id, uint64_t *index,
                          sa1b_error *err);

/* CRC32C of image i's payload and mask block against the stored values;
 * on an RLE shard also every mask's runs (sa1b_shard_parse_runs).
 * SA1B_ECHECKSUM with err->offset at the payload and a message naming the
 * image ("image 3 payload at offset 8192: CRC32C 0x... != stored 0x..."). */
int sa1b_shard_verify_image(const sa1b_shard *s, uint64_t i, sa1b_error *err);

/* Whole-file layout check (sa1b-verify): the header, provenance, every
 * payload and masks block, the names, index and mask tables and the footer
 * do not overlap, and every byte between them (alignment padding) is zero,
 * so that no bit of the file escapes a check.  SA1B_EFORMAT naming the
 * first offending offset.  Allocates O(n_images). */
int sa1b_shard_verify_layout(const sa1b_shard *s, sa1b_error *err);

/* CRC32C (Castagnoli, reflected, init/xorout ~0 handled inside): start
 * with crc = 0 and chain calls; sa1b_crc32c(0, "123456789", 9) =
 * 0xE3069283.  SSE4.2 when the CPU has it (checked at run time), else
 * slicing-by-8. */
uint32_t sa1b_crc32c(uint32_t crc, const void *data, size_t len);
/* The portable slicing-by-8 path alone (tests and benchmarks compare). */
uint32_t sa1b_crc32c_portable(uint32_t crc, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif
