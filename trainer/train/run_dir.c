/*
 * run_dir.c - which files of a folder belong to a training run, the latest
 * file that names its last checkpoint, the checkpoints a resume can start
 * from, and the run record's text form (see run_dir.h).
 */
#include "run_dir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/meta/backend_meta.h"
#include "checkpoint.h"
#include "common/safetensors.h"

/* "<prefix><digits><suffix>" exactly */
static int numbered(const char *name, const char *prefix, const char *suffix)
{
    size_t np = strlen(prefix), ns = strlen(suffix), n = strlen(name);
    if (n <= np + ns || strncmp(name, prefix, np) != 0 || strcmp(name + n - ns, suffix) != 0) return 0;
    for (size_t i = np; i < n - ns; i++)
        if (name[i] < '0' || name[i] > '9') return 0;
    return 1;
}

/* The length of NAME in a temporary NAME.tmp or NAME.tmp.PID.N (PID and N
 * decimal), 0 when name is no temporary. */
static size_t temp_base(const char *name)
{
    size_t n = strlen(name);
    if (n > 4 && strcmp(name + n - 4, ".tmp") == 0) return n - 4;
    const char *t = strstr(name, ".tmp.");
    if (!t) return 0;
    const char *p = t + 5, *q = p + strspn(p, "0123456789");
    if (q == p || *q != '.' || !q[1] || q[1 + strspn(q + 1, "0123456789")]) return 0;
    return (size_t)(t - name);
}

/* A file sa1b-train writes for a run, or its temporary (temp_base). */
static int run_file(const char *name)
{
    char base[256];
    size_t n = strlen(name);
    if (n >= sizeof base) return 0;
    memcpy(base, name, n + 1);
    size_t tb = temp_base(base);
    if (tb) base[tb] = 0;
    /* state-STEP.rRANK.bin: a rank's part of the optimizer state (--zero 1) */
    const char *dot = strchr(base, '.');
    char first[256];
    snprintf(first, sizeof first, "%.*s.bin", dot ? (int)(dot - base) : 0, base);
    int shard = dot && numbered(dot + 1, "r", ".bin") && numbered(first, "state-", ".bin");
    return !strcmp(base, "latest") || !strcmp(base, "log.jsonl") || numbered(base, "model-", ".safetensors") ||
           numbered(base, "state-", ".bin") || shard;
}

/* Calls fn on every run file of dir; the number of run files, or -1 with
 * errno set when dir cannot be read (ENOENT: no such folder). */
static long each_run_file(const char *dir, int (*fn)(const char *dir, const char *name, void *ctx), void *ctx)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!run_file(e->d_name)) continue;
        n++;
        if (fn && fn(dir, e->d_name, ctx) < 0) {
            int saved = errno;
            closedir(d);
            errno = saved;
            return -1;
        }
    }
    closedir(d);
    return n;
}

FILE *tr_run_dir_fopen(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    FILE *f = NULL;
    int e = fstat(fd, &st) != 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (!e && !(f = fdopen(fd, "r"))) e = errno;
    if (e) {
        close(fd);
        errno = e;
    }
    return f;
}

int tr_run_dir_holds_run(const char *dir, char *what, size_t what_len)
{
    long n = each_run_file(dir, NULL, NULL);
    if (n < 0) {
        if (errno == ENOENT) return 0;
        snprintf(what, what_len, "%s", strerror(errno));
        return -1;
    }
    if (n == 0) return 0;
    char path[4200];
    long step = -1;
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = tr_run_dir_fopen(path);
    if (f) {
        if (fscanf(f, "%ld", &step) != 1) step = -1;
        fclose(f);
    }
    if (step >= 0)
        snprintf(what, what_len, "a run with a checkpoint of step %ld (%ld files)", step, n);
    else
        snprintf(what, what_len, "files of a run (%ld: log, checkpoints)", n);
    return 1;
}

/* A cut last record (text up to the end of the file, or up to the zeros a
 * crash may leave there): printable, and as much of a record's start as
 * it has. */
static int cut_record(const char *line, size_t n)
{
    static const char head[] = "{\"step\": ";
    const size_t hn = sizeof head - 1;
    for (size_t i = 0; i < n; i++)
        if (line[i] < 0x20 || line[i] > 0x7e) return 0;
    return strncmp(line, head, n < hn ? n : hn) == 0;
}

