/*
 * fuzz-jpeg.c - libFuzzer target: any bytes as a JPEG through
 * sa1b_jpeg_letterbox at S = 64 (header checks, DCT-scaled decode, area
 * resize, padding), plus sa1b_jpeg_size and, for images up to 2^20
 * pixels, sa1b_jpeg_decode_region of the top-left (w/2+1) x (h/2+1).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sa1b_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { S = 64 };
    static uint8_t out[S * S * 3];
    sa1b_imgctx *c = NULL;
    sa1b_error err;
    if (sa1b_imgctx_new(&c, &err) != SA1B_OK) return 0;
    uint32_t w, h;
    if (sa1b_jpeg_size(c, data, size, &w, &h, &err) == SA1B_OK) {
        sa1b_letterbox lb;
        if (sa1b_jpeg_letterbox(c, data, size, S, out, &lb, &err) == SA1B_OK) {
            volatile unsigned sink = out[0] + out[S * S * 3 - 1] + lb.new_w + lb.new_h;
            (void)sink;
        }
        if ((uint64_t)w * h <= ((uint64_t)1 << 20)) {
            uint8_t *rgb = malloc((size_t)w * h * 3);
            if (rgb && sa1b_jpeg_decode_region(c, data, size, rgb, (size_t)w * 3, w, h, w / 2 + 1,
                                               h / 2 + 1, &err) == SA1B_OK) {
                volatile unsigned sink = rgb[0];
                (void)sink;
            }
            free(rgb);
        }
    }
    sa1b_imgctx_free(c);
    return 0;
}
