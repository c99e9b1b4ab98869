/*
 * shard.c - sa1b.Shard: a shard file mapped read-only and validated by
 * sa1b_shard_open; images and packed masks as numpy views of the map (no
 * copy: each view keeps the Shard, hence the map, alive), unpacked masks
 * and the mask table as new arrays; sa1b.verify(path).
 */
#include "sa1bpy.h"
#include "sa1b_prep.h"

#include <string.h>

#include "sa1b_shard.h"

typedef struct {
    PyObject_HEAD
    sa1b_shard *s;
    PyObject *path; /* str */
} Sa1bShard;

static int shard_init(PyObject *self, PyObject *args, PyObject *kw)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    static char *kwlist[] = {"path", NULL};
    PyObject *path_o;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&:Shard", kwlist, PyUnicode_FSDecoder, &path_o))
        return -1;
    if (sh->s) { /* views of the map may live: never unmap it under them */
        Py_DECREF(path_o);
        PyErr_SetString(PyExc_ValueError, "Shard: already opened");
        return -1;
    }
    PyObject *bytes = PyUnicode_EncodeFSDefault(path_o);
    if (!bytes) {
        Py_DECREF(path_o);
        return -1;
    }
    sa1b_shard *s = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    const char *p = PyBytes_AS_STRING(bytes);
    Py_BEGIN_ALLOW_THREADS
    rc = sa1b_shard_open(&s, p, &err);
    Py_END_ALLOW_THREADS
    Py_DECREF(bytes);
    if (rc == SA1B_OK && sh->s) { /* another thread's __init__ opened it meanwhile */
        sa1b_shard_close(s);
        Py_DECREF(path_o);
        PyErr_SetString(PyExc_ValueError, "Shard: already opened");
        return -1;
    }
    if (rc != SA1B_OK) {
        /* the path as given, a name that is not UTF-8 escaped */
        PyObject *what = PyUnicode_FromFormat("'%U'", path_o);
        PyObject *utf8 = what ? PyUnicode_AsEncodedString(what, "utf-8", "backslashreplace") : NULL;
        PyErr_Clear();
        sa1bpy_raise(&err, utf8 ? PyBytes_AS_STRING(utf8) : NULL);
        Py_XDECREF(utf8);
        Py_XDECREF(what);
        Py_DECREF(path_o);
        return -1;
    }
    Py_XSETREF(sh->path, path_o);
    sh->s = s;
    return 0;
}

static void shard_dealloc(PyObject *self)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    sa1b_shard_close(sh->s);
    Py_XDECREF(sh->path);
    Py_TYPE(self)->tp_free(self);
}

static const sa1b_shard_info *info_of(Sa1bShard *sh)
{
    if (!sh->s) {
        PyErr_SetString(PyExc_ValueError, "Shard: not opened");
        return NULL;
    }
    return sa1b_shard_get_info(sh->s);
}

static Py_ssize_t shard_len(PyObject *self)
{
    const sa1b_shard_info *in = info_of((Sa1bShard *)self);
    return in ? (Py_ssize_t)in->n_images : -1;
}

/* Index i (negative from the end) into 0..n-1; IndexError otherwise. */
static int index_of(Sa1bShard *sh, Py_ssize_t i, uint64_t *out)
{
    const sa1b_shard_info *in = info_of(sh);
    if (!in) return -1;
    Py_ssize_t n = (Py_ssize_t)in->n_images;
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
        PyErr_Format(PyExc_IndexError, "image index out of range (shard has %zd images)", n);
        return -1;
    }
    *out = (uint64_t)i;
    return 0;
}

static int image_of(Sa1bShard *sh, PyObject *args, sa1b_shard_image_view *im)
{
    Py_ssize_t i;
    uint64_t idx;
    if (!PyArg_ParseTuple(args, "n", &i) || index_of(sh, i, &idx) < 0) return -1;
    sa1b_error err;
    if (sa1b_shard_image(sh->s, idx, im, &err) != SA1B_OK) {
        sa1bpy_raise(&err, NULL);
        return -1;
    }
    return 0;
}

static PyObject *shard_meta(PyObject *self, PyObject *args)
{
    sa1b_shard_image_view im;
    if (image_of((Sa1bShard *)self, args, &im) < 0) return NULL;
    return Py_BuildValue("{s:K,s:L,s:I,s:I,s:d,s:s#,s:I,s:K,s:K,s:K}", "index",
                         (unsigned long long)im.index, "image_id", (long long)im.image_id,
                         "orig_w", im.orig_w, "orig_h", im.orig_h, "scale", (double)im.scale,
                         "file_name", im.file_name, (Py_ssize_t)im.file_name_len, "n_masks",
                         im.n_masks, "first_mask", (unsigned long long)im.first_mask,
                         "payload_offset", (unsigned long long)im.payload_offset, "payload_len",
                         (unsigned long long)im.payload_len);
}

