/*
 * tar.c - streaming SA-1B tar reader over libarchive.
 *
 * Implements: sa1b_tar.h.  Each sa1b_tar_next() call runs a small state
 * machine: first the pending list is brought back under its caps (one
 * eviction reported per call), then, at the end of the archive, the pending
 * members are reported one by one; otherwise the next member is read whole
 * into a malloc'ed buffer and either completes a pair (returned) or joins
 * the pending list (oldest first).  The buffers of the returned pair are
 * kept until the next call.
 *
 * A regular file is mapped whole and read through libarchive's memory
 * reader: a member of a plain (uncompressed) tar then arrives as one block
 * inside the mapping and is handed out where it lies, with no copy (no
 * read(2) into libarchive's buffer, no copy out of it); the pages behind
 * the read position are dropped from the mapping as it advances, so the
 * resident set stays bounded whatever the tar size (a dropped page that is
 * read again comes back from the page cache).  Compressed tars, sparse or
 * truncated members and pipes go the copying way.
 */
#include "sa1b_tar.h"

#include "sa1b_shard.h" /* sa1b_crc32c */

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { KIND_JPG = 0, KIND_JSON = 1 };
static const char *const kind_ext[2] = {".jpg", ".json"};

/* A pair returned: its stem, and what tells its bytes (the members where
 * they lie in the input, else their CRC32C), for a pair of its stem that
 * comes again; others of the stem (other bytes) follow through next. */
typedef struct done_ent {
    struct done_ent *next;
    const uint8_t *at[2];   /* jpg, json in the input (stable), or NULL: crc */
    size_t len[2];
    uint32_t crc[2];
    char stem[];
} done_ent;

typedef struct member {
    char stem[256];
    int kind;
    uint8_t *data;
    size_t len;
    int owned;              /* data is malloc'ed (else it lies in the input) */
    int live;               /* 0: taken (a hole in the list until it is compacted) */
    char *link;             /* not NULL: a link member, what it is (no data) */
    int reported;           /* came after its partner of the other kind was dropped at
                             * the pending cap (and reported): it pairs as any
                             * member, but should it go unpaired too, it goes
                             * without a second report (one sample, one report) */
} member;

struct sa1b_tar {
    struct archive *a;
    char *name;
    int fd;                 /* fd we opened (closed at free), or -1 */
    int started;            /* a header has been read successfully */
    int at_end;             /* no more members will come */
    int fatal;              /* stream unusable: repeat fatal_code */
    int fatal_code;
    char fatal_msg[SA1B_ERROR_MSG_MAX];
    int in_damage;          /* inside a run of damaged headers: report once */
    member *pending;        /* oldest first, with holes (live 0) */
    size_t pend_used, pend_cap, pend_head; /* slots used; allocated; before head all are holes */
    size_t n_pending;       /* live members */
    size_t n_owned;         /* of them malloc'ed (the others lie in the input) */
    uint64_t pending_bytes; /* bytes of the malloc'ed ones */
    size_t *pidx;           /* a long list's index: slot + 1 by (stem, kind or
                             * link), 0 empty; an entry whose slot is a hole
                             * is stale (reused); NULL: the list is scanned */
    size_t pidx_cap;        /* its size, a power of 2 over twice pend_cap */
    size_t oldest_at[2];    /* no live member in the input (0), malloc'ed (1)
                             * lies before these slots */
    uint8_t *cur[2];        /* the last returned pair's buffers */
    int cur_owned[2];
    const uint8_t *in;      /* the input in memory (a mapped file or the
                             * caller's buffer), or NULL: members inside it
                             * are not copied */
    size_t in_len;
    void *map;              /* our mapping of the input file (unmapped at free) */
    size_t dropped;         /* pages of map before this offset are dropped */
    /* the input's identity (sa1b_tar_identity) */
    int read_fd;            /* a stream read through fd_read, or -1 */
    uint8_t *rbuf;          /* its read buffer */
    uint64_t id_bytes;      /* bytes of the input in id_crc */
    uint32_t id_crc;        /* CRC32C of the input's first id_bytes bytes */
    int id_state;           /* 0 reading, 1 whole input in id_crc, -1 the rest could not be read */
    int truncated;          /* a member or header was cut short, or the end-of-archive blocks are missing */
    int no_member;          /* the archive ended before any member (only zero blocks) */
    int unread;             /* the current member's data is not consumed yet */
    char unread_base[262];  /* its basename (for a report if skipping it fails) */
    la_int64_t mark;        /* uncompressed bytes consumed before the last header read */
    struct done_ent **done; /* the pairs returned, by stem (open addressing) */
    size_t done_cap, n_done;
    struct evicted *ev;     /* the members dropped at the pending cap, by stem and
                             * kind (open addressing; stem NULL: empty; kind -1:
                             * removed, a chain goes on through it) */
    size_t ev_cap, n_ev, n_ev_dead; /* slots; live entries; removed ones */
};

/* A member dropped at the pending cap (report_unpaired). */
struct evicted {
    char *stem;
    int kind;
};

/* At most this many of them are remembered at once (their stems: up to
 * about 18 MB); a partner of one more is reported when it goes unpaired,
 * as before. */
#define TAR_MAX_EVICTED 65536

#define BLOCK_SIZE (128 * 1024)
/* a mapped input keeps at most about this much behind the read position
 * resident: the work in flight of a caller lies within it */
#define KEEP_BEHIND ((size_t)8 << 20)

static void cur_release(sa1b_tar *t)
{
    for (int k = 0; k < 2; k++)
        if (t->cur_owned[k]) free(t->cur[k]);
    t->cur[0] = t->cur[1] = NULL;
    t->cur_owned[0] = t->cur_owned[1] = 0;
}

