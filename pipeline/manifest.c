/*
 * manifest.c - reading and validating a shard manifest; the CRC32C of a
 * whole file.
 *
 * Implements: sa1b_manifest.h.  jansson parses the document (duplicate keys
 * refused, \u0000 kept so that a file name holding it is seen and refused);
 * every row is checked before anything is returned.
 */
#include "sa1b_manifest.h"

#include "sa1b_shard.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sa1b_manifest_free(sa1b_manifest *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_shards; i++) {
        free((char *)m->shards[i].file);
        free((char *)m->shards[i].path);
    }
    free(m->shards);
    free(m);
}

int sa1b_manifest_is_name(const char *arg)
{
    size_t n = arg ? strlen(arg) : 0;
    return n > 5 && strcmp(arg + n - 5, ".json") == 0;
}

/* A non-negative integer member of o, at most max. */
static int get_count(json_t *o, const char *key, uint64_t max, uint64_t *v, const char *where,
                     sa1b_error *err)
{
    json_t *j = json_object_get(o, key);
    if (!j) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s: no \"%s\"", where, key);
    if (!json_is_integer(j) || json_integer_value(j) < 0)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s: \"%s\" is not a count", where, key);
    if ((uint64_t)json_integer_value(j) > max)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%s: \"%s\" %lld is out of range", where, key,
                              (long long)json_integer_value(j));
    *v = (uint64_t)json_integer_value(j);
    return SA1B_OK;
}

static int parse_crc(json_t *j, uint32_t *crc)
{
    const char *s = json_string_value(j);
    if (!s || json_string_length(j) != 8) return -1;
    uint32_t v = 0;
    for (int i = 0; i < 8; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v << 4 | (uint32_t)d;
    }
    *crc = v;
    return 0;
}

static char *join(const char *dir, const char *file)
{
    size_t nd = dir && *dir && file[0] != '/' ? strlen(dir) : 0, nf = strlen(file);
    char *p = malloc(nd + 1 + nf + 1);
    if (!p) return NULL;
    if (nd) {
        memcpy(p, dir, nd);
        p[nd] = '/';
        memcpy(p + nd + 1, file, nf + 1);
    } else {
        memcpy(p, file, nf + 1);
    }
    /* without "." segments and repeated slashes, which never change the file
     * a path names: "./a.shard" and "a.shard" are one path (check_unique) */
    char *w = p;
    for (const char *r = p; *r;) {
        if (*r == '/' && w > p && w[-1] == '/') {
            r++;
        } else if (r[0] == '.' && (r == p || r[-1] == '/') && (r[1] == '/' || r[1] == 0) && (w > p || r[1] == '/')) {
            r += r[1] ? 2 : 1; /* (a path of "." alone stays) */
        } else {
            *w++ = *r++;
        }
    }
    if (w > p + 1 && w[-1] == '/') w--; /* (a trailing "/." leaves a slash) */
    *w = 0;
    return p;
}

static int path_cmp(const void *a, const void *b)
{
    return strcmp((*(sa1b_manifest_shard *const *)a)->path, (*(sa1b_manifest_shard *const *)b)->path);
}

static int check_rows(sa1b_manifest *m, json_t *rows, const char *dir, sa1b_error *err)
{
    for (size_t i = 0; i < m->n_shards; i++) {
        sa1b_manifest_shard *r = &m->shards[i];
        json_t *o = json_array_get(rows, i), *f = json_object_get(o, "file");
        char where[48];
        snprintf(where, sizeof where, "shards[%zu]", i);
        if (!json_is_object(o)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s is not an object", where);
        if (!json_is_string(f) || json_string_length(f) == 0)
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s: \"file\" is not a file name", where);
        if (strlen(json_string_value(f)) != json_string_length(f))
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s: \"file\" holds a NUL character", where);
        SA1B_FORWARD(get_count(o, "bytes", INT64_MAX, &r->bytes, where, err));
        SA1B_FORWARD(get_count(o, "images", UINT32_MAX, &r->images, where, err));
        SA1B_FORWARD(get_count(o, "masks", INT64_MAX, &r->masks, where, err));
        if (parse_crc(json_object_get(o, "crc32c"), &r->crc32c))
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s: \"crc32c\" is not 8 hex digits", where);
        r->file = strdup(json_string_value(f));
        r->path = r->file ? join(dir, r->file) : NULL;
        if (!r->file || !r->path) return sa1b_error_set(err, SA1B_ENOMEM, -1, "manifest: out of memory");
        if (r->images > UINT32_MAX - m->images || r->masks > INT64_MAX - m->masks ||
            r->bytes > INT64_MAX - m->bytes)
            return sa1b_error_set(err, SA1B_ERANGE, -1, "%s: the totals overflow", where);
        m->images += r->images;
        m->masks += r->masks;
        m->bytes += r->bytes;
    }
    return SA1B_OK;
}

/* Each file once: a shard listed twice would be read twice per epoch. */
static int check_unique(const sa1b_manifest *m, sa1b_error *err)
{
    const sa1b_manifest_shard **by = malloc(m->n_shards * sizeof *by);
    if (!by) return sa1b_error_set(err, SA1B_ENOMEM, -1, "manifest: out of memory");
    for (size_t i = 0; i < m->n_shards; i++) by[i] = &m->shards[i];
    qsort(by, m->n_shards, sizeof *by, path_cmp);
    int rc = SA1B_OK;
    for (size_t i = 1; i < m->n_shards && !rc; i++)
        if (strcmp(by[i - 1]->path, by[i]->path) == 0)
            rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "shards[%zu] and shards[%zu]: the same file '%s'",
                                (size_t)(by[i - 1] - m->shards), (size_t)(by[i] - m->shards), by[i]->file);
    free(by);
    return rc;
}

