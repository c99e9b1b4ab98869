/*
 * safetensors.c - the safetensors writer (atomic) and validating reader
 * (JSON through jansson, every number checked before use).
 */
#include "safetensors.h"
#include "quote.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dt_names[TR_ST_NDTYPE] = {"F32", "I32", "U8", "F16", "BF16", "I64", "F64", "U64"};
static const size_t dt_sizes[TR_ST_NDTYPE] = {4, 4, 1, 2, 2, 8, 8, 8};

const char *tr_st_dtype_name(tr_st_dtype d) { return (unsigned)d < TR_ST_NDTYPE ? dt_names[d] : "?"; }
size_t tr_st_dtype_size(tr_st_dtype d) { return (unsigned)d < TR_ST_NDTYPE ? dt_sizes[d] : 0; }

/* ---- writer ------------------------------------------------------------------ */

typedef struct wt {
    char *name;
    tr_st_dtype dtype;
    int ndim;
    int64_t shape[TR_ST_MAX_DIMS];
    const void *data;
    uint64_t n_bytes;
} wt;

struct tr_st_writer {
    wt *t;
    int n, cap;
    char **mk, **mv;
    int nm, mcap;
};

static int name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255) return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\') return 0;
    return 1;
}

tr_st_writer *tr_st_writer_new(void) { return calloc(1, sizeof(tr_st_writer)); }

int tr_st_writer_add(tr_st_writer *w, const char *name, tr_st_dtype dtype, int ndim, const int64_t *shape,
                     const void *data)
{
    if (!name_ok(name) || strcmp(name, "__metadata__") == 0 || (unsigned)dtype >= TR_ST_NDTYPE || ndim < 0 ||
        ndim > TR_ST_MAX_DIMS)
        return -1;
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 64;
        wt *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) return -1;
        w->t = t, w->cap = cap;
    }
    wt *t = &w->t[w->n];
    uint64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return -1;
        t->shape[i] = shape[i];
        count *= (uint64_t)shape[i];
    }
    t->name = strdup(name);
    if (!t->name) return -1;
    t->dtype = dtype, t->ndim = ndim, t->data = data, t->n_bytes = count * dt_sizes[dtype];
    w->n++;
    return 0;
}

int tr_st_writer_meta(tr_st_writer *w, const char *key, const char *value)
{
    if (!name_ok(key) || strlen(value) > 4096) return -1;
    for (const char *p = value; *p; p++)
        if (*p < 0x20 || *p > 0x7e || *p == '"' || *p == '\\') return -1;
    if (w->nm == w->mcap) {
        int cap = w->mcap ? 2 * w->mcap : 16;
        char **k = realloc(w->mk, (size_t)cap * sizeof *k);
        if (!k) return -1;
        w->mk = k;
        char **v = realloc(w->mv, (size_t)cap * sizeof *v);
        if (!v) return -1;
        w->mv = v, w->mcap = cap;
    }
    w->mk[w->nm] = strdup(key);
    w->mv[w->nm] = strdup(value);
    if (!w->mk[w->nm] || !w->mv[w->nm]) {
        free(w->mk[w->nm]), free(w->mv[w->nm]);
        return -1;
    }
    w->nm++;
    return 0;
}

typedef struct sbuf {
    char *s;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#include <stdarg.h>
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = 1;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s, b->cap = cap;
    }
}

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n) {
        ssize_t k = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += k, n -= (size_t)k;
    }
    return 0;
}

/* fsync of the folder path is in, after a rename into it (best effort: a
 * file system that cannot sync a folder has nothing to lose there). */