static PyObject *shard_image(PyObject *self, PyObject *args)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    sa1b_shard_image_view im;
    if (image_of(sh, args, &im) < 0) return NULL;
    const sa1b_shard_info *in = sa1b_shard_get_info(sh->s);
    PyObject *shape = in->image_format == SA1B_SHARD_RAW
                          ? Py_BuildValue("(III)", in->image_size, in->image_size, 3)
                          : Py_BuildValue("(K)", (unsigned long long)im.payload_len);
    if (!shape) return NULL;
    PyObject *arr = sa1bpy_view(self, (void *)im.payload, (Py_ssize_t)im.payload_len, "uint8",
                                shape, 1);
    Py_DECREF(shape);
    return arr;
}

static PyObject *shard_masks(PyObject *self, PyObject *args, PyObject *kw)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    static char *kwlist[] = {"i", "packed", "size", "resample", NULL};
    Py_ssize_t i, size = PY_SSIZE_T_MIN; /* not given: the shard's own R */
    int packed = 0;
    const char *resample = "area";
    uint64_t idx;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "n|pns:masks", kwlist, &i, &packed, &size, &resample) ||
        index_of(sh, i, &idx) < 0)
        return NULL;
    int mode = strcmp(resample, "area") == 0 ? SA1B_MASK_AREA : strcmp(resample, "nearest") == 0 ? SA1B_MASK_NEAREST : -1;
    if (mode < 0) { /* quoted as repr() does: control characters escaped, one line */
        PyObject *r = PyUnicode_FromString(resample);
        if (r) PyErr_Format(PyExc_ValueError, "resample must be 'area' or 'nearest', not %R", r);
        Py_XDECREF(r);
        return NULL;
    }
    if (size != PY_SSIZE_T_MIN && (size < 1 || size > 4096))
        return PyErr_Format(PyExc_ValueError, "size %zd is not in 1..4096", size);
    sa1b_shard_image_view im;
    sa1b_error err;
    if (sa1b_shard_image(sh->s, idx, &im, &err) != SA1B_OK) return sa1bpy_raise(&err, NULL);
    const sa1b_shard_info *in = sa1b_shard_get_info(sh->s);
    if (packed) {
        if (in->mask_format != SA1B_SHARD_PACKED)
            return PyErr_Format(PyExc_ValueError, "packed=True: this shard (version %u) stores its masks as runs, "
                                "not as packed bits", in->version);
        if (size > 0 && (uint32_t)size != in->mask_size)
            return PyErr_Format(PyExc_ValueError, "packed=True gives the stored masks: size must be %u or left out",
                                in->mask_size);
        PyObject *shape = Py_BuildValue("(II)", im.n_masks, in->mask_stride);
        if (!shape) return NULL;
        PyObject *arr = sa1bpy_view(self, (void *)im.mask_data, (Py_ssize_t)im.masks_len,
                                    "uint8", shape, 1);
        Py_DECREF(shape);
        return arr;
    }
    uint32_t R = size > 0 ? (uint32_t)size : in->mask_size;
    if (R == 0)
        return PyErr_Format(PyExc_ValueError, "this shard keeps each mask at its source size: give size=R "
                            "(and resample='area' or 'nearest') for R x R masks");
    PyObject *shape = Py_BuildValue("(III)", im.n_masks, R, R);
    if (!shape) return NULL;
    Py_buffer b;
    PyObject *arr = sa1bpy_empty(shape, "uint8", 'C', &b);
    Py_DECREF(shape);
    if (!arr) return NULL;
    uint8_t *dst = b.buf;
    for (uint32_t j = 0; j < im.n_masks; j++) {
        sa1b_shard_mask_view mv;
        int rc = sa1b_shard_mask(sh->s, idx, j, &mv, &err);
        /* the stored size: decoded as stored; another (or a source-size shard): resampled */
        if (rc == SA1B_OK)
            rc = R == in->mask_size ? sa1b_shard_decode_mask(sh->s, &mv, dst + (size_t)j * R * R, &err)
                                    : sa1b_shard_resample_mask(sh->s, &mv, R, mode, dst + (size_t)j * R * R, &err);
        if (rc != SA1B_OK) {
            PyBuffer_Release(&b);
            Py_DECREF(arr);
            return sa1bpy_raise(&err, NULL);
        }
    }
    PyBuffer_Release(&b);
    return arr;
}

/* One mask-table row as numpy sees it (MASK_DTYPE below). */
typedef struct mask_row {
    int64_t id;
    uint64_t image_index;
    int64_t orig_area;
    uint64_t data_offset;
    float area, bbox[4], orig_bbox[4], predicted_iou, stability_score, point[2];
} mask_row;

