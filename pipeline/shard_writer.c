/*
 * shard_writer.c - streams samples into a shard file (sa1b-shard(5)).
 *
 * Payloads go to "<path>.tmp-XXXXXX" through a 4 MiB buffer as they arrive.
 * The three tables (file names, index rows, mask rows) grow with the shard:
 * each keeps its last TABLE_MEM bytes in memory and the rest in an unlinked
 * temporary file beside the output, so that the writer's memory stays the
 * same whatever the number of samples.  At finish the tables are streamed
 * into the shard after the payloads, then the footer is appended, the
 * header (zeros until then) is written last at offset 0, the file fsynced
 * and renamed, and the directory fsynced: a file that opens is complete.
 *
 * Where the file system takes it, the file is opened with O_DIRECT and the
 * buffer (page aligned) is written in whole pages at page-aligned offsets:
 * the disk reads the bytes straight from the buffer, without the kernel's
 * copy into fresh page-cache pages (measured on a 2-core VM: that copy and
 * the page bookkeeping were a fifth of sa1b-shard's CPU time, and a shard
 * is written once and read much later, so caching it is no help).  The
 * last partial page and everything written at finish go through the page
 * cache (O_DIRECT cleared with fcntl); a direct write the device refuses
 * (EINVAL: stricter alignment) switches the file to buffered writes.  The
 * bytes of the file are the same either way.
 */
#include "nt_store.h"
#include "sa1b_shard.h"
#include "shard_format.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#define WR_HAVE_SSE2 1
#include <emmintrin.h>
#endif

/* The staging buffer: 4 MiB, more than a 1024 x 1024 raw image, so that a
 * sample takes about one write(2); 2 MiB aligned and advised for huge
 * pages, so that a direct write pins two huge pages and the block layer
 * takes each as one segment instead of 1024 pages of 4 KiB (measured with
 * perf on a 2-core VM, 100 samples at --image-size 1024: the kernel's share
 * of the write path 3.3-4.1% of sa1b-shard's CPU with 1 MiB of 4 KiB
 * pages, 1.2% with this). */
#define WBUF_CAP (4u << 20)
#define WBUF_ALIGN ((size_t)2 << 20)
/* Without O_DIRECT, payloads of this size or more go to write(2) straight
 * from the caller's memory (the kernel copies them anyway), not through
 * the buffer. */
#define WBUF_BYPASS ((size_t)1 << 20)
/* Direct writes are whole multiples of this, at offsets and from a buffer
 * aligned to it (covers 512- and 4096-byte logical blocks). */
#define DIO_ALIGN 4096u
/* Written data is handed to the kernel's writeback every WB_CHUNK bytes
 * (sync_file_range, advice only), so the disk writes overlap the work and
 * the fsync at finish has little left to wait for. */
#define WB_CHUNK ((uint64_t)8 << 20)

/* Bytes of each table kept in memory; the rest spills to a file. */
#define TABLE_MEM ((size_t)1 << 20)

/* A table appended to as samples come: its first file_len bytes in the
 * spill file fd (unlinked; -1 until the memory part first fills up), the
 * next mem_len bytes in mem. */
typedef struct wr_table {
    uint8_t *mem; /* TABLE_MEM bytes, allocated at the first append */
    size_t mem_len;
    int fd;
    uint64_t file_len;
} wr_table;

struct sa1b_shard_writer {
    int fd;
    int failed;
    int direct; /* fd has O_DIRECT: flushes write whole DIO_ALIGN blocks */
    char *path, *tmp_path;
    uint32_t S, R;
    int format;
    int mask_format; /* SA1B_SHARD_PACKED or SA1B_SHARD_RLE */
    uint64_t mask_bytes, mask_stride; /* 0 for RLE */
    char *prov;
    size_t prov_len;
    char *prov_final;       /* sa1b_shard_writer_set_provenance: written after the tables' payloads */
    uint64_t pos; /* file offset of the next byte written */
    uint64_t wb_from; /* bytes before this offset were handed to writeback */
    uint8_t *buf;
    size_t buf_len;
    uint64_t n_images, n_masks;
    /* names: NUL-terminated file names; index: 96-byte rows whose name
     * offset is relative to the names table until finish; masks: 80-byte
     * rows, final */
    wr_table names, index, masks;
    uint8_t *pack; /* one packed mask, mask_stride bytes (RLE: runs_bound bytes of runs) */
};

/* Starts writeback of what reached the file since the last call, once
 * that is at least WB_CHUNK bytes (errors ignored: fsync decides). */
static void wr_writeback(sa1b_shard_writer *w)
{
#ifdef SYNC_FILE_RANGE_WRITE
    uint64_t end = w->pos - w->buf_len; /* bytes in the file */
    if (end - w->wb_from < WB_CHUNK) return;
    (void)sync_file_range(w->fd, (off_t)w->wb_from, (off_t)(end - w->wb_from),
                          SYNC_FILE_RANGE_WRITE);
    w->wb_from = end;
#else
    (void)w;
#endif
}

/* Drops O_DIRECT: later writes go through the page cache. */
static int wr_buffered(sa1b_shard_writer *w)
{
    if (!w->direct) return 0;
    int fl = fcntl(w->fd, F_GETFL);
    if (fl < 0 || fcntl(w->fd, F_SETFL, fl & ~O_DIRECT) != 0) return -1;
    w->direct = 0;
    w->wb_from = w->pos - w->buf_len; /* writeback advice from here on */
    return 0;
}