/* A whole record of sa1b-train's log: "{\"step\": N, \"loss\": ..., then
 * the other keys of its first fields in their order ...}" with N above
 * prev.  (A log whose lines only begin like it, as json.dumps writes a
 * {"step", "loss"} dict, is another program's.) */
static int whole_record(const char *line, size_t n, long *prev)
{
    static const char *const keys[] = {", \"focal\": ", ", \"dice\": ", ", \"iou_mse\": ", ", \"miou\": ",
                                       ", \"lr\": ", ", \"grad_norm\": "};
    long step;
    int k = -1;
    if (n < 3 || line[n - 2] != '}' || sscanf(line, "{\"step\": %ld, \"loss\": %n", &step, &k) < 1 || k < 0 ||
        step <= *prev)
        return 0;
    const char *p = line + k;
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!(p = strstr(p, keys[i]))) return 0;
    *prev = step;
    return 1;
}

/* The log f is sa1b-train's: each line one of its step records (at most
 * 4 KiB, steps rising), the last one perhaps cut short anywhere, and
 * perhaps followed by zeros to the end of the file (what a crash may leave
 * at a file's end).  1, else 0 (-1: a read error). */
static int step_records(FILE *f)
{
    char line[4096];
    long prev = 0;
    for (;;) {
        size_t n = 0;
        int c = EOF;
        while (n < sizeof line - 1 && (c = getc(f)) != EOF && c != 0) {
            line[n++] = (char)c;
            if (c == '\n') break;
        }
        if (ferror(f)) return -1;
        line[n] = 0;
        if (c == 0) { /* zeros: to the end of the file, after a cut record (or none) */
            while ((c = getc(f)) == 0) continue;
            if (ferror(f)) return -1;
            return c == EOF && cut_record(line, n);
        }
        if (c == EOF) return cut_record(line, n); /* the end (n = 0), or a cut last line */
        if (c != '\n') return 0;                 /* a line longer than 4 KiB */
        if (!whole_record(line, n, &prev)) return 0;
    }
}

typedef struct killed_ctx {
    char *what;
    size_t what_len;
    long cut;    /* the step of a first checkpoint cut between its ranks' parts (-1: none) */
    long cut_files; /* its files */
    int more;    /* a file more than a killed start leaves */
    int err;     /* errno of a log that could not be read */
    long models; /* model-N.safetensors files (N: model_step) */
    long model_step;
    int log;     /* a log of sa1b-train's is there */
    char model_name[64];
} killed_ctx;

/* name is model-STEP.safetensors, state-STEP.bin or state-STEP.rR.bin. */
static int checkpoint_file(const char *name, long step)
{
    char want[64];
    size_t n = (size_t)snprintf(want, sizeof want, "state-%ld.", step);
    if (!strncmp(name, want, n) && (!strcmp(name + n, "bin") || numbered(name + n, "r", ".bin"))) return 1;
    snprintf(want, sizeof want, "model-%ld.safetensors", step);
    return !strcmp(name, want);
}