static void sync_folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* The descriptor tr_st_writer_write writes path through: an existing path
 * that is not a regular file (a FIFO, a device such as /dev/null) opened in
 * place, as a rename would replace it (*tmp NULL); otherwise a temporary of
 * a name no other file has (O_EXCL: never one that is there, such as a
 * user's PATH.tmp), *tmp its malloc'd name, with the owner and group
 * (where it may) and permissions of the regular file PATH it will replace,
 * renamed into place after.  -1 with err. */
static int open_output(const char *path, char **tmp, char *err, size_t err_len)
{
    struct stat st;
    *tmp = NULL;
    const int exists = stat(path, &st) == 0; /* (past the branch below: a regular file) */
    if (exists && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) return snprintf(err, err_len, "cannot write '%s': %s", path, strerror(EISDIR)), -1;
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) snprintf(err, err_len, "cannot open '%s': %s", path, strerror(errno));
        return fd;
    }
    size_t plen = strlen(path) + 48;
    if (!(*tmp = malloc(plen))) return snprintf(err, err_len, "out of memory"), -1;
    int fd = -1;
    for (unsigned k = 0; fd < 0 && k < 1000; k++) {
        snprintf(*tmp, plen, "%s.tmp.%ld.%u", path, (long)getpid(), k);
        fd = open(*tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    /* a file replaced keeps its owner and group where we may give them
     * (root; a group of ours), and its permissions (a private one stays
     * private) */
    if (fd >= 0 && exists && fchown(fd, st.st_uid, st.st_gid) != 0 && fchown(fd, (uid_t)-1, st.st_gid) != 0) {
        /* left ours */
    }
    if (fd >= 0 && exists && fchmod(fd, st.st_mode & 0777) != 0) {
        int e = errno;
        close(fd);
        unlink(*tmp);
        fd = -1;
        errno = e;
    }
    if (fd < 0) {
        snprintf(err, err_len, "cannot create '%s': %s", *tmp, strerror(errno));
        free(*tmp);
        *tmp = NULL;
    }
    return fd;
}

int tr_st_writer_write(tr_st_writer *w, const char *path, char *err, size_t err_len)
{
    sbuf b = {0};
    uint64_t off = 0;
    sb_printf(&b, "{");
    if (w->nm) {
        sb_printf(&b, "\"__metadata__\":{");
        for (int i = 0; i < w->nm; i++) sb_printf(&b, "%s\"%s\":\"%s\"", i ? "," : "", w->mk[i], w->mv[i]);
        sb_printf(&b, "}");
    }
    for (int i = 0; i < w->n; i++) {
        wt *t = &w->t[i];
        sb_printf(&b, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", (i || w->nm) ? "," : "", t->name, dt_names[t->dtype]);
        for (int d = 0; d < t->ndim; d++) sb_printf(&b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        sb_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                  (unsigned long long)(off + t->n_bytes));
        off += t->n_bytes;
    }
    sb_printf(&b, "}");
    while (!b.oom && (b.n + 8) % 8) sb_printf(&b, " ");
    if (b.oom) {
        free(b.s);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    uint8_t len8[8];
    uint64_t hl = b.n;
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)(hl >> (8 * i));
    char *tmp = NULL;
    int fd = open_output(path, &tmp, err, err_len);
    if (fd < 0) {
        free(b.s);
        return -1;
    }
    int rc = write_all(fd, len8, 8) || write_all(fd, b.s, b.n);
    for (int i = 0; i < w->n && !rc; i++) rc = write_all(fd, w->t[i].data, w->t[i].n_bytes);
    if (!rc && tmp) rc = fsync(fd); /* (a device written in place may not sync) */
    int e = errno;
    if (close(fd) != 0 && !rc) rc = -1, e = errno;
    if (!rc && tmp && rename(tmp, path) != 0) rc = -1, e = errno;
    if (!rc && tmp) sync_folder_of(path); /* the rename lasts through a crash */
    if (rc) {
        snprintf(err, err_len, "cannot write '%s': %s", path, strerror(e));
        if (tmp) unlink(tmp);
    }
    free(b.s), free(tmp);
    return rc ? -1 : 0;
}

void tr_st_writer_free(tr_st_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->t[i].name);
    for (int i = 0; i < w->nm; i++) free(w->mk[i]), free(w->mv[i]);
    free(w->t), free(w->mk), free(w->mv), free(w);
}

/* ---- reader ------------------------------------------------------------------ */

#define TR_ST_MAX_HEADER (100u << 20)
#define TR_ST_MAX_TENSORS 100000

void tr_st_close(tr_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < f->n_meta; i++) free(f->meta_key[i]), free(f->meta_val[i]);
    free(f->t), free(f->meta_key), free(f->meta_val), free(f->owned);
    memset(f, 0, sizeof *f);
}