static int tar_new(sa1b_tar **out, const char *name, sa1b_error *err)
{
    sa1b_tar *t = calloc(1, sizeof *t);
    if (!t) return sa1b_error_set(err, SA1B_ENOMEM, -1, "tar: out of memory");
    t->fd = t->read_fd = -1;
    t->name = strdup(name ? name : "");
    t->a = archive_read_new();
    if (!t->name || !t->a) {
        sa1b_tar_free(t);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "tar: out of memory");
    }
    archive_read_support_filter_all(t->a);
    archive_read_support_format_tar(t->a);
    archive_read_support_format_empty(t->a);   /* to tell "empty input" apart */
    /* read on past the end-of-archive blocks to the end of the (uncompressed)
     * input: so a compressed stream is decoded to its very end, where a
     * stream cut short or missing its trailer is found out, and a later
     * member (tars concatenated) is not silently left out */
    if (archive_read_set_format_option(t->a, "tar", "read_concatenated_archives", "1") != ARCHIVE_OK) {
        sa1b_tar_free(t);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "tar: cannot set up libarchive");
    }
    *out = t;
    return SA1B_OK;
}

static int set_fatal(sa1b_tar *t, int code, sa1b_error *err, const char *msg);
static int is_io_errno(int e);
static int says_cut(const char *m);
static int stream_failed(sa1b_tar *t, const char *base, sa1b_error *err);

/* libarchive recognises the format while opening; a format failure is kept
 * for the first sa1b_tar_next() so that callers handle it in one place. */
static int open_failed(sa1b_tar **out, sa1b_tar *t, sa1b_error *err)
{
    const char *m = archive_error_string(t->a);
    int e = archive_errno(t->a);
    if (!is_io_errno(e) || says_cut(m)) {
        if (says_cut(m)) {
            /* a compressed stream that ends before its first block of
             * output could be decoded (libarchive reads that far ahead to
             * recognise the format): an input cut short, nothing of it
             * readable; reported like any cut input, not as "not a tar" */
            t->at_end = 1;
            t->truncated = 1;
        } else {
            set_fatal(t, SA1B_EFORMAT, NULL, "not a tar archive");
        }
        *out = t;
        return SA1B_OK;
    }
    /* errno's text says more than libarchive's "Error reading fd 3" */
    int rc = sa1b_error_set(err, SA1B_EIO, -1, "cannot open: %s",
                            e > 0 ? strerror(e) : (m ? m : "unknown error"));
    sa1b_tar_free(t);
    *out = NULL;
    return rc;
}

/* Streams read through here: every byte goes into the input's CRC. */
static la_ssize_t fd_read(struct archive *a, void *ctx, const void **buf)
{
    sa1b_tar *t = ctx;
    ssize_t n;
    do n = read(t->read_fd, t->rbuf, BLOCK_SIZE);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        archive_set_error(a, errno, "%s", strerror(errno));
        return -1;
    }
    t->id_crc = sa1b_crc32c(t->id_crc, t->rbuf, (size_t)n);
    t->id_bytes += (uint64_t)n;
    *buf = t->rbuf;
    return n;
}

static int open_stream(sa1b_tar *t, int fd)
{
    t->read_fd = fd;
    t->rbuf = malloc(BLOCK_SIZE);
    if (!t->rbuf) return ARCHIVE_FATAL;
    return archive_read_open(t->a, t, NULL, fd_read, NULL);
}

int sa1b_tar_open_fd(sa1b_tar **out, int fd, const char *display_name, sa1b_error *err)
{
    if (!out || fd < 0) return sa1b_error_set(err, SA1B_EINVAL, -1, "tar: bad argument");
    *out = NULL;
    sa1b_tar *t;
    SA1B_FORWARD(tar_new(&t, display_name, err));
    if (open_stream(t, fd) != ARCHIVE_OK) return open_failed(out, t, err);
    *out = t;
    return SA1B_OK;
}

int sa1b_tar_open(sa1b_tar **out, const char *path, sa1b_error *err)
{
    if (!out || !path) return sa1b_error_set(err, SA1B_EINVAL, -1, "tar: NULL argument");
    *out = NULL;
    if (strcmp(path, "-") == 0) return sa1b_tar_open_fd(out, 0, "-", err);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sa1b_error_set(err, SA1B_EIO, -1, "cannot open: %s", strerror(errno));
    sa1b_tar *t;
    int rc = tar_new(&t, path, err);
    if (rc != SA1B_OK) {
        close(fd);
        return rc;
    }
    t->fd = fd;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= SIZE_MAX) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            (void)madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL); /* advice only */
            t->map = m;
            t->in = m;
            t->in_len = (size_t)st.st_size;
            if (archive_read_open_memory(t->a, m, t->in_len) != ARCHIVE_OK)
                return open_failed(out, t, err);
            *out = t;
            return SA1B_OK;
        }
    }
    if (open_stream(t, fd) != ARCHIVE_OK) return open_failed(out, t, err);
    *out = t;
    return SA1B_OK;
}

int sa1b_tar_open_memory(sa1b_tar **out, const void *buf, size_t len, const char *display_name,
                         sa1b_error *err)
{
    if (!out || (!buf && len)) return sa1b_error_set(err, SA1B_EINVAL, -1, "tar: NULL argument");
    *out = NULL;
    sa1b_tar *t;
    SA1B_FORWARD(tar_new(&t, display_name, err));
    static const char empty = 0;
    t->in = buf;
    t->in_len = buf ? len : 0;
    if (archive_read_open_memory(t->a, buf ? buf : &empty, len) != ARCHIVE_OK)
        return open_failed(out, t, err);
    *out = t;
    return SA1B_OK;
}

void sa1b_tar_free(sa1b_tar *t)
{
    if (!t) return;
    if (t->a) archive_read_free(t->a);
    for (size_t i = 0; i < t->pend_used; i++)
        if (t->pending[i].live) {
            if (t->pending[i].owned) free(t->pending[i].data);
            free(t->pending[i].link);
        }
    free(t->pending);
    free(t->pidx);
    cur_release(t);
    for (size_t i = 0; i < t->done_cap; i++)
        for (done_ent *d = t->done[i], *n; d; d = n) {
            n = d->next;
            free(d);
        }
    free(t->done);
    for (size_t i = 0; i < t->ev_cap; i++) free(t->ev[i].stem);
    free(t->ev);
    if (t->map) munmap(t->map, t->in_len);
    if (t->fd >= 0) close(t->fd);
    free(t->rbuf);
    free(t->name);
    free(t);
}