static int killed_one(const char *dir, const char *name, void *ctx)
{
    killed_ctx *k = ctx;
    if (k->more || k->err || temp_base(name)) return 0;
    if (k->cut >= 0 && checkpoint_file(name, k->cut)) { /* (one of its files named, if no log is there) */
        if (!k->cut_files++) snprintf(k->model_name, sizeof k->model_name, "%s", name);
        return 0;
    }
    if (numbered(name, "model-", ".safetensors") && strlen(name) < sizeof k->model_name) {
        /* a model file without its state: a run killed within its first
         * checkpoint, when the run's log is there (below) */
        k->models++;
        k->model_step = strtol(name + 6, NULL, 10);
        snprintf(k->model_name, sizeof k->model_name, "%s", name);
        return 0;
    }
    if (strcmp(name, "log.jsonl") != 0) {
        snprintf(k->what, k->what_len, "'%s'", name);
        k->more = 1;
        return 0;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = tr_run_dir_fopen(path);
    if (!f && errno == EINVAL) { /* not a regular file */
        snprintf(k->what, k->what_len, "'%s' (not a regular file)", name);
        k->more = 1;
        return 0;
    }
    if (!f) {
        k->err = errno;
        snprintf(k->what, k->what_len, "cannot read '%s': %s", path, strerror(errno));
        return 0;
    }
    int r = step_records(f);
    fclose(f);
    if (r < 0) {
        k->err = EIO;
        snprintf(k->what, k->what_len, "cannot read '%s': %s", path, strerror(EIO));
    } else if (!r) {
        snprintf(k->what, k->what_len, "'%s' that is not a log of sa1b-train's", name);
        k->more = 1;
    } else {
        k->log = 1;
    }
    return 0;
}

typedef struct one_ctx {
    long step;   /* the step of every checkpoint file (-1: none yet) */
    int model;   /* model-N.safetensors is there */
    int state;   /* state-N.bin is there */
    long part;   /* the lowest R of a part state-N.rR.bin there (-1: none) */
    int bad;     /* another run file, two steps, not a regular file */
} one_ctx;

static int one_file(const char *dir, const char *name, void *ctx)
{
    one_ctx *u = ctx;
    if (temp_base(name) || !strcmp(name, "log.jsonl")) return 0; /* (tr_run_dir_killed_start's) */
    int model = numbered(name, "model-", ".safetensors");
    if (!model && strncmp(name, "state-", 6) != 0) return u->bad = 1, 0; /* (latest: not there) */
    char *end;
    long step = strtol(name + 6, &end, 10); /* (model-, state-) */
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if ((u->step >= 0 && u->step != step) || (model && u->model) || lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return u->bad = 1, 0;
    u->step = step;
    if (model) u->model = 1;
    else if (!strcmp(end, ".bin")) u->state = 1;
    else if (u->part < 0 || strtol(end + 2, NULL, 10) < u->part) u->part = strtol(end + 2, NULL, 10); /* ".rR.bin" */
    return 0;
}

long tr_run_dir_one_checkpoint(const char *dir, int *model, int *state, long *part)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/latest", dir);
    if (lstat(path, &st) == 0 || errno != ENOENT) return -1;
    one_ctx u = {-1, 0, 0, -1, 0};
    if (each_run_file(dir, one_file, &u) < 0 || u.bad || u.step < 0) return -1;
    /* and the log, if any, sa1b-train's */
    snprintf(path, sizeof path, "%s/log.jsonl", dir);
    FILE *f = tr_run_dir_fopen(path);
    if (!f && errno != ENOENT) return -1;
    if (f) {
        int r = step_records(f);
        fclose(f);
        if (r != 1) return -1;
    }
    *model = u.model, *state = u.state, *part = u.part;
    return u.step;
}

int tr_run_dir_killed_start(const char *dir, long cut, char *what, size_t what_len)
{
    killed_ctx k = {what, what_len, cut, 0, 0, 0, 0, -1, 0, ""};
    if (each_run_file(dir, killed_one, &k) < 0) {
        if (errno == ENOENT) return 1;
        snprintf(what, what_len, "%s", strerror(errno));
        return -1;
    }
    if (k.err) return -1;
    /* (the log is made when the run starts, its records every --log-every
     * steps: it may hold none yet) */
    long cuts = k.models + (k.cut_files > 0); /* first checkpoints cut short */
    if (!k.more && cuts && (cuts > 1 || (k.models && k.model_step <= 0) || !k.log)) {
        snprintf(what, what_len, "'%s'", k.model_name); /* (one kept there, not a killed checkpoint's) */
        return 0;
    }
    return !k.more;
}

static int remove_one(const char *dir, const char *name, void *ctx)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (unlink(path) == 0 || errno == ENOENT) return 0;
    snprintf(ctx, 4200, "%s", path);
    return -1;
}

static int remove_temp(const char *dir, const char *name, void *ctx)
{
    return temp_base(name) ? remove_one(dir, name, ctx) : 0;
}

static int remove_latest(const char *dir, const char *name, void *ctx)
{
    return strcmp(name, "latest") == 0 ? remove_one(dir, name, ctx) : 0;
}

static int remove_middle(const char *dir, const char *name, void *ctx)
{
    return strcmp(name, "latest") != 0 && strcmp(name, "log.jsonl") != 0 ? remove_one(dir, name, ctx) : 0;
}

static int remove_log(const char *dir, const char *name, void *ctx)
{
    return strcmp(name, "log.jsonl") == 0 ? remove_one(dir, name, ctx) : 0;
}

