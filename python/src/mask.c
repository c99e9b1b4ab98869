/*
 * mask.c - the C half of sa1b.mask: pycocotools' _mask functions over the
 * libsa1b RLE codec.  sa1b/mask.py keeps pycocotools' Python-level
 * dispatch (single object or list, boxes or RLEs) and calls these.
 *
 * Every RLE string is validated (sa1b_rle_from_string): a bad one raises
 * ValueError naming the object ("rles[3]: bad character ..."), where
 * pycocotools reads past its end.  The codec runs without the GIL: the
 * strings are gathered (and kept alive) first, parsed and computed on with
 * the GIL released, and only then turned into Python objects.
 */
#include "sa1bpy.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sa1b_rle.h"

/* ---- gathering RLE objects ---------------------------------------------------- */

typedef struct rle_set {
    Py_ssize_t n;
    const char **s;     /* [n] counts strings (inside refs) */
    Py_ssize_t *len;    /* [n] */
    uint32_t *h, *w;    /* [n] */
    PyObject **refs;    /* [n] the counts objects, kept alive */
    sa1b_rle *rles;     /* [n] parsed */
} rle_set;

static void rle_set_free(rle_set *set)
{
    for (Py_ssize_t i = 0; i < set->n; i++) {
        if (set->refs) Py_XDECREF(set->refs[i]);
        if (set->rles) sa1b_rle_free(&set->rles[i]);
    }
    PyMem_Free(set->s);
    PyMem_Free(set->len);
    PyMem_Free(set->h);
    PyMem_Free(set->w);
    PyMem_Free(set->refs);
    PyMem_Free(set->rles);
    memset(set, 0, sizeof *set);
}