/* Writes the first len bytes of the buffer (whole DIO_ALIGN blocks when
 * direct) and moves the rest to its front. */
static int wr_flush_part(sa1b_shard_writer *w, size_t len, sa1b_error *err)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(w->fd, w->buf + done, len - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL && w->direct && wr_buffered(w) == 0) continue;
            w->failed = 1;
            return sa1b_error_set(err, SA1B_EIO, (int64_t)w->pos, "write '%s': %s", w->tmp_path,
                                  strerror(errno));
        }
        done += (size_t)n;
        if (w->direct && done % DIO_ALIGN && done < len && wr_buffered(w) != 0) {
            w->failed = 1; /* a short direct write left the block grid */
            return sa1b_error_set(err, SA1B_EIO, (int64_t)w->pos, "write '%s': %s",
                                  w->tmp_path, strerror(errno));
        }
    }
    if (len < w->buf_len) memmove(w->buf, w->buf + len, w->buf_len - len);
    w->buf_len -= len;
    if (!w->direct) wr_writeback(w);
    return SA1B_OK;
}

/* Writes out the buffer: all of it, or when direct its whole blocks (the
 * tail, less than a block, stays at the front). */
static int wr_flush(sa1b_shard_writer *w, sa1b_error *err)
{
    return wr_flush_part(w, w->direct ? w->buf_len / DIO_ALIGN * DIO_ALIGN : w->buf_len, err);
}

/* Writes out everything in the buffer, leaving direct mode first (always:
 * the header is written after this from an unaligned buffer, which a
 * direct write refuses, even when the buffer's tail is a whole block). */
static int wr_flush_all(sa1b_shard_writer *w, sa1b_error *err)
{
    if (w->direct && wr_buffered(w) != 0) {
        w->failed = 1;
        return sa1b_error_set(err, SA1B_EIO, (int64_t)w->pos, "fcntl '%s': %s", w->tmp_path,
                              strerror(errno));
    }
    return wr_flush_part(w, w->buf_len, err);
}

/* Copies n bytes into the staging buffer.  Large copies (raw images) use
 * streaming stores (nt_store.h): the buffer is read next by the disk's DMA,
 * not by the CPU.  The fence makes the stores visible before the write(2)
 * that follows. */
#define WR_STREAM_MIN ((size_t)256 << 10)
static void wr_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n < WR_STREAM_MIN) {
        memcpy(dst, src, n);
        return;
    }
    nt_copy(dst, src, n);
    nt_fence();
}

/* Direct mode, the buffer holding whole blocks alone (the file position
 * is on the block grid): writes the whole blocks of p[len] (DIO_ALIGN
 * aligned in memory) to the file straight from p, after the buffer.
 * Returns the bytes written; 0 with w->direct cleared when the file
 * refused the direct write (the caller goes on through the page cache);
 * (size_t)-1 with err on a failure. */
static size_t wr_direct_from(sa1b_shard_writer *w, const uint8_t *p, size_t len, sa1b_error *err)
{
    if (wr_flush(w, err) != SA1B_OK) return (size_t)-1;
    if (!w->direct) return 0; /* the flush fell back */
    size_t done = 0, want = len / DIO_ALIGN * DIO_ALIGN;
    while (done < want) {
        ssize_t n = write(w->fd, p + done, want - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EINVAL && done == 0 && wr_buffered(w) == 0) return 0;
        if (n <= 0 || (size_t)n % DIO_ALIGN) { /* a failure, or a short write off the block grid */
            w->failed = 1;
            sa1b_error_set(err, SA1B_EIO, (int64_t)w->pos, "write '%s': %s", w->tmp_path,
                           n < 0 ? strerror(errno) : "short direct write");
            return (size_t)-1;
        }
        done += (size_t)n;
        w->pos += (uint64_t)n;
    }
    return done;
}

static int wr_bytes(sa1b_shard_writer *w, const void *data, size_t len, sa1b_error *err)
{
    const uint8_t *p = data;
    if (len == 0) return SA1B_OK;
    if (w->direct && len >= WBUF_BYPASS && w->pos % DIO_ALIGN == 0 &&
        (uintptr_t)p % DIO_ALIGN == 0) {
        /* a large payload on the block grid (raw images, see writer_add)
         * from aligned memory (sa1b_prep_run's): written from there, not
         * copied into the buffer first; its tail (less than a block) is */
        size_t n = wr_direct_from(w, p, len, err);
        if (n == (size_t)-1) return SA1B_EIO;
        p += n;
        len -= n;
        if (!w->direct) return wr_bytes(w, p, len, err); /* fell back */
    }
    if (w->direct) { /* everything else through the aligned buffer */
        while (w->buf_len + len > WBUF_CAP) {
            size_t k = WBUF_CAP - w->buf_len;
            wr_copy(w->buf + w->buf_len, p, k);
            w->buf_len += k;
            w->pos += k;
            p += k;
            len -= k;
            SA1B_FORWARD(wr_flush(w, err));
            if (!w->direct) return wr_bytes(w, p, len, err); /* fell back */
        }
    } else if (w->buf_len + len > WBUF_CAP || len >= WBUF_BYPASS) {
        SA1B_FORWARD(wr_flush(w, err));
        while (len >= WBUF_BYPASS) { /* large payloads bypass the buffer */
            ssize_t n = write(w->fd, p, len);
            if (n < 0) {
                if (errno == EINTR) continue;
                w->failed = 1;
                return sa1b_error_set(err, SA1B_EIO, (int64_t)w->pos, "write '%s': %s",
                                      w->tmp_path, strerror(errno));
            }
            p += n;
            len -= (size_t)n;
            w->pos += (uint64_t)n;
        }
        wr_writeback(w);
    }
    wr_copy(w->buf + w->buf_len, p, len);
    w->buf_len += len;
    w->pos += len;
    return SA1B_OK;
}