int sa1b_tar_fatal(const sa1b_tar *t)
{
    return t ? t->fatal : 1;
}

uint64_t sa1b_tar_bytes_read(const sa1b_tar *t)
{
    if (!t || !t->a) return 0;
    la_int64_t n = archive_filter_bytes(t->a, -1);
    return n > 0 ? (uint64_t)n : 0;
}

const char *sa1b_tar_name(const sa1b_tar *t)
{
    return t && t->name ? t->name : "";
}

/* ---- helpers -------------------------------------------------------------- */

static int64_t pos(const sa1b_tar *t)
{
    return (int64_t)sa1b_tar_bytes_read(t);
}

static int set_fatal(sa1b_tar *t, int code, sa1b_error *err, const char *msg)
{
    t->fatal = 1;
    t->fatal_code = code;
    snprintf(t->fatal_msg, sizeof t->fatal_msg, "%s", msg);
    return sa1b_error_set(err, code, pos(t), "%s", msg);
}

/* A pending member's key in the index: its kind, or 2 for a link's note
 * (of either kind). */
static int pend_key(const member *m)
{
    return m->link ? 2 : m->kind;
}

/* FNV-1a of a stem: the pending index's and the returned pairs' hash. */
static uint64_t stem_hash(const char *stem)
{
    uint64_t h = 1469598103934665603u;
    for (const char *p = stem; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211u;
    return h;
}

static size_t pidx_home(const sa1b_tar *t, const char *stem, int key)
{
    uint64_t h = (stem_hash(stem) ^ (unsigned)key) * 1099511628211u;
    return (size_t)(h ^ (h >> 32)) & (t->pidx_cap - 1);
}

/* Enters live slot i in the index, in place of the first empty or stale
 * entry of its chain (a stale entry's slot is a hole: it never comes back
 * to life before the next build, so no lookup needs it). */
static void pidx_put(sa1b_tar *t, size_t i)
{
    size_t k = pidx_home(t, t->pending[i].stem, pend_key(&t->pending[i]));
    while (t->pidx[k] && t->pending[t->pidx[k] - 1].live) k = (k + 1) & (t->pidx_cap - 1);
    t->pidx[k] = i + 1;
}

/* Builds the index of a long list (over SA1B_TAR_MAX_PENDING slots: a
 * plain tar whose members wait in the input), so that finding a member's
 * partner does not scan up to SA1B_TAR_MAX_PENDING_IN_INPUT of them (a
 * tar sorted by type, or of unpaired members, took minutes); a short list
 * drops it and is scanned, as is a long one when memory for it runs out.
 * The index holds at most pend_used entries in more than twice as many
 * places, so a chain always ends. */
static void pidx_build(sa1b_tar *t)
{
    size_t cap = 1;
    while (cap < 2 * t->pend_cap + 2) cap *= 2;
    if (t->pend_used <= SA1B_TAR_MAX_PENDING || cap != t->pidx_cap) {
        free(t->pidx);
        t->pidx = NULL;
        t->pidx_cap = 0;
        if (t->pend_used <= SA1B_TAR_MAX_PENDING || !(t->pidx = calloc(cap, sizeof *t->pidx))) return;
        t->pidx_cap = cap;
    } else {
        memset(t->pidx, 0, cap * sizeof *t->pidx);
    }
    for (size_t i = t->pend_head; i < t->pend_used; i++)
        if (t->pending[i].live) pidx_put(t, i);
}

/* The live pending member of stem and key (pend_key), or (size_t)-1.  There
 * is at most one (a later copy replaces an earlier one, a link's note is
 * not added twice), but for the moment between a copy's arrival and the
 * earlier one's removal, when nothing is looked up. */
static size_t pending_find(const sa1b_tar *t, const char *stem, int key)
{
    if (t->pidx) {
        for (size_t k = pidx_home(t, stem, key); t->pidx[k]; k = (k + 1) & (t->pidx_cap - 1)) {
            const member *m = &t->pending[t->pidx[k] - 1];
            if (m->live && pend_key(m) == key && strcmp(m->stem, stem) == 0) return t->pidx[k] - 1;
        }
        return (size_t)-1;
    }
    for (size_t i = t->pend_head; i < t->pend_used; i++) {
        const member *m = &t->pending[i];
        if (m->live && pend_key(m) == key && strcmp(m->stem, stem) == 0) return i;
    }
    return (size_t)-1;
}

/* Removes pending[i] (keeping the order of the others) and returns its
 * data, ownership passed (*owned: whether it is malloc'ed); its link text
 * is freed.  The list is compacted when it is more holes than members, so
 * that taking one costs O(1) amortised however long it is (indices into
 * it change then: look them up again). */
static uint8_t *pending_take(sa1b_tar *t, size_t i, size_t *len, int *owned)
{
    member *m = &t->pending[i];
    uint8_t *d = m->data;
    *len = m->len;
    *owned = m->owned;
    if (m->owned) {
        t->pending_bytes -= m->len;
        t->n_owned--;
    }
    free(m->link);
    m->link = NULL;
    m->live = 0;
    t->n_pending--;
    while (t->pend_head < t->pend_used && !t->pending[t->pend_head].live) t->pend_head++;
    if (t->pend_used > 64 && t->n_pending * 2 < t->pend_used) {
        size_t k = 0;
        for (size_t j = t->pend_head; j < t->pend_used; j++)
            if (t->pending[j].live) t->pending[k++] = t->pending[j];
        t->pend_used = k;
        t->pend_head = 0;
        t->oldest_at[0] = t->oldest_at[1] = 0;
        pidx_build(t);
    }
    if (!t->n_pending) {
        t->pend_used = t->pend_head = 0;
        t->oldest_at[0] = t->oldest_at[1] = 0;
        if (t->pidx) pidx_build(t);
    }
    return d;
}

/* The oldest pending member, of those malloc'ed (owned 1), of those in the
 * input (owned 0), or of all (owned -1); (size_t)-1 when there is none.
 * Each kind's search goes on from where its last one stopped. */
static size_t pending_oldest(sa1b_tar *t, int owned)
{
    if (owned < 0) {
        for (size_t i = t->pend_head; i < t->pend_used; i++)
            if (t->pending[i].live) return i;
        return (size_t)-1;
    }
    size_t i = t->oldest_at[owned] > t->pend_head ? t->oldest_at[owned] : t->pend_head;
    while (i < t->pend_used && !(t->pending[i].live && t->pending[i].owned == owned)) i++;
    t->oldest_at[owned] = i;
    return i < t->pend_used ? i : (size_t)-1;
}

/* The pending file (not a link's note) of stem and kind, or (size_t)-1. */
static size_t find_pending(const sa1b_tar *t, const char *stem, int kind)
{
    return pending_find(t, stem, kind);
}

/* The pending note of a link member of stem (either kind), or (size_t)-1. */
static size_t find_link(const sa1b_tar *t, const char *stem)
{
    return pending_find(t, stem, 2);
}

static void pending_drop(sa1b_tar *t, size_t i)
{
    size_t len;
    int owned;
    uint8_t *d = pending_take(t, i, &len, &owned);
    if (owned) free(d);
}

/* The slot of stem's entry of kind, or the first empty one (ev_cap > 0). */
static size_t ev_slot(const sa1b_tar *t, const char *stem, int kind)
{
    size_t k = (size_t)stem_hash(stem) & (t->ev_cap - 1);
    for (; t->ev[k].stem; k = (k + 1) & (t->ev_cap - 1))
        if (t->ev[k].kind == kind && strcmp(t->ev[k].stem, stem) == 0) break;
    return k;
}

/* Remembers that stem's member of kind was dropped at the pending cap
 * (nothing where memory or TAR_MAX_EVICTED says no).  Before live and
 * removed entries fill half of the table it is built again without the
 * removed ones, twice as large where the live ones need it: every chain
 * ends, and removals never use up the room. */
static void ev_add(sa1b_tar *t, const char *stem, int kind)
{
    if (t->n_ev >= TAR_MAX_EVICTED) return;
    if (2 * (t->n_ev + t->n_ev_dead + 1) > t->ev_cap) {
        size_t cap = t->ev_cap ? t->ev_cap : 64;
        while (4 * (t->n_ev + 1) > cap) cap *= 2;
        struct evicted *nv = calloc(cap, sizeof *nv), *old = t->ev;
        if (!nv) return;
        const size_t old_cap = t->ev_cap;
        t->ev = nv;
        t->ev_cap = cap;
        t->n_ev = t->n_ev_dead = 0;
        for (size_t i = 0; i < old_cap; i++) {
            if (old[i].stem && old[i].kind >= 0) {
                t->ev[ev_slot(t, old[i].stem, old[i].kind)] = old[i];
                t->n_ev++;
            } else {
                free(old[i].stem);
            }
        }
        free(old);
    }
    size_t k = ev_slot(t, stem, kind);
    if (t->ev[k].stem) return; /* there already */
    if (!(t->ev[k].stem = strdup(stem))) return;
    t->ev[k].kind = kind;
    t->n_ev++;
}

/* Whether stem's member of kind was dropped at the pending cap (and not
 * taken since); forgets it. */
static int ev_take(sa1b_tar *t, const char *stem, int kind)
{
    if (!t->n_ev) return 0;
    size_t k = ev_slot(t, stem, kind);
    if (!t->ev[k].stem) return 0;
    t->ev[k].kind = -1;
    t->n_ev--;
    t->n_ev_dead++;
    return 1;
}

/* report_unpaired's answer when it dropped a member without a report */
#define TAR_SILENT (-1) /* (no SA1B_ code) */

/* Reports pending[i] and drops it: a file without its partner, or a
 * sample that a link member made unreadable (a file of the same stem
 * waiting goes with it: one bad sample, one report).  A file whose sample
 * was reported already (m->reported) goes without a report: TAR_SILENT.
 * evicted: it goes at the pending cap, and its partner may come yet (that
 * one is marked reported: tar_next). */
static int report_unpaired(sa1b_tar *t, size_t i, const char *why, int evicted, sa1b_error *err)
{
    member *m = &t->pending[i];
    size_t li = m->link ? i : find_link(t, m->stem);
    int rc;
    if (li != (size_t)-1) {
        const member *l = &t->pending[li];
        char stem[sizeof l->stem];
        snprintf(stem, sizeof stem, "%s", l->stem);
        rc = sa1b_error_set(err, SA1B_EFORMAT, pos(t), "%s%s: %s: sample skipped", stem, kind_ext[l->kind],
                            l->link);
        pending_drop(t, li); /* (may compact the list: indices change) */
        size_t fi;
        while ((fi = find_pending(t, stem, 0)) != (size_t)-1 || (fi = find_pending(t, stem, 1)) != (size_t)-1)
            pending_drop(t, fi);
        return rc;
    }
    if (m->reported) {
        pending_drop(t, i);
        return TAR_SILENT;
    }
    rc = sa1b_error_set(err, SA1B_EFORMAT, pos(t), "%s%s: no matching %s%s%s", m->stem, kind_ext[m->kind],
                        m->stem, kind_ext[!m->kind], why);
    if (evicted) ev_add(t, m->stem, m->kind);
    pending_drop(t, i);
    return rc;
}

/* The pairs returned so far, to tell a pair that comes again (tars
 * concatenated or appended to, two folders holding the same image) from
 * another pair of the same stem (two datasets numbered alike): the same
 * stem and the same bytes.  done_find: the chain of stem's pairs, or NULL. */

static done_ent **done_slot(const sa1b_tar *t, const char *stem)
{
    size_t k = (size_t)stem_hash(stem) & (t->done_cap - 1);
    for (; t->done[k]; k = (k + 1) & (t->done_cap - 1))
        if (strcmp(t->done[k]->stem, stem) == 0) break;
    return &t->done[k];
}

static const done_ent *done_find(const sa1b_tar *t, const char *stem)
{
    return t->done_cap ? *done_slot(t, stem) : NULL;
}

/* The pair of stem with jpg/json bytes d[2], len[2] (stable: they lie in the
 * input until sa1b_tar_free) against those returned: 1 when one of the
 * same stem had the same bytes (a duplicate), else 0 and it is recorded;
 * -1 out of memory.  A stable pair is compared where it lies (no cost but
 * on a stem seen before), another by the CRC32C of its bytes. */
static int done_add(sa1b_tar *t, const char *stem, const uint8_t *const d[2], const size_t len[2], int stable)
{
    uint32_t crc[2] = {0, 0};
    int have_crc = 0;
    for (const done_ent *e = done_find(t, stem); e; e = e->next) {
        if (e->len[0] != len[0] || e->len[1] != len[1]) continue;
        if (e->at[0]) {
            if (memcmp(e->at[0], d[0], len[0]) == 0 && memcmp(e->at[1], d[1], len[1]) == 0) return 1;
            continue;
        }
        if (!have_crc) {
            crc[0] = sa1b_crc32c(0, d[0], len[0]);
            crc[1] = sa1b_crc32c(0, d[1], len[1]);
            have_crc = 1;
        }
        if (e->crc[0] == crc[0] && e->crc[1] == crc[1]) return 1;
    }
    if ((t->n_done + 1) * 2 > t->done_cap) {
        size_t ncap = t->done_cap ? t->done_cap * 2 : 1024;
        done_ent **nd = calloc(ncap, sizeof *nd);
        if (!nd) return -1;
        for (size_t i = 0; i < t->done_cap; i++) {
            if (!t->done[i]) continue;
            size_t k = (size_t)stem_hash(t->done[i]->stem) & (ncap - 1);
            while (nd[k]) k = (k + 1) & (ncap - 1);
            nd[k] = t->done[i];
        }
        free(t->done);
        t->done = nd;
        t->done_cap = ncap;
    }
    size_t n = strlen(stem);
    done_ent *e = malloc(sizeof *e + n + 1);
    if (!e) return -1;
    memcpy(e->stem, stem, n + 1);
    for (int k = 0; k < 2; k++) {
        e->len[k] = len[k];
        e->at[k] = stable ? d[k] : NULL;
        e->crc[k] = 0;
    }
    if (!stable) {
        e->crc[0] = have_crc ? crc[0] : sa1b_crc32c(0, d[0], len[0]);
        e->crc[1] = have_crc ? crc[1] : sa1b_crc32c(0, d[1], len[1]);
    }
    done_ent **slot = done_slot(t, stem);
    e->next = *slot;
    if (!*slot) t->n_done++;
    *slot = e;
    return 0;
}

/* Classifies a member path: 1 and stem/kind set for sa_*.jpg / sa_*.json
 * regular files, 2 likewise for such a name on a link (symbolic, or hard
 * without data of its own), 0 to skip silently, -1 when the stem is too
 * long. */
static int classify(struct archive_entry *e, char stem[256], int *kind)
{
    /* a hard link that carries data (pax allows it) is read as a file */
    int link = archive_entry_filetype(e) == AE_IFLNK ||
               (archive_entry_hardlink(e) && !(archive_entry_size_is_set(e) && archive_entry_size(e) > 0));
    if (archive_entry_filetype(e) != AE_IFREG && !link) return 0;
    const char *path = archive_entry_pathname(e);
    if (!path) return 0;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n < 3 || strncmp(base, "sa_", 3) != 0) return 0;
    size_t stem_len;
    if (n > 4 && strcmp(base + n - 4, ".jpg") == 0) {
        *kind = KIND_JPG;
        stem_len = n - 4;
    } else if (n > 5 && strcmp(base + n - 5, ".json") == 0) {
        *kind = KIND_JSON;
        stem_len = n - 5;
    } else {
        return 0;
    }
    if (stem_len >= 256) return -1;
    memcpy(stem, base, stem_len);
    stem[stem_len] = '\0';
    return link ? 2 : 1;
}

