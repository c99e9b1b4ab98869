/*
 * test-shard-writer-tail.c - the shard writer on every 64-byte phase of the
 * file's length against its 4096-byte direct-write blocks: shards of one
 * small and one large (raw 300: the streaming copy into the staging
 * buffer) image each, provenance lengths stepping the length through all
 * 64 residues mod 4096, written in a directory next to the build (where
 * the file system takes O_DIRECT, as ext4 does; on tmpfs the writes are
 * buffered and the test still checks the files).  Each must finish and
 * open, with the length its footer gives and the image bytes written.
 * Before the fix, a file whose tail was a whole block stayed in direct mode
 * and the header's unaligned pwrite failed with EINVAL.
 */
#include "sa1b_shard.h"
#include "tap.h"

#include <sys/stat.h>
#include <unistd.h>

static int write_one(const char *path, uint32_t S, size_t prov_len, uint64_t *size)
{
    char *prov = malloc(prov_len + 1);
    memset(prov, ' ', prov_len);
    prov[0] = '{';
    prov[prov_len - 1] = '}';
    prov[prov_len] = 0;
    size_t n = (size_t)S * S * 3;
    uint8_t *img = malloc(n), bits[64 * 64];
    for (size_t i = 0; i < n; i++) img[i] = (uint8_t)(i * 31 + S);
    for (size_t i = 0; i < sizeof bits; i++) bits[i] = (uint8_t)(i % 3 == 0);
    sa1b_shard_params p = {S, S < 64 ? S : 64, SA1B_SHARD_RAW, prov};
    sa1b_shard_mask_in m = {0};
    m.id = 7;
    m.point[0] = m.point[1] = NAN;
    m.bits = bits;
    sa1b_shard_sample_in s = {0};
    s.image_id = 1;
    s.orig_w = s.orig_h = S;
    s.scale = 1;
    s.file_name = "sa_1.jpg";
    s.image = img;
    s.image_len = n;
    s.n_masks = 1;
    s.masks = &m;
    sa1b_shard_writer *w = NULL;
    sa1b_error err;
    int rc = sa1b_shard_writer_open(&w, path, &p, &err);
    if (!rc) rc = sa1b_shard_writer_add(w, &s, &err);
    if (!rc) rc = sa1b_shard_writer_finish(w, &err);
    else sa1b_shard_writer_abort(w);
    if (rc) tap_diag("%s (provenance %zu bytes): %s", path, prov_len, err.msg);
    sa1b_shard *sh = NULL;
    if (!rc && (rc = sa1b_shard_open(&sh, path, &err)) != 0)
        tap_diag("open %s: %s", path, err.msg);
    if (!rc) {
        *size = sa1b_shard_get_info(sh)->file_size;
        struct stat st;
        sa1b_shard_image_view v;
        if (stat(path, &st) != 0 || (uint64_t)st.st_size != *size) rc = -1;
        else if (sa1b_shard_image(sh, 0, &v, &err) || v.payload_len != n ||
                 memcmp(v.payload, img, n) != 0 || v.payload_crc != sa1b_crc32c(0, img, n))
            rc = -2;
        sa1b_shard_close(sh);
    }
    unlink(path);
    free(prov);
    free(img);
    return rc;
}

int main(void)
{
    char dir[] = "test-shard-writer-tail.XXXXXX";
    if (!mkdtemp(dir)) tap_skip_all("cannot make a directory here");
    tap_plan(0);
    static const uint32_t sizes[] = {8, 300};
    for (int k = 0; k < 2; k++) {
        int fails = 0, whole = 0;
        for (int i = 0; i < 64; i++) {
            char path[128];
            snprintf(path, sizeof path, "%s/t%d.shard", dir, i);
            uint64_t size = 0;
            if (write_one(path, sizes[k], 1 + 64 * (size_t)i, &size)) fails++;
            else whole += size % 4096 == 0;
        }
        tap_ok(fails == 0, "S=%u: 64 shards of every length phase finish, open, hold the image",
               sizes[k]);
        tap_ok(whole > 0, "S=%u: %d of them end on a whole 4096-byte block", sizes[k], whole);
    }
    rmdir(dir);
    return tap_done();
}
