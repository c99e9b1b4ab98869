/*
 * test-shard-runs.c - run-length masks (format version 2, sa1b-shard(5)):
 * the coder against a byte-at-a-time reference (every R from 1 to 70 and
 * some large ones; empty, full, random, sparse, striped masks; any nonzero
 * byte a one), the validation of untrusted runs (each rule with its
 * message), and the writer and reader: a version-2 shard written from
 * bytes and one from runs coded by the caller are the same file, open as
 * version 2, decode to the masks given and to the same masks as a packed
 * shard of the same samples, verify, and report runs that were tampered
 * with behind valid CRCs (sa1b_shard_verify_image, sa1b_shard_decode_mask
 * and the loader, which skips that sample).  Source-size masks: COCO runs
 * recoded canonically and decoded back.  Deterministic.
 */
#include "sa1b_loader.h"
#include "sa1b_rle.h"
#include "sa1b_shard.h"
#include "shard_format.h"
#include "tap.h"
#include "test-rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) { return trng_below(&rs, n); }

/* reference coder: one byte at a time */
static size_t ref_encode(const uint8_t *m, uint32_t R, uint8_t *out)
{
    uint64_t n = (uint64_t)R * R, k = 0;
    uint32_t runs[1 << 16], count = 0; /* R <= 256 here */
    int one = 0;
    while (k < n || count == 0) {
        uint64_t start = k;
        while (k < n && (m[k] != 0) == one) k++;
        runs[count++] = (uint32_t)(k - start);
        one ^= 1;
    }
    size_t len = shard_varint_put(out, count);
    for (uint32_t i = 0; i < count; i++) len += shard_varint_put(out + len, runs[i]);
    return len;
}

static void fill(uint8_t *m, uint32_t R, int kind)
{
    static const uint8_t ones[] = {1, 2, 0x7F, 0x80, 0xFF};
    size_t n = (size_t)R * R;
    for (size_t i = 0; i < n; i++) {
        int on = kind == 0   ? 0
                 : kind == 1 ? 1
                 : kind == 2 ? (int)rnd(2)
                 : kind == 3 ? rnd(40) == 0
                             : (i / 3) % 5 < 2; /* stripes crossing rows */
        m[i] = on ? ones[rnd(sizeof ones)] : 0;
    }
}

static void test_coder(void)
{
    int bad_enc = 0, bad_dec = 0, bad_parse = 0, cases = 0;
    for (uint32_t R = 1; R <= 256; R += R < 70 ? 1 : 93) {
        size_t n = (size_t)R * R, bound = (size_t)sa1b_shard_runs_bound(R);
        uint8_t *m = malloc(n), *dec = malloc(n), *out = malloc(bound), *ref = malloc(bound);
        uint32_t *runs = malloc(bound * sizeof *runs);
        for (int kind = 0; kind < 5; kind++) {
            fill(m, R, kind);
            memset(out, 0xA5, bound);
            size_t len = sa1b_shard_encode_runs(m, R, out), rlen = ref_encode(m, R, ref);
            bad_enc += len != rlen || memcmp(out, ref, len) != 0 || len > bound;
            sa1b_error e;
            memset(dec, 7, n);
            bad_dec += sa1b_shard_parse_runs(out, len, R, runs, bound, &(size_t){0}, &e) != 0;
            size_t nr = 0;
            sa1b_shard_parse_runs(out, len, R, runs, bound, &nr, &e);
            uint64_t sum = 0;
            for (size_t i = 0; i < nr; i++) sum += runs[i];
            bad_parse += sum != n;
            if (shard_runs_decode(out, len, R, dec, &e) != 0) bad_dec++;
            for (size_t i = 0; i < n; i++) bad_dec += dec[i] != (m[i] != 0);
            cases++;
        }
        free(m), free(dec), free(out), free(ref), free(runs);
    }
    tap_ok(bad_enc == 0, "encode == byte-at-a-time reference (%d masks, %d differ)", cases, bad_enc);
    tap_ok(bad_dec == 0, "decode(encode(m)) == (m != 0)");
    tap_ok(bad_parse == 0, "parsed runs sum to R*R");
    /* the documented shapes of an empty and a full mask */
    uint8_t m[16] = {0}, out[32];
    size_t len = sa1b_shard_encode_runs(m, 4, out);
    tap_ok(len == 2 && out[0] == 1 && out[1] == 16, "empty 4x4 mask: 01 10");
    memset(m, 1, sizeof m);
    len = sa1b_shard_encode_runs(m, 4, out);
    tap_ok(len == 3 && out[0] == 2 && out[1] == 0 && out[2] == 16, "full 4x4 mask: 02 00 10");
}

