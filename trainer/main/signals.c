/*
 * signals.c - sa1b-train and signals: SIGINT, SIGTERM and SIGHUP stop a
 * run after its step (a checkpoint is written), a second at once; SIGBUS
 * (a mapped shard cut short) ends it in one line naming the last
 * checkpoint.  The handlers read what this file keeps (the process's one
 * copy: a handler has no other way to reach it), set through the
 * functions below.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "train.h"

static volatile sig_atomic_t stop_requested, stop_signal;
static const char *volatile stop_line; /* after the training: the line a signal ends the process with */
/* The first SIGINT/SIGTERM/SIGHUP stops after the step (a checkpoint is
 * written); a second ends the process at once.  Once the training is over
 * on rank 0 (its last checkpoint written, the evaluation of --val to come,
 * until that evaluation's line is printed), the first ends the process at
 * once with stop_line, exit 130. */
static void on_signal(int sig)
{
    const char *line = stop_line;
    if (line) {
        int bad = write(2, line, strlen(line)) < 0;
        (void)bad; /* nothing more can be done */
        _exit(130);
    }
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
    stop_signal = sig;
    stop_requested = 1;
}

/* SIGBUS: a mapped shard was truncated (or its disk failed) while the
 * loader read it.  Any thread may take the fault and nothing can be saved
 * from here: one line naming where the last checkpoint is, and exit 3. */
static const char *volatile bus_out = NULL;
static volatile sig_atomic_t bus_checkpoint; /* a checkpoint of this run is in bus_out (latest names it) */
static const char *volatile bus_line;         /* after the training: the whole line (nothing is lost) */

static void on_sigbus(int sig)
{
    (void)sig;
    static const char a[] = ": a training shard was truncated or could not be read while it was read (SIGBUS); ",
                      b[] = "the steps after the last checkpoint are lost: --resume ",
                      c[] = " continues from it once the shards are whole\n",
                      d[] = "no checkpoint was written: start the run again (--overwrite) once the shards are whole\n",
                      e[] = ": a shard was truncated or could not be read while it was read (SIGBUS)\n";
    const char *p = cli_prog(), *out = bus_out, *line = bus_line;
    if (line) {
        int bad = write(2, line, strlen(line)) < 0;
        (void)bad;
        _exit(CLI_EXIT_FATAL);
    }
    int bad = write(2, p, strlen(p)) < 0;
    if (!out) bad = bad || write(2, e, sizeof e - 1) < 0;
    else if (bus_checkpoint)
        bad = bad || write(2, a, sizeof a - 1) < 0 || write(2, b, sizeof b - 1) < 0 ||
              write(2, out, strlen(out)) < 0 || write(2, c, sizeof c - 1) < 0;
    else bad = bad || write(2, a, sizeof a - 1) < 0 || write(2, d, sizeof d - 1) < 0;
    (void)bad; /* nothing more can be done */
    _exit(CLI_EXIT_FATAL);
}

void sig_watch_bus(void) { signal(SIGBUS, on_sigbus); }

void sig_watch_stop(void)
{
    struct sigaction hup;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN) /* (nohup: left ignored) */
        signal(SIGHUP, on_signal); /* a closed terminal: stop with a checkpoint, as SIGTERM */
}

int sig_stop_requested(void) { return stop_requested != 0; }

void sig_stop_now(void)
{
    if (stop_requested) signal(stop_signal, SIG_DFL), raise(stop_signal);
}

void sig_bus_checkpoint(const char *out, int written)
{
    bus_out = out;
    bus_checkpoint = written;
}

void sig_bus_checkpointed(const char *out)
{
    if (out) bus_out = out;
    bus_checkpoint = 1;
}

void sig_after_training(const char *stop_msg, const char *bus_msg)
{
    static char after[4400], bus_after[4400]; /* (read by the handlers, any time from now on) */
    snprintf(after, sizeof after, "%s: %s\n", cli_prog(), stop_msg);
    snprintf(bus_after, sizeof bus_after, "%s: %s\n", cli_prog(), bus_msg);
    stop_line = after;
    bus_line = bus_after;
}

void sig_stop_keeps(void) { stop_line = NULL; }