/* A mask side from a Python integer: OverflowError outside 0..2^32-1. */
static int side_from(PyObject *o, uint32_t *out)
{
    PyObject *i = PyNumber_Index(o);
    if (!i) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    if (v > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "mask size beyond 2^32-1");
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

/* obj['size'] as (h, w). */
static int size_of(PyObject *obj, uint32_t *h, uint32_t *w)
{
    PyObject *size = PyMapping_GetItemString(obj, "size");
    if (!size) return -1;
    PyObject *h_o = PySequence_GetItem(size, 0);
    PyObject *w_o = h_o ? PySequence_GetItem(size, 1) : NULL;
    int rc = (h_o && w_o && side_from(h_o, h) == 0 && side_from(w_o, w) == 0) ? 0 : -1;
    Py_XDECREF(h_o);
    Py_XDECREF(w_o);
    Py_DECREF(size);
    return rc;
}

/* PySequence_Fast(o, msg), but never the caller's list itself: a list o is
 * copied into a tuple, so that Python code run while the items are read (a
 * mapping's __getitem__, an __index__) can neither shrink it under the
 * reader nor free the item being read. */
static PyObject *items_of(PyObject *o, const char *msg)
{
    PyObject *seq = PySequence_Fast(o, msg);
    if (!seq || seq != o || !PyList_Check(seq)) return seq;
    PyObject *t = PyList_AsTuple(seq);
    Py_DECREF(seq);
    return t;
}

/* Gathers a sequence of RLE dicts {'size': [h, w], 'counts': str|bytes}. */
static int rle_set_gather(rle_set *set, PyObject *objs)
{
    memset(set, 0, sizeof *set);
    PyObject *seq = items_of(objs, "expected a list of RLE objects");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t cap = n ? (size_t)n : 1;
    set->s = PyMem_Calloc(cap, sizeof *set->s);
    set->len = PyMem_Calloc(cap, sizeof *set->len);
    set->h = PyMem_Calloc(cap, sizeof *set->h);
    set->w = PyMem_Calloc(cap, sizeof *set->w);
    set->refs = PyMem_Calloc(cap, sizeof *set->refs);
    set->rles = PyMem_Calloc(cap, sizeof *set->rles);
    if (!set->s || !set->len || !set->h || !set->w || !set->refs || !set->rles) {
        Py_DECREF(seq);
        rle_set_free(set);
        PyErr_NoMemory();
        return -1;
    }
    set->n = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *counts = PyMapping_GetItemString(obj, "counts");
        if (!counts) goto fail;
        set->refs[i] = counts;
        if (size_of(obj, &set->h[i], &set->w[i]) < 0) goto fail;
        if (PyUnicode_Check(counts)) {
            set->s[i] = PyUnicode_AsUTF8AndSize(counts, &set->len[i]);
            if (!set->s[i]) goto fail;
        } else if (PyBytes_Check(counts)) {
            set->s[i] = PyBytes_AS_STRING(counts);
            set->len[i] = PyBytes_GET_SIZE(counts);
        } else {
            PyErr_Format(PyExc_TypeError, "rles[%zd]: counts must be str or bytes, not %.100s", i,
                         Py_TYPE(counts)->tp_name);
            goto fail;
        }
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    rle_set_free(set);
    return -1;
}

/* Parses every string with the GIL released; ValueError naming the first
 * bad one. */
static int rle_set_parse(rle_set *set)
{
    sa1b_error err;
    sa1b_error_clear(&err);
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < set->n; i++) {
        if (sa1b_rle_from_string(&set->rles[i], set->h[i], set->w[i], set->s[i],
                                 (size_t)set->len[i], &err) != SA1B_OK) {
            bad = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        char what[48];
        snprintf(what, sizeof what, "rles[%zd]", bad);
        sa1bpy_raise(&err, what);
        rle_set_free(set);
        return -1;
    }
    return 0;
}

static int rle_set_load(rle_set *set, PyObject *objs)
{
    if (rle_set_gather(set, objs) < 0) return -1;
    return rle_set_parse(set);
}

/* ---- building RLE dicts -------------------------------------------------------- */

/* {'size': [h, w], 'counts': b'...'} as pycocotools' _toString makes it. */
static PyObject *rle_to_dict(const sa1b_rle *r)
{
    size_t cap = sa1b_rle_string_bound(r->n);
    char *buf = PyMem_Malloc(cap);
    if (!buf) return PyErr_NoMemory();
    size_t len = sa1b_rle_to_buffer(r, buf, cap);
    PyObject *counts = PyBytes_FromStringAndSize(buf, (Py_ssize_t)len);
    PyMem_Free(buf);
    if (!counts) return NULL;
    PyObject *d = Py_BuildValue("{s:[II],s:N}", "size", (unsigned)r->h, (unsigned)r->w,
                                "counts", counts);
    return d;
}

static PyObject *rles_to_list(const sa1b_rle *rles, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *d = rle_to_dict(&rles[i]);
        if (!d) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

static sa1b_rle *rles_new(Py_ssize_t n)
{
    sa1b_rle *r = PyMem_Calloc(n ? (size_t)n : 1, sizeof *r);
    if (!r) PyErr_NoMemory();
    return r;
}

static void rles_free(sa1b_rle *r, Py_ssize_t n)
{
    if (!r) return;
    for (Py_ssize_t i = 0; i < n; i++) sa1b_rle_free(&r[i]);
    PyMem_Free(r);
}

/* ---- encode --------------------------------------------------------------------- */

static PyObject *m_encode(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_RECORDS_RO) < 0) return NULL;
    PyObject *ret = NULL;
    sa1b_rle *rles = NULL;
    Py_ssize_t n = 0;
    if (b.ndim != 3) {
        PyErr_Format(PyExc_ValueError, "Buffer has wrong number of dimensions (expected 3, got %d)",
                     b.ndim);
        goto out;
    }
    /* uint8, or bool as pycocotools takes it too (its bytes are 0 and 1) */
    const char *fmt = b.format ? b.format : "";
    if (*fmt && strchr("@=<>!", *fmt)) fmt++;
    if (b.itemsize != 1 || (strcmp(fmt, "B") != 0 && strcmp(fmt, "?") != 0)) {
        PyErr_Format(PyExc_ValueError, "Buffer dtype mismatch, expected 'uint8_t' but got '%s'",
                     b.format ? b.format : "?");
        goto out;
    }
    if (!PyBuffer_IsContiguous(&b, 'F')) {
        PyErr_SetString(PyExc_ValueError, "ndarray is not Fortran contiguous");
        goto out;
    }
    Py_ssize_t h = b.shape[0], w = b.shape[1];
    n = b.shape[2];
    /* each side too (an empty [2^32, 0, n] has no pixels, and its RLE's
     * size must not wrap to [0, 0]) */
    if ((uint64_t)h > UINT32_MAX || (uint64_t)w > UINT32_MAX ||
        (uint64_t)h * (uint64_t)w > SA1B_RLE_MAX_PIXELS) {
        PyErr_Format(PyExc_ValueError, "mask of %zdx%zd: a side or the pixel count beyond 2^32-1",
                     h, w);
        goto out;
    }
    if (!(rles = rles_new(n))) goto out;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = SA1B_OK;
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *p = b.buf;
    for (Py_ssize_t i = 0; i < n && rc == SA1B_OK; i++)
        rc = sa1b_rle_encode(&rles[i], p + (size_t)i * (size_t)h * (size_t)w, (uint32_t)h,
                             (uint32_t)w, 1, &err);
    Py_END_ALLOW_THREADS
    if (rc != SA1B_OK) {
        sa1bpy_raise(&err, NULL); /* the codec's message names encode */
        goto out;
    }
    ret = rles_to_list(rles, n);
out:
    rles_free(rles, n);
    PyBuffer_Release(&b);
    return ret;
}

/* ---- decode --------------------------------------------------------------------- */

enum { DECODE_FULL = 0, DECODE_NEAREST = 1, DECODE_AREA = 2 };

