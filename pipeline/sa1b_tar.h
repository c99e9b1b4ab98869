/*
 * sa1b_tar.h - streaming reader of SA-1B tars: yields (jpg, json) pairs.
 *
 * Implements: the first stage of the data path.  A tar (plain, or anything
 * libarchive's filter auto-detection decodes: gzip, bzip2, xz, zstd, ...)
 * is read front to back through libarchive, without extracting anything and
 * without seeking, so a pipe works ("-" = standard input).  Members named
 * sa_<id>.jpg and sa_<id>.json are paired by the stem of their basename
 * ("sa_<id>"), whatever their order, a "./" prefix or subdirectories in the
 * member path.  Other members (directories, files with other names or
 * extensions, links with other names) are skipped silently.  A link
 * (symbolic, or hard without data of its own: a hard link's data lies in an
 * earlier member) named like a sample's member never pairs: unless files of
 * its name come too (a folder of links beside the files: nothing said), its
 * sample is reported once, at the end, with its partner if that came.
 * A pair whose stem and bytes were returned before (tars concatenated or
 * appended to, two folders of the same images) is reported as a duplicate
 * and skipped: the first copy is the one returned.  A pair of a stem
 * returned before with other bytes (two datasets numbered alike) is no
 * copy: it is returned.  The stems returned are kept for that, with where
 * their members lie in the input (compared only when a stem comes again)
 * or, for copies, their CRC32C: a few dozen bytes per sample.
 *
 * A member whose partner has not arrived yet is kept ("pending") until it
 * does.  Memory is bounded whatever the archive size (but for the stems of
 * the pairs returned, above): at most SA1B_TAR_MAX_PENDING members and
 * SA1B_TAR_MAX_PENDING_BYTES bytes are kept as copies (a compressed tar, a
 * pipe); past either cap the oldest of them is reported as unpaired and
 * dropped.  Its partner, should it come later, waits and pairs as any
 * member does (with a member of its stem that comes after it: another
 * dataset numbered alike, a copy), but goes without a second report if
 * it goes unpaired too: one sample, one report.  The stems of up to 65536
 * such dropped members are kept at once for that (about 22 MB at most).
 * Limits: a member of the stem that has no partner of its own (another
 * dataset's broken sample) is taken for the partner and goes without a
 * line of its own; a link member of the stem is still reported apart.  A member that lies in the input (a plain tar opened by path,
 * which is mapped) is kept where it lies, without a copy: up to
 * SA1B_TAR_MAX_PENDING_IN_INPUT of them wait for their partners (past that,
 * the oldest is reported alike), so that a plain tar pairs its members in
 * any order at all (every .jpg first, then every .json).  A member larger
 * than SA1B_TAR_MAX_MEMBER_BYTES is reported and skipped without being read
 * into memory.
 *
 * Problems are reported one per sa1b_tar_next() call, so that a caller can
 * log one line per bad sample and go on.  Error messages (err->msg) start
 * with the member's basename where one is concerned and do not include the
 * archive's name (the caller prefixes it if wanted):
 *     "sa_12.jpg: no matching sa_12.json"                    (SA1B_EFORMAT)
 *     "sa_12.json: no matching sa_12.jpg"                    (SA1B_EFORMAT)
 *     "sa_12.jpg: no matching sa_12.json (pending limit reached)" (SA1B_EFORMAT)
 *     "sa_12.jpg: duplicate member, earlier copy dropped"    (SA1B_EFORMAT)
 *     "sa_12: duplicate sample (sa_12.jpg and sa_12.json came before): this copy skipped"
 *                                                            (SA1B_EFORMAT)
 *     "sa_12.json: a symbolic link to 'x/sa_12.json', not a file: sample skipped"
 *                                                            (SA1B_EFORMAT; or "a hard link")
 *     "sa_9.json: member truncated"                          (SA1B_ETRUNC)
 *     "tar truncated inside a header"                        (SA1B_ETRUNC)
 *     "sa_9.jpg: member too large (629145600 bytes)"         (SA1B_ERANGE)
 *     "damaged tar header near byte 1536"                    (SA1B_EFORMAT; once per
 *                                                             damaged stretch, then on)
 *     "not a tar archive"                                    (SA1B_EFORMAT, fatal)
 *     "empty input: not a tar archive"                       (SA1B_EFORMAT, fatal)
 *     "read error: <libarchive's text>"                      (SA1B_EIO, fatal)
 * err->offset is the input byte count (sa1b_tar_bytes_read) at the time.
 *
 * Truncation.  libarchive takes a tar that stops at a 512-byte block
 * boundary (no end-of-archive blocks) for a complete one; this reader still
 * reports every pending member whose partner never came, one per call,
 * before SA1B_EOF, and tells the cut by its identity (clean_end 0, below).
 * A tar cut inside a member gives one SA1B_ETRUNC for that member (its
 * partner, if pending, is dropped with it: one bad sample, one report),
 * then the remaining pending members as unpaired, then SA1B_EOF.  A
 * compressed tar is read alike: its uncompressed stream is read to the very
 * end, past the end-of-archive blocks, so a stream cut short or without its
 * trailer (gzip's) is found out; cut between members, it gives no report of
 * its own, only clean_end 0.  libarchive's filters drop the block of
 * output being decoded when the stream ends inside it (64 KiB for gzip, more
 * for others), so the members there are reported truncated; one that ends
 * before its first block could be decoded gives SA1B_EOF at once, with
 * clean_end 0: nothing of it can be read.  Members after the
 * end-of-archive blocks (tars concatenated) are read too; anything else
 * there is reported as a damaged header.
 *
 * A sa1b_tar is not thread-safe; use one per thread or serialise calls.
 */
