/*
 * sa1b_anno.h - parse and validate one SA-1B annotation file (sa_<id>.json).
 *
 * Implements: the JSON stage of the data path.  The document is
 *   {"image": {"image_id": I, "width": W, "height": H, "file_name": "sa_I.jpg"},
 *    "annotations": [{"id": N,
 *                     "segmentation": {"size": [h, w], "counts": "<COCO RLE string>"},
 *                     "bbox": [x, y, w, h], "area": A,
 *                     "predicted_iou": p, "stability_score": s,
 *                     "crop_box": [x, y, w, h], "point_coords": [[x, y], ...]}, ...]}
 * with the quirks of real SA-1B files: segmentation.size is [height, width];
 * the counts string contains JSON escapes ("\\") that jansson decodes, so
 * counts below is the decoded RLE string; bbox and crop_box hold ints or
 * floats; predicted_iou may exceed 1; ids exceed 2^31 (int64); integers may
 * also be written as integral reals (6206.0); point_coords are full-image
 * pixel coordinates.  Unknown keys are ignored, every key above is required
 * (point_coords may be an empty list).
 *
 * The RLE content is NOT decoded or checked here: pass counts to
 * sa1b_rle_from_string (sa1b_rle.h) with (h, w).
 *
 * Errors (err->msg, no file name: the caller prefixes "sa_123.json: "):
 *   JSON that does not parse   SA1B_EFORMAT  "line 3 column 7: <jansson's text>"
 *                                            (err->offset = byte position)
 *   wrong schema               SA1B_EFORMAT  "image.width: not an integer",
 *                                            "mask 7: missing segmentation.counts",
 *                                            "mask 7: bbox: not an array of 4 numbers"
 *   absurd values              SA1B_ERANGE   "image.width: 0 outside 1..32768",
 *                                            "annotations: 200000 masks, more than 100000",
 *                                            "mask 7: area: -5 is negative"
 *   non-finite or huge numbers SA1B_ERANGE   "mask 7: predicted_iou: not finite or beyond 1e9"
 *                                            (every real must satisfy |x| <= 1e9, so it
 *                                            converts safely to float or int32)
 *   area > h*w                 SA1B_ERANGE   "mask 7: area: 3000001 larger than 1500x2000"
 *   mask size != image size    SA1B_EMISMATCH "mask 7: size 1500x2000 != image 2000x1500"
 * Masks are numbered from 0 in file order (index into "annotations"); sizes
 * in messages are printed HxW like the file's [h, w].  err->offset is -1
 * except for parse errors.
 */
#ifndef SA1B_ANNO_H
#define SA1B_ANNO_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits enforced by sa1b_anno_parse. */
#define SA1B_ANNO_MAX_SIDE 32768u      /* width, height in 1..this */
#define SA1B_ANNO_MAX_MASKS 100000u    /* annotations per image */
#define SA1B_ANNO_MAX_ABS 1e9          /* |bbox|, |crop_box|, |point|, |scores| at most */

typedef struct sa1b_mask_anno {
    int64_t id;                        /* annotation id (exceeds 2^31) */
    uint32_t h, w;                     /* segmentation.size = [h, w] (== image) */
    const char *counts;                /* decoded RLE string, NUL-terminated, */
    size_t counts_len;                 /*   owned by the sa1b_anno */
    double bbox[4];                    /* [x, y, w, h] as in the file (SA-1B: w, h = max - min) */
    int64_t area;                      /* foreground pixels, as in the file (>= 0) */
    double predicted_iou, stability_score;
    double crop_box[4];                /* [x, y, w, h] as in the file */
    double point[2];                   /* first of point_coords [x, y], full-image pixels */
    int has_point;                     /* 1 when point_coords was not empty */
    size_t n_points;                   /* length of point_coords */
} sa1b_mask_anno;

typedef struct sa1b_anno {
    int64_t image_id;
    uint32_t width, height;            /* image.width, image.height, 1..32768 */
    char file_name[256];               /* image.file_name (NUL-terminated) */
    size_t n_masks;
    sa1b_mask_anno *masks;             /* [n_masks], file order */
    void *priv_;                       /* implementation storage: do not touch */
} sa1b_anno;

/* An empty annotation: sa1b_anno a = SA1B_ANNO_INIT; */
#define SA1B_ANNO_INIT {0}

/* Parses and validates the len bytes of JSON at json (not necessarily
 * NUL-terminated) into *a, replacing its previous content (its storage is
 * reused: parse many files into one sa1b_anno, then free it once).  On
 * error *a is left empty (n_masks 0) and err says what was wrong (see
 * above).  Pointers into *a stay valid until the next parse or free. */
int sa1b_anno_parse(sa1b_anno *a, const char *json, size_t len, sa1b_error *err);

/* Frees all storage and resets *a to SA1B_ANNO_INIT.  a may be NULL. */
void sa1b_anno_free(sa1b_anno *a);

#ifdef __cplusplus
}
#endif
#endif