/* An error that is no libarchive format complaint: errno from read(2) etc. */
static int is_io_errno(int e)
{
    return e > 0 && e != EILSEQ && e != EINVAL;
}

/* libarchive's message names a cut: its tar reader ("Truncated tar
 * archive"), its reading ("Truncated input file") and its filters ("truncated
 * gzip input", "Truncated zstd input", ...) say so, liblzma says "No progress
 * is possible"; a filter that stops without a message (gzip's missing
 * trailer) is taken for a cut too. */
static int says_cut(const char *m)
{
    return !m || !*m || strstr(m, "runcated") != NULL || strstr(m, "No progress is possible") != NULL;
}

/* archive_read_data error for member base; r < 0.  A fatal one ends the
 * archive: the rest of the input is not read, so it did not end cleanly. */
static int data_error(sa1b_tar *t, const char *base, la_ssize_t r, sa1b_error *err)
{
    const char *m = archive_error_string(t->a);
    if (r == ARCHIVE_FATAL) {
        t->at_end = 1;
        t->unread = 0;
        if (is_io_errno(archive_errno(t->a)) && !says_cut(m)) {
            char buf[SA1B_ERROR_MSG_MAX];
            snprintf(buf, sizeof buf, "%s: read error: %s", base, m);
            return set_fatal(t, SA1B_EIO, err, buf);
        }
        t->truncated = 1;
        if (says_cut(m)) return sa1b_error_set(err, SA1B_ETRUNC, pos(t), "%s: member truncated", base);
    }
    return sa1b_error_set(err, SA1B_EFORMAT, pos(t), "%s: cannot read member: %s", base,
                          m ? m : "unknown error");
}

