/*
 * test-train-st-hostile.c - issue 39's hostile safetensors headers: the
 * two readers (tr_st_parse, and tr_st_peek_meta, which reads the header
 * alone) refuse the same files (a duplicate key, in the metadata or among
 * the tensors; a tensor past the data block), and accept the same; a
 * message quoting the header (jansson's text, a name) stays one line; a
 * state file's run record whose value holds a newline, or whose key is not
 * one sa1b-train writes, is refused, and one it wrote reads back as it was.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "train/checkpoint.h"
#include "train/run_dir.h"
#include "tap.h"

static char dir[256];

/* a safetensors file of header h (padded) and data[n] at name; its path */
static const char *put(const char *name, const char *h, const void *data, size_t n)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t hl = strlen(h), pad = (8 - hl % 8) % 8;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((hl + pad) >> (8 * i));
    FILE *f = fopen(path, "wb");
    if (!f) exit(99);
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, hl, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
    return path;
}

static int parses(const char *path, char *err, size_t len)
{
    tr_st_file f;
    int ok = tr_st_load(&f, path, err, len) == 0;
    tr_st_close(&f);
    return ok;
}

static int one_line(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 0;
    return 1;
}

static void both(const char *name, const char *h, const void *data, size_t n, int want)
{
    char err[512] = "", v[64];
    const char *path = put(name, h, data, n);
    int p = parses(path, err, sizeof err), k = tr_st_peek_meta(path, "run.world", v, sizeof v);
    tap_is_int(p, want, "%s: tr_st_parse %s it", name, want ? "accepts" : "refuses");
    tap_is_int(k, want, "%s: tr_st_peek_meta %s it", name, want ? "accepts" : "refuses");
    if (!want) tap_ok(one_line(err) && *err, "%s: in one line (%s)", name, err);
    else tap_is_str(v, "4", "%s: the same value", name);
}

int main(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/st-hostile.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(dir)) return 99;
    const uint8_t zero[8] = {0};
    both("valid", "{\"__metadata__\":{\"run.world\":\"4\"},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}",
         zero, 1, 1);
    both("duplicate-meta-key", "{\"__metadata__\":{\"run.world\":\"4\",\"run.world\":\"2\"}}", NULL, 0, 0);
    both("duplicate-metadata", "{\"__metadata__\":{\"run.world\":\"4\"},\"__metadata__\":{\"run.world\":\"2\"}}", NULL,
         0, 0);
    both("duplicate-tensor",
         "{\"__metadata__\":{\"run.world\":\"4\"},\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
         "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", zero, 1, 0);
    both("tensor-past-end",
         "{\"__metadata__\":{\"run.world\":\"4\"},\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", zero,
         8, 0);
    both("overlap",
         "{\"__metadata__\":{\"run.world\":\"4\"},\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", zero, 3, 0);
    both("json-escape-newline", "{\"__metadata__\":{\"run.world\":\"\\\n4\"}}", NULL, 0, 0);
    both("name-with-controls", "{\"__metadata__\":{\"run.world\":\"4\"},\"a\\n\\u001b[2J\":{\"dtype\":\"X9\"}}", NULL, 0,
         0);

    /* the run record as --resume reads it */
    char *rec = NULL, err[512] = "", v[256];
    const char *state = put("rec-ok", "{\"__metadata__\":{\"format\":\"sa1b-train-state-1\",\"run.data\":\"d ir%25%22x/"
                            "t=1.shard\",\"run.steps\":\"8\",\"run.world\":\"1\"}}", NULL, 0);
    tap_ok(tr_ckpt_read_run(state, &rec, err, sizeof err) == 0 && rec, "a record sa1b-train wrote is read");
    tap_is_str(rec, "data=d ir%25%22x/t=1.shard\nsteps=8\nworld=1\n", "line for line");
    tap_is_str(tr_run_rec_get(rec ? rec : "", "data", v, sizeof v), "d ir%\"x/t=1.shard", "its values decoded");
    free(rec), rec = NULL;
    const char *bad[][2] = {
        {"rec-newline", "{\"__metadata__\":{\"run.steps\":\"2\\nckpt_every=1\",\"run.ckpt_every\":\"4\"}}"},
        {"rec-key-newline", "{\"__metadata__\":{\"run.steps\\nckpt_every\":\"1\"}}"},
        {"rec-key-equals", "{\"__metadata__\":{\"run.ckpt_every=1\":\"\"}}"},
        {"rec-raw-percent", "{\"__metadata__\":{\"run.data\":\"50%\"}}"},
        {"rec-escape", "{\"__metadata__\":{\"run.data\":\"a\\u001b[2Jb\"}}"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        int rc = tr_ckpt_read_run(put(bad[i][0], bad[i][1], NULL, 0), &rec, err, sizeof err);
        tap_ok(rc < 0 && !rec, "%s: refused", bad[i][0]);
        tap_ok(one_line(err) && strstr(err, "is not one sa1b-train writes"), "%s: in one line (%s)", bad[i][0], err);
        free(rec), rec = NULL;
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) tap_diag("could not remove %s", dir);
    return tap_done();
}