static PyObject *mask_dtype(void)
{
    PyObject *dtype = sa1bpy_numpy("dtype");
    if (!dtype) return NULL;
    PyObject *spec = Py_BuildValue(
        "{s:[ssssssssss],s:[ssssssssss],s:[nnnnnnnnnn],s:n}", "names", "id", "image_index",
        "orig_area", "data_offset", "area", "bbox", "orig_bbox", "predicted_iou",
        "stability_score", "point", "formats", "<i8", "<u8", "<i8", "<u8", "<f4", "(4,)<f4",
        "(4,)<f4", "<f4", "<f4", "(2,)<f4", "offsets", offsetof(mask_row, id),
        offsetof(mask_row, image_index), offsetof(mask_row, orig_area),
        offsetof(mask_row, data_offset), offsetof(mask_row, area), offsetof(mask_row, bbox),
        offsetof(mask_row, orig_bbox), offsetof(mask_row, predicted_iou),
        offsetof(mask_row, stability_score), offsetof(mask_row, point), "itemsize",
        sizeof(mask_row));
    if (!spec) return NULL;
    PyObject *dt = PyObject_CallOneArg(dtype, spec);
    Py_DECREF(spec);
    return dt;
}

static PyObject *shard_mask_table(PyObject *self, PyObject *noargs)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    const sa1b_shard_info *in = info_of(sh);
    if (!in) return NULL;
    PyObject *dt = mask_dtype();
    if (!dt) return NULL;
    PyObject *empty = sa1bpy_numpy("empty");
    PyObject *arr = empty ? PyObject_CallFunction(empty, "(K)O", (unsigned long long)in->n_masks, dt)
                          : NULL;
    Py_DECREF(dt);
    if (!arr) return NULL;
    Py_buffer b;
    if (PyObject_GetBuffer(arr, &b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    mask_row *rows = b.buf;
    for (uint64_t i = 0, k = 0; i < in->n_images; i++) {
        sa1b_shard_image_view im;
        sa1b_error err;
        if (sa1b_shard_image(sh->s, i, &im, &err) != SA1B_OK) {
            PyBuffer_Release(&b);
            Py_DECREF(arr);
            return sa1bpy_raise(&err, NULL);
        }
        for (uint32_t j = 0; j < im.n_masks; j++, k++) {
            sa1b_shard_mask_view mv;
            if (sa1b_shard_mask(sh->s, i, j, &mv, &err) != SA1B_OK) {
                PyBuffer_Release(&b);
                Py_DECREF(arr);
                return sa1bpy_raise(&err, NULL);
            }
            mask_row *r = &rows[mv.index];
            r->id = mv.id;
            r->image_index = mv.image_index;
            r->orig_area = mv.orig_area;
            r->data_offset = mv.data_offset;
            r->area = mv.area;
            memcpy(r->bbox, mv.bbox, sizeof r->bbox);
            memcpy(r->orig_bbox, mv.orig_bbox, sizeof r->orig_bbox);
            r->predicted_iou = mv.predicted_iou;
            r->stability_score = mv.stability_score;
            memcpy(r->point, mv.point, sizeof r->point);
        }
    }
    PyBuffer_Release(&b);
    return arr;
}

static PyObject *shard_verify_image(PyObject *self, PyObject *args)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    Py_ssize_t i;
    uint64_t idx;
    if (!PyArg_ParseTuple(args, "n", &i) || index_of(sh, i, &idx) < 0) return NULL;
    sa1b_error err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sa1b_shard_verify_image(sh->s, idx, &err);
    Py_END_ALLOW_THREADS
    if (rc != SA1B_OK) return sa1bpy_raise(&err, NULL);
    Py_RETURN_NONE;
}

static PyObject *get_path(PyObject *self, void *c)
{
    Sa1bShard *sh = (Sa1bShard *)self;
    return Py_NewRef(sh->path ? sh->path : Py_None);
}

/* Header fields, selected by the closure. */
enum { F_IMAGE_SIZE, F_MASK_SIZE, F_FORMAT, F_N_MASKS, F_FILE_SIZE, F_PROVENANCE, F_VERSION };

static PyObject *get_info(PyObject *self, void *c)
{
    const sa1b_shard_info *in = info_of((Sa1bShard *)self);
    if (!in) return NULL;
    switch ((int)(intptr_t)c) {
    case F_IMAGE_SIZE: return PyLong_FromUnsignedLong(in->image_size);
    case F_MASK_SIZE: return PyLong_FromUnsignedLong(in->mask_size);
    case F_FORMAT: return PyUnicode_FromString(in->image_format == SA1B_SHARD_RAW ? "raw" : "jpeg");
    case F_N_MASKS: return PyLong_FromUnsignedLongLong(in->n_masks);
    case F_FILE_SIZE: return PyLong_FromUnsignedLongLong(in->file_size);
    case F_PROVENANCE:
        return PyUnicode_DecodeUTF8(in->provenance, (Py_ssize_t)in->provenance_len, "replace");
    default: return PyLong_FromUnsignedLong(in->version);
    }
}