#ifndef SA1B_TAR_H
#define SA1B_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Memory bounds (see above). */
#define SA1B_TAR_MAX_PENDING 64
#define SA1B_TAR_MAX_PENDING_BYTES ((uint64_t)256 << 20)
/* pending members that lie in the input (a plain tar opened by path, or
 * sa1b_tar_open_memory): they cost no copy, only their place in the list */
#define SA1B_TAR_MAX_PENDING_IN_INPUT 65536
#define SA1B_TAR_MAX_MEMBER_BYTES ((uint64_t)512 << 20)

typedef struct sa1b_tar sa1b_tar;

/* One paired sample.  The buffers belong to the reader and stay valid until
 * the next sa1b_tar_next() or sa1b_tar_free() call on the same reader; when
 * stable is 1 they lie in the input itself (a plain tar opened by path,
 * which is mapped, or by sa1b_tar_open_memory) and stay valid until
 * sa1b_tar_free(), so a caller can keep several samples without copying. */
typedef struct sa1b_tar_sample {
    char name[256];                  /* stem, e.g. "sa_123" (NUL-terminated) */
    const uint8_t *jpg;  size_t jpg_len;   /* bytes of sa_123.jpg */
    const uint8_t *json; size_t json_len;  /* bytes of sa_123.json (not NUL-terminated) */
    int stable;                      /* 1: valid until sa1b_tar_free() */
} sa1b_tar_sample;

/* Opens the file at path for streaming ("-" reads standard input, which is
 * not closed by sa1b_tar_free).  A regular file is mapped (members of a
 * plain tar are then handed out without a copy, and the mapping's pages
 * behind the read position are released as reading advances, so the
 * resident set stays bounded); as with any mapping, a file truncated or
 * unreadable while it is read raises SIGBUS in the process.  Opening reads the first block (so it
 * waits for data on a pipe) to recognise the compression and the format,
 * but a stream that is not a tar still opens: the first sa1b_tar_next()
 * reports "not a tar archive", so all content problems surface there.
 * Errors: SA1B_EIO (cannot open or read: "cannot open: <errno text>"),
 * SA1B_ENOMEM, SA1B_EINVAL (NULL arguments).  On error *t is NULL. */
int sa1b_tar_open(sa1b_tar **t, const char *path, sa1b_error *err);

/* Same, reading an already open file descriptor (a pipe is fine).  The fd is
 * not closed by sa1b_tar_free.  display_name (may be NULL) is only returned
 * by sa1b_tar_name(). */
int sa1b_tar_open_fd(sa1b_tar **t, int fd, const char *display_name, sa1b_error *err);

/* Same, reading the len bytes at buf, which must stay valid until
 * sa1b_tar_free (used by the fuzz target and tests). */
int sa1b_tar_open_memory(sa1b_tar **t, const void *buf, size_t len, const char *display_name,
                         sa1b_error *err);

/* Reads on until the next complete pair, or the next problem.
 * Returns SA1B_OK with *s filled, SA1B_EOF at the clean end (and again on
 * every later call), or another code with err describing one problem (see
 * the top of this file).  After a problem, if sa1b_tar_fatal(t) is 0 the
 * caller may call again to continue with the rest of the archive; if it is
 * 1, reading cannot go on and every later call returns the same code. */
int sa1b_tar_next(sa1b_tar *t, sa1b_tar_sample *s, sa1b_error *err);

/* 1 when the last problem stops the stream (not a tar, I/O error), else 0. */
int sa1b_tar_fatal(const sa1b_tar *t);

/* Input bytes consumed so far (compressed bytes for a compressed tar): for
 * progress and MB/s reporting. */
uint64_t sa1b_tar_bytes_read(const sa1b_tar *t);

/* The input's identity, known once sa1b_tar_next has returned SA1B_EOF:
 * its length and the CRC32C of all its bytes (computed while reading; a
 * stream is read to its end for it, so a path and the same bytes on a pipe
 * give the same identity; compressed bytes for a compressed tar), and
 * whether the archive ended cleanly: clean_end is 0 when a member or a
 * header was cut short (SA1B_ETRUNC was reported), when the tar ends
 * without an end-of-archive block (cut at a 512-byte boundary, which
 * libarchive takes for a complete archive), plain or compressed alike (the
 * uncompressed stream ends right after a member's padded data), when a
 * compressed stream ends early or without its trailer, when reading could
 * not go on after a damaged stretch, and when the archive has no member at
 * all (no_member 1: only zero blocks, an empty archive or a file of zeros,
 * as a preallocated download that never got its data; an empty file is
 * SA1B_EFORMAT "empty input" instead).  A single end-of-archive block where
 * two belong is a clean end (nothing is missing).
 * SA1B_OK, or SA1B_EINVAL before the end (or when the rest of a stream
 * could not be read). */
typedef struct sa1b_tar_identity {
    uint64_t bytes;
    uint32_t crc32c;
    int clean_end;
    int no_member;   /* 1: no member at all (then clean_end is 0) */
} sa1b_tar_identity;
int sa1b_tar_get_identity(const sa1b_tar *t, sa1b_tar_identity *id);
/* The name given at open: the path, "-" for stdin, or display_name ("" when
 * NULL). */
const char *sa1b_tar_name(const sa1b_tar *t);

/* Closes the archive and frees everything, including the last sample's
 * buffers.  t may be NULL. */
void sa1b_tar_free(sa1b_tar *t);

#ifdef __cplusplus
}
#endif
#endif
