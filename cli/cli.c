/* cli.c - messages, usage errors, progress bar and parsers for the programs. */
#include "cli.h"
#include "sa1b_shard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

static const char *prog_name = "sa1b";
/* Why flushing standard output before a message failed (0: it did not):
 * glibc drops what it could not write, so cli_stdout_check would no longer
 * see the reason. */
static int stdout_errno;

void cli_init(const char *argv0)
{
    if (!argv0) return;
    const char *slash = strrchr(argv0, '/');
    prog_name = slash ? slash + 1 : argv0;
    /* libtool wrappers run "lt-NAME" */
    if (strncmp(prog_name, "lt-", 3) == 0) prog_name += 3;
}

const char *cli_prog(void) { return prog_name; }

/* The temporary output of cli_temp_set, removed by the signal handler and
 * by cli_die and cli_usage_error, so that no exit leaves it behind. */
static char temp_path[4096];
static volatile sig_atomic_t temp_active;

static _Noreturn void exit_clean(int status)
{
    if (temp_active) unlink(temp_path);
    temp_active = 0;
    exit(status);
}

static void vwarn(const char *fmt, va_list ap)
{
    int saved = errno;
    errno = 0;
    if (fflush(stdout) != 0 && !stdout_errno) stdout_errno = errno;
    errno = saved;
    fprintf(stderr, "%s: ", prog_name);
    /* a message is one line whatever it quotes (a name, a file's text):
     * its control bytes are written as \n, \t, \xHH */
    va_list aq;
    va_copy(aq, ap);
    errno = saved; /* (for a %m) */
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *m = n >= 0 ? malloc((size_t)n + 1) : NULL;
    errno = saved;
    if (!m) {
        vfprintf(stderr, fmt, ap);
    } else {
        vsnprintf(m, (size_t)n + 1, fmt, ap);
        char *e = malloc(4 * (size_t)n + 1);
        fputs(e ? sa1b_escape(e, 4 * (size_t)n + 1, m, (size_t)n) : m, stderr);
        free(e);
    }
    free(m);
    fputc('\n', stderr);
}

void cli_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

void cli_die(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
    exit_clean(status);
}

void cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
    fprintf(stderr, "Try '%s --help' for more information.\n", prog_name);
    exit_clean(CLI_EXIT_USAGE);
}

void cli_version(void)
{
    printf("%s (sa1b) %s\n", prog_name, PACKAGE_VERSION);
    cli_stdout_check();
}

double cli_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress_init(cli_progress *p, int quiet)
{
    memset(p, 0, sizeof *p);
    p->enabled = !quiet && isatty(STDERR_FILENO);
    p->t0 = cli_now();
}

void cli_progress_update(cli_progress *p, uint64_t done, uint64_t total, const char *fmt, ...)
{
    if (!p->enabled) return;
    double t = cli_now();
    if (p->drawn && t - p->last < 0.1 && !(total && done >= total)) return;
    p->last = t;
    p->drawn = 1;
    char tail[160] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tail, sizeof tail, fmt, ap);
        va_end(ap);
    }
    if (total) {
        enum { W = 24 };
        double f = (double)done / (double)total;
        if (f > 1) f = 1;
        int fill = (int)(f * W);
        char bar[W + 1];
        for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '.';
        bar[W] = '\0';
        if (p->bytes)
            fprintf(stderr, "\r\033[K%s [%s] %3d%% %.1f/%.1f MB %s", prog_name, bar, (int)(100 * f),
                    (double)done / 1e6, (double)total / 1e6, tail);
        else
            fprintf(stderr, "\r\033[K%s [%s] %3d%% %llu/%llu %s", prog_name, bar, (int)(100 * f),
                    (unsigned long long)done, (unsigned long long)total, tail);
    } else {
        fprintf(stderr, "\r\033[K%s %llu %s (%.0fs)", prog_name, (unsigned long long)done, tail,
                t - p->t0);
    }
    fflush(stderr);
}

void cli_progress_end(cli_progress *p)
{
    if (p->enabled && p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = 0;
}

int cli_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    if (!s || !*s) return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

int cli_parse_dims(const char *s, uint32_t max, uint32_t *h, uint32_t *w)
{
    if (!s) return -1;
    const char *x = strchr(s, 'x');
    if (!x || x == s) return -1;
    char a[32];
    size_t n = (size_t)(x - s);
    if (n >= sizeof a) return -1;
    memcpy(a, s, n);
    a[n] = '\0';
    uint64_t hh, ww;
    if (cli_parse_u64(a, 1, max, &hh) || cli_parse_u64(x + 1, 1, max, &ww)) return -1;
    *h = (uint32_t)hh;
    *w = (uint32_t)ww;
    return 0;
}

int cli_parse_size(const char *s, uint64_t *bytes)
{
    if (!s || !*s || *s == '-') return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0) return -1;
    double mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) return -1;
    double b = v * mult;
    if (b > 1.8e19) return -1;
    *bytes = (uint64_t)b;
    return 0;
}