#define INFO_GETTER(name, f, doc) {name, get_info, NULL, doc, (void *)(intptr_t)(f)}
static PyGetSetDef shard_getset[] = {
    {"path", get_path, NULL, "the path the shard was opened from", NULL},
    INFO_GETTER("image_size", F_IMAGE_SIZE, "S: images are S x S x 3"),
    INFO_GETTER("mask_size", F_MASK_SIZE, "R: masks are R x R"),
    INFO_GETTER("format", F_FORMAT, "image payloads: 'raw' or 'jpeg'"),
    INFO_GETTER("n_masks", F_N_MASKS, "masks of all images"),
    INFO_GETTER("file_size", F_FILE_SIZE, "bytes"),
    INFO_GETTER("provenance", F_PROVENANCE, "the provenance JSON text"),
    INFO_GETTER("version", F_VERSION, "format version"),
    {NULL, NULL, NULL, NULL, NULL}};

static PyMethodDef shard_methods[] = {
    {"meta", shard_meta, METH_VARARGS,
     "meta(i) -> dict: image i's row (image_id, orig_w, orig_h, scale, file_name, n_masks, "
     "first_mask, payload_offset, payload_len)"},
    {"image", shard_image, METH_VARARGS,
     "image(i) -> read-only uint8 view of the map: [S, S, 3] RGB (raw shards) or the JPEG "
     "bytes [len] (jpeg shards)"},
    {"masks", (PyCFunction)(void (*)(void))shard_masks, METH_VARARGS | METH_KEYWORDS,
     "masks(i, packed=False[, size], resample='area') -> [n, R, R] uint8 0/1 (a new array; "
     "R the shard's mask size; a source-size shard needs size=R: its runs resampled as sa1b-shard "
     "would at R), or with packed=True the stored bits of a version-1 shard as a read-only view "
     "[n, mask_stride] (bit k of the row-major mask in byte k/8, LSB first)"},
    {"mask_table", shard_mask_table, METH_NOARGS,
     "mask_table() -> structured array of every mask row (id, image_index, orig_area, "
     "data_offset, area, bbox, orig_bbox, predicted_iou, stability_score, point)"},
    {"verify_image", shard_verify_image, METH_VARARGS,
     "verify_image(i): checks image i's payload and masks against their CRC32C (ValueError)"},
    {NULL, NULL, 0, NULL}};

static PySequenceMethods shard_as_sequence = {.sq_length = shard_len};

PyTypeObject Sa1bShard_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sa1b.Shard",
    .tp_basicsize = sizeof(Sa1bShard),
    .tp_dealloc = shard_dealloc,
    .tp_as_sequence = &shard_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Shard(path): a shard file, memory-mapped read-only and validated "
              "(ValueError or OSError naming the problem otherwise).",
    .tp_methods = shard_methods,
    .tp_getset = shard_getset,
    .tp_init = shard_init,
    .tp_new = PyType_GenericNew,
};

/* verify(path): what sa1b-verify checks, in this thread. */
static PyObject *m_verify(PyObject *self, PyObject *arg)
{
    PyObject *bytes;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    const char *path = PyBytes_AS_STRING(bytes);
    sa1b_shard *s = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sa1b_shard_open(&s, path, &err);
    if (rc == SA1B_OK) rc = sa1b_shard_verify_layout(s, &err);
    if (rc == SA1B_OK) {
        uint64_t n = sa1b_shard_get_info(s)->n_images;
        for (uint64_t i = 0; i < n && rc == SA1B_OK; i++) rc = sa1b_shard_verify_image(s, i, &err);
    }
    sa1b_shard_close(s);
    Py_END_ALLOW_THREADS
    PyObject *ret = NULL;
    if (rc != SA1B_OK) {
        PyObject *what = PyUnicode_FromFormat("'%s'", path);
        sa1bpy_raise(&err, what ? PyUnicode_AsUTF8(what) : NULL);
        Py_XDECREF(what);
    } else {
        ret = Py_NewRef(Py_None);
    }
    Py_DECREF(bytes);
    return ret;
}

PyMethodDef sa1bpy_shard_methods[] = {
    {"verify", m_verify, METH_O,
     "verify(path): the checks of sa1b-verify (structure, layout, every CRC32C); "
     "ValueError or OSError naming the first problem"},
    {NULL, NULL, 0, NULL}};
