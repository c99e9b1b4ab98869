/*
 * fuzz-rundir.c - a run folder's latest and log.jsonl as --resume and
 * --auto-resume read them (run_dir.h), on arbitrary bytes.  The first byte
 * says which files the folder holds (bit 0 latest, 1 log.jsonl, 2
 * model-1.safetensors, 3 state-1.bin: empty files); the rest is latest's
 * text up to the first 0xff byte, and the log's after it.  Whatever they
 * are: latest gives a step >= 0 or -1 with one line; the folder's verdicts
 * (holds a run, a killed start, its one checkpoint) are in range, their
 * lines one line, and agree (a folder with latest is no killed start's
 * one checkpoint).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/run_dir.h"
#include "fuzz_files.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const unsigned have = data[0];
    const uint8_t *rest = data + 1, *sep = memchr(rest, 0xff, size - 1);
    const size_t nl = sep ? (size_t)(sep - rest) : size - 1;
    char p[4][4200];
    const char *names[4] = {"latest", "log.jsonl", "model-1.safetensors", "state-1.bin"};
    for (int i = 0; i < 4; i++) {
        fuzz_path(names[i], p[i]);
        unlink(p[i]);
    }
    if (have & 1) fuzz_write(p[0], rest, nl);
    if (have & 2) fuzz_write(p[1], sep ? sep + 1 : rest, sep ? size - 1 - nl - 1 : 0);
    if (have & 4) fuzz_write(p[2], "", 0);
    if (have & 8) fuzz_write(p[3], "", 0);
    const char *dir = fuzz_dir();

    char err[512], what[512];
    long step = tr_run_read_latest(dir, err, sizeof err);
    if (step < -1) abort();
    if (step < 0) fuzz_one_line(err, sizeof err);
    if (!(have & 1) && step >= 0) abort();

    int h = tr_run_dir_holds_run(dir, what, sizeof what);
    if (h < -1 || h > 1) abort();
    if (h) fuzz_one_line(what, sizeof what);
    if (h == 0 && (have & 15)) abort(); /* each of those files is a run's */
    for (long cut = -1; cut <= 1; cut += 2) {
        what[0] = 0;
        int k = tr_run_dir_killed_start(dir, cut, what, sizeof what);
        if (k < -1 || k > 1) abort();
        fuzz_one_line(what, sizeof what);
        if (k == 1 && (have & 1)) abort(); /* latest: more than a killed start */
    }
    int model = -1, state = -1;
    long part = -2;
    long one = tr_run_dir_one_checkpoint(dir, &model, &state, &part);
    if (one >= 0 && ((have & 1) || one != 1 || model != !!(have & 4) || state != !!(have & 8) || part != -1)) abort();
    if (one < -1) abort();
    return 0;
}