/* A member (not sparse) of an input in memory, read by blocks: when it
 * arrives whole as one block inside the input (a plain tar's member),
 * *data points there (*owned 0); otherwise the blocks, which follow each
 * other, are assembled into a malloc'ed buffer.  Same results and errors
 * as the copying way of read_member. */
static int read_member_blocks(sa1b_tar *t, const char *base, size_t size, uint8_t **data,
                              size_t *len, int *owned, sa1b_error *err)
{
    const void *p;
    size_t n;
    la_int64_t off;
    int r = archive_read_data_block(t->a, &p, &n, &off);
    if (r == ARCHIVE_OK && off == 0 && n == size && (const uint8_t *)p >= t->in &&
        (size_t)((const uint8_t *)p - t->in) <= t->in_len - n) {
        const void *q;
        size_t m;
        la_int64_t qoff;
        int r2 = archive_read_data_block(t->a, &q, &m, &qoff);
        if (r2 == ARCHIVE_EOF) {
            *data = (uint8_t *)(uintptr_t)p; /* read only: handed out as const */
            *len = size;
            *owned = 0;
            return SA1B_OK;
        }
        if (r2 < ARCHIVE_OK) return data_error(t, base, r2, err);
        return sa1b_error_set(err, SA1B_EFORMAT, pos(t), "%s: member longer than its header says",
                              base);
    }
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return sa1b_error_set(err, SA1B_ENOMEM, pos(t), "%s: out of memory", base);
    size_t got = 0;
    for (; r != ARCHIVE_EOF; r = archive_read_data_block(t->a, &p, &n, &off)) {
        if (r < ARCHIVE_OK) {
            free(buf);
            return data_error(t, base, r, err);
        }
        if (off < 0 || (uint64_t)off != got || n > size - got) {
            free(buf);
            return sa1b_error_set(err, SA1B_EFORMAT, pos(t),
                                  "%s: member longer than its header says", base);
        }
        memcpy(buf + got, p, n);
        got += n;
    }
    if (got != size) {
        free(buf);
        t->at_end = 1;
        return sa1b_error_set(err, SA1B_ETRUNC, pos(t), "%s: member truncated", base);
    }
    *data = buf;
    *len = size;
    *owned = 1;
    return SA1B_OK;
}

