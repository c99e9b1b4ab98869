/*
 * anno.c - SA-1B annotation JSON parsing and validation with jansson.
 *
 * Implements: sa1b_anno.h.  The document is loaded with json_loadb (which
 * decodes the counts strings' escapes); the mask array is then filled with
 * pointers into jansson's strings, so the json_t tree lives as long as the
 * sa1b_anno (kept in priv_ with the mask array's capacity).
 *
 * Fast path: a strict single-pass scanner (anno_fast below) reads the
 * documents SA-1B actually has -- ASCII strings without \u escapes, no
 * duplicate keys, modest nesting, every value of the schema well-formed --
 * straight into the sa1b_anno, decoding the strings into one arena.  It
 * accepts a subset of what jansson accepts, converts numbers with the same
 * C library calls (strtoll, strtod), or without them where the result is
 * exactly theirs (short integers, Clinger's fast path for decimals: the
 * boxes and points of SA-1B), and applies the same checks, so the result
 * is identical; on anything else (any syntax or schema problem
 * included) it gives up and the jansson path parses the document from
 * scratch, which alone produces every error message.
 */
#include "sa1b_anno.h"
#include "anno_internal.h"

#include <errno.h>
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#define ANNO_HAVE_SSE2 1
#include <emmintrin.h>
#endif

typedef struct anno_priv {
    json_t *root;          /* the jansson tree (jansson path), or NULL */
    size_t cap;            /* allocated masks */
    char *arena;           /* decoded strings of the fast path */
    size_t arena_cap;
} anno_priv;

/* Reads a JSON integer, or a real with an integral value in int64 range. */
static int get_int64(const json_t *v, int64_t *out)
{
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!isfinite(d) || d != floor(d) || d < -9.2233720368547758e18 ||
            d >= 9.2233720368547758e18)
            return 0;
        *out = (int64_t)d;
        return 1;
    }
    return 0;
}

/* 1 ok, 0 not a number, -1 not finite or beyond SA1B_ANNO_MAX_ABS (so that
 * callers may convert to float or int32 safely). */
static int get_double(const json_t *v, double *out)
{
    if (!json_is_number(v)) return 0;
    double d = json_number_value(v);
    if (!isfinite(d) || fabs(d) > SA1B_ANNO_MAX_ABS) return -1;
    *out = d;
    return 1;
}

/* prefix is "" or "mask 7: " */
static int get_number_field(const json_t *obj, const char *key, const char *prefix,
                            double *out, sa1b_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing %s", prefix, key);
    int r = get_double(v, out);
    if (r == 0) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not a number", prefix, key);
    if (r < 0) return sa1b_error_set(err, SA1B_ERANGE, -1, "%s%s: not finite or beyond 1e9", prefix, key);
    return SA1B_OK;
}

static int get_box(const json_t *obj, const char *key, const char *prefix, double out[4],
                   sa1b_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing %s", prefix, key);
    if (!json_is_array(v) || json_array_size(v) != 4)
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not an array of 4 numbers", prefix,
                              key);
    for (size_t i = 0; i < 4; i++) {
        int r = get_double(json_array_get(v, i), &out[i]);
        if (r == 0)
            return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not an array of 4 numbers",
                                  prefix, key);
        if (r < 0)
            return sa1b_error_set(err, SA1B_ERANGE, -1, "%s%s: not finite or beyond 1e9", prefix,
                                  key);
    }
    return SA1B_OK;
}

/* A dimension in 1..SA1B_ANNO_MAX_SIDE. */
static int get_side(const json_t *v, const char *what, const char *prefix, uint32_t *out,
                    sa1b_error *err)
{
    int64_t x;
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing %s", prefix, what);
    if (!get_int64(v, &x))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%s%s: not an integer", prefix, what);
    if (x < 1 || x > (int64_t)SA1B_ANNO_MAX_SIDE)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%s%s: %lld outside 1..%u", prefix, what,
                              (long long)x, SA1B_ANNO_MAX_SIDE);
    *out = (uint32_t)x;
    return SA1B_OK;
}