/* Zero padding up to the next multiple of a (a power of two <= DIO_ALIGN). */
static int wr_align_to(sa1b_shard_writer *w, uint64_t a, sa1b_error *err)
{
    static const uint8_t zeros[DIO_ALIGN];
    uint64_t pad = (a - (w->pos % a)) % a;
    return pad ? wr_bytes(w, zeros, (size_t)pad, err) : SA1B_OK;
}

static int wr_align(sa1b_shard_writer *w, sa1b_error *err)
{
    return wr_align_to(w, SA1B_SHARD_ALIGN, err);
}

/* The directory of path, malloc'ed ("." for a bare name, "/" at the
 * root), or NULL when out of memory. */
static char *dir_of(const char *path)
{
    size_t n = strlen(path);
    char *dir = malloc(n + 2);
    if (!dir) return NULL;
    memcpy(dir, path, n + 1);
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) dir[1] = 0;
    else *slash = 0;
    return dir;
}

/* Creates t's spill file: unlinked from the start where the file system
 * has O_TMPFILE, else created beside the shard's temporary file and
 * unlinked at once. */
static int tab_open_spill(sa1b_shard_writer *w, wr_table *t, sa1b_error *err)
{
    char *dir = dir_of(w->tmp_path);
    if (!dir) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
#ifdef O_TMPFILE
    t->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
    free(dir);
    if (t->fd < 0) {
        char *tmpl = NULL;
        if (asprintf(&tmpl, "%s.rows-XXXXXX", w->tmp_path) < 0)
            return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
        t->fd = mkostemp(tmpl, O_CLOEXEC);
        if (t->fd >= 0) unlink(tmpl);
        free(tmpl);
    }
    if (t->fd < 0)
        return sa1b_error_set(err, SA1B_EIO, -1, "cannot create a table file beside '%s': %s",
                              w->tmp_path, strerror(errno));
    return SA1B_OK;
}

/* Appends len bytes to t, moving the memory part to the spill file when it
 * is full. */
