/*
 * anno_internal.h - test hook of the annotation parser in anno.c; not part
 * of the public API (not installed, no sa1b_ prefix).
 *
 * sa1b_anno_parse first tries a fast scanner that accepts the documents
 * SA-1B really has and falls back to the jansson parser (the reference,
 * and the only source of error messages) on anything else.  Tests run
 * both on the same input and check that they agree.
 */
#ifndef SA1B_ANNO_INTERNAL_H
#define SA1B_ANNO_INTERNAL_H

#include <stddef.h>

#include "sa1b_anno.h"

enum {
    ANNO_PARSE_AUTO = 0,    /* what sa1b_anno_parse does: fast, else jansson */
    ANNO_PARSE_JANSSON = 1, /* the jansson path alone */
    ANNO_PARSE_FAST = 2     /* the fast path alone: SA1B_EUNSUPPORTED where it gives up */
};

/* sa1b_anno_parse with the implementation chosen by impl. */
int anno_parse_impl(sa1b_anno *a, const char *json, size_t len, int impl, sa1b_error *err);

#endif