int sa1b_manifest_parse(sa1b_manifest **out, const char *text, size_t len, const char *dir,
                        sa1b_error *err)
{
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root)
        return sa1b_error_set(err, SA1B_EFORMAT, je.position, "not JSON: line %d, column %d: %s", je.line,
                              je.column, je.text);
    int rc = SA1B_OK;
    json_t *ver = json_object_get(root, "sa1b_manifest"), *rows = json_object_get(root, "shards");
    sa1b_manifest *m = calloc(1, sizeof *m);
    if (!m) {
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "manifest: out of memory");
    } else if (!json_is_object(root) || !ver) {
        rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "not a manifest: no \"sa1b_manifest\" key");
    } else if (!json_is_integer(ver) || json_integer_value(ver) != SA1B_MANIFEST_VERSION) {
        rc = sa1b_error_set(err, SA1B_EUNSUPPORTED, -1, "manifest version is not %d",
                            SA1B_MANIFEST_VERSION);
    } else if (!json_is_array(rows)) {
        rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "\"shards\" is not a list of shards");
    } else if (json_array_size(rows) == 0) {
        rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "\"shards\" lists no shard");
    } else if (json_array_size(rows) > SA1B_MANIFEST_MAX_SHARDS) {
        rc = sa1b_error_set(err, SA1B_ERANGE, -1, "%zu shards, more than %u", json_array_size(rows),
                            SA1B_MANIFEST_MAX_SHARDS);
    } else if (!(m->shards = calloc(json_array_size(rows), sizeof *m->shards))) {
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "manifest: out of memory");
    } else {
        m->n_shards = json_array_size(rows);
        rc = check_rows(m, rows, dir, err);
        if (!rc) rc = check_unique(m, err);
        const char *key[3] = {"images", "masks", "bytes"};
        uint64_t sum[3] = {m->images, m->masks, m->bytes}, v;
        for (int k = 0; k < 3 && !rc; k++) {
            if ((rc = get_count(root, key[k], INT64_MAX, &v, "manifest", err))) break;
            if (v != sum[k])
                rc = sa1b_error_set(err, SA1B_EFORMAT, -1, "\"%s\" is %llu, but its shards hold %llu", key[k],
                                    (unsigned long long)v, (unsigned long long)sum[k]);
        }
    }
    json_decref(root);
    if (rc) {
        sa1b_manifest_free(m);
        return rc;
    }
    *out = m;
    return SA1B_OK;
}

/* Reads a whole regular file of at most max bytes. */
static int slurp(const char *path, size_t max, char **buf, size_t *len, sa1b_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* (a FIFO: refused below, not waited on) */
    if (fd < 0) return sa1b_error_set(err, SA1B_EIO, -1, "cannot open: %s", strerror(errno));
    struct stat st;
    int rc = SA1B_OK;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = sa1b_error_set(err, SA1B_EIO, -1, "not a regular file");
    } else if ((uint64_t)st.st_size > max) {
        rc = sa1b_error_set(err, SA1B_ERANGE, -1, "%lld bytes, more than %zu", (long long)st.st_size, max);
    } else if (!(*buf = malloc((size_t)st.st_size + 1))) {
        rc = sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    } else {
        size_t n = 0;
        while (n < (size_t)st.st_size) {
            ssize_t k = read(fd, *buf + n, (size_t)st.st_size - n);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                rc = sa1b_error_set(err, SA1B_EIO, -1, "read error: %s", k < 0 ? strerror(errno) : "file shrank");
                break;
            }
            n += (size_t)k;
        }
        *len = n;
        if (rc) {
            free(*buf);
            *buf = NULL;
        }
    }
    close(fd);
    return rc;
}

int sa1b_manifest_read(sa1b_manifest **out, const char *path, sa1b_error *err)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    SA1B_FORWARD(slurp(path, SA1B_MANIFEST_MAX_BYTES, &text, &len, err));
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : NULL;
    int rc = slash && !dir ? sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory")
                           : sa1b_manifest_parse(out, text, len, dir, err);
    free(dir);
    free(text);
    return rc;
}

int sa1b_file_crc32c(const char *path, uint64_t *bytes, uint32_t *crc, sa1b_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* (a FIFO: refused below, not waited on) */
    if (fd < 0) return sa1b_error_set(err, SA1B_EIO, -1, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sa1b_error_set(err, SA1B_EIO, -1, "not a regular file");
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    uint32_t c = 0;
    uint64_t n = 0;
    int rc = buf ? SA1B_OK : sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    while (!rc) {
        ssize_t k = read(fd, buf, CHUNK);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rc = sa1b_error_set(err, SA1B_EIO, (int64_t)n, "read error: %s", strerror(errno));
        if (k <= 0) break;
        c = sa1b_crc32c(c, buf, (size_t)k);
        n += (uint64_t)k;
    }
    free(buf);
    close(fd);
    if (!rc) {
        *bytes = n;
        *crc = c;
    }
    return rc;
}
