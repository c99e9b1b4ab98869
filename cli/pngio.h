/*
 * pngio.h - the programs' small PNG helper (libpng underneath): write and
 * read 8-bit greyscale or RGB images to and from a stdio FILE.  Not part of
 * libsa1b.  Errors are returned, never printed: every function returns 0 on
 * success or -1 with a one-line reason in errbuf (errlen bytes, may be 0).
 *
 * Pixels are row-major, interleaved: pix[(y * w + x) * channels + c],
 * channels 1 (grey) or 3 (RGB).
 */
#ifndef SA1B_PNGIO_H
#define SA1B_PNGIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Writes a w x h PNG with 1 or 3 channels of 8 bits to f (not closed).
 * Both sizes must be in 1..2^31-1. */
int pngio_write(FILE *f, const uint8_t *pix, uint32_t w, uint32_t h, int channels,
                char *errbuf, size_t errlen);

typedef struct pngio_image {
    uint32_t w, h;   /* columns, rows */
    int channels;    /* 1 or 3, as requested */
    uint8_t *pix;    /* [h * w * channels], malloc'ed; pngio_free releases it */
} pngio_image;

/* Reads a PNG of any colour type and bit depth from f and converts it to
 * `channels` (1: grey, RGB is converted with libpng's standard weights;
 * 3: RGB, grey is replicated); alpha is dropped, 16-bit samples keep their
 * high byte.  Refuses images of more than max_pixels pixels (0: no limit
 * beyond size_t). */
int pngio_read(FILE *f, pngio_image *img, int channels, uint64_t max_pixels, char *errbuf,
               size_t errlen);

/* Frees img->pix and zeroes *img; img may be NULL. */
void pngio_free(pngio_image *img);

#endif