/* Reads the current member whole.  Returns SA1B_OK with *data and *len
 * (*owned: malloc'ed, else inside the input in memory), or an error already
 * reported through err (and *data NULL).  The copying way grows its buffer
 * as data arrives, so a header that lies about the size costs no memory. */
static int read_member(sa1b_tar *t, struct archive_entry *e, const char *base, uint8_t **data,
                       size_t *len, int *owned, sa1b_error *err)
{
    *data = NULL;
    *len = 0;
    *owned = 1;
    int known = archive_entry_size_is_set(e);
    la_int64_t size = archive_entry_size(e);
    if (known && (size < 0 || (uint64_t)size > SA1B_TAR_MAX_MEMBER_BYTES))
        return sa1b_error_set(err, SA1B_ERANGE, pos(t), "%s: member too large (%lld bytes)", base,
                              (long long)size);
    /* in memory, of a known size no larger than what is left of the input
     * (a header claiming more is a truncated member: the copying way finds
     * out without allocating that much) */
    if (t->in && known && size > 0 && archive_entry_sparse_count(e) == 0 &&
        (uint64_t)size <= t->in_len)
        return read_member_blocks(t, base, (size_t)size, data, len, owned, err);
    const size_t limit = known ? (size_t)size : (size_t)SA1B_TAR_MAX_MEMBER_BYTES;
    size_t cap = limit < ((size_t)1 << 20) ? limit : ((size_t)1 << 20);
    uint8_t *buf = malloc(cap ? cap : 1);
    if (!buf) return sa1b_error_set(err, SA1B_ENOMEM, pos(t), "%s: out of memory", base);
    size_t got = 0;
    for (;;) {
        if (got == cap) {
            if (cap == limit) {
                /* the entry should be done: one more read must say so */
                uint8_t probe;
                la_ssize_t r = archive_read_data(t->a, &probe, 1);
                if (r == 0) break;
                free(buf);
                if (r < 0) return data_error(t, base, r, err);
                if (!known)
                    return sa1b_error_set(err, SA1B_ERANGE, pos(t),
                                          "%s: member too large (over %llu bytes)", base,
                                          (unsigned long long)SA1B_TAR_MAX_MEMBER_BYTES);
                return sa1b_error_set(err, SA1B_EFORMAT, pos(t),
                                      "%s: member longer than its header says", base);
            }
            size_t ncap = cap * 2 < limit ? cap * 2 : limit;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                return sa1b_error_set(err, SA1B_ENOMEM, pos(t), "%s: out of memory", base);
            }
            buf = nb;
            cap = ncap;
        }
        la_ssize_t r = archive_read_data(t->a, buf + got, cap - got);
        if (r < 0) {
            free(buf);
            return data_error(t, base, r, err);
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (known && got != (size_t)size) {
        free(buf);
        t->at_end = 1;
        return sa1b_error_set(err, SA1B_ETRUNC, pos(t), "%s: member truncated", base);
    }
    *data = buf;
    *len = got;
    return SA1B_OK;
}

/* Drops a pending partner of a member that could not be read: one bad sample,
 * one report. */
static void drop_partner(sa1b_tar *t, const char *stem, int kind)
{
    size_t i = find_pending(t, stem, !kind);
    if (i != (size_t)-1) {
        size_t len;
        int owned;
        uint8_t *d = pending_take(t, i, &len, &owned);
        if (owned) free(d);
    }
}

/* A mapped input: drops the pages more than KEEP_BEHIND behind the read
 * position from the mapping (not from the page cache), in steps of
 * KEEP_BEHIND, so that the resident set does not grow with the file.
 * Members handed out or pending there stay valid: their pages come back
 * from the page cache when read. */
static void drop_behind(sa1b_tar *t)
{
    if (!t->map) return;
    uint64_t at = sa1b_tar_bytes_read(t);
    if (at < t->dropped + 2 * KEEP_BEHIND) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), to = (size_t)(at - KEEP_BEHIND);
    to -= to % page;
    if (to > t->id_bytes) { /* into the input's CRC while the pages are still mapped */
        t->id_crc = sa1b_crc32c(t->id_crc, (const uint8_t *)t->map + t->id_bytes, to - (size_t)t->id_bytes);
        t->id_bytes = to;
    }
    if (to > t->dropped)
        (void)madvise((uint8_t *)t->map + t->dropped, to - t->dropped, MADV_DONTNEED); /* advice only */
    t->dropped = to;
}

/* ---- the iterator --------------------------------------------------------- */

/* At the end of the archive: the rest of the input into its CRC (a stream
 * is read to its end, trailing blocks included). */
