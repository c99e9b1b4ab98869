/*
 * test-rle.c - hand-checked vectors of the RLE codec: strings, runs,
 * masks, area, both bbox conventions, IoU and merge on tiny masks whose
 * answers were worked out by hand.
 */
#include "sa1b_rle.h"
#include "tap.h"

static void vec_string(uint32_t h, uint32_t w, const uint32_t *runs, size_t n, const char *str)
{
    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error err;
    int rc = sa1b_rle_from_string(&r, h, w, str, strlen(str), &err);
    tap_is_int(rc, SA1B_OK, "parse \"%s\" (%ux%u)", str, h, w);
    int same = rc == 0 && r.n == n && r.h == h && r.w == w;
    for (size_t i = 0; same && i < n; i++) same = r.cnts[i] == runs[i];
    tap_ok(same, "\"%s\" gives the expected %zu runs", str, n);
    sa1b_rle s = SA1B_RLE_INIT;
    rc = sa1b_rle_set_runs(&s, h, w, runs, n, &err);
    char *out = NULL;
    size_t len = 0;
    if (rc == 0) rc = sa1b_rle_to_string(&s, &out, &len, &err);
    tap_is_str(out, str, "runs format to \"%s\"", str);
    tap_is_int(len, strlen(str), "length of \"%s\"", str);
    free(out);
    sa1b_rle_free(&r);
    sa1b_rle_free(&s);
}