static int tab_append(sa1b_shard_writer *w, wr_table *t, const void *data, size_t len,
                      sa1b_error *err)
{
    const uint8_t *p = data;
    if (len && !t->mem && !(t->mem = malloc(TABLE_MEM)))
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    while (len) {
        if (t->mem_len == TABLE_MEM) {
            if (t->fd < 0) SA1B_FORWARD(tab_open_spill(w, t, err));
            size_t done = 0;
            while (done < TABLE_MEM) {
                ssize_t n = pwrite(t->fd, t->mem + done, TABLE_MEM - done,
                                   (off_t)(t->file_len + done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0)
                    return sa1b_error_set(err, SA1B_EIO, -1, "write a table file beside '%s': %s",
                                          w->tmp_path, n < 0 ? strerror(errno) : "no progress");
                done += (size_t)n;
            }
            t->file_len += TABLE_MEM;
            t->mem_len = 0;
        }
        size_t k = TABLE_MEM - t->mem_len < len ? TABLE_MEM - t->mem_len : len;
        memcpy(t->mem + t->mem_len, p, k);
        t->mem_len += k;
        p += k;
        len -= k;
    }
    return SA1B_OK;
}

static uint64_t tab_len(const wr_table *t) { return t->file_len + t->mem_len; }

/* Copies bytes [at, at + n) of table t to buf: from the spill file, then
 * from memory. */
static int tab_read(const sa1b_shard_writer *w, const wr_table *t, uint64_t at, uint8_t *buf,
                    size_t n, sa1b_error *err)
{
    while (n && at < t->file_len) {
        size_t k = t->file_len - at < n ? (size_t)(t->file_len - at) : n;
        ssize_t r = pread(t->fd, buf, k, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return sa1b_error_set(err, SA1B_EIO, -1, "read back a table file beside '%s': %s",
                                  w->tmp_path, r < 0 ? strerror(errno) : "shorter than written");
        buf += r;
        at += (uint64_t)r;
        n -= (size_t)r;
    }
    if (n) memcpy(buf, t->mem + (at - t->file_len), n);
    return SA1B_OK;
}

/* Writes table t into the shard in pieces of whole rows of row bytes, and
 * its CRC32C to *crc; index rows get names_offset added to their name
 * offset on the way. */
static int tab_emit(sa1b_shard_writer *w, const wr_table *t, size_t row, int index_rows,
                    uint64_t names_offset, uint32_t *crc, sa1b_error *err)
{
    *crc = 0;
    const size_t cap = row * 4096;
    uint8_t *piece = tab_len(t) ? malloc(cap) : NULL;
    if (tab_len(t) && !piece) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    int rc = SA1B_OK;
    for (uint64_t at = 0; !rc && at < tab_len(t);) {
        size_t n = tab_len(t) - at < cap ? (size_t)(tab_len(t) - at) : cap;
        if ((rc = tab_read(w, t, at, piece, n, err))) break;
        if (index_rows)
            for (size_t k = 0; k + row <= n; k += row) {
                uint8_t *f = piece + k + IDX_NAME_OFFSET;
                shard_st64(f, shard_ld64(f) + names_offset);
            }
        *crc = sa1b_crc32c(*crc, piece, n);
        rc = wr_bytes(w, piece, n, err);
        at += n;
    }
    free(piece);
    return rc;
}

static void tab_free(wr_table *t)
{
    free(t->mem);
    if (t->fd >= 0) close(t->fd);
    memset(t, 0, sizeof *t);
    t->fd = -1;
}

static void wr_free(sa1b_shard_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    free(w->path);
    free(w->tmp_path);
    free(w->prov);
    free(w->prov_final);
    free(w->buf);
    tab_free(&w->names);
    tab_free(&w->index);
    tab_free(&w->masks);
    free(w->pack);
    free(w);
}

/* Opens a fresh "<path>.tmp-XXXXXX" with O_EXCL (mode 0666 & ~umask). */
static int wr_create_tmp(sa1b_shard_writer *w, sa1b_error *err)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    size_t n = strlen(w->path) + 16;
    w->tmp_path = malloc(n);
    if (!w->tmp_path) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40) ^
                 (uint64_t)(uintptr_t)w;
    for (int attempt = 0; attempt < 100; attempt++) {
        char suf[7];
        for (int i = 0; i < 6; i++) {
            x ^= x << 13; /* xorshift64 */
            x ^= x >> 7;
            x ^= x << 17;
            suf[i] = alnum[x % (sizeof alnum - 1)];
        }
        suf[6] = 0;
        snprintf(w->tmp_path, n, "%s.tmp-%s", w->path, suf);
        w->fd = open(w->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (w->fd >= 0) {
            /* a write lock while the file is ours: a temp nobody holds is stale
             * (advice only: a file system without locks still works) */
            struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
            (void)fcntl(w->fd, F_SETLK, &lk);
            /* direct writes where the file system has them (else buffered) */
            int fl = fcntl(w->fd, F_GETFL);
            w->direct = fl >= 0 && fcntl(w->fd, F_SETFL, fl | O_DIRECT) == 0;
            return SA1B_OK;
        }
        if (errno != EEXIST) break;
    }
    return sa1b_error_set(err, SA1B_EIO, -1, "cannot create '%s': %s", w->tmp_path,
                          strerror(errno));
}

int sa1b_shard_writer_open(sa1b_shard_writer **wp, const char *path, const sa1b_shard_params *p,
                           sa1b_error *err)
{
    if (!wp || !path || !p) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    *wp = NULL;
    if (p->image_size < 1 || p->image_size > SA1B_SHARD_MAX_IMAGE_SIZE)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image size %u not in 1..%u", p->image_size,
                              SA1B_SHARD_MAX_IMAGE_SIZE);
    if (p->mask_format != SA1B_SHARD_PACKED && p->mask_format != SA1B_SHARD_RLE &&
        p->mask_format != SA1B_SHARD_RLE_SOURCE)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "mask format %d unknown", p->mask_format);
    if (p->mask_format == SA1B_SHARD_RLE_SOURCE ? p->mask_size != 0
                                                 : p->mask_size < 1 || p->mask_size > p->image_size)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "mask size %u not in %s%u", p->mask_size,
                              p->mask_format == SA1B_SHARD_RLE_SOURCE ? "0.." : "1..",
                              p->mask_format == SA1B_SHARD_RLE_SOURCE ? 0 : p->image_size);
    if (p->image_format != SA1B_SHARD_RAW && p->image_format != SA1B_SHARD_JPEG)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image format %d unknown", p->image_format);
    sa1b_shard_writer *w = calloc(1, sizeof *w);
    if (!w) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    w->fd = w->names.fd = w->index.fd = w->masks.fd = -1;
    w->S = p->image_size;
    w->R = p->mask_size;
    w->format = p->image_format;
    w->mask_format = p->mask_format;
    w->mask_bytes = w->mask_format != SA1B_SHARD_PACKED ? 0 : shard_mask_bytes(w->R);
    w->mask_stride = w->mask_format != SA1B_SHARD_PACKED ? 0 : shard_mask_stride(w->R);
    const char *prov = p->provenance ? p->provenance : "{}";
    w->prov_len = strlen(prov);
    w->path = strdup(path);
    w->prov = strdup(prov);
    void *buf = NULL;
    w->buf = posix_memalign(&buf, WBUF_ALIGN, WBUF_CAP) == 0 ? buf : NULL;
#ifdef MADV_HUGEPAGE
    /* huge pages where the payloads go through the buffer; raw images of
     * WBUF_BYPASS or more are written from the caller's memory, and the
     * buffer takes little more than the tables at the end: a fresh huge
     * page there costs more to zero than it saves (6 ms on a VM that hands
     * free memory back to its host) */
    if (w->buf && !(w->format == SA1B_SHARD_RAW && (uint64_t)w->S * w->S * 3 >= WBUF_BYPASS))
        (void)madvise(w->buf, WBUF_CAP, MADV_HUGEPAGE); /* advice only */
#endif
    w->pack = malloc((size_t)(w->mask_format != SA1B_SHARD_PACKED ? sa1b_shard_runs_bound(w->R)
                                                                  : w->mask_stride));
    if (!w->path || !w->prov || !w->buf || !w->pack) {
        wr_free(w);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    }
    int rc = wr_create_tmp(w, err);
    if (rc) {
        wr_free(w);
        return rc;
    }
    static const uint8_t zero_header[SA1B_SHARD_HEADER_SIZE];
    if ((rc = wr_bytes(w, zero_header, sizeof zero_header, err)) ||
        (rc = wr_bytes(w, w->prov, w->prov_len + 1, err)) || (rc = wr_align(w, err))) {
        sa1b_shard_writer_abort(w);
        return rc;
    }
    *wp = w;
    return SA1B_OK;
}