static void id_finish(sa1b_tar *t)
{
    if (t->id_state) return;
    t->id_state = 1;
    if (t->in) {
        t->id_crc = sa1b_crc32c(t->id_crc, t->in + t->id_bytes, t->in_len - (size_t)t->id_bytes);
        t->id_bytes = t->in_len;
        return;
    }
    if (t->read_fd < 0) return;
    for (;;) {
        ssize_t n = read(t->read_fd, t->rbuf, BLOCK_SIZE);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) t->id_state = -1;
        if (n <= 0) return;
        t->id_crc = sa1b_crc32c(t->id_crc, t->rbuf, (size_t)n);
        t->id_bytes += (uint64_t)n;
    }
}

int sa1b_tar_get_identity(const sa1b_tar *t, sa1b_tar_identity *id)
{
    if (!t || !id || t->id_state != 1) return SA1B_EINVAL;
    id->bytes = t->id_bytes;
    id->crc32c = t->id_crc;
    id->clean_end = !t->truncated;
    id->no_member = t->no_member;
    return SA1B_OK;
}

/* libarchive failed looking for the next header, or skipping the data of
 * the member before it (base: its name, else NULL).  Reading cannot go on:
 * returns the problem to report, or SA1B_OK when there is none to report
 * but the cut (then the caller goes on to the end of the archive). */
static int stream_failed(sa1b_tar *t, const char *base, sa1b_error *err)
{
    const char *m = archive_error_string(t->a);
    char buf[SA1B_ERROR_MSG_MAX];
    t->at_end = 1;
    if (is_io_errno(archive_errno(t->a)) && !says_cut(m)) {
        snprintf(buf, sizeof buf, "read error: %s", m);
        return set_fatal(t, SA1B_EIO, err, buf);
    }
    if (!t->started && !says_cut(m)) {
        snprintf(buf, sizeof buf, "not a tar archive (%s)", m);
        return set_fatal(t, SA1B_EFORMAT, err, strstr(m, "Unrecognized") ? "not a tar archive" : buf);
    }
    t->truncated = 1; /* the rest of the input is not read */
    if (!says_cut(m)) return sa1b_error_set(err, SA1B_EFORMAT, pos(t), "damaged tar archive: %s", m);
    if (base) return sa1b_error_set(err, SA1B_ETRUNC, pos(t), "%s: member truncated", base);
    if (strstr(m ? m : "", "Truncated tar archive"))
        return sa1b_error_set(err, SA1B_ETRUNC, pos(t), "tar truncated inside a header");
    /* a compressed stream cut (or missing its trailer) between members: no
     * member is concerned; the caller's report of the cut (clean_end 0)
     * says it all: SA1B_OK, reading goes on to the end */
    return SA1B_OK;
}

static int tar_next(sa1b_tar *t, sa1b_tar_sample *s, sa1b_error *err);

int sa1b_tar_next(sa1b_tar *t, sa1b_tar_sample *s, sa1b_error *err)
{
    int rc = tar_next(t, s, err);
    if (rc == SA1B_ETRUNC) t->truncated = 1;
    if (rc == SA1B_EOF && t) id_finish(t);
    return rc;
}