int main(void)
{
    /* 100 = 3*32 + 4: group 4 with continuation ('T'), then 3 */
    vec_string(5, 41, (const uint32_t[]){100, 5, 100}, 3, "T35T3");
    vec_string(3, 4, (const uint32_t[]){12}, 1, "<");
    vec_string(3, 4, (const uint32_t[]){0, 12}, 2, "0<");
    /* deltas from the fourth run on: 2,3,4,5 -> 2,3,4,(5-3)=2 */
    vec_string(2, 7, (const uint32_t[]){2, 3, 4, 5}, 4, "2342");
    /* negative delta: 5,5,5,1 -> last stored as 1-5 = -4 = 0b11100 -> 28 -> 'L' */
    vec_string(4, 4, (const uint32_t[]){5, 5, 5, 1}, 4, "555L");
    /* a 32-bit run: 2^32-1 */
    vec_string(65535, 65537, (const uint32_t[]){0, 4294967295u}, 2, "0oooooo3");

    /* masks */
    {
        uint8_t zeros[12] = {0}, ones[12], back[12];
        memset(ones, 7, sizeof ones); /* any nonzero byte is foreground */
        sa1b_rle r = SA1B_RLE_INIT;
        sa1b_error err;
        char *s = NULL;
        tap_is_int(sa1b_rle_encode(&r, zeros, 3, 4, 0, &err), 0, "encode zeros");
        sa1b_rle_to_string(&r, &s, NULL, &err);
        tap_is_str(s, "<", "all-zero 3x4 mask is \"<\"");
        free(s);
        double bb[4];
        sa1b_rle_bbox(&r, bb);
        tap_ok(bb[0] == 0 && bb[1] == 0 && bb[2] == 0 && bb[3] == 0, "empty bbox is zeros");
        tap_is_int(sa1b_rle_encode(&r, ones, 3, 4, 1, &err), 0, "encode ones");
        sa1b_rle_to_string(&r, &s, NULL, &err);
        tap_is_str(s, "0<", "all-ones 3x4 mask is \"0<\"");
        free(s);
        tap_is_int(sa1b_rle_area(&r), 12, "area of all-ones 3x4");
        sa1b_rle_bbox(&r, bb);
        tap_ok(bb[0] == 0 && bb[1] == 0 && bb[2] == 4 && bb[3] == 3, "all-ones coco bbox");
        sa1b_rle_bbox_sa1b(&r, bb);
        tap_ok(bb[0] == 0 && bb[1] == 0 && bb[2] == 3 && bb[3] == 2, "all-ones sa1b bbox");
        sa1b_rle_decode(&r, back, 0);
        tap_ok(memcmp(back, (uint8_t[12]){1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 12) == 0,
               "decode all ones");

        /* row-major 3x4:
         *   0 1 0 0
         *   0 1 1 0
         *   0 0 1 0
         * column-major: col0 000, col1 110, col2 011, col3 000
         * runs: 3 (bg), 2, 2, 2, 3 */
        uint8_t m[12] = {0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1, 0};
        tap_is_int(sa1b_rle_encode(&r, m, 3, 4, 0, &err), 0, "encode 3x4 shape");
        int ok = r.n == 5 && r.cnts[0] == 3 && r.cnts[1] == 2 && r.cnts[2] == 2 &&
                 r.cnts[3] == 2 && r.cnts[4] == 3;
        tap_ok(ok, "runs of 3x4 shape are 3,2,2,2,3");
        sa1b_rle_decode(&r, back, 0);
        tap_ok(memcmp(back, m, 12) == 0, "row-major decode restores the shape");
        sa1b_rle_decode(&r, back, 1);
        tap_ok(memcmp(back, (uint8_t[12]){0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 0}, 12) == 0,
               "column-major decode");
        sa1b_rle_bbox(&r, bb);
        tap_ok(bb[0] == 1 && bb[1] == 0 && bb[2] == 2 && bb[3] == 3, "coco bbox [1,0,2,3]");
        sa1b_rle_bbox_sa1b(&r, bb);
        tap_ok(bb[0] == 1 && bb[1] == 0 && bb[2] == 1 && bb[3] == 2, "sa1b bbox [1,0,1,2]");
        tap_is_int(sa1b_rle_area(&r), 4, "area 4");

        /* IoU against the column x=1 only (runs 3,2,7): inter 2, union 4 */
        sa1b_rle g = SA1B_RLE_INIT;
        sa1b_rle_set_runs(&g, 3, 4, (const uint32_t[]){3, 2, 7}, 3, &err);
        double iou = -1;
        tap_is_int(sa1b_rle_iou(&r, &g, 0, &iou, &err), 0, "iou call");
        tap_is_close(iou, 0.5, 1e-12, "iou = 2/4");
        sa1b_rle_iou(&r, &g, 1, &iou, &err);
        tap_is_close(iou, 0.5, 1e-12, "crowd iou = 2/area(dt)=2/4");
        sa1b_rle_iou(&g, &r, 1, &iou, &err);
        tap_is_close(iou, 1.0, 1e-12, "crowd iou of g in r = 2/2");

        const sa1b_rle *in[2] = {&r, &g};
        sa1b_rle u = SA1B_RLE_INIT;
        tap_is_int(sa1b_rle_merge(&u, in, 2, 0, &err), 0, "union");
        sa1b_rle_to_string(&u, &s, NULL, &err);
        tap_is_str(s, "32201", "union is runs 3,2,2,2,3 (deltas 0,1 at the end)");
        free(s);
        tap_is_int(sa1b_rle_merge(&u, in, 2, 1, &err), 0, "intersection");
        tap_ok(u.n == 3 && u.cnts[0] == 3 && u.cnts[1] == 2 && u.cnts[2] == 7,
               "intersection is the column");

        sa1b_rle bad = SA1B_RLE_INIT;
        sa1b_rle_set_runs(&bad, 4, 3, (const uint32_t[]){12}, 1, &err);
        tap_is_int(sa1b_rle_iou(&r, &bad, 0, &iou, &err), SA1B_EMISMATCH, "iou of 3x4 and 4x3");
        sa1b_rle_free(&bad);
        sa1b_rle_free(&u);
        sa1b_rle_free(&g);
        sa1b_rle_free(&r);
    }

    /* malformed */
    {
        sa1b_rle r = SA1B_RLE_INIT;
        sa1b_error err;
        tap_is_int(sa1b_rle_from_string(&r, 3, 4, "0<!", 3, &err), SA1B_EFORMAT, "bad char");
        tap_is_int(err.offset, 2, "bad char offset 2");
        tap_is_int(sa1b_rle_from_string(&r, 3, 4, "0P", 2, &err), SA1B_ETRUNC, "dangling");
        tap_is_int(sa1b_rle_from_string(&r, 3, 4, "0<", 1, &err), SA1B_EMISMATCH, "short sum");
        tap_is_int(sa1b_rle_from_string(&r, 3, 4, "@", 1, &err), SA1B_ERANGE, "negative run");
        tap_is_int(sa1b_rle_from_string(&r, 3, 4, "0<1", 3, &err), SA1B_EMISMATCH, "sum over");
        tap_is_int(sa1b_rle_from_string(&r, 65536, 65536, "", 0, &err), SA1B_ERANGE,
                   "h*w beyond 32 bits");
        tap_diag("%s", err.msg);
        sa1b_rle_free(&r);
    }
    return tap_done();
}
