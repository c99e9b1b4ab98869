/*
 * bytes.c - parsing byte counts.
 */
#include "bytes.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>

int tr_parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    if (!s || !isdigit((unsigned char)*s)) return -1;
    double v = strtod(s, &end);
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0, end++; break;
    case 'M': mul = 1048576.0, end++; break;
    case 'G': mul = 1073741824.0, end++; break;
    case 'T': mul = 1099511627776.0, end++; break;
    default: break;
    }
    if (mul > 1 && *end == 'i') end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || !isfinite(v) || v * mul >= 1.8e19) return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}