static int parse_image(sa1b_anno *a, const json_t *root, sa1b_error *err)
{
    const json_t *img = json_object_get(root, "image");
    if (!img) return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing image");
    if (!json_is_object(img)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "image: not an object");
    const json_t *v = json_object_get(img, "image_id");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing image.image_id");
    if (!get_int64(v, &a->image_id))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "image.image_id: not an integer");
    SA1B_FORWARD(get_side(json_object_get(img, "width"), "image.width", "", &a->width, err));
    SA1B_FORWARD(get_side(json_object_get(img, "height"), "image.height", "", &a->height, err));
    v = json_object_get(img, "file_name");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing image.file_name");
    if (!json_is_string(v))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "image.file_name: not a string");
    size_t n = json_string_length(v);
    if (n >= sizeof a->file_name)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "image.file_name: %zu bytes, more than %zu",
                              n, sizeof a->file_name - 1);
    const char *s = json_string_value(v);
    if (memchr(s, '\0', n))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "image.file_name: contains a NUL byte");
    memcpy(a->file_name, s, n);
    a->file_name[n] = '\0';
    return SA1B_OK;
}

static int parse_mask(const sa1b_anno *a, size_t i, const json_t *o, sa1b_mask_anno *m,
                      sa1b_error *err)
{
    char pre[48];
    snprintf(pre, sizeof pre, "mask %zu: ", i);
    if (!json_is_object(o)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%snot an object", pre);

    const json_t *v = json_object_get(o, "id");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing id", pre);
    if (!get_int64(v, &m->id)) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%sid: not an integer", pre);

    const json_t *seg = json_object_get(o, "segmentation");
    if (!seg) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing segmentation", pre);
    if (!json_is_object(seg))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%ssegmentation: not an object", pre);
    const json_t *size = json_object_get(seg, "size");
    if (!size) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing segmentation.size", pre);
    if (!json_is_array(size) || json_array_size(size) != 2)
        return sa1b_error_set(err, SA1B_EFORMAT, -1,
                              "%ssegmentation.size: not an array [h, w]", pre);
    SA1B_FORWARD(get_side(json_array_get(size, 0), "segmentation.size[0]", pre, &m->h, err));
    SA1B_FORWARD(get_side(json_array_get(size, 1), "segmentation.size[1]", pre, &m->w, err));
    if (m->h != a->height || m->w != a->width)
        return sa1b_error_set(err, SA1B_EMISMATCH, -1, "%ssize %ux%u != image %ux%u", pre, m->h,
                              m->w, a->height, a->width);
    const json_t *counts = json_object_get(seg, "counts");
    if (!counts) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing segmentation.counts", pre);
    if (!json_is_string(counts))
        return sa1b_error_set(err, SA1B_EFORMAT, -1,
                              json_is_array(counts)
                                  ? "%ssegmentation.counts: uncompressed RLE is not supported"
                                  : "%ssegmentation.counts: not a string",
                              pre);
    m->counts = json_string_value(counts);
    m->counts_len = json_string_length(counts);

    SA1B_FORWARD(get_box(o, "bbox", pre, m->bbox, err));
    v = json_object_get(o, "area");
    if (!v) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing area", pre);
    if (!get_int64(v, &m->area))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%sarea: not an integer", pre);
    if (m->area < 0)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%sarea: %lld is negative", pre,
                              (long long)m->area);
    if ((uint64_t)m->area > (uint64_t)m->h * m->w)
        return sa1b_error_set(err, SA1B_ERANGE, -1, "%sarea: %lld larger than %ux%u", pre,
                              (long long)m->area, m->h, m->w);
    SA1B_FORWARD(get_number_field(o, "predicted_iou", pre, &m->predicted_iou, err));
    SA1B_FORWARD(get_number_field(o, "stability_score", pre, &m->stability_score, err));
    SA1B_FORWARD(get_box(o, "crop_box", pre, m->crop_box, err));

    const json_t *pc = json_object_get(o, "point_coords");
    if (!pc) return sa1b_error_set(err, SA1B_EFORMAT, -1, "%smissing point_coords", pre);
    if (!json_is_array(pc))
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "%spoint_coords: not an array", pre);
    m->n_points = json_array_size(pc);
    m->has_point = 0;
    m->point[0] = m->point[1] = 0.0;
    for (size_t k = 0; k < m->n_points; k++) {
        const json_t *p = json_array_get(pc, k);
        double xy[2];
        if (!json_is_array(p) || json_array_size(p) != 2)
            return sa1b_error_set(err, SA1B_EFORMAT, -1,
                                  "%spoint_coords[%zu]: not an array [x, y]", pre, k);
        for (size_t j = 0; j < 2; j++) {
            int r = get_double(json_array_get(p, j), &xy[j]);
            if (r == 0)
                return sa1b_error_set(err, SA1B_EFORMAT, -1,
                                      "%spoint_coords[%zu]: not an array [x, y]", pre, k);
            if (r < 0)
                return sa1b_error_set(err, SA1B_ERANGE, -1,
                                      "%spoint_coords[%zu]: not finite or beyond 1e9", pre, k);
        }
        if (k == 0) {
            m->point[0] = xy[0];
            m->point[1] = xy[1];
            m->has_point = 1;
        }
    }
    return SA1B_OK;
}

