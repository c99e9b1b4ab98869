/*
 * run_log.c - sa1b-train's log (OUT/log.jsonl): a step's record there and
 * on the terminal, trimmed to the checkpoint on resume, a record that did
 * not reach it said once, numbers as JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

/* On resume: drop log records of steps after the checkpoint (a run killed
 * between checkpoints logged steps that will now be redone), and a last
 * record cut short (a write that a full disk or a crash cut, after which
 * the run may have gone on to later checkpoints), which the resumed run's
 * first record would otherwise continue on the same line; a last record
 * that is whole but for its newline gets it.  A failure leaves the log as
 * it was, its temporary removed, and ends the run. */
void trim_log(const char *path, long step)
{
    FILE *in = tr_run_dir_fopen(path);
    if (!in && errno == ENOENT) return;
    if (!in)
        cli_die(CLI_EXIT_FATAL, "cannot trim '%s' to step %ld: %s", path, step,
                errno == EINVAL ? "not a regular file" : strerror(errno));
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        int e = errno;
        fclose(in);
        cli_die(CLI_EXIT_FATAL, "cannot trim '%s' to step %ld: cannot create '%s': %s", path, step, tmp, strerror(e));
    }
    char *line = NULL;
    size_t cap = 0;
    int bad = 0;
    ssize_t n;
    while (!bad && (n = getline(&line, &cap, in)) > 0) {
        long s = -1;
        int whole = line[n - 1] == '\n'; /* (only the last line can lack it) */
        if (!whole) { /* a record cut short, unless it is whole JSON but for its newline */
            json_t *j = json_loadb(line, (size_t)n, 0, NULL);
            int cut = !json_is_object(j);
            json_decref(j);
            if (cut) continue;
        }
        if (sscanf(line, "{\"step\": %ld", &s) == 1 && s > step) continue;
        if (fputs(line, out) == EOF || (!whole && fputc('\n', out) == EOF)) bad = errno ? errno : EIO;
    }
    free(line);
    if (!bad && ferror(in)) bad = EIO;
    fclose(in);
    errno = 0;
    if (fflush(out) != 0 && !bad) bad = errno ? errno : EIO;
    if (!bad && fsync(fileno(out)) != 0) bad = errno; /* never an empty log after a crash */
    if (fclose(out) != 0 && !bad) bad = errno ? errno : EIO;
    if (!bad && rename(tmp, path) != 0) bad = errno;
    if (bad) {
        unlink(tmp);
        cli_die(CLI_EXIT_FATAL, "cannot trim '%s' to step %ld: %s", path, step, strerror(bad));
    }
}

/* A record of the log that did not reach its file (a full disk): one line,
 * no more records (the log would have a gap), and the run ends with exit 3
 * once training is done.  Returns NULL (the log closed). */
FILE *log_failed(FILE *log, const char *path, long step, int *bad)
{
    int e = errno ? errno : EIO;
    if (log) fclose(log);
    cli_warn("cannot write '%s' at step %ld: %s (no further records; training goes on, exit status 3)", path, step,
             strerror(e));
    *bad = 1;
    return NULL;
}

/* v with digits significant digits (%g), or digits decimals with fixed,
 * into buf[32]; "null" when it is not finite: JSON has no NaN or infinity
 * (printf's "-nan" broke every reader of the log). */
const char *json_num(char buf[32], double v, int digits, int fixed)
{
    if (!isfinite(v)) return "null";
    snprintf(buf, 32, fixed ? "%.*f" : "%.*g", digits, v);
    return buf;
}

void log_step(FILE *log, const step_record *r)
{
    char jl[6][32]; /* a loss term that overflowed (fp16; weights grown large): null, valid JSON */
    const tr_loss *L = &r->L;
    char dmg[40] = ""; /* (only where there were: the records of a run without any as they were) */
    if (r->damaged > 0) snprintf(dmg, sizeof dmg, ", \"damaged\": %ld", r->damaged);
    fprintf(log, "{\"step\": %ld, \"loss\": %s, \"focal\": %s, \"dice\": %s, \"iou_mse\": %s, "
            "\"miou\": %s, \"lr\": %.6g, \"grad_norm\": %s, \"images_per_s\": %.3f, \"data_wait_pct\": %.1f, "
            "\"mem_allocated\": %" PRIu64 ", \"mem_peak\": %" PRIu64 ", \"mem_reserved\": %" PRIu64
            ", \"mem_sys_allocs\": %" PRIu64 ", \"step_s\": %.4f%s%s}\n",
            r->step, json_num(jl[0], L->loss, 6, 0), json_num(jl[1], L->focal, 6, 0), json_num(jl[2], L->dice, 6, 0),
            json_num(jl[3], L->iou_mse, 6, 0), json_num(jl[4], L->miou, 4, 1), r->lr, json_num(jl[5], r->grad_norm, 6, 0),
            r->images_per_s, r->data_wait_pct, r->mem.total, r->mem.total_peak, r->mem.reserved, r->mem.n_sys_allocs,
            r->step_s, dmg, r->extra ? r->extra : "");
}

void print_step(const step_record *r)
{
    char mline[160];
    const tr_loss *L = &r->L;
    char dmg[40] = "";
    tr_mem_format_line(mline, sizeof mline, &r->mem);
    if (r->damaged > 0) snprintf(dmg, sizeof dmg, "  damaged %ld", r->damaged);
    fprintf(stderr, "step %ld/%ld  loss %.4f (focal %.4f dice %.4f iou %.4f)  mIoU %.3f  lr %.2e  "
            "%.2f img/s  data %.0f%%  %s%s\n",
            r->step, r->steps, L->loss, L->focal, L->dice, L->iou_mse, L->miou, r->lr, r->images_per_s, r->data_wait_pct,
            mline, dmg);
}