static int tar_next(sa1b_tar *t, sa1b_tar_sample *s, sa1b_error *err)
{
    if (!t || !s) return sa1b_error_set(err, SA1B_EINVAL, -1, "tar: NULL argument");
    cur_release(t);
    memset(s, 0, sizeof *s);
    if (t->fatal) return sa1b_error_set(err, t->fatal_code, pos(t), "%s", t->fatal_msg);

    for (;;) {
        /* memory bounds: one reported eviction per call (a silent one,
         * of a member whose sample was reported, goes on to the next) */
        int urc;
        if (t->n_owned > SA1B_TAR_MAX_PENDING ||
            (t->n_owned > 1 && t->pending_bytes > SA1B_TAR_MAX_PENDING_BYTES)) {
            if ((urc = report_unpaired(t, pending_oldest(t, 1), " (pending limit reached)", 1, err)) != TAR_SILENT)
                return urc;
            continue;
        }
        if (t->n_pending - t->n_owned > SA1B_TAR_MAX_PENDING_IN_INPUT) {
            if ((urc = report_unpaired(t, pending_oldest(t, 0), " (pending limit reached)", 1, err)) != TAR_SILENT)
                return urc;
            continue;
        }
        if (t->at_end) {
            if (t->n_pending && (urc = report_unpaired(t, pending_oldest(t, -1), "", 0, err)) != TAR_SILENT)
                return urc;
            if (t->n_pending) continue;
            return sa1b_error_set(err, SA1B_EOF, pos(t), "end of archive");
        }

        /* the last member's data (when not read) is skipped here rather than
         * inside archive_read_next_header, so that mark is where its padded
         * data ends: past it, only a header or an end-of-archive block */
        if (t->unread) {
            t->unread = 0;
            if (archive_read_data_skip(t->a) != ARCHIVE_OK) {
                int rc = stream_failed(t, t->unread_base, err);
                if (rc != SA1B_OK) return rc;
                continue;
            }
        }
        t->mark = archive_filter_bytes(t->a, 0); /* index 0: the uncompressed side */
        struct archive_entry *e;
        int r = archive_read_next_header(t->a, &e);
        if (r == ARCHIVE_EOF) {
            t->at_end = 1;
            if (!t->started && archive_format(t->a) == ARCHIVE_FORMAT_EMPTY)
                return set_fatal(t, SA1B_EFORMAT, err, "empty input: not a tar archive");
            if (!t->started) {
                /* only zero blocks: an empty archive, or a file of zeros (a
                 * download that never got its data): not silently "done" */
                t->no_member = 1;
                t->truncated = 1;
            } else if (archive_filter_bytes(t->a, 0) == t->mark) {
                /* the end came where a header or an end-of-archive block
                 * should be, and not one zero block was there: the input
                 * was cut at a block boundary (libarchive takes that for a
                 * complete archive), compressed or not */
                t->truncated = 1;
            }
            continue;
        }
        if (r == ARCHIVE_RETRY) {
            /* a damaged header: libarchive skips on; say so once per damaged run */
            if (t->in_damage) continue;
            t->in_damage = 1;
            return sa1b_error_set(err, SA1B_EFORMAT, pos(t), "damaged tar header near byte %lld",
                                  (long long)pos(t));
        }
        if (r < ARCHIVE_WARN) { /* FAILED or FATAL */
            int rc = stream_failed(t, NULL, err);
            if (rc != SA1B_OK) return rc;
            continue;
        }
        t->started = 1;
        t->in_damage = 0;
        t->unread = 1;
        {
            const char *p = archive_entry_pathname(e), *b = p ? strrchr(p, '/') : NULL;
            snprintf(t->unread_base, sizeof t->unread_base, "%.255s", b ? b + 1 : p ? p : "");
        }

        char stem[256], base[262];
        int kind = 0;
        int c = classify(e, stem, &kind);
        if (c == 0) continue;   /* not ours: libarchive skips its data */
        if (c < 0) {
            const char *p = archive_entry_pathname(e);
            const char *b = strrchr(p, '/');
            return sa1b_error_set(err, SA1B_EFORMAT, pos(t), "%.60s...: member name too long",
                                  b ? b + 1 : p);
        }
        snprintf(base, sizeof base, "%s%s", stem, kind_ext[kind]);

        uint8_t *data = NULL;
        size_t len = 0;
        int owned = 0;
        char link[200] = "";
        if (c == 2) {
            /* a link has no data of its own (a hard link's lies in an
             * earlier member, long gone).  It never pairs: a note of it
             * waits, and unless a file of its name comes, its sample is
             * reported once, with its partner if that came, at the end.
             * A link beside the file itself (a folder of links to the
             * files of another folder of the tar) so loses nothing and
             * says nothing. */
            if (done_find(t, stem) || find_link(t, stem) != (size_t)-1) continue;
            const char *hard = archive_entry_hardlink(e), *to = hard ? hard : archive_entry_symlink(e);
            snprintf(link, sizeof link, "a %s link to '%.120s', not a file", hard ? "hard" : "symbolic",
                     to ? to : "");
        } else {
            int rc = read_member(t, e, base, &data, &len, &owned, err);
            if (rc != SA1B_OK) {
                drop_partner(t, stem, kind);
                return rc;
            }
            t->unread = 0; /* read to its end, padding included */
            drop_behind(t);
        }

        if (!link[0]) (void)ev_take(t, stem, kind); /* a new copy: an eviction of its kind is old news */
        size_t pi = link[0] ? (size_t)-1 : find_pending(t, stem, !kind);
        if (pi != (size_t)-1) {
            size_t plen;
            int powned;
            uint8_t *pdata = pending_take(t, pi, &plen, &powned);
            size_t li = find_link(t, stem); /* the files came: a link's note says nothing */
            if (li != (size_t)-1) pending_drop(t, li);
            const uint8_t *pd[2] = {kind == KIND_JPG ? data : pdata, kind == KIND_JPG ? pdata : data};
            const size_t pl[2] = {kind == KIND_JPG ? len : plen, kind == KIND_JPG ? plen : len};
            int dup = done_add(t, stem, pd, pl, !owned && !powned);
            if (dup != 0) {
                if (owned) free(data);
                if (powned) free(pdata);
                if (dup < 0) return sa1b_error_set(err, SA1B_ENOMEM, pos(t), "%s: out of memory", base);
                return sa1b_error_set(err, SA1B_EFORMAT, pos(t),
                                      "%s: duplicate sample (%s.jpg and %s.json came before): this copy skipped",
                                      stem, stem, stem);
            }
            t->cur[kind] = data;
            t->cur[!kind] = pdata;
            t->cur_owned[kind] = owned;
            t->cur_owned[!kind] = powned;
            snprintf(s->name, sizeof s->name, "%s", stem);
            s->jpg = t->cur[KIND_JPG];
            s->jpg_len = kind == KIND_JPG ? len : plen;
            s->json = t->cur[KIND_JSON];
            s->json_len = kind == KIND_JSON ? len : plen;
            s->stable = !t->cur_owned[0] && !t->cur_owned[1];
            return SA1B_OK;
        }

        /* no partner yet: keep it; a same-named earlier copy is dropped */
        size_t di = link[0] ? (size_t)-1 : find_pending(t, stem, kind);
        char *ml = link[0] ? strdup(link) : NULL;
        if (t->pend_used == t->pend_cap) {
            size_t ncap = t->pend_cap ? t->pend_cap * 2 : 2 * SA1B_TAR_MAX_PENDING;
            member *np = realloc(t->pending, ncap * sizeof *np);
            if (np) {
                t->pending = np;
                t->pend_cap = ncap;
            }
        }
        if (t->pend_used == t->pend_cap || (link[0] && !ml)) {
            free(ml);
            if (owned) free(data);
            return sa1b_error_set(err, SA1B_ENOMEM, pos(t), "%s: out of memory", base);
        }
        member *m = &t->pending[t->pend_used++];
        snprintf(m->stem, sizeof m->stem, "%s", stem);
        /* the partner of a member dropped at the cap (or another member of
         * its stem): it waits and pairs as any member; unpaired too, it
         * goes without a second report */
        m->reported = !link[0] && (ev_take(t, stem, !kind) ||
                                   (di != (size_t)-1 && t->pending[di].reported)); /* a copy keeps the mark */
        m->kind = kind;
        m->data = data;
        m->len = len;
        m->owned = owned;
        m->live = 1;
        m->link = ml;
        t->n_pending++;
        if (owned) {
            t->n_owned++;
            t->pending_bytes += len;
        }
        if (t->pend_used > SA1B_TAR_MAX_PENDING && (!t->pidx || t->pidx_cap < 2 * t->pend_cap + 2))
            pidx_build(t); /* (without memory for it, the list is scanned) */
        else if (t->pidx)
            pidx_put(t, t->pend_used - 1);
        if (di != (size_t)-1) {
            size_t dlen;
            int downed;
            uint8_t *d = pending_take(t, di, &dlen, &downed);
            if (downed) free(d);
            return sa1b_error_set(err, SA1B_EFORMAT, pos(t), "%s: duplicate member, earlier copy dropped",
                                  base);
        }
    }
}
