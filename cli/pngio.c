/*
 * pngio.c - 8-bit grey/RGB PNG in and out through libpng (see pngio.h).
 * libpng reports errors by longjmp; the error callback copies its message
 * into the caller's buffer so that nothing is printed.
 */
#include "pngio.h"

#include <errno.h>
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

typedef struct pngio_err {
    char *buf;
    size_t len;
    int sys;      /* errno when libpng gave up (a failed write's reason) */
} pngio_err;

static void set_err(char *buf, size_t len, const char *msg)
{
    if (buf && len) snprintf(buf, len, "%s", msg);
}

static void on_error(png_structp png, png_const_charp msg)
{
    pngio_err *e = png_get_error_ptr(png);
    if (e) {
        e->sys = errno;
        set_err(e->buf, e->len, msg);
    }
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

int pngio_write(FILE *f, const uint8_t *pix, uint32_t w, uint32_t h, int channels,
                char *errbuf, size_t errlen)
{
    if (!f || !pix || (channels != 1 && channels != 3) || w == 0 || h == 0 ||
        w > 0x7fffffffu || h > 0x7fffffffu) {
        set_err(errbuf, errlen, "invalid image parameters");
        return -1;
    }
    pngio_err e = {errbuf, errlen, 0};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &e, on_error, on_warning);
    if (!png) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    png_infop info = png_create_info_struct(png);
    if (!info || setjmp(png_jmpbuf(png))) {
        if (!info) set_err(errbuf, errlen, "out of memory");
        /* a write that failed: the system's reason, not libpng's "Write Error" */
        else if (ferror(f) && e.sys) set_err(errbuf, errlen, strerror(e.sys));
        png_destroy_write_struct(&png, &info);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, w, h, 8, channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    size_t stride = (size_t)w * (size_t)channels;
    for (uint32_t y = 0; y < h; y++) png_write_row(png, (png_const_bytep)(pix + (size_t)y * stride));
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    errno = 0;
    if (fflush(f) != 0 || ferror(f)) {
        set_err(errbuf, errlen, errno ? strerror(errno) : "write error");
        return -1;
    }
    return 0;
}

int pngio_read(FILE *f, pngio_image *img, int channels, uint64_t max_pixels, char *errbuf,
               size_t errlen)
{
    if (!f || !img || (channels != 1 && channels != 3)) {
        set_err(errbuf, errlen, "invalid arguments");
        return -1;
    }
    memset(img, 0, sizeof *img);
    unsigned char sig[8];
    if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8) != 0) {
        set_err(errbuf, errlen, "not a PNG file");
        return -1;
    }
    pngio_err e = {errbuf, errlen, 0};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &e, on_error, on_warning);
    if (!png) {
        set_err(errbuf, errlen, "out of memory");
        return -1;
    }
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile pix = NULL;
    png_bytep *volatile rows = NULL;
    if (!info || setjmp(png_jmpbuf(png))) {
        if (!info) set_err(errbuf, errlen, "out of memory");
        png_destroy_read_struct(&png, &info, NULL);
        free(pix);
        free(rows);
        return -1;
    }
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    int ct = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (max_pixels && (uint64_t)w * h > max_pixels) png_error(png, "image too large");
    if ((uint64_t)w * h * (uint64_t)channels > SIZE_MAX / 2) png_error(png, "image too large");
    if (depth == 16) png_set_strip_16(png);
    if (ct == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if ((ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA) && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if (ct & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png), png_set_strip_alpha(png);
    int is_color = ct == PNG_COLOR_TYPE_PALETTE || (ct & PNG_COLOR_MASK_COLOR);
    if (channels == 1 && is_color) png_set_rgb_to_gray_fixed(png, 1, -1, -1);
    if (channels == 3 && !is_color) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * (size_t)channels)
        png_error(png, "unexpected row layout");
    pix = malloc((size_t)w * h * (size_t)channels);
    rows = malloc((size_t)h * sizeof *rows);
    if (!pix || !rows) png_error(png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++) rows[y] = pix + (size_t)y * w * (size_t)channels;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    free(rows);
    img->w = w;
    img->h = h;
    img->channels = channels;
    img->pix = pix;
    return 0;
}

void pngio_free(pngio_image *img)
{
    if (!img) return;
    free(img->pix);
    memset(img, 0, sizeof *img);
}