static void anno_reset(sa1b_anno *a, anno_priv *p)
{
    if (p && p->root) {
        json_decref(p->root);
        p->root = NULL;
    }
    a->image_id = 0;
    a->width = a->height = 0;
    a->file_name[0] = '\0';
    a->n_masks = 0;
}

/* Grows the mask array to hold n masks (n <= SA1B_ANNO_MAX_MASKS). */
static int reserve_masks(sa1b_anno *a, anno_priv *p, size_t n)
{
    if (n <= p->cap) return 0;
    size_t cap = p->cap ? p->cap : 64;
    while (cap < n) cap *= 2;
    sa1b_mask_anno *m = realloc(a->masks, cap * sizeof *m);
    if (!m) return -1;
    a->masks = m;
    p->cap = cap;
    return 0;
}

/* The jansson path: the reference, and the only source of error messages. */
static int parse_jansson(sa1b_anno *a, anno_priv *p, const char *json, size_t len,
                         sa1b_error *err)
{
    anno_reset(a, p);

    json_error_t je;
    /* JSON_ALLOW_NUL keeps strings with \u0000 parseable (file_name rejects it
     * itself; counts with a NUL fail in the RLE parser at the right offset). */
    json_t *root = json_loadb(json ? json : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root)
        return sa1b_error_set(err, SA1B_EFORMAT, je.position, "line %d column %d: %s", je.line,
                              je.column, je.text);
    p->root = root;
    if (!json_is_object(root)) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "top level: not an object");
    }
    int rc = parse_image(a, root, err);
    if (rc != SA1B_OK) {
        anno_reset(a, p);
        return rc;
    }
    const json_t *arr = json_object_get(root, "annotations");
    if (!arr) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "missing annotations");
    }
    if (!json_is_array(arr)) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_EFORMAT, -1, "annotations: not an array");
    }
    size_t n = json_array_size(arr);
    if (n > SA1B_ANNO_MAX_MASKS) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_ERANGE, -1, "annotations: %zu masks, more than %u", n,
                              SA1B_ANNO_MAX_MASKS);
    }
    if (reserve_masks(a, p, n)) {
        anno_reset(a, p);
        return sa1b_error_set(err, SA1B_ENOMEM, -1, "anno: out of memory for %zu masks", n);
    }
    for (size_t i = 0; i < n; i++) {
        memset(&a->masks[i], 0, sizeof a->masks[i]);
        rc = parse_mask(a, i, json_array_get(arr, i), &a->masks[i], err);
        if (rc != SA1B_OK) {
            anno_reset(a, p);
            return rc;
        }
    }
    a->n_masks = n;
    return SA1B_OK;
}

