/*
 * fuzz-tar.c - libFuzzer target: any bytes as a (possibly compressed) tar
 * through sa1b_tar_open_memory and sa1b_tar_next until the end or a fatal
 * error, reading every byte of every returned pair.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sa1b_tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* a message of the library is one line, whatever input it quotes */
static void one_line(const sa1b_error *e)
{
    for (const char *c = e->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) abort();
}


int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sa1b_tar *t = NULL;
    sa1b_error err;
    if (sa1b_tar_open_memory(&t, data, size, "fuzz", &err) != SA1B_OK) return 0;
    sa1b_tar_sample s;
    volatile uint64_t sink = 0;
    /* every call consumes input or drains the pending list, so this ends;
     * the bound only guards against a regression hanging the fuzzer */
    for (int i = 0; i < 100000; i++) {
        int rc = sa1b_tar_next(t, &s, &err);
        if (rc == SA1B_EOF) break;
        if (rc == SA1B_OK) {
            for (size_t k = 0; k < s.jpg_len; k++) sink += s.jpg[k];
            for (size_t k = 0; k < s.json_len; k++) sink += s.json[k];
            sink += s.name[0];
        } else {
            one_line(&err);
            if (sa1b_tar_fatal(t)) break;
        }
    }
    sink += sa1b_tar_bytes_read(t);
    (void)sink;
    sa1b_tar_free(t);
    return 0;
}
