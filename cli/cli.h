/*
 * cli.h - the programs' private helper library (libarchive_fe's role): one
 * voice for messages, usage errors, --version, a progress bar, and small
 * parsers shared by every sa1b-* program.  Not part of libsa1b.
 *
 * Messages follow "prog: what: why" (lower case, no full stop, subject
 * quoted).  Exit codes common to every program:
 */
#ifndef SA1B_CLI_H
#define SA1B_CLI_H

#include <stdint.h>
#include <stdio.h>

enum { CLI_EXIT_OK = 0, CLI_EXIT_PARTIAL = 1, CLI_EXIT_USAGE = 2, CLI_EXIT_FATAL = 3 };

/* Sets the program name used in every message (basename of argv0). */
void cli_init(const char *argv0);
const char *cli_prog(void);

/* "prog: <message>\n" on stderr. */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* cli_warn then exit(status), removing the temporary file of cli_temp_set. */
_Noreturn void cli_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "prog: <message>\nTry 'prog --help' for more information.\n", exit 2
 * (removing the temporary file of cli_temp_set). */
_Noreturn void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "prog (sa1b) VERSION" on stdout, checked as cli_stdout_check does. */
void cli_version(void);

/* Monotonic time in seconds. */
double cli_now(void);

/* A one-line progress bar on stderr, drawn only when stderr is a terminal
 * and quiet is 0; redrawn at most 10 times a second. */
typedef struct cli_progress {
    int enabled;
    double t0, last;
    int drawn;
    int bytes;          /* set to 1: done/total are bytes, shown in MB */
} cli_progress;
void cli_progress_init(cli_progress *p, int quiet);
/* done of total (total 0: unknown), then a free-form tail ("12.3 MB/s ..."). */
void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Clears the bar line so that the next message starts on a clean line. */
void cli_progress_end(cli_progress *p);

/* Parsers: 0 on success, -1 on a malformed or out-of-range value. */
int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);
int cli_parse_double(const char *s, double *out);
/* "HxW" (rows x columns), both in 1..max. */
int cli_parse_dims(const char *s, uint32_t max, uint32_t *h, uint32_t *w);
/* "512", "64K", "16M", "16G", "1T" (powers of 1024) */
int cli_parse_size(const char *s, uint64_t *bytes);

/* Installs handler for SIGINT, SIGTERM and SIGHUP, the signals that end a
 * program which may have temporary files to remove; a SIGHUP that the
 * program was started with ignored (nohup) stays ignored. */
void cli_on_termination(void (*handler)(int));
/* For programs that read shards through a memory mapping: a shard truncated
 * (or unreadable) while it is read raises SIGBUS, which then ends the
 * program with one line ("prog: a shard was truncated or became unreadable
 * while it was read (SIGBUS)"), exit 3, instead of "Bus error". */
void cli_catch_sigbus(void);

/* Registers the temporary file an output is written to (one at a time), so
 * that SIGINT, SIGTERM or SIGHUP removes it before the program dies of the
 * signal, and cli_die or cli_usage_error before it exits; NULL once it has been renamed into place or removed.  The first
 * call installs the handlers.  Tests: SA1B_TEST_KILL=temp:N raises SIGTERM
 * right after the N-th registration. */
void cli_temp_set(const char *path);

/* Checks standard output at the end of a program: flushes it and, when a
 * write to it failed (now or earlier: ferror), prints "prog: standard
 * output: REASON" and exits with CLI_EXIT_FATAL.  Every program that prints
 * results calls it before it returns from main. */
void cli_stdout_check(void);

/* An output file named on the command line, written so that nothing is
 * lost or half-written:
 *  - NULL or "-": standard output (checked as cli_stdout_check does);
 *  - an existing file that is not a regular file (a character device such
 *    as /dev/null, a FIFO): written in place, opened O_WRONLY, never
 *    replaced by a regular file;
 *  - the file of standard output or error under another name
 *    (/dev/stdout with standard output redirected to a file): written in
 *    place, through a duplicate of that descriptor;
 *  - otherwise a temporary "PATH.tmp-XXXXXX" in the same directory
 *    (registered with cli_temp_set), synced, given the permissions of the
 *    regular file PATH it replaces (else 0666 less the umask), and its
 *    owner and group where the process may, and renamed over PATH by
 *    cli_out_commit; it is flock(2)ed while written, and the temporaries
 *    of PATH that killed runs left (no lock held, unchanged for 10
 *    seconds) are removed first, one line each. */
typedef struct cli_out {
    FILE *f;          /* where to write */
    const char *path; /* as named; NULL for standard output */
    char *tmp;        /* the temporary file, NULL when written in place */
} cli_out;

/* Opens o for path; on failure prints "prog: cannot create 'PATH': REASON"
 * and exits with CLI_EXIT_FATAL. */
void cli_out_open(cli_out *o, const char *path);
/* Flushes and closes o (renaming the temporary file into place); on a write
 * error, now or earlier, removes the temporary file, prints "prog: cannot
 * write 'PATH': REASON" (or "prog: standard output: REASON") and exits with
 * CLI_EXIT_FATAL. */
void cli_out_commit(cli_out *o);
/* Closes o without committing it: the temporary file is removed and PATH
 * left as it was (what went to a device or FIFO or standard output stays
 * written).  Prints nothing. */
void cli_out_discard(cli_out *o);
/* Removes the temporary file (the output is left as it was), prints "prog:
 * cannot write 'PATH': why" and exits with CLI_EXIT_FATAL. */
_Noreturn void cli_out_fail(cli_out *o, const char *why);

/* fsync of folder dir after a rename into it, so that the rename lasts
 * through a crash (best effort: a file system that cannot sync a folder
 * has nothing to lose there). */
void cli_sync_dir(const char *dir);

/* Before an output named with -o is opened: exit 2 ("prog: -o 'OUT' is
 * the input 'IN': give another file") when OUT is one of the n inputs (the
 * same file; for "-", the file standard input is redirected from), and
 * ("-o 'OUT' is a shard: not replaced; give another file") when OUT is a
 * shard, which no results file replaces. */
void cli_check_output(const char *out, char *const *in, int n);

/* The path to open for a shard named on the command line: "-" is standard
 * input when it is a regular file (redirected from one); otherwise (a pipe)
 * the program stops with a message saying why and what to do. */
const char *cli_shard_path(const char *arg);

#endif