/* ---- fast path ------------------------------------------------------------
 *
 * Every function returns 0 when it read what it expected and -1 to give up
 * (the jansson path then decides).  It accepts only standard JSON that
 * jansson with JSON_REJECT_DUPLICATES accepts too: strings of printable
 * ASCII with the simple escapes (\" \\ \/ \b \f \n \r \t; never \u), keys
 * without escapes, numbers in jansson's grammar whose conversion sets no
 * errno, no duplicate key among the first FAST_MAX_KEYS keys of an object
 * (more keys: give up), nesting below FAST_MAX_DEPTH. */

#define FAST_MAX_KEYS 32
#define FAST_MAX_DEPTH 64

typedef struct fast {
    const unsigned char *s;
    size_t n, i;
    char *arena;           /* decoded strings, NUL-terminated; len + 1 bytes reserved */
    size_t alen;
} fast;

typedef struct fast_obj {
    int n;
    const unsigned char *k[FAST_MAX_KEYS];
    size_t kl[FAST_MAX_KEYS];
} fast_obj;

typedef struct fast_num {
    int is_int;
    int64_t iv;            /* is_int: what json_integer_value gives */
    double dv;             /* else: what json_real_value gives */
} fast_num;

static inline void fast_ws(fast *f)
{
    while (f->i < f->n) {
        unsigned char c = f->s[f->i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        f->i++;
    }
}

/* ws, then the byte c. */
static inline int fast_expect(fast *f, unsigned char c)
{
    fast_ws(f);
    if (f->i >= f->n || f->s[f->i] != c) return -1;
    f->i++;
    return 0;
}

/* A string at f->i (after ws) decoded into the arena. */
static int fast_string(fast *f, const char **out, size_t *out_len)
{
    fast_ws(f);
    if (f->i >= f->n || f->s[f->i] != '"') return -1;
    const unsigned char *s = f->s;
    size_t i = f->i + 1, n = f->n;
    char *d0 = f->arena + f->alen, *d = d0;
    for (;;) {
#ifdef ANNO_HAVE_SSE2
        /* sixteen plain bytes (no quote, backslash, control or non-ASCII
         * byte) at a time, stored whole: the arena holds the decoded
         * bytes at an offset <= i - 1 here, so d + 16 stays within its
         * n + 1 bytes while i + 16 <= n */
        while (i + 16 <= n) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
            __m128i sp = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                   _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
            unsigned m = (unsigned)_mm_movemask_epi8(sp);
            _mm_storeu_si128((__m128i *)(void *)d, v);
            if (m) { /* the plain bytes before the first special one */
                unsigned k = (unsigned)__builtin_ctz(m);
                i += k;
                d += k;
                break;
            }
            i += 16;
            d += 16;
        }
#endif
        if (i >= n) return -1;
        unsigned char c = s[i];
        if (c == '"') break;
        if (c < 0x20 || c >= 0x80) return -1;
        if (c == '\\') {
            if (i + 1 >= n) return -1;
            switch (s[i + 1]) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            default: return -1; /* \u and invalid escapes */
            }
            i += 2;
        } else {
            i++;
        }
        *d++ = (char)c;
    }
    /* decoded length + NUL <= the raw bytes with both quotes: the arena
     * (len + 1 bytes) never overflows */
    *d = '\0';
    f->i = i + 1;
    *out = d0;
    *out_len = (size_t)(d - d0);
    f->alen += (size_t)(d - d0) + 1;
    return 0;
}

/* The next key of an object (after '{' or a value): 1 with the key read
 * and the ':' consumed, 0 at the closing '}', -1 to give up. */