/* Removes the run files of dir that fn takes (remove_one: all). */
static int remove_each(const char *dir, int (*fn)(const char *, const char *, void *), char *err, size_t err_len)
{
    char failed[4200] = "";
    if (each_run_file(dir, fn, failed) >= 0 || errno == ENOENT) return 0;
    snprintf(err, err_len, "cannot remove '%s': %s", *failed ? failed : dir, strerror(errno));
    return -1;
}

int tr_run_dir_remove_temps(const char *dir, char *err, size_t err_len) { return remove_each(dir, remove_temp, err, err_len); }

/* Before any is removed: a run file that unlink would refuse (a folder of
 * that name) stops the clear with nothing removed, never half of the old
 * run gone (its latest removed, its earlier checkpoints left). */
static int removable(const char *dir, const char *name, void *ctx)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : (snprintf(ctx, 4200, "%s", path), -1);
    if (!S_ISDIR(st.st_mode)) return 0;
    snprintf(ctx, 4200, "%s", path);
    errno = EISDIR;
    return -1;
}

int tr_run_dir_clear(const char *dir, char *err, size_t err_len)
{
    char failed[4200] = "";
    if (each_run_file(dir, removable, failed) < 0 && errno != ENOENT) {
        snprintf(err, err_len, "cannot remove '%s': %s (nothing was removed)", *failed ? failed : dir, strerror(errno));
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0 && errno != ENOENT) { /* (not root: a folder it may not change) */
        snprintf(err, err_len, "cannot remove the files of the run in '%s': %s (nothing was removed)", dir,
                 strerror(errno));
        return -1;
    }
    /* latest first, the log last: a kill in the middle never leaves a
     * latest that names a removed file (every resume failed on it), nor
     * checkpoint files without their log (which --auto-resume refuses for
     * good; beside their log it tells a checkpoint cut short) */
    if (remove_each(dir, remove_latest, err, err_len) < 0 || remove_each(dir, remove_middle, err, err_len) < 0)
        return -1;
    return remove_each(dir, remove_log, err, err_len);
}

typedef struct same_file {
    dev_t dev;
    ino_t ino;
    char *name;
    size_t name_len;
} same_file;

static int is_same(const char *dir, const char *name, void *ctx)
{
    same_file *s = ctx;
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino) {
        snprintf(s->name, s->name_len, "%s", name);
        errno = EEXIST;
        return -1; /* found: stop */
    }
    return 0;
}

/* "NNNNN-iouXXX.png": five digits or more, three digits (export_png), or
 * the temporary of one that a killed export left (".tmp-" and mkstemp's
 * six letters or digits after it) */
static int overlay_name(const char *n)
{
    size_t d = 0;
    while (isdigit((unsigned char)n[d])) d++;
    if (!(d >= 5 && strncmp(n + d, "-iou", 4) == 0 && isdigit((unsigned char)n[d + 4]) &&
          isdigit((unsigned char)n[d + 5]) && isdigit((unsigned char)n[d + 6]) && strncmp(n + d + 7, ".png", 4) == 0))
        return 0;
    const char *t = n + d + 11;
    if (!*t) return 1;
    if (strncmp(t, ".tmp-", 5) != 0 || strlen(t + 5) != 6) return 0;
    for (int i = 5; i < 11; i++)
        if (!isalnum((unsigned char)t[i])) return 0;
    return 1;
}

long tr_run_dir_overlays(const char *dir, int remove)
{
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -1;
    long n = 0;
    char path[4400];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!overlay_name(e->d_name)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (remove && unlink(path) != 0 && errno != ENOENT) {
            closedir(d);
            return -1;
        }
        n++;
    }
    closedir(d);
    return n;
}

int tr_run_dir_has_file(const char *dir, const char *path, char *name, size_t name_len)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    same_file s = {st.st_dev, st.st_ino, name, name_len};
    return each_run_file(dir, is_same, &s) < 0 && errno == EEXIST;
}

static int needs_escape(unsigned char c) { return c < 0x20 || c > 0x7e || c == '%' || c == '"' || c == '\\'; }