/* Writes the row-major rh x rw grid src into column-major dst. */
static void transpose_to_f(const uint8_t *src, uint32_t rh, uint32_t rw, uint8_t *dst)
{
    for (uint32_t x = 0; x < rw; x++)
        for (uint32_t y = 0; y < rh; y++) dst[(size_t)x * rh + y] = src[(size_t)y * rw + x];
}

/* _decode(rles, rh, rw, mode): [h, w, n] uint8 in Fortran order (h, w of the
 * masks for DECODE_FULL, else rh, rw). */
static PyObject *m_decode(PyObject *self, PyObject *args)
{
    PyObject *objs;
    long long rh_a = 0, rw_a = 0;
    int mode = DECODE_FULL;
    if (!PyArg_ParseTuple(args, "O|LLi", &objs, &rh_a, &rw_a, &mode)) return NULL;
    rle_set set;
    if (rle_set_load(&set, objs) < 0) return NULL;
    PyObject *ret = NULL;
    if (set.n == 0) {
        PyErr_SetString(PyExc_ValueError, "decode: no RLE objects");
        goto out;
    }
    for (Py_ssize_t i = 1; i < set.n; i++)
        if (set.h[i] != set.h[0] || set.w[i] != set.w[0]) {
            PyErr_Format(PyExc_ValueError, "rles[%zd]: size %ux%u differs from rles[0]'s %ux%u", i,
                         set.h[i], set.w[i], set.h[0], set.w[0]);
            goto out;
        }
    uint32_t oh = set.h[0], ow = set.w[0];
    if (mode != DECODE_FULL) {
        if (rh_a < 1 || rw_a < 1 || rh_a > UINT32_MAX || rw_a > UINT32_MAX ||
            (uint64_t)rh_a * (uint64_t)rw_a > SA1B_RLE_MAX_PIXELS) {
            PyErr_Format(PyExc_ValueError, "decode: bad target size %lldx%lld", rh_a, rw_a);
            goto out;
        }
        oh = (uint32_t)rh_a;
        ow = (uint32_t)rw_a;
    }
    size_t plane = (size_t)oh * ow;
    PyObject *shape = Py_BuildValue("(IIn)", oh, ow, set.n);
    if (!shape) goto out;
    Py_buffer b;
    PyObject *arr = sa1bpy_empty(shape, "uint8", 'F', &b);
    Py_DECREF(shape);
    if (!arr) goto out;
    uint8_t *scratch = NULL;
    if (mode != DECODE_FULL && !(scratch = PyMem_Malloc(plane ? plane : 1))) {
        PyBuffer_Release(&b);
        Py_DECREF(arr);
        PyErr_NoMemory();
        goto out;
    }
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = SA1B_OK;
    Py_ssize_t bad = -1;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *dst = b.buf;
    for (Py_ssize_t i = 0; i < set.n; i++, dst += plane) {
        if (mode == DECODE_FULL) {
            sa1b_rle_decode(&set.rles[i], dst, 1);
            continue;
        }
        rc = mode == DECODE_NEAREST
                 ? sa1b_rle_resample_nearest(&set.rles[i], oh, ow, scratch, &err)
                 : sa1b_rle_resample_area(&set.rles[i], oh, ow, NULL, scratch, &err);
        if (rc != SA1B_OK) {
            bad = i;
            break;
        }
        transpose_to_f(scratch, oh, ow, dst);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(scratch);
    PyBuffer_Release(&b);
    if (bad >= 0) {
        char what[48];
        snprintf(what, sizeof what, "rles[%zd]", bad);
        sa1bpy_raise(&err, what);
        Py_DECREF(arr);
        goto out;
    }
    ret = arr;
out:
    rle_set_free(&set);
    return ret;
}

/* ---- area, bbox ----------------------------------------------------------------- */

/* A new C-order array of rows (x cols when cols > 0) elements of dtype, its
 * buffer in *b; NULL with the Python error set. */
static PyObject *new_array(Py_ssize_t rows, int cols, const char *dtype, Py_buffer *b)
{
    PyObject *shape = cols > 0 ? Py_BuildValue("(ni)", rows, cols) : Py_BuildValue("(n)", rows);
    PyObject *arr = shape ? sa1bpy_empty(shape, dtype, 'C', b) : NULL;
    Py_XDECREF(shape);
    return arr;
}

static PyObject *m_area(PyObject *self, PyObject *objs)
{
    rle_set set;
    if (rle_set_load(&set, objs) < 0) return NULL;
    Py_buffer b;
    PyObject *arr = new_array(set.n, 0, "uint32", &b);
    if (arr) {
        uint32_t *a = b.buf;
        for (Py_ssize_t i = 0; i < set.n; i++) a[i] = (uint32_t)sa1b_rle_area(&set.rles[i]);
        PyBuffer_Release(&b);
    }
    rle_set_free(&set);
    return arr;
}

/* _bbox(rles, sa1b_convention) -> [n, 4] float64 */
static PyObject *m_bbox(PyObject *self, PyObject *args)
{
    PyObject *objs;
    int sa1b = 0;
    if (!PyArg_ParseTuple(args, "O|p", &objs, &sa1b)) return NULL;
    rle_set set;
    if (rle_set_load(&set, objs) < 0) return NULL;
    Py_buffer b;
    PyObject *arr = new_array(set.n, 4, "float64", &b);
    if (arr) {
        double *bb = b.buf;
        for (Py_ssize_t i = 0; i < set.n; i++) {
            if (sa1b) sa1b_rle_bbox_sa1b(&set.rles[i], bb + 4 * i);
            else sa1b_rle_bbox(&set.rles[i], bb + 4 * i);
        }
        PyBuffer_Release(&b);
    }
    rle_set_free(&set);
    return arr;
}

/* ---- iou ----------------------------------------------------------------------- */

/* The crowd flags: a bytes-like of n uint8 (mask.py passes
 * numpy.array(iscrowd, dtype=numpy.uint8)). */
static int crowd_flags(PyObject *o, Py_ssize_t n, Py_buffer *b)
{
    if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0) return -1;
    if (b->len != n) {
        PyErr_Format(PyExc_ValueError, "iou: iscrowd has %zd entries for %zd ground truths",
                     b->len, n);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* IoU of boxes D and G ([x, y, w, h]) as pycocotools' bbIou: 0 unless they
 * overlap with positive width and height; iscrowd divides by D's area. */
static double box_iou(const double *D, const double *G, int crowd)
{
    double iw = fmin(D[2] + D[0], G[2] + G[0]) - fmax(D[0], G[0]);
    if (iw <= 0) return 0;
    double ih = fmin(D[3] + D[1], G[3] + G[1]) - fmax(D[1], G[1]);
    if (ih <= 0) return 0;
    double inter = iw * ih, da = D[2] * D[3], ga = G[2] * G[3];
    return inter / (crowd ? da : da + ga - inter);
}

/* _rle_iou(dt, gt, iscrowd) -> float64 [m*n], o[g*m + d] as pycocotools. */
static PyObject *m_rle_iou(PyObject *self, PyObject *args)
{
    PyObject *dt_o, *gt_o, *crowd_o;
    if (!PyArg_ParseTuple(args, "OOO", &dt_o, &gt_o, &crowd_o)) return NULL;
    rle_set dt, gt;
    if (rle_set_load(&dt, dt_o) < 0) return NULL;
    if (rle_set_load(&gt, gt_o) < 0) {
        rle_set_free(&dt);
        return NULL;
    }
    PyObject *ret = NULL;
    /* every pair must have one size (pycocotools reads past the smaller) */
    for (Py_ssize_t i = 0; i < dt.n + gt.n; i++) {
        uint32_t h = i < dt.n ? dt.h[i] : gt.h[i - dt.n], w = i < dt.n ? dt.w[i] : gt.w[i - dt.n];
        uint32_t h0 = dt.n ? dt.h[0] : gt.h[0], w0 = dt.n ? dt.w[0] : gt.w[0];
        if (h != h0 || w != w0) {
            PyErr_Format(PyExc_ValueError, "iou: %s[%zd] is %ux%u, the first mask %ux%u",
                         i < dt.n ? "dt" : "gt", i < dt.n ? i : i - dt.n, h, w, h0, w0);
            goto out;
        }
    }
    Py_buffer cb;
    if (crowd_flags(crowd_o, gt.n, &cb) < 0) goto out;
    Py_buffer b;
    PyObject *arr = new_array(dt.n * gt.n, 0, "float64", &b);
    if (!arr) {
        PyBuffer_Release(&cb);
        goto out;
    }
    double *boxes = PyMem_Malloc(sizeof(double) * 4 * (size_t)(dt.n + gt.n));
    if (!boxes) {
        PyBuffer_Release(&b);
        PyBuffer_Release(&cb);
        Py_DECREF(arr);
        PyErr_NoMemory();
        goto out;
    }
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = SA1B_OK;
    Py_BEGIN_ALLOW_THREADS
    double *o = b.buf, *db = boxes, *gb = boxes + 4 * dt.n;
    const uint8_t *crowd = cb.buf;
    /* as pycocotools: pairs whose boxes do not overlap are 0 without a look
     * at their runs (the boxes are toBbox's, quirks included, so the
     * answers stay identical) */
    for (Py_ssize_t d = 0; d < dt.n; d++) sa1b_rle_bbox(&dt.rles[d], db + 4 * d);
    for (Py_ssize_t g = 0; g < gt.n; g++) sa1b_rle_bbox(&gt.rles[g], gb + 4 * g);
    for (Py_ssize_t g = 0; g < gt.n && rc == SA1B_OK; g++)
        for (Py_ssize_t d = 0; d < dt.n && rc == SA1B_OK; d++) {
            o[g * dt.n + d] = 0;
            if (box_iou(db + 4 * d, gb + 4 * g, 0) > 0)
                rc = sa1b_rle_iou(&dt.rles[d], &gt.rles[g], crowd[g] != 0, &o[g * dt.n + d], &err);
        }
    Py_END_ALLOW_THREADS
    PyMem_Free(boxes);
    PyBuffer_Release(&b);
    PyBuffer_Release(&cb);
    if (rc != SA1B_OK) {
        sa1bpy_raise(&err, NULL); /* "iou: ..." */
        Py_DECREF(arr);
        goto out;
    }
    ret = arr;
out:
    rle_set_free(&dt);
    rle_set_free(&gt);
    return ret;
}

/* A C-contiguous float64 [n, 4] buffer (boxes). */
static int boxes_of(PyObject *o, Py_buffer *b, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    if (b->ndim != 2 || b->shape[1] != 4 || b->itemsize != 8 || strcmp(b->format, "d") != 0) {
        PyErr_Format(PyExc_ValueError, "%s: boxes must be float64 [n, 4]", what);
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

/* _bb_iou(dt, gt, iscrowd) -> float64 [m*n] (pycocotools' bbIou). */
static PyObject *m_bb_iou(PyObject *self, PyObject *args)
{
    PyObject *dt_o, *gt_o, *crowd_o;
    if (!PyArg_ParseTuple(args, "OOO", &dt_o, &gt_o, &crowd_o)) return NULL;
    Py_buffer db, gb, cb, b;
    if (boxes_of(dt_o, &db, "iou") < 0) return NULL;
    if (boxes_of(gt_o, &gb, "iou") < 0) {
        PyBuffer_Release(&db);
        return NULL;
    }
    Py_ssize_t m = db.shape[0], n = gb.shape[0];
    PyObject *arr = NULL;
    if (crowd_flags(crowd_o, n, &cb) == 0) {
        arr = new_array(m * n, 0, "float64", &b);
        if (arr) {
            const double *dt = db.buf, *gt = gb.buf;
            const uint8_t *crowd = cb.buf;
            double *o = b.buf;
            for (Py_ssize_t g = 0; g < n; g++)
                for (Py_ssize_t d = 0; d < m; d++)
                    o[g * m + d] = box_iou(dt + 4 * d, gt + 4 * g, crowd[g]);
            PyBuffer_Release(&b);
        }
        PyBuffer_Release(&cb);
    }
    PyBuffer_Release(&db);
    PyBuffer_Release(&gb);
    return arr;
}

/* ---- merge ---------------------------------------------------------------------- */

static PyObject *m_merge(PyObject *self, PyObject *args)
{
    PyObject *objs;
    int intersect = 0;
    if (!PyArg_ParseTuple(args, "O|p", &objs, &intersect)) return NULL;
    rle_set set;
    if (rle_set_load(&set, objs) < 0) return NULL;
    PyObject *ret = NULL;
    const sa1b_rle **in = PyMem_Calloc(set.n ? (size_t)set.n : 1, sizeof *in);
    if (!in) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < set.n; i++) in[i] = &set.rles[i];
    sa1b_rle r = SA1B_RLE_INIT;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sa1b_rle_merge(&r, (const sa1b_rle *const *)in, (size_t)set.n, intersect, &err);
    Py_END_ALLOW_THREADS
    if (rc != SA1B_OK) sa1bpy_raise(&err, NULL); /* "merge: ..." */
    else ret = rle_to_dict(&r);
    sa1b_rle_free(&r);
out:
    PyMem_Free(in);
    rle_set_free(&set);
    return ret;
}

/* ---- from boxes, polygons and uncompressed runs ---------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The toggle positions found so far (column-major pixel offsets). */
typedef struct toggles {
    uint32_t *a;
    size_t n, cap;
} toggles;

static int toggles_push(toggles *t, uint32_t v)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        uint32_t *a = realloc(t->a, cap * sizeof *a);
        if (!a) return -1;
        t->a = a, t->cap = cap;
    }
    t->a[t->n++] = v;
    return 0;
}

/* The crossing of two consecutive boundary points with a pixel column's
 * centre line, as pycocotools' rleFrPoly finds it: xf the fine-grid column
 * it takes (the later point's, less one when it lies right of the
 * earlier), yf the upper point's fine-grid row; a toggle where xf is a
 * column centre inside the grid. */
static int toggle_at(toggles *t, int64_t xf, int64_t yf, uint32_t h, uint32_t w)
{
    const double scale = 5;
    double xd = ((double)xf + .5) / scale - .5;
    if (floor(xd) != xd || xd < 0 || xd > (double)((uint64_t)w - 1)) return 0;
    double yd = ((double)yf + .5) / scale - .5;
    if (yd < 0) yd = 0;
    else if (yd > h) yd = h;
    yd = ceil(yd);
    /* modulo 2^32 as pycocotools' int arithmetic gives it, without its
     * overflow beyond 2^31 pixels */
    return toggles_push(t, (uint32_t)((uint64_t)xd * h + (uint64_t)yd));
}

/* The fine-grid column of point t of an edge that runs along y from
 * (xs, ys) (dy steps, slope s): as rleFrPoly computes it. */
static int64_t col_at(int xs, double s, int64_t t) { return (int)(xs + s * (double)t + .5); }

/* The toggles of one edge of the boundary, from (xs, ys) to (xe, ye) on the
 * 5x finer grid.  rleFrPoly lists every point of it (one per fine step
 * along the major axis: up to 2^31 of them, 16 GB, for an edge across
 * +-4.29e8) and looks at each pair of consecutive points whose columns
 * differ; this finds the same pairs without the list: only pairs whose
 * column can be a pixel centre inside the grid (x-major: every fifth step;
 * y-major: the steps where the monotone column changes, found by bisection,
 * one per column value in the grid's range).  Pairs of points of two
 * edges never count: they share a vertex, and so a column, wherever a
 * column centre can be (x >= 2). */
static int edge_toggles(toggles *t, int xs, int ys, int xe, int ye, uint32_t h, uint32_t w)
{
    int dx = abs(xe - xs), dy = abs(ys - ye);
    int flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
    if (flip) {
        int tmp = xs; xs = xe; xe = tmp;
        tmp = ys; ys = ye; ye = tmp;
    }
    /* the columns x_f whose pairs can toggle: 5c + 2 for c in 0..w-1 (the
     * largest below 2^35: int64_t) */
    const int64_t lo = 2, hi = 5 * ((int64_t)w - 1) + 2;
    if (dx >= dy) {
        if (dx == 0) return 0; /* a repeated vertex: one point */
        /* u = xs + t, v = ys + s t rounded; pair (t, t+1) takes column
         * xs + t in either order of the points */
        double s = (double)(ye - ys) / dx;
        int64_t first = (int64_t)xs > lo ? (int64_t)xs : lo, last = (int64_t)xs + dx - 1 < hi ? (int64_t)xs + dx - 1 : hi;
        if (first > last) return 0;
        int64_t c0 = (first - 2 + 4) / 5; /* first >= 2: the first c with 5c + 2 >= first */
        for (int64_t xf = 5 * c0 + 2; xf <= last; xf += 5) {
            int64_t tt = xf - xs;
            int va = (int)(ys + s * (double)tt + .5), vb = (int)(ys + s * (double)(tt + 1) + .5);
            if (toggle_at(t, xf, va < vb ? va : vb, h, w)) return -1;
        }
        return 0;
    }
    /* y-major: v = ys + t, u = col_at(t), monotone in t (up when xe > xs);
     * the points are listed with t rising, or falling when flipped */
    double s = (double)(xe - xs) / dy;
    int up = col_at(xs, s, dy) >= col_at(xs, s, 0);
    int64_t u0 = col_at(xs, s, 0), u1 = col_at(xs, s, dy);
    int64_t umin = up ? u0 : u1, umax = up ? u1 : u0;
    /* a pair takes a column of [min(ua, ub) - 0, max(ua, ub) - 1]: every value
     * of the grid's range the edge passes, and one above */
    int64_t vlo = umin > lo ? umin : lo, vhi = umax < hi + 1 ? umax : hi + 1;
    int64_t prev = -1; /* the last pair found (its first t) */
    for (int64_t val = vlo; val <= vhi; val++) {
        /* the first t whose column is >= val (up) or <= val - 1 (down): the
         * pair (t - 1, t) is where the column passes val */
        int64_t a = 0, b = dy;
        while (a < b) {
            int64_t m = a + (b - a) / 2;
            int64_t u = col_at(xs, s, m);
            if (up ? u >= val : u <= val - 1) b = m;
            else a = m + 1;
        }
        if (a == 0 || a > dy) continue;
        int64_t ta = a - 1, tb = a;
        if (ta == prev) continue; /* a jump over more than one column: one pair */
        prev = ta;
        int64_t ua = col_at(xs, s, ta), ub = col_at(xs, s, tb);
        if (ua == ub) continue;
        /* the later point of the pair as listed, and the earlier */
        int64_t ul = flip ? ua : ub, ue = flip ? ub : ua;
        int64_t xf = ul < ue ? ul : ul - 1;
        if (xf < lo || xf > hi) continue;
        if (toggle_at(t, xf, ys + ta, h, w)) return -1;
    }
    return 0;
}

/* Rasterises the closed polygon xy[2k] (x, y pairs in pixels) on an h x w
 * grid, with the rule of pycocotools' rleFrPoly so that the runs are the
 * same: the boundary is traced on a 5x finer grid, the crossings with each
 * pixel column's centre line give the rows where the inside toggles, and
 * the sorted column-major toggle positions are the runs.  Memory and time
 * go with the toggles (at most one per edge and column), never with the
 * boundary's length (edge_toggles). */
static int rle_from_poly(sa1b_rle *r, const double *xy, size_t k, uint32_t h, uint32_t w,
                         sa1b_error *err)
{
    const double scale = 5;
    int rc = SA1B_ENOMEM;
    int *x = malloc(sizeof(int) * (k + 1)), *y = malloc(sizeof(int) * (k + 1));
    toggles tg = {NULL, 0, 0};
    uint32_t *b = NULL;
    if (!x || !y) goto out;
    /* a coordinate the fine grid's int cannot hold (NaN, inf, |c| beyond
     * ~4.29e8), or an edge of 2^31-1 steps or more, is refused: pycocotools'
     * undefined behaviour there became a boundary of billions of points
     * (gigabytes, minutes) or a crash */
    for (size_t j = 0; j < 2 * k; j++) {
        double f = scale * xy[j] + .5;
        if (!(f > (double)INT_MIN - 1 && f < (double)INT_MAX + 1)) {
            rc = sa1b_error_set(err, SA1B_ERANGE, -1,
                                "polygon: coordinate %zu (%g) is not a finite number within "
                                "+-4.29e8", j, xy[j]);
            goto out;
        }
        if (j % 2) y[j / 2] = (int)f;
        else x[j / 2] = (int)f;
    }
    x[k] = k ? x[0] : 0;
    y[k] = k ? y[0] : 0;
    for (size_t j = 0; j < k; j++) {
        long long dx = llabs((long long)x[j] - x[j + 1]), dy = llabs((long long)y[j] - y[j + 1]);
        if (dx >= INT_MAX || dy >= INT_MAX) {
            rc = sa1b_error_set(err, SA1B_ERANGE, -1,
                                "polygon: edge %zu is longer than 2^31-2 steps of 1/5 pixel", j);
            goto out;
        }
    }
    for (size_t j = 0; j < k; j++)
        if (edge_toggles(&tg, x[j], y[j], x[j + 1], y[j + 1], h, w)) goto out;
    if (toggles_push(&tg, (uint32_t)((uint64_t)h * w))) goto out;
    uint32_t *a = tg.a;
    size_t nt = tg.n;
    qsort(a, nt, sizeof *a, cmp_u32);
    uint32_t prev = 0;
    for (size_t j = 0; j < nt; j++) {
        uint32_t t = a[j];
        a[j] -= prev;
        prev = t;
    }
    /* a zero run toggles twice: the run after it continues the one before */
    b = malloc(sizeof(uint32_t) * nt);
    if (!b) goto out;
    size_t nb = 0, j = 0;
    b[nb++] = a[j++];
    while (j < nt) {
        if (a[j] > 0) {
            b[nb++] = a[j++];
        } else {
            j++;
            if (j < nt) b[nb - 1] += a[j++];
        }
    }
    rc = sa1b_rle_set_runs(r, h, w, b, nb, err);
out:
    if (rc == SA1B_ENOMEM) sa1b_error_set(err, SA1B_ENOMEM, -1, "polygon: out of memory");
    free(x);
    free(y);
    free(tg.a);
    free(b);
    return rc;
}

static int sides_of(PyObject *h_o, PyObject *w_o, uint32_t *h, uint32_t *w)
{
    if (side_from(h_o, h) < 0 || side_from(w_o, w) < 0) return -1;
    if ((uint64_t)*h * *w > SA1B_RLE_MAX_PIXELS) {
        PyErr_Format(PyExc_ValueError, "mask of %ux%u: more than 2^32-1 pixels", *h, *w);
        return -1;
    }
    return 0;
}

/* _fr_bbox(bb [n, 4] float64, h, w) -> list of RLE dicts */
static PyObject *m_fr_bbox(PyObject *self, PyObject *args)
{
    PyObject *bb_o, *h_o, *w_o;
    uint32_t h, w;
    if (!PyArg_ParseTuple(args, "OOO", &bb_o, &h_o, &w_o)) return NULL;
    if (sides_of(h_o, w_o, &h, &w) < 0) return NULL;
    Py_buffer bb;
    if (boxes_of(bb_o, &bb, "frBbox") < 0) return NULL;
    Py_ssize_t n = bb.shape[0];
    PyObject *ret = NULL;
    sa1b_rle *rles = rles_new(n);
    if (rles) {
        sa1b_error err;
        sa1b_error_clear(&err);
        int rc = SA1B_OK;
        const double *B = bb.buf;
        for (Py_ssize_t i = 0; i < n && rc == SA1B_OK; i++) {
            double xs = B[4 * i], ys = B[4 * i + 1];
            double xe = xs + B[4 * i + 2], ye = ys + B[4 * i + 3];
            double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
            rc = rle_from_poly(&rles[i], xy, 4, h, w, &err);
        }
        if (rc != SA1B_OK) sa1bpy_raise(&err, "frBbox");
        else ret = rles_to_list(rles, n);
        rles_free(rles, n);
    }
    PyBuffer_Release(&bb);
    return ret;
}

/* _fr_poly(polys, h, w): polys a list of float64 1-D arrays */
static PyObject *m_fr_poly(PyObject *self, PyObject *args)
{
    PyObject *polys, *h_o, *w_o;
    uint32_t h, w;
    if (!PyArg_ParseTuple(args, "OOO", &polys, &h_o, &w_o)) return NULL;
    if (sides_of(h_o, w_o, &h, &w) < 0) return NULL;
    PyObject *seq = items_of(polys, "frPoly: expected a list of polygons");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *ret = NULL;
    sa1b_rle *rles = rles_new(n);
    if (!rles) goto out;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_buffer pb;
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &pb,
                               PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto out;
        if (pb.ndim != 1 || pb.itemsize != 8 || strcmp(pb.format, "d") != 0) {
            PyBuffer_Release(&pb);
            PyErr_Format(PyExc_ValueError, "frPoly: polygon %zd must be float64 [2k]", i);
            goto out;
        }
        sa1b_error err;
        sa1b_error_clear(&err);
        int rc = rle_from_poly(&rles[i], pb.buf, (size_t)pb.shape[0] / 2, h, w, &err);
        PyBuffer_Release(&pb);
        if (rc != SA1B_OK) {
            sa1bpy_raise(&err, "frPoly");
            goto out;
        }
    }
    ret = rles_to_list(rles, n);
out:
    rles_free(rles, n);
    Py_DECREF(seq);
    return ret;
}