static int fast_key(fast *f, fast_obj *o, const unsigned char **k, size_t *kl)
{
    fast_ws(f);
    if (f->i >= f->n) return -1;
    if (f->s[f->i] == '}') {
        f->i++;
        return 0;
    }
    if (o->n > 0) {
        if (f->s[f->i] != ',') return -1;
        f->i++;
        fast_ws(f);
    }
    if (f->i >= f->n || f->s[f->i] != '"') return -1;
    size_t i = f->i + 1;
    while (i < f->n && f->s[i] != '"') {
        if (f->s[i] < 0x20 || f->s[i] >= 0x80 || f->s[i] == '\\') return -1;
        i++;
    }
    if (i >= f->n) return -1;
    *k = f->s + f->i + 1;
    *kl = i - f->i - 1;
    f->i = i + 1;
    if (o->n >= FAST_MAX_KEYS) return -1;
    for (int j = 0; j < o->n; j++)
        if (o->kl[j] == *kl && memcmp(o->k[j], *k, *kl) == 0) return -1; /* duplicate */
    o->k[o->n] = *k;
    o->kl[o->n++] = *kl;
    if (fast_expect(f, ':')) return -1;
    return 1;
}

/* The next element of an array (after '[' or a value): 1 when one
 * follows, 0 at the closing ']', -1 to give up.  *count: elements so far. */
static int fast_elem(fast *f, size_t *count)
{
    fast_ws(f);
    if (f->i >= f->n) return -1;
    if (f->s[f->i] == ']') {
        f->i++;
        return 0;
    }
    if (*count > 0) {
        if (f->s[f->i] != ',') return -1;
        f->i++;
    }
    (*count)++;
    return 1;
}

static inline int fast_isdigit(unsigned char c) { return c >= '0' && c <= '9'; }

/* A digit c of a number: m gathers the first 19 after leading zeros, nd
 * counts them all. */
static inline void fast_digit(uint64_t *m, int *nd, unsigned char c)
{
    if (*m || c != '0') {
        if (*nd < 19) *m = *m * 10 + (uint64_t)(c - '0');
        ++*nd;
    }
}

/* 10^k for k <= 22: every one an exact double. */
static const double fast_pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A number in jansson's grammar, converted as jansson does. */
static int fast_number(fast *f, fast_num *v)
{
    fast_ws(f);
    const unsigned char *s = f->s;
    size_t i = f->i, n = f->n, start = i;
    /* the digits as an integer m (nd of them after leading zeros) and the
     * power of ten e that scales it, for the exact cases below */
    uint64_t m = 0;
    int nd = 0, neg = 0;
    long e = 0;
    if (i < n && s[i] == '-') {
        i++;
        neg = 1;
    }
    if (i >= n) return -1;
    if (s[i] == '0') {
        i++;
        if (i < n && fast_isdigit(s[i])) return -1;
    } else if (fast_isdigit(s[i])) {
        while (i < n && fast_isdigit(s[i])) {
            fast_digit(&m, &nd, s[i]);
            i++;
        }
    } else {
        return -1;
    }
    int is_int = 1;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !fast_isdigit(s[i])) return -1;
        while (i < n && fast_isdigit(s[i])) {
            fast_digit(&m, &nd, s[i]);
            e--;
            i++;
        }
        is_int = 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = s[i++] == '-';
        if (i >= n || !fast_isdigit(s[i])) return -1;
        long x = 0;
        while (i < n && fast_isdigit(s[i])) {
            if (x < 100000) x = x * 10 + (s[i] - '0');
            i++;
        }
        e += eneg ? -x : x;
        is_int = 0;
    }
    /* Clinger's fast path: m <= 2^53 and 10^|e| <= 10^22 are exact
     * doubles, so the one IEEE multiply or divide rounds m 10^e correctly,
     * which is strtod's result; far from overflow and underflow, so strtod
     * would not set errno either.  Integers of up to 18 digits cannot
     * overflow strtoll.  Anything else goes to the C library. */
    if (nd <= 19) {
        if (is_int && nd <= 18) {
            v->iv = neg ? -(int64_t)m : (int64_t)m;
            v->is_int = 1;
            f->i = i;
            return 0;
        }
        if (!is_int && FLT_EVAL_METHOD == 0 && m <= (UINT64_C(1) << 53) && e >= -22 && e <= 22) {
            double d = (double)m;
            d = e < 0 ? d / fast_pow10[-e] : d * fast_pow10[e];
            v->dv = neg ? -d : d;
            v->is_int = 0;
            f->i = i;
            return 0;
        }
    }
    size_t len = i - start;
    char buf[64];
    if (len >= sizeof buf) return -1;
    memcpy(buf, s + start, len);
    buf[len] = '\0';
    char *end;
    errno = 0;
    if (is_int) {
        long long x = strtoll(buf, &end, 10);
        if (errno || end != buf + len) return -1;
        v->iv = (int64_t)x;
    } else {
        double d = strtod(buf, &end);
        if (errno || end != buf + len) return -1;
        v->dv = d;
    }
    v->is_int = is_int;
    f->i = i;
    return 0;
}

