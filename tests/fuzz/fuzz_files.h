/*
 * fuzz_files.h - for the fuzz targets whose parsers read files (a state
 * file, a run folder's latest and log): a private folder made once per
 * process, files written into it, and the check that a message is one
 * line.  Test code: its one static is the folder's name.
 */
#ifndef SA1B_FUZZ_FILES_H
#define SA1B_FUZZ_FILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The process's folder (under TMPDIR), removed at exit with what it holds. */
static char fuzz_dir_name[4096];

static void fuzz_dir_remove(void)
{
    static const char *const fuzz_names[] = {"state.bin", "latest", "log.jsonl", "model-1.safetensors", "state-1.bin"};
    char p[4200];
    for (size_t i = 0; i < sizeof fuzz_names / sizeof *fuzz_names; i++) {
        snprintf(p, sizeof p, "%s/%s", fuzz_dir_name, fuzz_names[i]);
        unlink(p);
    }
    rmdir(fuzz_dir_name);
}

static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_name[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir_name, sizeof fuzz_dir_name, "%s/sa1b-fuzz.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fuzz_dir_name)) abort();
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_name;
}

/* dir/name (one of the names fuzz_dir_remove removes) into buf[4200]. */
static inline const char *fuzz_path(const char *name, char *buf)
{
    snprintf(buf, 4200, "%s/%s", fuzz_dir(), name);
    return buf;
}

/* Writes data[size] to path (abort if it cannot: not the input's fault). */
static inline void fuzz_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
}

/* A message: terminated within len, one line, no control byte. */
static inline void fuzz_one_line(const char *msg, size_t len)
{
    size_t n = strnlen(msg, len);
    if (n >= len) abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f) abort();
}

#endif
