/*
 * sa1b_error.h - error codes and the error record every libsa1b call fills.
 *
 * Implements: the library's one way of reporting failure.  Every fallible
 * function returns an int: SA1B_OK (0) or one of the positive codes below,
 * and, when given a non-NULL sa1b_error, stores the same code, a one-line
 * message (lower case, no trailing full stop, "what: why") and, where it
 * makes sense, the byte/character offset in the input where the problem was
 * found (control bytes escaped: one line whatever input it quotes).  The
 * library never prints and never exits; programs decide.
 */
#ifndef SA1B_ERROR_H
#define SA1B_ERROR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum sa1b_code {
    SA1B_OK = 0,
    SA1B_EINVAL = 1,    /* invalid argument from the caller */
    SA1B_ENOMEM = 2,    /* allocation failed */
    SA1B_EIO = 3,       /* system I/O error (errno text in the message) */
    SA1B_EFORMAT = 4,   /* malformed input: bad character, bad structure */
    SA1B_ERANGE = 5,    /* value out of range: overflow, absurd size */
    SA1B_ECHECKSUM = 6, /* stored checksum does not match the data */
    SA1B_ETRUNC = 7,    /* input ends before the structure does */
    SA1B_EMISMATCH = 8, /* two inputs disagree (e.g. mask size vs image size) */
    SA1B_EUNSUPPORTED = 9, /* valid but not supported (e.g. newer version) */
    SA1B_EOF = 10       /* clean end of a stream: not an error for iterators */
};

#define SA1B_ERROR_MSG_MAX 256

typedef struct sa1b_error {
    int code;            /* enum sa1b_code */
    int64_t offset;      /* position in the input, or -1 when none applies */
    char msg[SA1B_ERROR_MSG_MAX];
} sa1b_error;

/* Resets *err to SA1B_OK, offset -1, empty message.  err may be NULL. */
void sa1b_error_clear(sa1b_error *err);

/* Records code, offset and a printf-style message in *err (err may be NULL)
 * and returns code, so that error paths stay one line:
 *     return sa1b_error_set(err, SA1B_EFORMAT, pos, "bad character '%c'", c); */
int sa1b_error_set(sa1b_error *err, int code, int64_t offset, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The n bytes of src into dst[dst_len] (dst_len >= 1, NUL-terminated) as
 * every message quotes input: control bytes (below 0x20, and 0x7f; a NUL
 * among the n too) as \n, \r, \t or \xHH, so that the text stays one
 * line; bytes from 0x80 and the backslash as they are (escaping twice
 * changes nothing).  Cut where dst is full, never inside an escape (4 * n
 * + 1 bytes always fit).  Returns dst. */
char *sa1b_escape(char *dst, size_t dst_len, const char *src, size_t n);

/* Static English name of a code ("malformed input", ...). Never NULL. */
const char *sa1b_strerror(int code);

/* Evaluates expr (an int-returning libsa1b call); returns its code from the
 * enclosing function when it is not SA1B_OK. */
#define SA1B_FORWARD(expr)                                                     \
    do {                                                                       \
        int sa1b_fwd_rc_ = (expr);                                             \
        if (sa1b_fwd_rc_ != SA1B_OK) return sa1b_fwd_rc_;                     \
    } while (0)

#ifdef __cplusplus
}
#endif
#endif