static void expect_bad(const uint8_t *d, size_t len, uint32_t R, const char *want, const char *what)
{
    sa1b_error e;
    uint32_t runs[64];
    size_t n;
    uint8_t dec[256];
    memset(dec, 1, sizeof dec);
    int rc = sa1b_shard_parse_runs(d, len, R, runs, 64, &n, &e);
    int rc2 = shard_runs_decode(d, len, R, dec, &e);
    int zero = 1;
    for (size_t i = 0; i < (size_t)R * R; i++) zero &= dec[i] == 0;
    tap_ok(rc == SA1B_EFORMAT && rc2 == SA1B_EFORMAT && zero && strstr(e.msg, want), "%s: '%s'",
           what, e.msg);
}

static void test_validation(void)
{
    expect_bad((const uint8_t[]){0}, 1, 4, "0 runs", "no runs");
    expect_bad((const uint8_t[]){3, 5, 0, 11}, 4, 4, "run 1 of length 0", "empty run after the first");
    expect_bad((const uint8_t[]){2, 5, 12}, 3, 4, "run 1 of length 12 overruns the 16 cells (sum 17)",
               "overlong run");
    expect_bad((const uint8_t[]){2, 5, 10}, 3, 4, "runs sum to 15, want 16", "short sum");
    expect_bad((const uint8_t[]){1, 16, 0}, 3, 4, "1 bytes after the 1 runs", "trailing byte");
    expect_bad((const uint8_t[]){1, 0x90, 0x00}, 3, 4, "not minimal", "non-minimal varint");
    expect_bad((const uint8_t[]){1, 0x80}, 2, 4, "end inside a varint", "truncated varint");
    expect_bad((const uint8_t[]){1, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F}, 6, 4, "exceeds 32 bits",
               "33-bit varint");
    expect_bad((const uint8_t[]){9, 16}, 2, 4, "9 runs in 1 bytes", "count beyond the bytes");
    sa1b_error e;
    uint32_t runs[1];
    size_t n;
    tap_ok(sa1b_shard_parse_runs((const uint8_t[]){2, 0, 16}, 3, 4, runs, 1, &n, &e) ==
               SA1B_EFORMAT && strstr(e.msg, "room for 1"),
           "more runs than the caller's room: '%s'", e.msg);
}

#define NIMG 5
#define R_ 24

typedef struct masks_of {
    uint8_t bits[8][R_ * R_];
    uint8_t runs[8][R_ * R_ + 6];
    sa1b_shard_mask_in in[8], coded[8];
} masks_of;