/* Any value, checked and skipped. */
static int fast_skip(fast *f, int depth)
{
    if (depth >= FAST_MAX_DEPTH) return -1;
    fast_ws(f);
    if (f->i >= f->n) return -1;
    unsigned char c = f->s[f->i];
    if (c == '{') {
        f->i++;
        fast_obj o;
        o.n = 0;
        const unsigned char *k;
        size_t kl;
        int r;
        while ((r = fast_key(f, &o, &k, &kl)) == 1)
            if (fast_skip(f, depth + 1)) return -1;
        return r;
    }
    if (c == '[') {
        f->i++;
        size_t cnt = 0;
        int r;
        while ((r = fast_elem(f, &cnt)) == 1)
            if (fast_skip(f, depth + 1)) return -1;
        return r;
    }
    if (c == '"') {
        const char *s;
        size_t l;
        return fast_string(f, &s, &l);
    }
    if (c == '-' || fast_isdigit(c)) {
        fast_num v;
        return fast_number(f, &v);
    }
    static const char *const words[] = {"true", "false", "null"};
    for (int w = 0; w < 3; w++) {
        size_t l = strlen(words[w]);
        if (f->n - f->i >= l && memcmp(f->s + f->i, words[w], l) == 0) {
            f->i += l;
            return 0;
        }
    }
    return -1;
}

static inline int fast_keyeq(const unsigned char *k, size_t kl, const char *name)
{
    size_t n = strlen(name);
    return kl == n && memcmp(k, name, n) == 0;
}

/* get_int64 on a number. */
static int fast_int64(const fast_num *v, int64_t *out)
{
    if (v->is_int) {
        *out = v->iv;
        return 0;
    }
    double d = v->dv;
    if (!isfinite(d) || d != floor(d) || d < -9.2233720368547758e18 || d >= 9.2233720368547758e18)
        return -1;
    *out = (int64_t)d;
    return 0;
}

/* get_double on a number (1 there: ok). */
static int fast_double(const fast_num *v, double *out)
{
    double d = v->is_int ? (double)v->iv : v->dv;
    if (!isfinite(d) || fabs(d) > SA1B_ANNO_MAX_ABS) return -1;
    *out = d;
    return 0;
}