/* Mask j of s, given as runs, validates (a shard never holds bad runs). */
static int check_runs(const sa1b_shard_writer *w, const sa1b_shard_sample_in *s, uint32_t j,
                      sa1b_error *err)
{
    sa1b_error e;
    uint64_t cells = w->mask_format == SA1B_SHARD_RLE_SOURCE ? (uint64_t)s->orig_w * s->orig_h
                                                             : (uint64_t)w->R * w->R;
    int rc = shard_runs_check(s->masks[j].bits, s->masks[j].data_len, cells, &e);
    if (rc)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: mask %u: %s",
                              (long long)s->image_id, j, e.msg);
    return SA1B_OK;
}

static int check_sample(const sa1b_shard_writer *w, const sa1b_shard_sample_in *s, int packed,
                        sa1b_error *err)
{
    uint64_t raw_len = (uint64_t)w->S * w->S * 3;
    if (w->format == SA1B_SHARD_RAW && s->image_len != raw_len)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: raw payload of %zu bytes, want %llu",
                              (long long)s->image_id, s->image_len, (unsigned long long)raw_len);
    if (!s->image || s->image_len == 0)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: empty image payload",
                              (long long)s->image_id);
    if (!shard_orig_ok(s->orig_w, s->orig_h))
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: original size %ux%u (each side 1..%u)",
                              (long long)s->image_id, s->orig_w, s->orig_h, SA1B_ANNO_MAX_SIDE);
    if (!isfinite(s->scale) || !(s->scale > 0))
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: scale %g not finite and positive",
                              (long long)s->image_id, (double)s->scale);
    if (s->n_masks && !s->masks)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: %u masks but no array",
                              (long long)s->image_id, s->n_masks);
    for (uint32_t j = 0; j < s->n_masks; j++)
        if (!s->masks[j].bits)
            return sa1b_error_set(err, SA1B_EINVAL, -1, "image %lld: mask %u has no bits",
                                  (long long)s->image_id, j);
    if (!packed && w->mask_format == SA1B_SHARD_RLE_SOURCE && s->n_masks)
        return sa1b_error_set(err, SA1B_EINVAL, -1,
                              "image %lld: source-size masks come as runs "
                              "(sa1b_shard_writer_add_packed)",
                              (long long)s->image_id);
    if (packed && w->mask_format != SA1B_SHARD_PACKED)
        for (uint32_t j = 0; j < s->n_masks; j++)
            SA1B_FORWARD(check_runs(w, s, j, err));
    if (s->file_name && strlen(s->file_name) > UINT32_MAX - 1)
        return sa1b_error_set(err, SA1B_EINVAL, -1, "file name too long");
    return SA1B_OK;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define WR_HAVE_AVX2 1
#include <immintrin.h>
/* Thirty-two bytes at a time: bit i of the movemask is "byte i is zero";
 * returns the bytes done (a multiple of 32). */
__attribute__((target("avx2"))) static uint64_t pack_avx2(const uint8_t *bits, uint64_t n,
                                                          uint8_t *out)
{
    const __m256i zero = _mm256_setzero_si256();
    uint64_t k = 0;
    for (; k + 32 <= n; k += 32) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(bits + k));
        uint32_t m = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, zero));
        memcpy(out + (k >> 3), &m, 4); /* little-endian: byte j holds mask bytes 8j.. */
    }
    return k;
}

#endif

/* Packs R*R bytes into out: bit k of the row-major mask goes to byte k/8,
 * bit k%8 (LSB first); padding stays zero.  Eight bytes at a time:
 * the high bit of each byte of t says "nonzero", and the multiply gathers
 * those eight bits, byte i to bit 56 + i, without carries.  With AVX2 (at
 * run time) 32 bytes at a time, else 16 with SSE2, the rest as above. */
void sa1b_shard_pack_mask(const uint8_t *bits, uint32_t R, uint8_t *out)
{
    uint64_t n = (uint64_t)R * R, k = 0;
    memset(out, 0, (size_t)shard_mask_stride(R));
#ifdef WR_HAVE_AVX2
    /* __builtin_cpu_supports reads a constant the runtime fills before main */
    if (__builtin_cpu_supports("avx2")) k = pack_avx2(bits, n, out);
#endif
#ifdef WR_HAVE_SSE2
    /* sixteen bytes at a time: bit i of the movemask is "byte i is zero" */
    const __m128i zero = _mm_setzero_si128();
    for (; k + 16 <= n; k += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(bits + k));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero)) ^ 0xFFFFu;
        out[k >> 3] = (uint8_t)m;
        out[(k >> 3) + 1] = (uint8_t)(m >> 8);
    }
#endif
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t lo7 = UINT64_C(0x7F7F7F7F7F7F7F7F), hi = UINT64_C(0x8080808080808080);
    for (; k + 8 <= n; k += 8) {
        uint64_t x;
        memcpy(&x, bits + k, 8); /* byte i of the mask is byte i of x */
        uint64_t t = (((x & lo7) + lo7) | x) & hi;
        out[k >> 3] = (uint8_t)(((t >> 7) * UINT64_C(0x0102040810204080)) >> 56);
    }