static int write_shard(const char *path, int mask_format, int coded, masks_of *mo,
                       const uint8_t *image, sa1b_error *e)
{
    sa1b_shard_params p = {32, R_, SA1B_SHARD_RAW, "{\"test\":1}", mask_format};
    sa1b_shard_writer *w;
    if (sa1b_shard_writer_open(&w, path, &p, e)) return -1;
    for (int i = 0; i < NIMG; i++) {
        sa1b_shard_sample_in s = {0};
        s.image_id = 100 + i;
        s.orig_w = 40 + (uint32_t)i;
        s.orig_h = 30;
        s.scale = 0.5f;
        s.file_name = "x.jpg";
        s.image = image;
        s.image_len = 32 * 32 * 3; /* the runs' blocks end anywhere */
        s.n_masks = (uint32_t)i % 4 * 2; /* 0, 2, 4, 6 masks */
        s.masks = coded ? mo[i].coded : mo[i].in;
        int rc = coded ? sa1b_shard_writer_add_packed(w, &s, e) : sa1b_shard_writer_add(w, &s, e);
        if (rc) {
            sa1b_shard_writer_abort(w);
            return -1;
        }
    }
    return sa1b_shard_writer_finish(w, e) ? -1 : 0;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *d = malloc(*len);
    if (fread(d, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return d;
}

static void test_files(void)
{
    static masks_of mo[NIMG];
    static uint8_t image[32 * 32 * 3];
    for (size_t i = 0; i < sizeof image; i++) image[i] = (uint8_t)rnd(256);
    for (int i = 0; i < NIMG; i++)
        for (int j = 0; j < 8; j++) {
            fill(mo[i].bits[j], R_, j % 5); /* empty and full masks included */
            memset(&mo[i].in[j], 0, sizeof mo[i].in[j]);
            mo[i].in[j].id = i * 10 + j;
            mo[i].in[j].bits = mo[i].bits[j];
            mo[i].coded[j] = mo[i].in[j];
            mo[i].coded[j].bits = mo[i].runs[j];
            mo[i].coded[j].data_len = sa1b_shard_encode_runs(mo[i].bits[j], R_, mo[i].runs[j]);
        }
    char dir[] = "/tmp/sa1b-test-runs.XXXXXX";
    if (!mkdtemp(dir)) {
        tap_ok(0, "mkdtemp");
        return;
    }
    char a[64], b[64], c[64];
    snprintf(a, sizeof a, "%s/a.shard", dir);
    snprintf(b, sizeof b, "%s/b.shard", dir);
    snprintf(c, sizeof c, "%s/c.shard", dir);
    sa1b_error e;
    tap_ok(write_shard(a, SA1B_SHARD_RLE, 0, mo, image, &e) == 0, "RLE shard from bytes");
    tap_ok(write_shard(b, SA1B_SHARD_RLE, 1, mo, image, &e) == 0, "RLE shard from coded runs");
    tap_ok(write_shard(c, SA1B_SHARD_PACKED, 0, mo, image, &e) == 0, "packed shard");
    size_t la = 0, lb = 0;
    uint8_t *da = slurp(a, &la), *db = slurp(b, &lb);
    tap_ok(da && db && la == lb && memcmp(da, db, la) == 0, "the two RLE shards are the same bytes");

    sa1b_shard *sa = NULL, *sc = NULL;
    tap_ok(sa1b_shard_open(&sa, a, &e) == 0, "RLE shard opens");
    tap_ok(sa1b_shard_open(&sc, c, &e) == 0, "packed shard opens");
    if (sa && sc) {
        const sa1b_shard_info *ia = sa1b_shard_get_info(sa), *ic = sa1b_shard_get_info(sc);
        tap_ok(ia->version == 2 && ia->mask_format == SA1B_SHARD_RLE && ia->mask_stride == 0,
               "RLE: version 2, mask format rle, no stride");
        tap_ok(ic->version == 1 && ic->mask_format == SA1B_SHARD_PACKED, "packed: version 1");
        int bad = 0, vbad = 0;
        uint8_t x[R_ * R_], y[R_ * R_];
        for (uint64_t i = 0; i < NIMG; i++) {
            vbad += sa1b_shard_verify_image(sa, i, &e) != 0;
            sa1b_shard_image_view im;
            sa1b_shard_image(sa, i, &im, &e);
            for (uint32_t j = 0; j < im.n_masks; j++) {
                sa1b_shard_mask_view ma, mc;
                sa1b_shard_mask(sa, i, j, &ma, &e);
                sa1b_shard_mask(sc, i, j, &mc, &e);
                bad += sa1b_shard_decode_mask(sa, &ma, x, &e) != 0;
                sa1b_shard_unpack_mask(sc, &mc, y);
                bad += memcmp(x, y, sizeof x) != 0;
                bad += ma.data_len != mo[i].coded[j].data_len;
                bad += memcmp(ma.bits, mo[i].runs[j], (size_t)ma.data_len) != 0;
                for (size_t k = 0; k < sizeof x; k++) bad += x[k] != (mo[i].bits[j][k] != 0);
            }
        }
        tap_ok(bad == 0, "RLE masks decode to the input and to the packed shard's masks");
        tap_ok(vbad == 0 && sa1b_shard_verify_layout(sa, &e) == 0, "RLE shard verifies");
    }
    sa1b_shard_close(sa);
    sa1b_shard_close(sc);

    /* runs made invalid behind valid CRCs: image 3's mask 1 gets one run
     * longer (the sum then exceeds R*R) */
    if (da && la) {
        sa1b_shard *s = NULL;
        sa1b_shard_open_memory(&s, da, la, &e);
        sa1b_shard_mask_view m;
        sa1b_shard_image_view im;
        if (s && sa1b_shard_image(s, 3, &im, &e) == 0 && sa1b_shard_mask(s, 3, 1, &m, &e) == 0) {
            uint64_t off = m.data_offset, ioff = sa1b_shard_index_offset(s) + 3 * 96;
            sa1b_shard_close(s);
            da[off + 1] = 0x7F; /* the first run: 127 */
            shard_st32(da + ioff + IDX_MASKS_CRC, sa1b_crc32c(0, da + im.masks_offset, im.masks_len));
            uint64_t io = shard_ld64(da + HDR_INDEX_OFFSET), n = shard_ld64(da + HDR_N_IMAGES);
            shard_st32(da + HDR_INDEX_CRC, sa1b_crc32c(0, da + io, n * 96));
            uint32_t h = sa1b_crc32c(0, da, HDR_CRC);
            shard_st32(da + HDR_CRC, h);
            uint8_t *f = da + la - 64;
            shard_st32(f + FTR_HEADER_CRC, h);
            shard_st32(f + FTR_CRC, sa1b_crc32c(0, f, FTR_CRC));
            s = NULL;
            tap_ok(sa1b_shard_open_memory(&s, da, la, &e) == 0, "tampered shard still opens");
            int rc = sa1b_shard_verify_image(s, 3, &e);
            tap_ok(rc == SA1B_EFORMAT && strstr(e.msg, "image 3 (id 103) mask 1 runs at offset") &&
                       strstr(e.msg, "overruns"),
                   "verify names the image, mask, offset and rule: '%s'", e.msg);
            uint8_t x[R_ * R_];
            sa1b_shard_mask(s, 3, 1, &m, &e);
            rc = sa1b_shard_decode_mask(s, &m, x, &e);
            tap_ok(rc == SA1B_EFORMAT && strstr(e.msg, "runs at offset"), "decode reports it: '%s'",
                   e.msg);
            /* the loader (no --verify: decoding alone) reports that sample as
             * damaged, names it, and goes on with the others when called again */
            char t[64];
            snprintf(t, sizeof t, "%s/t.shard", dir);
            FILE *fp = fopen(t, "wb");
            int wrote = fp && fwrite(da, 1, la, fp) == la;
            if (fp) fclose(fp);
            sa1b_loader_config lc;
            sa1b_loader_config_init(&lc);
            const char *paths[] = {t};
            lc.paths = paths;
            lc.n_paths = 1;
            lc.max_masks = 8;
            lc.max_epochs = 1;
            lc.threads = 1;
            sa1b_loader *L = NULL;
            int damaged = 0, rows = 0, named = 0;
            if (wrote && sa1b_loader_open(&L, &lc, &e) == 0) {
                sa1b_batch *bt;
                while ((rc = sa1b_loader_next(L, &bt, &e)) != SA1B_EOF) {
                    if (rc) {
                        damaged++;
                        named += strstr(e.msg, "image 3 (id 103)") && strstr(e.msg, "runs at offset");
                        continue;
                    }
                    rows += (int)bt->count;
                    sa1b_loader_release(L, bt);
                }
            }
            sa1b_loader_close(L);
            unlink(t);
            tap_ok(damaged == 1 && named == 1 && rows == NIMG - 1,
                   "loader: the damaged sample reported (%d, named %d), %d others delivered",
                   damaged, named, rows);
        } else {
            tap_ok(0, "reopen for tampering");
        }
        sa1b_shard_close(s);
    }
    /* the writer refuses runs that do not validate and writes nothing */
    mo[1].coded[1].data_len--;
    char d[64];
    snprintf(d, sizeof d, "%s/d.shard", dir);
    tap_ok(write_shard(d, SA1B_SHARD_RLE, 1, mo, image, &e) != 0 &&
               strstr(e.msg, "image 101: mask 1:") && access(d, F_OK) != 0,
           "writer refuses bad runs, no file: '%s'", e.msg);
    free(da);
    free(db);
    unlink(a), unlink(b), unlink(c);
    rmdir(dir);
}

/* Source-size masks: an annotation's own (column-major) runs recoded, empty
 * runs merged away, decoded back to the row-major mask. */
static void test_source(void)
{
    uint8_t out[64], m[7 * 5], back[7 * 5];
    size_t len = sa1b_shard_encode_coco_runs((const uint32_t[]){3, 0, 2, 0, 0, 5}, 6, out);
    tap_ok(len == 3 && out[0] == 2 && out[1] == 5 && out[2] == 5,
           "COCO runs 3 0 2 0 0 5 are coded canonically as 5 5");
    len = sa1b_shard_encode_coco_runs((const uint32_t[]){0, 4}, 2, out);
    tap_ok(len == 3 && out[0] == 2 && out[1] == 0 && out[2] == 4, "a leading empty run stays");
    int bad = 0;
    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error e;
    for (int t = 0; t < 200; t++) {
        for (size_t i = 0; i < sizeof m; i++) m[i] = (uint8_t)(t % 7 == 0 ? (uint32_t)t % 2 : rnd(2));
        sa1b_rle_encode(&r, m, 5, 7, 0, NULL); /* h 5, w 7, row-major in */
        len = sa1b_shard_encode_coco_runs(r.cnts, r.n, out);
        bad += shard_runs_decode_source(out, len, 7, 5, back, &e) != 0 ||
               memcmp(back, m, sizeof m) != 0 || shard_runs_check(out, len, 35, &e) != 0;
    }
    sa1b_rle_free(&r);
    tap_ok(bad == 0, "source runs decode to the row-major mask (200 masks, empty and full too)");
    uint8_t back6[7 * 6];
    tap_ok(shard_runs_decode_source(out, len, 7, 6, back6, &e) == SA1B_EFORMAT &&
               strstr(e.msg, "want 42"),
           "runs of another size are refused: '%s'", e.msg);
    /* the writer takes source-size masks as runs of the image's size only */
    char path[] = "/tmp/sa1b-test-source.XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) close(fd);
    sa1b_shard_params p = {16, 0, SA1B_SHARD_RAW, NULL, SA1B_SHARD_RLE_SOURCE};
    sa1b_shard_writer *w = NULL;
    static uint8_t img[16 * 16 * 3];
    sa1b_shard_mask_in mk = {0};
    mk.bits = out;
    mk.data_len = len; /* runs of a 7 x 5 mask */
    sa1b_shard_sample_in smp = {0};
    smp.image_id = 9;
    smp.orig_w = 7;
    smp.orig_h = 6; /* not 5 */
    smp.scale = 16.0f / 7;
    smp.image = img;
    smp.image_len = sizeof img;
    smp.n_masks = 1;
    smp.masks = &mk;
    int r1 = -1, r2 = -1, r3 = -1, r4 = -1;
    if (sa1b_shard_writer_open(&w, path, &p, &e) == 0) {
        r1 = sa1b_shard_writer_add(w, &smp, &e); /* bytes: refused */
        r2 = sa1b_shard_writer_add_packed(w, &smp, &e); /* runs of 35 cells for 42 */
        smp.orig_h = 5;
        r3 = sa1b_shard_writer_add_packed(w, &smp, &e);
        r4 = sa1b_shard_writer_finish(w, &e);
    }
    sa1b_shard *sh = NULL;
    sa1b_shard_mask_view mv;
    uint8_t at4[16];
    int ok = r1 == SA1B_EINVAL && r2 == SA1B_EINVAL && r3 == 0 && r4 == 0 &&
             sa1b_shard_open(&sh, path, &e) == 0 && sa1b_shard_verify_image(sh, 0, &e) == 0 &&
             sa1b_shard_get_info(sh)->mask_size == 0 && sa1b_shard_mask(sh, 0, 0, &mv, &e) == 0 &&
             sa1b_shard_decode_mask(sh, &mv, back, &e) == 0 && memcmp(back, m, sizeof m) == 0 &&
             sa1b_shard_resample_mask(sh, &mv, 4, 1, at4, &e) == 0 &&
             sa1b_shard_resample_mask(sh, &mv, 17, 1, at4, &e) == SA1B_EINVAL;
    tap_ok(ok, "source-size writer: bytes and runs of another size refused, runs kept, read back");
    sa1b_shard_close(sh);
    unlink(path);
}

int main(void)
{
    tap_plan(0);
    test_coder();
    test_source();
    test_validation();
    test_files();
    return tap_done();
}
