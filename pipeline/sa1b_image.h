/*
 * sa1b_image.h - JPEG decode/encode (TurboJPEG), area-filter resize and the
 * SAM letterbox.
 *
 * Implements: the image stage of the data path.  An SA-1B JPEG (about
 * 2250x1500) becomes an S x S x 3 RGB letterbox, as SAM's preprocessing
 * does: the longest side is scaled to S, the image sits in the top-left
 * corner and the bottom/right padding is zero.  The decode uses TurboJPEG's
 * DCT scaling to the smallest of the scales 1/8, 1/4, 1/2 and 1/1 whose
 * output is not smaller than the target on either axis (the scales its SIMD
 * code decodes; the others, 3/8 to 7/8, are slower than a whole decode), so
 * that most of the downscaling costs nothing, and an exact area (box)
 * filter does the rest.  Where a resize follows, the letterbox decodes
 * through libjpeg with tjDecompress2's settings (the same pixels) into a
 * band of rows that the resize takes as they come, so that the decoded
 * image never goes out to memory and back whole; except where that decode
 * would upsample chroma (a whole decode of 4:2:0, as of a 2000x1500
 * photograph at S = 1024): there it decodes the YCbCr planes as they are
 * stored, resizes each over the image's extent and converts the result to
 * RGB (the planar way, see sa1b_jpeg_letterbox), a sixth less work.
 *
 * Untrusted input: corrupt or truncated JPEGs are clean errors (TurboJPEG
 * warnings such as "Premature end of JPEG file" count as errors), images
 * wider or taller than SA1B_IMAGE_MAX_SIDE or with more than
 * SA1B_IMAGE_MAX_PIXELS pixels are rejected from the header, before any
 * allocation.  Errors: SA1B_EFORMAT (not a JPEG, corrupt data, unsupported
 * colour space such as CMYK: "jpeg: <TurboJPEG's text>"), SA1B_ETRUNC (data
 * ends early: "jpeg: truncated: Premature end of JPEG file"), SA1B_ERANGE
 * ("jpeg: 40000x30000 too large"), SA1B_EMISMATCH (sa1b_jpeg_decode with a
 * size that is not the image's), SA1B_EINVAL, SA1B_ENOMEM (ours, or an
 * allocation inside libjpeg: "jpeg: out of memory: Insufficient memory
 * (case 4)" is never the data's fault).
 *
 * A sa1b_imgctx holds the TurboJPEG decompressor (and libjpeg's
 * decompressor for banded and region decodes and compressor for encodes) and scratch
 * buffers; it is not
 * thread-safe: use one per thread.  The free functions (resize, geometry)
 * are thread-safe.  Pixels are 8-bit, row-major, channels interleaved (RGB).
 */
#ifndef SA1B_IMAGE_H
#define SA1B_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SA1B_IMAGE_MAX_SIDE 32768u
#define SA1B_IMAGE_MAX_PIXELS ((uint64_t)1 << 28)

typedef struct sa1b_imgctx sa1b_imgctx;

/* Geometry of one letterbox. */
typedef struct sa1b_letterbox {
    uint32_t orig_w, orig_h;  /* the JPEG's size */
    uint32_t new_w, new_h;    /* the resized image inside the S x S canvas */
    uint32_t S;               /* canvas side */
    double scale;             /* S / max(orig_w, orig_h): target = original * scale */
} sa1b_letterbox;

/* Creates a context (TurboJPEG decompressor and compressor handles, scratch
 * space grown on demand).  On error *c is NULL (SA1B_ENOMEM, SA1B_EINVAL). */
int sa1b_imgctx_new(sa1b_imgctx **c, sa1b_error *err);

/* Frees the context.  c may be NULL. */
void sa1b_imgctx_free(sa1b_imgctx *c);

/* Reads the JPEG header only: *w x *h pixels.  Rejects absurd sizes. */
int sa1b_jpeg_size(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t *w, uint32_t *h,
                   sa1b_error *err);

/* Fills *lb for a w x h image in an S x S letterbox, without any decoding:
 * scale = S / max(w, h); new_w = round(w * scale), new_h = round(h * scale)
 * computed exactly in integers (halves round up), each at least 1; the
 * longest side becomes exactly S.  Use it to map annotation coordinates:
 * x' = x * scale.  SA1B_EINVAL when w, h or S is 0 or S > SA1B_IMAGE_MAX_SIDE. */
int sa1b_letterbox_geometry(uint32_t w, uint32_t h, uint32_t S, sa1b_letterbox *lb,
                            sa1b_error *err);

/* Decodes the JPEG to an S x S letterbox: DCT-scaled decode (the smallest
 * of 1/8, 1/4, 1/2 with TJSCALED output >= (new_w, new_h) on both axes, else
 * 1/1), area-filter resize to new_w x new_h
 * (skipped when the scaled decode already has that size), placed top-left
 * in out, which receives S*S*3 bytes, everything right of new_w and below
 * new_h zero.  *lb (may be NULL) receives the geometry.  S in 1..32768.
 * The resized pixels are those of sa1b_jpeg_decode_scaled then
 * sa1b_resize_area, except the planar way: where the decode at that scale
 * is YCbCr in 3 components whose luma plane has the decode's size and
 * whose chroma planes are each an exact integer fraction of it, one
 * smaller (4:2:0 or 4:2:2 at 1/1 with an even width, 4:4:0 with an even
 * height; libjpeg decodes chroma at full size at 1/2 and below for 4:2:0),
 * each plane, as libjpeg decodes it (raw, ISLOW), is resized to new_w x
 * new_h (luma by sa1b_resize_area; chroma reconstructed over the image by
 * linear interpolation between its samples' centres, libjpeg's "fancy"
 * triangle in exact arithmetic, then area-filtered the same way) and the
 * three are converted to RGB with libjpeg's integers
 * (R = Y + floor((91881 Cr' + 2^15) / 2^16),
 * G = Y + floor((-22554 Cb' - 46802 Cr' + 2^15) / 2^16),
 * B = Y + floor((116130 Cb' + 2^15) / 2^16), Cb' = Cb - 128,
 * Cr' = Cr - 128, clamped to 0..255).  The planes are rounded to 8 bits
 * before that conversion, which adds a little rounding noise: against the
 * picture resized, 0.0-0.55 dB less PSNR than the RGB way on ten
 * photographs (41-56 dB), 1.1 dB on a smooth colour field, as close on
 * sharp colour edges (tests/test-image.c). */