/* _fr_uncompressed(objs): [{'size': [h, w], 'counts': [runs]}] -> RLE dicts */
static PyObject *m_fr_uncompressed(PyObject *self, PyObject *objs)
{
    PyObject *seq = items_of(objs, "frUncompressedRLE: expected a list");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *ret = NULL;
    sa1b_rle *rles = rles_new(n);
    if (!rles) goto out;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *obj = PySequence_Fast_GET_ITEM(seq, i);
        uint32_t h, w;
        if (size_of(obj, &h, &w) < 0) goto out;
        PyObject *counts = PyMapping_GetItemString(obj, "counts");
        if (!counts) goto out;
        PyObject *cs = items_of(counts, "frUncompressedRLE: counts must be a list of runs");
        Py_DECREF(counts);
        if (!cs) goto out;
        Py_ssize_t nc = PySequence_Fast_GET_SIZE(cs);
        uint32_t *runs = PyMem_Malloc(sizeof(uint32_t) * (nc ? (size_t)nc : 1));
        int ok = runs != NULL;
        if (!runs) PyErr_NoMemory();
        for (Py_ssize_t j = 0; ok && j < nc; j++) {
            if (side_from(PySequence_Fast_GET_ITEM(cs, j), &runs[j]) < 0) {
                PyErr_Format(PyExc_ValueError, "rles[%zd]: run %zd is not in 0..2^32-1", i, j);
                ok = 0;
            }
        }
        Py_DECREF(cs);
        sa1b_error err;
        sa1b_error_clear(&err);
        if (ok && sa1b_rle_set_runs(&rles[i], h, w, runs, (size_t)nc, &err) != SA1B_OK) {
            char what[48];
            snprintf(what, sizeof what, "rles[%zd]", i);
            sa1bpy_raise(&err, what);
            ok = 0;
        }
        PyMem_Free(runs);
        if (!ok) goto out;
    }
    ret = rles_to_list(rles, n);