int tr_run_rec_add(char **rec, const char *key, const char *value)
{
    if (!value) value = "";
    size_t old = *rec ? strlen(*rec) : 0, n = strlen(key) + 2;
    for (const char *p = value; *p; p++) n += needs_escape((unsigned char)*p) ? 3 : 1;
    char *r = realloc(*rec, old + n + 1);
    if (!r) return -1;
    char *w = r + old;
    w += sprintf(w, "%s=", key);
    for (const unsigned char *p = (const unsigned char *)value; *p; p++)
        w += needs_escape(*p) ? sprintf(w, "%%%02X", *p) : (*w = (char)*p, 1);
    *w++ = '\n';
    *w = 0;
    *rec = r;
    return 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

const char *tr_run_rec_get(const char *rec, const char *key, char *buf, size_t buf_len)
{
    size_t nk = strlen(key);
    for (const char *line = rec; line && *line;) {
        const char *end = strchr(line, '\n');
        if (!end) end = line + strlen(line);
        if ((size_t)(end - line) > nk && strncmp(line, key, nk) == 0 && line[nk] == '=') {
            size_t o = 0;
            for (const char *p = line + nk + 1; p < end; p++) {
                int c = (unsigned char)*p;
                if (c == '%' && end - p >= 3 && hexval(p[1]) >= 0 && hexval(p[2]) >= 0)
                    c = hexval(p[1]) * 16 + hexval(p[2]), p += 2;
                if (o + 1 >= buf_len) return NULL;
                buf[o++] = (char)c;
            }
            if (o >= buf_len) return NULL;
            buf[o] = 0;
            return buf;
        }
        line = *end ? end + 1 : end;
    }
    return NULL;
}

long tr_run_read_latest(const char *dir, char *err, size_t err_len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = tr_run_dir_fopen(path);
    if (!f)
        return snprintf(err, err_len, "cannot resume from '%s': %s", path,
                        errno == EINVAL ? "not a regular file" : strerror(errno)), -1;
    long step = -1;
    if (fscanf(f, "%ld", &step) != 1 || step < 0) step = -1;
    fclose(f);
    if (step < 0) snprintf(err, err_len, "'%s': not a step number", path);
    return step;
}

int tr_run_write_latest(const char *dir, long step, int own_tmp)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/latest", dir);
    if (own_tmp) snprintf(tmp, sizeof tmp, "%s.tmp.%ld.0", path, (long)getpid());
    else snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f && fprintf(f, "%ld\n", step) > 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the rename reaches the disk */
    if (fd >= 0) (void)fsync(fd), close(fd);
    return 0;
}

/* ---- the checkpoints a resume can start from ------------------------------ */

typedef struct ckpt_list {
    long *steps;
    long n, cap;
    int oom;
} ckpt_list;

static int list_model(const char *dir, const char *name, void *ctx)
{
    ckpt_list *c = ctx;
    char path[4200];
    struct stat st;
    if (!numbered(name, "model-", ".safetensors")) return 0;
    errno = 0;
    char *end;
    long step = strtol(name + 6, &end, 10);
    if (errno || step < 0) return 0; /* (digits beyond a long: no step a run writes) */
    snprintf(path, sizeof path, "%s/state-%ld.bin", dir, step);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (c->n == c->cap) {
        long cap = c->cap ? 2 * c->cap : 16;
        long *p = realloc(c->steps, (size_t)cap * sizeof *p);
        if (!p) return c->oom = 1, errno = ENOMEM, -1;
        c->steps = p, c->cap = cap;
    }
    c->steps[c->n++] = step;
    return 0;
}

static int step_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x > y ? -1 : x < y;
}

long tr_run_dir_checkpoints(const char *dir, long **steps)
{
    ckpt_list c = {NULL, 0, 0, 0};
    *steps = NULL;
    if (each_run_file(dir, list_model, &c) < 0) {
        int e = errno;
        free(c.steps);
        errno = e;
        return -1;
    }
    if (c.n) qsort(c.steps, (size_t)c.n, sizeof *c.steps, step_desc);
    /* (a step written twice, "model-7" and "model-07": once) */
    long k = 0;
    for (long i = 0; i < c.n; i++)
        if (!k || c.steps[k - 1] != c.steps[i]) c.steps[k++] = c.steps[i];
    *steps = c.steps;
    return k;
}

/* A safetensors file's metadata key as an integer in 0..max. */
static int meta_long(const tr_st_file *f, const char *key, long max, long *out)
{
    const char *v = tr_st_meta(f, key);
    if (!v || !*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 18) return -1;
    long x = strtol(v, NULL, 10);
    if (x > max) return -1;
    *out = x;
    return 0;
}

