/*
 * fuzz-runrec.c - the run record's text (run_dir.h: "key=value\n" lines,
 * values percent-encoded), as --resume reads it, on arbitrary bytes.  The
 * input up to its first NUL is a record: every key looked up
 * (tr_run_rec_get) gives a terminated value within its buffer, or none.
 * The input split at its first '=' is a key and a value: stored
 * (tr_run_rec_add) they make exactly one line, whatever bytes the value
 * holds (a newline never adds a key), and read back give the value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "train/run_dir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const keys[] = {"config", "image_size", "batch", "lr", "seed", "steps", "data", "val",
                                   "ckpt_every", "log_every", "unfreeze", "stage_batch", "world", "synthetic_batch",
                                   "", "="};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    char small[8], big[8192];
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const char *v = tr_run_rec_get(text, keys[i], big, sizeof big);
        if (v && (v != big || strnlen(big, sizeof big) >= sizeof big)) abort();
        v = tr_run_rec_get(text, keys[i], small, sizeof small);
        if (v && strnlen(small, sizeof small) >= sizeof small) abort();
    }
    /* key=value, the key without '=', newline or NUL */
    char *eq = strchr(text, '=');
    if (eq && !memchr(text, '\n', (size_t)(eq - text)) && eq > text) {
        *eq = 0;
        const char *key = text, *value = eq + 1;
        char *rec = NULL;
        if (tr_run_rec_add(&rec, key, value) < 0) abort();
        if (tr_run_rec_add(&rec, "world", "1") < 0) abort(); /* a key after it stays its own */
        const char *nl = strchr(rec, '\n');
        if (!nl || strchr(nl + 1, '\n') != rec + strlen(rec) - 1) abort(); /* two lines, no more */
        size_t vlen = strlen(value);
        char *back = malloc(vlen + 1);
        if (!back) abort();
        if (!tr_run_rec_get(rec, key, back, vlen + 1) || strcmp(back, value) != 0) abort();
        if (strcmp(key, "world") != 0 && (!tr_run_rec_get(rec, "world", big, sizeof big) || strcmp(big, "1") != 0))
            abort();
        free(back);
        free(rec);
    }
    free(text);
    return 0;
}