/* The reason a write to f failed, flushing it first: 0 when none did, -1
 * when the reason is lost (after a failed write glibc drops the buffer, and
 * a later fflush succeeds with only the error flag set). */
static int stream_error(FILE *f)
{
    errno = 0;
    if (fflush(f) != 0) return errno ? errno : -1;
    return ferror(f) ? -1 : 0;
}

static const char *reason(int e) { return e > 0 ? strerror(e) : "write error"; }

void cli_stdout_check(void)
{
    int e = stream_error(stdout);
    if (e < 0 && stdout_errno) e = stdout_errno;
    if (e) cli_die(CLI_EXIT_FATAL, "standard output: %s", reason(e));
}

/* Removes the temporaries "PATH.tmp-XXXXXX" that runs killed while they
 * wrote PATH left (SIGKILL, the OOM killer, a power cut: a multi-gigabyte
 * tar of sa1b-synth, left for good), one line each.  A live writer holds a
 * flock(2) lock on its temporary from the moment it made it, so a file
 * whose lock this process gets has no writer; the few microseconds between
 * mkstemp and flock are covered by leaving files changed in the last 10
 * seconds alone.  Nothing else is touched: only regular files of exactly
 * that name's form. */
static void sweep_temps(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    const char *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (strncmp(n, base, blen) != 0 || strncmp(n + blen, ".tmp-", 5) != 0 || strlen(n + blen + 5) != 6) continue;
        int form = 1;
        for (const char *c = n + blen + 5; *c; c++)
            if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))) form = 0;
        char p[8300];
        struct stat ls, fs;
        snprintf(p, sizeof p, "%s/%s", dir, n);
        if (!form || lstat(p, &ls) != 0 || !S_ISREG(ls.st_mode) || time(NULL) - ls.st_mtime < 10) continue;
        int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &fs) == 0 && lstat(p, &ls) == 0 && fs.st_dev == ls.st_dev &&
            fs.st_ino == ls.st_ino && unlink(p) == 0)
            cli_warn("removed '%s', the temporary of an earlier run that was killed while it wrote '%s'", p, path);
        close(fd);
    }
    closedir(d);
}

void cli_out_open(cli_out *o, const char *path)
{
    o->f = NULL;
    o->path = NULL;
    o->tmp = NULL;
    if (!path || strcmp(path, "-") == 0) {
        o->f = stdout;
        return;
    }
    o->path = path;
    struct stat st;
    int exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", path, strerror(EISDIR));
    for (int std = 1; exists && std <= 2; std++) {
        /* the file of standard output or error under another name
         * (/dev/stdout, /proc/self/fd/1): written through that descriptor,
         * where the shell's redirection put it (a rename would leave the
         * redirection writing to a file no longer there, replace what >>
         * appends to, and as root turn /dev/stdout into a regular file) */
        struct stat ss;
        if (fstat(std, &ss) != 0 || ss.st_dev != st.st_dev || ss.st_ino != st.st_ino) continue;
        fflush(std == 1 ? stdout : stderr);
        int fd = fcntl(std, F_DUPFD_CLOEXEC, 3);
        if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
            int e = errno;
            if (fd >= 0) close(fd);
            cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", path, strerror(e));
        }
        return;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        /* a device or a FIFO: write in place; a rename over it would
         * replace it (as root, /dev/null itself) with a regular file */
        int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
        if (fd < 0) cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", path, strerror(errno));
        if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
            if (!(o->f = fdopen(fd, "wb"))) {
                int e = errno;
                close(fd);
                cli_die(CLI_EXIT_FATAL, "cannot open '%s': %s", path, strerror(e));
            }
            return;
        }
        close(fd); /* replaced by a regular file meanwhile: by a rename, below */
    }
    size_t n = strlen(path) + 16;
    o->tmp = malloc(n);
    if (!o->tmp) cli_die(CLI_EXIT_FATAL, "out of memory");
    snprintf(o->tmp, n, "%s.tmp-XXXXXX", path);
    sweep_temps(path);
    int fd = mkstemp(o->tmp);
    if (fd < 0) cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", path, strerror(errno));
    cli_temp_set(o->tmp);
    (void)flock(fd, LOCK_EX | LOCK_NB); /* held while it is written: see sweep_temps */
    /* mkstemp makes 0600: a file replaced keeps its permissions (a private
     * one stays private), a new one is for sharing (0666 less the umask) */
    mode_t mask = umask(0);
    umask(mask);
    mode_t mode = exists && S_ISREG(st.st_mode) ? st.st_mode & 0777 : 0666 & ~mask;
    /* and its owner and group where we may give them (root; a group of
     * ours): a file of a shared group stays the group's */
    if (exists && S_ISREG(st.st_mode) && fchown(fd, st.st_uid, st.st_gid) != 0 && fchown(fd, (uid_t)-1, st.st_gid) != 0) {
        /* left ours */
    }
    if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        cli_die(CLI_EXIT_FATAL, "cannot create '%s': %s", path, strerror(e)); /* (removes o->tmp) */
    }
}