int sa1b_jpeg_letterbox(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t S,
                        uint8_t *out /* [S][S][3] */, sa1b_letterbox *lb, sa1b_error *err);

/* The decode step of sa1b_jpeg_letterbox alone (also the benchmark floor):
 * decodes with the smallest DCT scale of 1/8, 1/4, 1/2 whose output is at
 * least min_w x min_h (1/1 when none is), into the context's scratch buffer.
 * *rgb points to (*out_w) x (*out_h) x 3 bytes owned by the context, valid
 * until the next call on c.  min_w = min_h = 0 picks 1/8. */
int sa1b_jpeg_decode_scaled(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint32_t min_w,
                            uint32_t min_h, const uint8_t **rgb, uint32_t *out_w,
                            uint32_t *out_h, sa1b_error *err);

/* Decodes the JPEG at full size into rgb, which receives w*h*3 bytes; w, h
 * must be the JPEG's size (SA1B_EMISMATCH otherwise): for loaders of shards
 * whose images were stored as JPEG. */
int sa1b_jpeg_decode(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint8_t *rgb, uint32_t w,
                     uint32_t h, sa1b_error *err);

/* Decodes the top-left w x h region of the jw x jh JPEG (jw, jh must be its
 * size: SA1B_EMISMATCH otherwise) into rgb, rows stride >= jw*3 bytes apart,
 * for loaders that letterbox: the rows from h on are not decoded at all and
 * the columns beyond w only as far as the upsampling of the region needs
 * (libjpeg's scanline cropping, a margin of two iMCUs), so a canvas whose
 * padding the caller clears anyway costs only its content.  The region's
 * pixels equal those of sa1b_jpeg_decode; rows [0, h) of rgb may receive
 * bytes beyond w*3 (up to jw*3, unspecified values), rows from h on are not
 * touched.  Progressive and other multi-scan JPEGs are decoded whole into
 * the context's scratch and the region copied.  Errors as sa1b_jpeg_decode;
 * SA1B_EINVAL for an empty region, one larger than the image, or a short
 * stride. */
int sa1b_jpeg_decode_region(sa1b_imgctx *c, const uint8_t *jpg, size_t len, uint8_t *rgb,
                            size_t stride, uint32_t jw, uint32_t jh, uint32_t w, uint32_t h,
                            sa1b_error *err);

/* The Huffman tables of sa1b_jpeg_encode.  Both code the same quantised
 * coefficients, so a decoder gets the same pixels from either. */
enum {
    SA1B_JPEG_OPTIMIZED = 0, /* tables computed for the image in a second pass over its
                                coefficients: 1 to 15% fewer bytes for photographs at
                                q90, in about twice the encode's time */
    SA1B_JPEG_STANDARD = 1   /* the JPEG standard's example tables: the bytes of
                                TurboJPEG's tjCompress2, as sa1b wrote before */
};

/* Encodes w x h RGB (w*h*3 bytes) as a baseline (single-scan) JPEG, chroma
 * subsampling 4:2:0, quality 1..100 with libjpeg's tables for it, the DCT
 * TurboJPEG's tjCompress2 uses (the fast integer one below quality 96, the
 * accurate one from 96), huffman SA1B_JPEG_OPTIMIZED or
 * SA1B_JPEG_STANDARD.  Reads no environment variable; the same input gives
 * the same bytes.  *out is malloc'ed (caller frees) and *len set.
 * SA1B_EINVAL for a bad quality, huffman or size, SA1B_ENOMEM. */
int sa1b_jpeg_encode(sa1b_imgctx *c, const uint8_t *rgb, uint32_t w, uint32_t h, int quality,
                     int huffman, uint8_t **out, size_t *len, sa1b_error *err);

/* Area (box) filter resize of sw x sh to dw x dh, channels 1..4 interleaved,
 * rows packed (stride = width * channels).  Each destination pixel is the
 * mean of the source area it covers, with exact fractional coverage weights
 * (destination pixel i spans source [i*sw/dw, (i+1)*sw/dw) per axis; this
 * also defines upscaling), rounded to nearest.  Separable, integer
 * arithmetic only (so results are bit-identical on every machine): weights
 * are 16-bit fixed point summing exactly to 1 and the intermediate keeps 8
 * fractional bits, so a result may differ from the exact rounding only where
 * the exact mean lies within about 1/128 of a .5 boundary (exact ties may
 * round either way).  src and dst must not
 * overlap.  SA1B_EINVAL on zero sizes, bad channels, or sizes over
 * SA1B_IMAGE_MAX_SIDE; SA1B_ENOMEM. */
int sa1b_resize_area(const uint8_t *src, uint32_t sw, uint32_t sh, uint8_t *dst, uint32_t dw,
                     uint32_t dh, int channels, sa1b_error *err);

#ifdef __cplusplus
}
#endif
#endif
