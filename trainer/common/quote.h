/*
 * quote.h - text read from a file (a name, a metadata value, a JSON
 * parser's message) as a message quotes it: control bytes escaped, so that
 * every message stays one line whatever the file holds.
 */
#ifndef SA1B_TRAINER_QUOTE_H
#define SA1B_TRAINER_QUOTE_H

#include <stddef.h>

/* s into buf[len] (len >= 1), its control bytes (below 0x20, and 0x7f) as
 * \n, \r, \t or \xHH, cut to at most max bytes of s and to what fits (never
 * inside an escape); bytes from 0x80 and the backslash as they are.  buf. */
static inline const char *tr_quote(const char *s, size_t max, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p && max; p++, max--) {
        char e[4];
        size_t k = 0;
        if (*p == '\n') e[k++] = '\\', e[k++] = 'n';
        else if (*p == '\r') e[k++] = '\\', e[k++] = 'r';
        else if (*p == '\t') e[k++] = '\\', e[k++] = 't';
        else if (*p < 0x20 || *p == 0x7f) e[k++] = '\\', e[k++] = 'x', e[k++] = hex[*p >> 4], e[k++] = hex[*p & 15];
        else e[k++] = (char)*p;
        if (o + k >= len) break;
        for (size_t i = 0; i < k; i++) buf[o++] = e[i];
    }
    buf[o] = '\0';
    return buf;
}

#endif
