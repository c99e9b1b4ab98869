/* error.c - the sa1b_error record (see sa1b_error.h). */
#include "sa1b_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void sa1b_error_clear(sa1b_error *err)
{
    if (!err) return;
    err->code = SA1B_OK;
    err->offset = -1;
    err->msg[0] = '\0';
}

char *sa1b_escape(char *dst, size_t dst_len, const char *src, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)src; p < (const unsigned char *)src + n; p++) {
        char e[4];
        size_t k = 0;
        if (*p == '\n') e[k++] = '\\', e[k++] = 'n';
        else if (*p == '\r') e[k++] = '\\', e[k++] = 'r';
        else if (*p == '\t') e[k++] = '\\', e[k++] = 't';
        else if (*p < 0x20 || *p == 0x7f) e[k++] = '\\', e[k++] = 'x', e[k++] = hex[*p >> 4], e[k++] = hex[*p & 15];
        else e[k++] = (char)*p;
        if (o + k >= dst_len) break; /* cut before an escape, never inside one */
        for (size_t i = 0; i < k; i++) dst[o++] = e[i];
    }
    dst[o] = '\0';
    return dst;
}

int sa1b_error_set(sa1b_error *err, int code, int64_t offset, const char *fmt, ...)
{
    if (!err) return code;
    err->code = code;
    err->offset = offset;
    /* the message may quote input (a name, a JSON parser's text): its
     * control bytes are escaped, so that it stays one line */
    char raw[SA1B_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    sa1b_escape(err->msg, sizeof err->msg, raw, strlen(raw));
    return code;
}

const char *sa1b_strerror(int code)
{
    switch (code) {
    case SA1B_OK: return "success";
    case SA1B_EINVAL: return "invalid argument";
    case SA1B_ENOMEM: return "out of memory";
    case SA1B_EIO: return "input/output error";
    case SA1B_EFORMAT: return "malformed input";
    case SA1B_ERANGE: return "value out of range";
    case SA1B_ECHECKSUM: return "checksum mismatch";
    case SA1B_ETRUNC: return "truncated";
    case SA1B_EMISMATCH: return "inputs disagree";
    case SA1B_EUNSUPPORTED: return "unsupported";
    case SA1B_EOF: return "end of stream";
    default: return "unknown error";
    }
}