static int cmp_off(const void *a, const void *b)
{
    const tr_st_tensor *x = *(tr_st_tensor *const *)a, *y = *(tr_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The one reader of a header: hdr[hl], the JSON after the 8-byte length,
 * of a file whose data block (data_size bytes) is data, or NULL where only
 * the header was read (tr_st_peek_meta: the tensors are checked alike, their
 * data left NULL).  0, or -1 with err and f emptied (f->owned kept). */
static int parse_header(tr_st_file *f, const char *hdr, uint64_t hl, const uint8_t *data, uint64_t data_size,
                        char *err, size_t err_len)
{
    char q[4 * 64 + 1], q2[4 * 64 + 1];
    json_error_t je;
    json_t *root = json_loadb(hdr, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return snprintf(err, err_len, "not a checkpoint (safetensors): header JSON at byte %d: %s", je.position + 8,
                        tr_quote(je.text, sizeof je.text, q, sizeof q)), -1;
    int rc = -1;
    if (!json_is_object(root)) {
        snprintf(err, err_len, "header is not a JSON object");
        goto out;
    }
    size_t nk = json_object_size(root);
    if (nk > TR_ST_MAX_TENSORS) {
        snprintf(err, err_len, "too many entries (%zu)", nk);
        goto out;
    }
    f->t = calloc(nk + 1, sizeof *f->t);
    if (!f->t) {
        snprintf(err, err_len, "out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                snprintf(err, err_len, "__metadata__ is not an object");
                goto out;
            }
            size_t nm = json_object_size(val);
            f->meta_key = calloc(nm + 1, sizeof(char *));
            f->meta_val = calloc(nm + 1, sizeof(char *));
            if (!f->meta_key || !f->meta_val) {
                snprintf(err, err_len, "out of memory");
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    snprintf(err, err_len, "__metadata__ '%s' is not a string", tr_quote(mk, 64, q, sizeof q));
                    goto out;
                }
                f->meta_key[f->n_meta] = strdup(mk);
                f->meta_val[f->n_meta] = strdup(json_string_value(mv));
                f->n_meta++;
                if (!f->meta_key[f->n_meta - 1] || !f->meta_val[f->n_meta - 1]) {
                    snprintf(err, err_len, "out of memory");
                    goto out;
                }
            }
            continue;
        }
        tr_quote(key, 64, q, sizeof q);
        json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
               *of = json_object_get(val, "data_offsets");
        if (!json_is_object(val) || !json_is_string(dt) || !json_is_array(sh) || !json_is_array(of) ||
            json_array_size(of) != 2) {
            snprintf(err, err_len, "tensor '%s': needs dtype, shape and data_offsets [begin, end]", q);
            goto out;
        }
        tr_st_tensor *t = &f->t[f->n];
        t->dtype = TR_ST_NDTYPE;
        for (int d = 0; d < TR_ST_NDTYPE; d++)
            if (strcmp(json_string_value(dt), dt_names[d]) == 0) t->dtype = (tr_st_dtype)d;
        if (t->dtype == TR_ST_NDTYPE) {
            snprintf(err, err_len, "tensor '%s': unsupported dtype '%s'", q,
                     tr_quote(json_string_value(dt), 16, q2, sizeof q2));
            goto out;
        }
        size_t nd = json_array_size(sh);
        if (nd > TR_ST_MAX_DIMS) {
            snprintf(err, err_len, "tensor '%s': %zu dimensions (at most %d)", q, nd, TR_ST_MAX_DIMS);
            goto out;
        }
        uint64_t count = 1;
        int zero = 0;
        for (size_t d = 0; d < nd; d++) {
            json_t *x = json_array_get(sh, d);
            if (!json_is_integer(x) || json_integer_value(x) < 0) {
                snprintf(err, err_len, "tensor '%s': shape[%zu] is not a non-negative integer", q, d);
                goto out;
            }
            uint64_t v = (uint64_t)json_integer_value(x);
            t->shape[d] = (int64_t)v;
            if (v == 0) zero = 1;
            if (!zero && v > UINT64_MAX / 16 / count) {
                snprintf(err, err_len, "tensor '%s': shape overflows", q);
                goto out;
            }
            count = zero ? 0 : count * v;
        }
        t->ndim = (int)nd;
        t->count = count;
        json_t *b0 = json_array_get(of, 0), *b1 = json_array_get(of, 1);
        if (!json_is_integer(b0) || !json_is_integer(b1) || json_integer_value(b0) < 0 ||
            json_integer_value(b1) < json_integer_value(b0) || (uint64_t)json_integer_value(b1) > data_size) {
            snprintf(err, err_len, "tensor '%s': data_offsets outside the %llu-byte data block", q,
                     (unsigned long long)data_size);
            goto out;
        }
        uint64_t beg = (uint64_t)json_integer_value(b0), end = (uint64_t)json_integer_value(b1);
        if (end - beg != count * dt_sizes[t->dtype]) {
            snprintf(err, err_len, "tensor '%s': %llu bytes for %llu elements of %s", q,
                     (unsigned long long)(end - beg), (unsigned long long)count, dt_names[t->dtype]);
            goto out;
        }
        t->offset = beg;
        t->data = data ? data + beg : NULL;
        t->n_bytes = end - beg;
        t->name = strdup(key);
        if (!t->name) {
            snprintf(err, err_len, "out of memory");
            goto out;
        }
        f->n++;
    }
    /* tensors must not overlap */
    if (f->n > 1) {
        tr_st_tensor **s = malloc((size_t)f->n * sizeof *s);
        if (!s) {
            snprintf(err, err_len, "out of memory");
            goto out;
        }
        for (int i = 0; i < f->n; i++) s[i] = &f->t[i];
        qsort(s, (size_t)f->n, sizeof *s, cmp_off);
        for (int i = 1; i < f->n; i++)
            if (s[i]->n_bytes && s[i - 1]->offset + s[i - 1]->n_bytes > s[i]->offset) {
                snprintf(err, err_len, "tensors '%s' and '%s' overlap", tr_quote(s[i - 1]->name, 64, q, sizeof q),
                         tr_quote(s[i]->name, 64, q2, sizeof q2));
                free(s);
                goto out;
            }
        free(s);
    }
    rc = 0;
out:
    json_decref(root);
    if (rc) {
        uint8_t *keep = f->owned;
        f->owned = NULL;
        tr_st_close(f);
        f->owned = keep;
    }
    return rc;
}

int tr_st_parse(tr_st_file *f, const uint8_t *buf, size_t size, char *err, size_t err_len)
{
    uint8_t *owned = f->owned;
    memset(f, 0, sizeof *f);
    f->owned = owned;
    if (size < 8)
        return snprintf(err, err_len, "not a checkpoint (safetensors): %zu bytes, shorter than the 8-byte header length", size), -1;
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    if (hl > size - 8 || hl > TR_ST_MAX_HEADER)
        return snprintf(err, err_len, "not a checkpoint (safetensors): its first 8 bytes give a header length of %llu, "
                        "more than the file's %zu bytes", (unsigned long long)hl, size), -1;
    return parse_header(f, (const char *)buf + 8, hl, buf + 8 + hl, size - 8 - hl, err, err_len);
}

int tr_st_load(tr_st_file *f, const char *path, char *err, size_t err_len)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* (a FIFO is refused below, never waited on) */
    if (fd < 0) return snprintf(err, err_len, "cannot open '%s': %s", path, strerror(errno)), -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return snprintf(err, err_len, "'%s' is not a regular file", path), -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return snprintf(err, err_len, "'%s': out of memory for %zu bytes", path, size), -1;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t k = read(fd, buf + got, size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (got != size) {
        free(buf);
        return snprintf(err, err_len, "cannot read '%s'", path), -1;
    }
    f->owned = buf;
    char e2[256];
    if (tr_st_parse(f, buf, size, e2, sizeof e2) < 0) {
        snprintf(err, err_len, "'%s': %s", path, e2);
        tr_st_close(f);
        return -1;
    }
    return 0;
}

const tr_st_tensor *tr_st_find(const tr_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}

const char *tr_st_meta(const tr_st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_key[i], key) == 0) return f->meta_val[i];
    return NULL;
}

int tr_st_peek_meta(const char *path, const char *key, char *val, size_t val_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* (a FIFO: not waited on) */
    if (fd < 0) return 0;
    struct stat st;
    uint8_t len8[8];
    uint64_t hl = 0;
    char *h = NULL;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 8 && pread(fd, len8, 8, 0) == 8) {
        for (int i = 0; i < 8; i++) hl |= (uint64_t)len8[i] << (8 * i);
        if (hl <= TR_ST_MAX_HEADER && hl <= (uint64_t)st.st_size - 8) h = malloc(hl ? hl : 1);
    }
    while (h && got < hl) {
        ssize_t k = pread(fd, h + got, hl - got, (off_t)(8 + got));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    /* the header read as tr_st_parse reads it: the same inputs refused */
    tr_st_file f = {0};
    char err[256];
    int found = 0;
    if (h && got == hl && parse_header(&f, h, hl, NULL, (uint64_t)st.st_size - 8 - hl, err, sizeof err) == 0) {
        const char *v = tr_st_meta(&f, key);
        if (v) found = 1, snprintf(val, val_len, "%s", v);
        tr_st_close(&f);
    }
    free(h);
    return found;
}
