/*
 * quote.h - text read from a file (a name, a metadata value, a JSON
 * parser's message) as a message quotes it: control bytes escaped, so that
 * every message stays one line whatever the file holds.
 */
#ifndef SA1B_TRAINER_QUOTE_H
#define SA1B_TRAINER_QUOTE_H

#include <stddef.h>
#include <string.h>

#include "sa1b_error.h"

/* s into buf[len] (len >= 1) as every message quotes input (sa1b_escape:
 * control bytes as \n, \r, \t or \xHH), at most max bytes of s, cut
 * to what fits.  buf. */
static inline const char *tr_quote(const char *s, size_t max, char *buf, size_t len)
{
    s = s ? s : "";
    return sa1b_escape(buf, len, s, strnlen(s, max));
}

#endif