#endif
    for (; k < n; k++)
        if (bits[k]) out[k >> 3] |= (uint8_t)(1u << (k & 7));
}

uint64_t sa1b_shard_mask_stride(uint32_t R) { return shard_mask_stride(R); }

/* crc, masks_crc: the image payload's and the stored masks' checksums
 * when the caller has them, else NULL. */
static int writer_add(sa1b_shard_writer *w, const sa1b_shard_sample_in *s, int packed,
                      const uint32_t *crc, const uint32_t *masks_crc, sa1b_error *err)
{
    if (!w || !s) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    if (w->failed) return sa1b_error_set(err, SA1B_EIO, -1, "writer failed earlier");
    SA1B_FORWARD(check_sample(w, s, packed, err));
    if (w->n_images >= UINT32_MAX)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "too many images in one shard");
    const char *name = s->file_name ? s->file_name : "";
    size_t name_len = strlen(name);

    int rc;
    /* a payload of WBUF_BYPASS or more (raw images from --image-size 592)
     * starts on a page: a direct write then takes it from the caller's
     * memory, and a reader's mapping of it starts on a page too; the rule
     * depends on the size alone, so the bytes are the same on every file
     * system */
    if (s->image_len >= WBUF_BYPASS && (rc = wr_align_to(w, DIO_ALIGN, err))) return rc;
    const uint64_t image_offset = w->pos;
    const uint32_t image_crc = crc ? *crc : sa1b_crc32c(0, s->image, s->image_len);
    /* packed masks side by side (sa1b-shard's): one checksum over them all,
     * one write; and where they follow the image in memory as they do in
     * the file (no padding between: an image of whole alignment units, as
     * raw images of a side divisible by 8 are), one write of both (a
     * direct one from the caller's memory for 3.5 MiB at --image-size
     * 1024) */
    int one_run = packed && s->n_masks > 0 && w->mask_format == SA1B_SHARD_PACKED;
    for (uint32_t j = 1; one_run && j < s->n_masks; j++)
        one_run = s->masks[j].bits == s->masks[0].bits + (size_t)j * w->mask_stride;
    const size_t run_len = one_run ? (size_t)s->n_masks * w->mask_stride : 0;
    const int joined = one_run && s->masks[0].bits == s->image + s->image_len &&
                       (image_offset + s->image_len) % SA1B_SHARD_ALIGN == 0;
    if ((rc = wr_bytes(w, s->image, s->image_len + (joined ? run_len : 0), err)) ||
        (rc = wr_align(w, err)))
        return rc;
    const uint64_t masks_offset = joined ? image_offset + s->image_len : w->pos;
    uint32_t mcrc = masks_crc ? *masks_crc : 0;
    if (one_run && !masks_crc) mcrc = sa1b_crc32c(0, s->masks[0].bits, run_len);
    uint8_t row[SA1B_SHARD_INDEX_ROW_SIZE];
    for (uint32_t j = 0; j < s->n_masks; j++) {
        const sa1b_shard_mask_in *m = &s->masks[j];
        const uint8_t *pk = m->bits;
        size_t pk_len = (size_t)w->mask_stride;
        if (w->mask_format != SA1B_SHARD_PACKED) {
            pk_len = packed ? m->data_len : sa1b_shard_encode_runs(m->bits, w->R, w->pack);
            if (!packed) pk = w->pack;
        } else if (!packed) {
            sa1b_shard_pack_mask(m->bits, w->R, w->pack);
            pk = w->pack;
        }
        if (!one_run && !masks_crc) mcrc = sa1b_crc32c(mcrc, pk, pk_len);
        memset(row, 0, SA1B_SHARD_MASK_ROW_SIZE);
        shard_st64(row + MSK_ID, (uint64_t)m->id);
        shard_st64(row + MSK_DATA_OFFSET, one_run ? masks_offset + j * w->mask_stride : w->pos);
        shard_st64(row + MSK_ORIG_AREA, (uint64_t)m->orig_area);
        shard_stf(row + MSK_AREA, m->area);
        for (int k = 0; k < 4; k++) {
            shard_stf(row + MSK_BBOX + 4 * k, m->bbox[k]);
            shard_stf(row + MSK_ORIG_BBOX + 4 * k, m->orig_bbox[k]);
        }
        shard_stf(row + MSK_IOU, m->predicted_iou);
        shard_stf(row + MSK_STABILITY, m->stability_score);
        shard_stf(row + MSK_POINT, m->point[0]);
        shard_stf(row + MSK_POINT + 4, m->point[1]);
        shard_st32(row + MSK_IMAGE_INDEX, (uint32_t)w->n_images);
        if ((rc = tab_append(w, &w->masks, row, SA1B_SHARD_MASK_ROW_SIZE, err)) ||
            (!one_run && (rc = wr_bytes(w, pk, pk_len, err))))
            goto failed;
    }
    /* side by side: one copy of them all (streaming stores from 256 KiB on,
     * as 32 or more masks of 256 x 256 are) instead of one per mask */
    if (one_run && !joined && (rc = wr_bytes(w, s->masks[0].bits, run_len, err))) goto failed;
    const uint64_t masks_len = w->pos - masks_offset;
    if ((rc = wr_align(w, err))) goto failed; /* runs end anywhere; packed: a no-op */
    /* the index row; its name offset is relative to the names table until
     * finish knows where that lands */
    memset(row, 0, sizeof row);
    shard_st64(row + IDX_IMAGE_OFFSET, image_offset);
    shard_st64(row + IDX_IMAGE_LENGTH, s->image_len);
    shard_st64(row + IDX_MASKS_OFFSET, masks_offset);
    shard_st64(row + IDX_MASKS_LENGTH, masks_len);
    shard_st64(row + IDX_NAME_OFFSET, tab_len(&w->names));
    shard_st32(row + IDX_NAME_LENGTH, (uint32_t)name_len);
    shard_st32(row + IDX_N_MASKS, s->n_masks);
    shard_st64(row + IDX_FIRST_MASK, w->n_masks);
    shard_st64(row + IDX_IMAGE_ID, (uint64_t)s->image_id);
    shard_st32(row + IDX_ORIG_W, s->orig_w);
    shard_st32(row + IDX_ORIG_H, s->orig_h);
    shard_stf(row + IDX_SCALE, s->scale);
    shard_st32(row + IDX_IMAGE_CRC, image_crc);
    shard_st32(row + IDX_MASKS_CRC, mcrc);
    if ((rc = tab_append(w, &w->index, row, sizeof row, err)) ||
        (rc = tab_append(w, &w->names, name, name_len + 1, err)))
        goto failed;
    w->n_masks += s->n_masks;
    w->n_images++;
    return SA1B_OK;