/* The model configuration of a checkpoint's metadata: 0, or -1 with why. */
static int meta_config(const tr_st_file *f, tr_config *c, char *why, size_t why_len)
{
    const char *k[8] = {"S", "P", "E", "L", "H", "C", "h", "D"};
    int *x[8] = {&c->S, &c->P, &c->E, &c->L, &c->H, &c->C, &c->h, &c->D};
    for (int i = 0; i < 8; i++) {
        long v;
        if (meta_long(f, k[i], 1000000, &v) < 0)
            return snprintf(why, why_len, "__metadata__ '%s' missing or not an integer", k[i]), -1;
        *x[i] = (int)v;
    }
    return tr_config_check(c, why, why_len);
}

/* Every F32 tensor of f finite (training never saves a NaN or an infinity:
 * such steps are skipped): 0, or -1 with why. */
static int all_finite(const tr_st_file *f, char *why, size_t why_len)
{
    for (int i = 0; i < f->n; i++) {
        const tr_st_tensor *t = &f->t[i];
        if (t->dtype != TR_ST_F32) continue;
        for (uint64_t j = 0; j < t->count; j++) {
            float v;
            memcpy(&v, t->data + 4 * j, 4);
            if (!isfinite(v))
                return snprintf(why, why_len, "tensor '%.100s': element %llu is %s", t->name, (unsigned long long)j,
                                isnan(v) ? "NaN" : "infinite"), -1;
        }
    }
    return 0;
}

/* Every parameter of model m (its table, laid out on the counting backend
 * for the checkpoint's configuration) in the model file f, by the name and
 * with the elements tr_ckpt_load_model reads, F32: 0, or -1 with why (a
 * flipped byte in a name leaves the file's JSON whole). */
static int params_there(const tr_st_file *f, const tr_model *m, char *why, size_t why_len)
{
    for (int i = 0; i < m->n_params; i++) {
        const tr_param_info *pi = &m->pinfo[i];
        const tr_st_tensor *t = tr_st_find(f, pi->name);
        if (!t) return snprintf(why, why_len, "tensor '%s' missing", pi->name), -1;
        if (t->dtype != TR_ST_F32 || t->count != pi->count)
            return snprintf(why, why_len, "tensor '%s': %s with %llu elements, want F32 with %zu", pi->name,
                            tr_st_dtype_name(t->dtype), (unsigned long long)t->count, pi->count), -1;
    }
    return 0;
}

/* Every tensor of the state file f an optimizer state of a parameter of m
 * as tr_optim_save_tensors names them (adam.m.P and adam.v.P, F32 of P's
 * elements; adam8.m.P and adam8.v.P, U8 of them, with their F32
 * adam8.m_absmax.P and adam8.v_absmax.P), each with its pair: 0, or -1
 * with why.  Which parameters have a state (frozen ones have none, a
 * rank's part holds its own) the load tells. */
static int states_named(const tr_st_file *f, const tr_model *m, char *why, size_t why_len)
{
    static const char *const pre[6] = {"adam.m.", "adam.v.", "adam8.m.", "adam8.v.", "adam8.m_absmax.",
                                       "adam8.v_absmax."};
    static const int pair[6] = {1, 0, 3, 2, 5, 4};
    char other[160];
    for (int i = 0; i < f->n; i++) {
        const char *name = f->t[i].name;
        int k = 0, p = -1;
        for (; k < 6; k++)
            if (!strncmp(name, pre[k], strlen(pre[k]))) break;
        if (k < 6) p = tr_model_find_param(m, name + strlen(pre[k]));
        if (p < 0) return snprintf(why, why_len, "tensor '%.100s' is no optimizer state of a parameter", name), -1;
        const tr_st_dtype dt = k == 2 || k == 3 ? TR_ST_U8 : TR_ST_F32;
        if (f->t[i].dtype != dt || (k < 4 && f->t[i].count != m->pinfo[p].count))
            return snprintf(why, why_len, "tensor '%.100s': %s with %llu elements", name,
                            tr_st_dtype_name(f->t[i].dtype), (unsigned long long)f->t[i].count), -1;
        snprintf(other, sizeof other, "%s%s", pre[pair[k]], m->pinfo[p].name);
        if (!tr_st_find(f, other)) return snprintf(why, why_len, "tensor '%.100s' missing", other), -1;
    }
    return 0;
}

/* A state file (rank 0's or a rank's part) of step and configuration c: 0,
 * or -1 with why (the file named). */