out:
    rles_free(rles, n);
    Py_DECREF(seq);
    return ret;
}

PyMethodDef sa1bpy_mask_methods[] = {
    {"_encode", m_encode, METH_O, "_encode(mask [h, w, n] uint8 Fortran order) -> [RLE]"},
    {"_decode", m_decode, METH_VARARGS,
     "_decode(rles, rh=0, rw=0, mode=0) -> [h, w, n] uint8 Fortran order; mode 0 full, "
     "1 nearest to rh x rw, 2 area coverage >= 1/2"},
    {"_area", m_area, METH_O, "_area(rles) -> uint32 [n]"},
    {"_bbox", m_bbox, METH_VARARGS, "_bbox(rles, sa1b=False) -> float64 [n, 4]"},
    {"_rle_iou", m_rle_iou, METH_VARARGS, "_rle_iou(dt, gt, iscrowd) -> float64 [m*n]"},
    {"_bb_iou", m_bb_iou, METH_VARARGS, "_bb_iou(dt, gt, iscrowd) -> float64 [m*n]"},
    {"_merge", m_merge, METH_VARARGS, "_merge(rles, intersect=False) -> RLE"},
    {"_fr_bbox", m_fr_bbox, METH_VARARGS, "_fr_bbox(bb [n, 4] float64, h, w) -> [RLE]"},
    {"_fr_poly", m_fr_poly, METH_VARARGS, "_fr_poly([float64 [2k]], h, w) -> [RLE]"},
    {"_fr_uncompressed", m_fr_uncompressed, METH_O, "_fr_uncompressed([{size, counts: [runs]}]) -> [RLE]"},
    {NULL, NULL, 0, NULL}};