failed:
    /* rows of this sample may be in the tables: the shard cannot finish */
    w->failed = 1;
    return rc;
}

int sa1b_shard_writer_add(sa1b_shard_writer *w, const sa1b_shard_sample_in *s, sa1b_error *err)
{
    return writer_add(w, s, 0, NULL, NULL, err);
}

int sa1b_shard_writer_add_packed(sa1b_shard_writer *w, const sa1b_shard_sample_in *s,
                                 sa1b_error *err)
{
    return writer_add(w, s, 1, NULL, NULL, err);
}

int sa1b_shard_writer_add_packed_crc(sa1b_shard_writer *w, const sa1b_shard_sample_in *s,
                                     uint32_t image_crc, uint32_t masks_crc, sa1b_error *err)
{
    return writer_add(w, s, 1, &image_crc, &masks_crc, err);
}

uint64_t sa1b_shard_writer_images(const sa1b_shard_writer *w) { return w ? w->n_images : 0; }
uint64_t sa1b_shard_writer_bytes(const sa1b_shard_writer *w) { return w ? w->pos : 0; }

void sa1b_shard_writer_abort(sa1b_shard_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->tmp_path) unlink(w->tmp_path);
    wr_free(w);
}

static int fsync_dir(const char *path, sa1b_error *err)
{
    char *dir = dir_of(path);
    if (!dir) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = SA1B_OK;
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        rc = sa1b_error_set(err, SA1B_EIO, -1, "fsync directory '%s': %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    free(dir);
    return rc;
}

static int wr_tables(sa1b_shard_writer *w, sa1b_error *err)
{
    uint8_t hdr[SA1B_SHARD_HEADER_SIZE], ftr[SA1B_SHARD_FOOTER_SIZE];
    uint32_t names_crc, index_crc, masktab_crc;
    SA1B_FORWARD(wr_align(w, err));
    uint64_t names_offset = w->pos;
    SA1B_FORWARD(tab_emit(w, &w->names, 1, 0, 0, &names_crc, err));
    SA1B_FORWARD(wr_align(w, err));
    uint64_t index_offset = w->pos;
    SA1B_FORWARD(tab_emit(w, &w->index, SA1B_SHARD_INDEX_ROW_SIZE, 1, names_offset, &index_crc, err));
    SA1B_FORWARD(wr_align(w, err));
    uint64_t masktab_offset = w->pos;
    SA1B_FORWARD(tab_emit(w, &w->masks, SA1B_SHARD_MASK_ROW_SIZE, 0, 0, &masktab_crc, err));
    SA1B_FORWARD(wr_align(w, err));
    /* a provenance completed at the end goes here; the first one's bytes become zeros */
    uint64_t prov_offset = SA1B_SHARD_HEADER_SIZE;
    const char *prov = w->prov;
    size_t prov_len = w->prov_len;
    if (w->prov_final) {
        prov_offset = w->pos, prov = w->prov_final, prov_len = strlen(w->prov_final);
        SA1B_FORWARD(wr_bytes(w, prov, prov_len + 1, err));
        SA1B_FORWARD(wr_align(w, err));
    }
    uint64_t file_size = w->pos + SA1B_SHARD_FOOTER_SIZE;

    memset(hdr, 0, sizeof hdr);
    memcpy(hdr + HDR_MAGIC, SA1B_SHARD_MAGIC, 8);
    const uint32_t version =
        w->mask_format != SA1B_SHARD_PACKED ? SA1B_SHARD_VERSION_RLE : SA1B_SHARD_VERSION;
    shard_st32(hdr + HDR_VERSION, version);
    shard_st32(hdr + HDR_HEADER_SIZE, SA1B_SHARD_HEADER_SIZE);
    shard_st32(hdr + HDR_IMAGE_SIZE, w->S);
    shard_st32(hdr + HDR_MASK_SIZE, w->R);
    shard_st32(hdr + HDR_IMAGE_FORMAT, (uint32_t)w->format);
    shard_st32(hdr + HDR_ALIGNMENT, SA1B_SHARD_ALIGN);
    shard_st64(hdr + HDR_N_IMAGES, w->n_images);
    shard_st64(hdr + HDR_N_MASKS, w->n_masks);
    shard_st64(hdr + HDR_FILE_SIZE, file_size);
    shard_st64(hdr + HDR_PROV_OFFSET, prov_offset);
    shard_st64(hdr + HDR_PROV_LENGTH, prov_len);
    shard_st64(hdr + HDR_NAMES_OFFSET, names_offset);
    shard_st64(hdr + HDR_NAMES_LENGTH, tab_len(&w->names));
    shard_st64(hdr + HDR_INDEX_OFFSET, index_offset);
    shard_st64(hdr + HDR_MASKTAB_OFFSET, masktab_offset);
    shard_st32(hdr + HDR_INDEX_ROW_SIZE, SA1B_SHARD_INDEX_ROW_SIZE);
    shard_st32(hdr + HDR_MASK_ROW_SIZE, SA1B_SHARD_MASK_ROW_SIZE);
    shard_st32(hdr + HDR_MASK_STRIDE, (uint32_t)w->mask_stride);
    shard_st32(hdr + HDR_FLAGS, 0);
    shard_st32(hdr + HDR_PROV_CRC, sa1b_crc32c(0, prov, prov_len));
    shard_st32(hdr + HDR_NAMES_CRC, names_crc);
    shard_st32(hdr + HDR_INDEX_CRC, index_crc);
    shard_st32(hdr + HDR_MASKTAB_CRC, masktab_crc);
    shard_st32(hdr + HDR_MASK_FORMAT, (uint32_t)w->mask_format); /* 0 in version 1 */
    uint32_t hcrc = sa1b_crc32c(0, hdr, HDR_CRC);
    shard_st32(hdr + HDR_CRC, hcrc);

    memset(ftr, 0, sizeof ftr);
    memcpy(ftr + FTR_MAGIC, SA1B_SHARD_MAGIC, 8);
    shard_st32(ftr + FTR_VERSION, version);
    shard_st32(ftr + FTR_FOOTER_SIZE, SA1B_SHARD_FOOTER_SIZE);
    shard_st64(ftr + FTR_N_IMAGES, w->n_images);
    shard_st64(ftr + FTR_N_MASKS, w->n_masks);
    shard_st64(ftr + FTR_FILE_SIZE, file_size);
    shard_st64(ftr + FTR_INDEX_OFFSET, index_offset);
    shard_st64(ftr + FTR_MASKTAB_OFFSET, masktab_offset);
    shard_st32(ftr + FTR_HEADER_CRC, hcrc);
    shard_st32(ftr + FTR_CRC, sa1b_crc32c(0, ftr, FTR_CRC));
    SA1B_FORWARD(wr_bytes(w, ftr, sizeof ftr, err));
    SA1B_FORWARD(wr_flush_all(w, err));
    if (w->prov_final) {
        uint8_t zero[256] = {0};
        for (uint64_t at = 0; at < w->prov_len + 1;) {
            size_t n = w->prov_len + 1 - at < sizeof zero ? (size_t)(w->prov_len + 1 - at) : sizeof zero;
            if (pwrite(w->fd, zero, n, (off_t)(SA1B_SHARD_HEADER_SIZE + at)) != (ssize_t)n)
                return sa1b_error_set(err, SA1B_EIO, SA1B_SHARD_HEADER_SIZE, "write '%s': %s", w->tmp_path,
                                      strerror(errno));
            at += n;
        }
    }
    /* the header last: until here offset 0 holds zeros, which never open */
    if (pwrite(w->fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
        return sa1b_error_set(err, SA1B_EIO, 0, "write header of '%s': %s", w->tmp_path,
                              strerror(errno));
    return SA1B_OK;
}

const char *sa1b_shard_writer_temp_path(const sa1b_shard_writer *w)
{
    return w ? w->tmp_path : NULL;
}

int sa1b_shard_writer_set_provenance(sa1b_shard_writer *w, const char *provenance, sa1b_error *err)
{
    if (!w || !provenance) return sa1b_error_set(err, SA1B_EINVAL, -1, "null argument");
    char *p = strdup(provenance);
    if (!p) return sa1b_error_set(err, SA1B_ENOMEM, -1, "out of memory");
    free(w->prov_final);
    w->prov_final = p;
    return SA1B_OK;
}

int sa1b_shard_writer_finish(sa1b_shard_writer *w, sa1b_error *err)
{
    if (!w) return sa1b_error_set(err, SA1B_EINVAL, -1, "null writer");
    if (w->failed) {
        sa1b_shard_writer_abort(w);
        return sa1b_error_set(err, SA1B_EIO, -1, "writer failed earlier");
    }
    int rc = wr_tables(w, err);
    if (!rc && fsync(w->fd) != 0)
        rc = sa1b_error_set(err, SA1B_EIO, -1, "fsync '%s': %s", w->tmp_path, strerror(errno));
    /* renamed while still open: the temp's lock lasts until it has its name */
    if (!rc && rename(w->tmp_path, w->path) != 0)
        rc = sa1b_error_set(err, SA1B_EIO, -1, "rename '%s' to '%s': %s", w->tmp_path, w->path,
                            strerror(errno));
    if (!rc && close(w->fd) != 0) {
        w->fd = -1;
        unlink(w->path);
        rc = sa1b_error_set(err, SA1B_EIO, -1, "close '%s': %s", w->tmp_path, strerror(errno));
    }
    if (!rc) w->fd = -1;
    if (rc) {
        sa1b_shard_writer_abort(w);
        return rc;
    }
    rc = fsync_dir(w->path, err);
    wr_free(w);
    return rc;
}