static int state_intact(const char *path, long step, const tr_model *m, char *why, size_t why_len)
{
    tr_st_file f;
    char e[300] = "";
    if (tr_st_load(&f, path, why, why_len) < 0) return -1;
    const char *fmt = tr_st_meta(&f, "format"), *rng = tr_st_meta(&f, "rng");
    tr_config fc;
    long v;
    int rc = -1;
    if (fmt && strcmp(fmt, TR_CKPT_FORMAT_STATE) != 0) /* (whole, of another kind: the loader's refusal says which) */
        rc = 0;
    else if (!fmt)
        snprintf(e, sizeof e, "__metadata__ 'format' missing");
    else if (meta_config(&f, &fc, e, sizeof e) < 0)
        ;
    else if (memcmp(&fc, &m->cfg, sizeof fc) != 0)
        snprintf(e, sizeof e, "its model configuration is not its model file's");
    else if (meta_long(&f, "step", 1L << 40, &v) < 0 || v != step)
        snprintf(e, sizeof e, "its step is not %ld", step);
    else if (meta_long(&f, "adam_t", 1L << 40, &v) < 0 || meta_long(&f, "data_epoch", 1L << 62, &v) < 0 ||
             meta_long(&f, "data_consumed", 1L << 62, &v) < 0 || !rng || strlen(rng) != 64 ||
             strspn(rng, "0123456789abcdefABCDEF") != 64)
        snprintf(e, sizeof e, "bad or missing adam_t, rng or data position");
    else if (states_named(&f, m, e, sizeof e) == 0)
        rc = all_finite(&f, e, sizeof e);
    if (rc < 0) snprintf(why, why_len, "'%s': %s", path, e);
    tr_st_close(&f);
    return rc;
}

int tr_run_checkpoint_intact(const char *dir, long step, int world, char *why, size_t why_len)
{
    char path[4200], e[300] = "";
    tr_st_file f;
    tr_config c;
    tr_model m; /* the configuration's parameter table, on the counting backend (made: 0) */
    tr_backend *mb = NULL;
    int made = -1;
    snprintf(path, sizeof path, "%s/model-%ld.safetensors", dir, step);
    if (tr_st_load(&f, path, why, why_len) < 0) return 0;
    const char *fmt = tr_st_meta(&f, "format");
    const tr_st_tensor *pe = tr_st_find(&f, "prompt.pe_gaussian");
    int rc = -1, other = 0;
    if ((fmt && strcmp(fmt, TR_CKPT_FORMAT_MODEL) != 0) || (!fmt && tr_st_find(&f, "out.logits")))
        rc = 0, other = 1; /* (whole, of another kind: a dump, a later version's; the loader's refusal says which) */
    else if (meta_config(&f, &c, e, sizeof e) < 0)
        ;
    else if (!pe || pe->dtype != TR_ST_F32 || pe->count != (uint64_t)c.C)
        snprintf(e, sizeof e, "tensor 'prompt.pe_gaussian' missing or not F32 of %d elements", c.C);
    else if (!(mb = tr_backend_meta_create(NULL, NULL)))
        snprintf(e, sizeof e, "out of memory");
    else if ((made = tr_model_init(&m, mb, &c, 1, 1, 1, e, sizeof e)) < 0) /* (a failure frees its own) */
        ;
    else if (params_there(&f, &m, e, sizeof e) == 0)
        rc = all_finite(&f, e, sizeof e);
    tr_st_close(&f);
    int ok = rc == 0;
    if (rc < 0) snprintf(why, why_len, "'%s': %s", path, e);
    if (ok && !other) {
        snprintf(path, sizeof path, "%s/state-%ld.bin", dir, step);
        ok = state_intact(path, step, &m, why, why_len) == 0;
        struct stat st;
        snprintf(path, sizeof path, "%s/state-%ld.r1.bin", dir, step);
        if (ok && world > 1 && lstat(path, &st) == 0) /* the ranks' parts (--zero 1) */
            for (int r = 1; r < world && ok; r++) {
                snprintf(path, sizeof path, "%s/state-%ld.r%d.bin", dir, step, r);
                ok = state_intact(path, step, &m, why, why_len) == 0;
            }
    }
    if (made == 0) tr_model_free(&m);
    if (mb) tr_backend_free(mb);
    return ok;
}