void cli_out_fail(cli_out *o, const char *why)
{
    if (!o->path) cli_die(CLI_EXIT_FATAL, "standard output: %s", why);
    cli_die(CLI_EXIT_FATAL, "cannot write '%s': %s", o->path, why); /* (cli_die removes the temporary) */
}

void cli_out_discard(cli_out *o)
{
    if (!o->path) {
        fflush(stdout);
        return;
    }
    fclose(o->f);
    o->f = NULL;
    if (o->tmp) {
        unlink(o->tmp);
        cli_temp_set(NULL);
        free(o->tmp);
        o->tmp = NULL;
    }
}

void cli_out_commit(cli_out *o)
{
    if (!o->path) {
        cli_stdout_check();
        return;
    }
    int e = stream_error(o->f);
    if (!e && o->tmp && fsync(fileno(o->f)) != 0) e = errno;
    if (fclose(o->f) != 0 && !e) e = errno;
    o->f = NULL;
    if (!e && o->tmp && rename(o->tmp, o->path) != 0) e = errno;
    if (e) cli_out_fail(o, reason(e));
    if (o->tmp) cli_temp_set(NULL);
    free(o->tmp);
    o->tmp = NULL;
}

void cli_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

void cli_check_output(const char *out, char *const *in, int n)
{
    struct stat os, is;
    if (stat(out, &os) != 0 || !S_ISREG(os.st_mode)) return;
    for (int i = 0; i < n; i++) {
        int got = strcmp(in[i], "-") == 0 ? fstat(0, &is) == 0 : stat(in[i], &is) == 0;
        if (got && is.st_dev == os.st_dev && is.st_ino == os.st_ino)
            cli_die(CLI_EXIT_USAGE, "-o '%s' is the input '%s'%s: give another file", out, in[i],
                    strcmp(in[i], "-") == 0 ? " (standard input)" : "");
    }
    char magic[8];
    FILE *f = fopen(out, "rb");
    int shard = f && fread(magic, 1, sizeof magic, f) == sizeof magic && !memcmp(magic, SA1B_SHARD_MAGIC, 8);
    if (f) fclose(f);
    if (shard) cli_die(CLI_EXIT_USAGE, "-o '%s' is a shard: not replaced; give another file", out);
}

static void on_sigbus(int sig)
{
    (void)sig;
    static const char msg[] = ": a shard was truncated or became unreadable while it was read (SIGBUS)\n";
    if (write(2, prog_name, strlen(prog_name)) < 0 || write(2, msg, sizeof msg - 1) < 0) {
        /* nothing more can be done */
    }
    _exit(CLI_EXIT_FATAL);
}

void cli_catch_sigbus(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

const char *cli_shard_path(const char *arg)
{
    struct stat st;
    if (strcmp(arg, "-") != 0) return arg;
    if (fstat(0, &st) == 0 && S_ISREG(st.st_mode)) return "/dev/stdin";
    cli_die(CLI_EXIT_FATAL, "'-': standard input is not a file: a shard is read through a memory mapping, so "
            "give its path, or redirect standard input from it (< FILE)");
}

void cli_on_termination(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL); /* (also where a shell's background job has it ignored: kill -INT stops it) */
    sigaction(SIGTERM, &sa, NULL);
    struct sigaction old; /* nohup's SIGHUP stays ignored, as sa1b-train leaves it */
    if (sigaction(SIGHUP, NULL, &old) != 0 || old.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
}


static void temp_on_signal(int sig)
{
    if (temp_active) unlink(temp_path);
    signal(sig, SIG_DFL);
    raise(sig);
}

void cli_temp_set(const char *path)
{
    static int installed;
    static unsigned long count;
    temp_active = 0;
    if (!path || strlen(path) >= sizeof temp_path) return;
    memcpy(temp_path, path, strlen(path) + 1);
    temp_active = 1;
    if (!installed) {
        cli_on_termination(temp_on_signal);
        installed = 1;
    }
    /* tests: SA1B_TEST_KILL=temp:N raises SIGTERM once the N-th temporary exists */
    const char *k = getenv("SA1B_TEST_KILL");
    unsigned long n;
    if (k && sscanf(k, "temp:%lu", &n) == 1 && ++count == n) raise(SIGTERM);
}