/* get_side on a number. */
static int fast_side(fast *f, uint32_t *out)
{
    fast_num v;
    int64_t x;
    if (fast_number(f, &v) || fast_int64(&v, &x) || x < 1 || x > (int64_t)SA1B_ANNO_MAX_SIDE)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

static int fast_dbl(fast *f, double *out)
{
    fast_num v;
    return fast_number(f, &v) || fast_double(&v, out) ? -1 : 0;
}

/* An array of exactly n numbers passing get_double. */
static int fast_dbl_array(fast *f, double *out, size_t n)
{
    if (fast_expect(f, '[')) return -1;
    size_t cnt = 0;
    int r;
    while ((r = fast_elem(f, &cnt)) == 1) {
        double d;
        if (cnt > n || fast_dbl(f, &d)) return -1;
        out[cnt - 1] = d;
    }
    return r < 0 || cnt != n ? -1 : 0;
}

static int fast_image(fast *f, sa1b_anno *a)
{
    if (fast_expect(f, '{')) return -1;
    fast_obj o;
    o.n = 0;
    const unsigned char *k;
    size_t kl;
    int r, have = 0;
    while ((r = fast_key(f, &o, &k, &kl)) == 1) {
        if (fast_keyeq(k, kl, "image_id")) {
            fast_num v;
            if (fast_number(f, &v) || fast_int64(&v, &a->image_id)) return -1;
            have |= 1;
        } else if (fast_keyeq(k, kl, "width")) {
            if (fast_side(f, &a->width)) return -1;
            have |= 2;
        } else if (fast_keyeq(k, kl, "height")) {
            if (fast_side(f, &a->height)) return -1;
            have |= 4;
        } else if (fast_keyeq(k, kl, "file_name")) {
            const char *s;
            size_t n;
            if (fast_string(f, &s, &n) || n >= sizeof a->file_name || memchr(s, '\0', n))
                return -1;
            memcpy(a->file_name, s, n + 1);
            have |= 8;
        } else if (fast_skip(f, 2)) {
            return -1;
        }
    }
    return r < 0 || have != 15 ? -1 : 0;
}

static int fast_segmentation(fast *f, sa1b_mask_anno *m)
{
    if (fast_expect(f, '{')) return -1;
    fast_obj o;
    o.n = 0;
    const unsigned char *k;
    size_t kl;
    int r, have = 0;
    while ((r = fast_key(f, &o, &k, &kl)) == 1) {
        if (fast_keyeq(k, kl, "size")) {
            if (fast_expect(f, '[')) return -1;
            size_t cnt = 0;
            int e;
            while ((e = fast_elem(f, &cnt)) == 1)
                if (cnt > 2 || fast_side(f, cnt == 1 ? &m->h : &m->w)) return -1;
            if (e < 0 || cnt != 2) return -1;
            have |= 1;
        } else if (fast_keyeq(k, kl, "counts")) {
            if (fast_string(f, &m->counts, &m->counts_len)) return -1;
            have |= 2;
        } else if (fast_skip(f, 4)) {
            return -1;
        }
    }
    return r < 0 || have != 3 ? -1 : 0;
}

static int fast_points(fast *f, sa1b_mask_anno *m)
{
    if (fast_expect(f, '[')) return -1;
    size_t cnt = 0;
    int r;
    while ((r = fast_elem(f, &cnt)) == 1) {
        double xy[2];
        if (fast_dbl_array(f, xy, 2)) return -1;
        if (cnt == 1) {
            m->point[0] = xy[0];
            m->point[1] = xy[1];
            m->has_point = 1;
        }
    }
    if (r < 0) return -1;
    m->n_points = cnt;
    return 0;
}

static int fast_mask(fast *f, sa1b_mask_anno *m)
{
    memset(m, 0, sizeof *m);
    if (fast_expect(f, '{')) return -1;
    fast_obj o;
    o.n = 0;
    const unsigned char *k;
    size_t kl;
    int r, have = 0;
    while ((r = fast_key(f, &o, &k, &kl)) == 1) {
        fast_num v;
        if (fast_keyeq(k, kl, "id")) {
            if (fast_number(f, &v) || fast_int64(&v, &m->id)) return -1;
            have |= 1;
        } else if (fast_keyeq(k, kl, "segmentation")) {
            if (fast_segmentation(f, m)) return -1;
            have |= 2;
        } else if (fast_keyeq(k, kl, "bbox")) {
            if (fast_dbl_array(f, m->bbox, 4)) return -1;
            have |= 4;
        } else if (fast_keyeq(k, kl, "area")) {
            if (fast_number(f, &v) || fast_int64(&v, &m->area) || m->area < 0) return -1;
            have |= 8;
        } else if (fast_keyeq(k, kl, "predicted_iou")) {
            if (fast_dbl(f, &m->predicted_iou)) return -1;
            have |= 16;
        } else if (fast_keyeq(k, kl, "stability_score")) {
            if (fast_dbl(f, &m->stability_score)) return -1;
            have |= 32;
        } else if (fast_keyeq(k, kl, "crop_box")) {
            if (fast_dbl_array(f, m->crop_box, 4)) return -1;
            have |= 64;
        } else if (fast_keyeq(k, kl, "point_coords")) {
            if (fast_points(f, m)) return -1;
            have |= 128;
        } else if (fast_skip(f, 3)) {
            return -1;
        }
    }
    if (r < 0 || have != 255) return -1;
    if ((uint64_t)m->area > (uint64_t)m->h * m->w) return -1;
    return 0;
}

static int fast_annotations(fast *f, sa1b_anno *a, anno_priv *p)
{
    if (fast_expect(f, '[')) return -1;
    size_t cnt = 0;
    int r;
    while ((r = fast_elem(f, &cnt)) == 1) {
        if (cnt > SA1B_ANNO_MAX_MASKS || reserve_masks(a, p, cnt)) return -1;
        if (fast_mask(f, &a->masks[cnt - 1])) return -1;
    }
    if (r < 0) return -1;
    a->n_masks = cnt;
    return 0;
}

/* The whole document; 0 with *a filled exactly as parse_jansson would
 * fill it, -1 to leave the document to parse_jansson. */
static int parse_fast(sa1b_anno *a, anno_priv *p, const char *json, size_t len)
{
    anno_reset(a, p);
    if (!json || len == 0 || len >= SIZE_MAX) return -1;
    if (len + 1 > p->arena_cap) {
        char *ar = realloc(p->arena, len + 1);
        if (!ar) return -1;
        p->arena = ar;
        p->arena_cap = len + 1;
    }
    fast f = {(const unsigned char *)json, len, 0, p->arena, 0};
    if (fast_expect(&f, '{')) return -1;
    fast_obj o;
    o.n = 0;
    const unsigned char *k;
    size_t kl;
    int r, have = 0;
    size_t n_masks = 0;
    while ((r = fast_key(&f, &o, &k, &kl)) == 1) {
        if (fast_keyeq(k, kl, "image")) {
            if (fast_image(&f, a)) return -1;
            have |= 1;
        } else if (fast_keyeq(k, kl, "annotations")) {
            if (fast_annotations(&f, a, p)) return -1;
            n_masks = a->n_masks;
            have |= 2;
        } else if (fast_skip(&f, 1)) {
            return -1;
        }
    }
    fast_ws(&f);
    if (r < 0 || have != 3 || f.i != f.n) return -1;
    for (size_t i = 0; i < n_masks; i++)
        if (a->masks[i].h != a->height || a->masks[i].w != a->width) return -1;
    return 0;
}

int anno_parse_impl(sa1b_anno *a, const char *json, size_t len, int impl, sa1b_error *err)
{
    if (!a || (!json && len)) return sa1b_error_set(err, SA1B_EINVAL, -1, "anno: NULL argument");
    anno_priv *p = a->priv_;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return sa1b_error_set(err, SA1B_ENOMEM, -1, "anno: out of memory");
        a->priv_ = p;
        a->masks = NULL;
    }
    if (impl != ANNO_PARSE_JANSSON) {
        if (parse_fast(a, p, json, len) == 0) return SA1B_OK;
        anno_reset(a, p);
        if (impl == ANNO_PARSE_FAST)
            return sa1b_error_set(err, SA1B_EUNSUPPORTED, -1, "anno: not for the fast path");
    }
    return parse_jansson(a, p, json, len, err);
}

int sa1b_anno_parse(sa1b_anno *a, const char *json, size_t len, sa1b_error *err)
{
    return anno_parse_impl(a, json, len, ANNO_PARSE_AUTO, err);
}

void sa1b_anno_free(sa1b_anno *a)
{
    if (!a) return;
    anno_priv *p = a->priv_;
    if (p) {
        if (p->root) json_decref(p->root);
        free(p->arena);
        free(p);
    }
    free(a->masks);
    memset(a, 0, sizeof *a);
}
