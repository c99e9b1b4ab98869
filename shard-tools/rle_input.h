/*
 * rle_input.h - sa1b-rle's parsers of untrusted input, apart from the
 * program so that tests/fuzz/fuzz-rle-input.c runs the same code: masks as
 * JSON values ({"size":[h,w],"counts":STR or [runs]}), mask arguments (JSON
 * or HxW:COUNTS), the stream of JSON values that `info` reads (annotation
 * files, JSON lines), binary PGM and PNG.  Nothing here prints or exits:
 * every parser returns 0 or a reason of one line in which the bytes of the
 * input that it quotes have their control bytes escaped (rle_input_escape).
 * Not part of libsa1b.
 */
#ifndef SA1B_RLE_INPUT_H
#define SA1B_RLE_INPUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "pngio.h"
#include "sa1b_rle.h"

/* s[0, n) with each control byte (0x00-0x1f, 0x7f) written as \n, \r, \t
 * or \xHH, everything else as it is: a string of one line, malloc'ed (NULL
 * when memory runs out). */
char *rle_input_escape(const char *s, size_t n);

/* Sets r from a JSON value {"size":[h,w],"counts":STR or [runs]}; 0 or an
 * sa1b code with err filled. */
int rle_input_mask_json(json_t *seg, sa1b_rle *r, sa1b_error *err);

/* A mask argument: a JSON object (a mask, or one holding "segmentation")
 * or HxW:COUNTS.  Returns 0, RLE_ARG_BAD (a malformed mask) or
 * RLE_ARG_USAGE (not a mask argument at all) with the reason in why. */
enum { RLE_ARG_BAD = 1, RLE_ARG_USAGE = 2 };
int rle_input_mask_arg(const char *arg, sa1b_rle *r, char *why, size_t why_len);

/* What info makes of a stream of JSON values: mask() for each mask (seg,
 * the value holding "size" and "counts"; holder, the annotation that may
 * hold an "id"; line, where its "counts" key is when that can be told, else
 * where the value begins), bad() for each value that is no JSON object
 * (why: one line; the stream goes on at the next line). */
typedef struct rle_input_stream_cb {
    void (*mask)(void *ctx, json_t *holder, json_t *seg, size_t line);
    void (*bad)(void *ctx, size_t line, const char *why);
    void *ctx;
} rle_input_stream_cb;

void rle_input_stream(const char *buf, size_t len, const rle_input_stream_cb *cb);

/* A binary PGM (P5, maxval 1..255) in buf: its size and pixels (inside
 * buf); 0, or -1 with *why a constant reason. */
int rle_input_pgm(const uint8_t *buf, size_t len, uint32_t *h, uint32_t *w, const uint8_t **pix,
                  const char **why);

/* A PNG in buf, as 8-bit grey (pngio_read), of at most max_pixels pixels
 * and no more than its len bytes can hold (deflate expands 1032 times at
 * most: a short file that claims a huge image is refused before anything
 * is allocated for it); 0, or -1 with the reason in msg. */
int rle_input_png(const uint8_t *buf, size_t len, uint64_t max_pixels, pngio_image *img, char *msg,
                  size_t msg_len);

#endif
