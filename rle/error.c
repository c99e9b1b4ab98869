/* error.c - the sa1b_error record (see sa1b_error.h). */
#include "sa1b_error.h"

#include <stdarg.h>
#include <stdio.h>

void sa1b_error_clear(sa1b_error *err)
{
    if (!err) return;
    err->code = SA1B_OK;
    err->offset = -1;
    err->msg[0] = '\0';
}

int sa1b_error_set(sa1b_error *err, int code, int64_t offset, const char *fmt, ...)
{
    if (!err) return code;
    err->code = code;
    err->offset = offset;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
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
