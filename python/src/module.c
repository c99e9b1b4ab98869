/*
 * module.c - sa1b._sa1b: module init, the error mapping, the View buffer
 * type and the numpy helpers (see sa1bpy.h).
 */
#include "sa1bpy.h"

#include <stdio.h>
#include <string.h>

/* ---- errors ---------------------------------------------------------------- */

/* s decoded (bytes that are not UTF-8 as \xHH, backslashreplace) with its
 * control characters escaped as \n, \r, \t or \xHH: one line, whatever a
 * path or a counts string in it held. */
static PyObject *one_line(const char *s)
{
    size_t n = strlen(s);
    char *e = PyMem_Malloc(4 * n + 1);
    if (!e) return PyErr_NoMemory();
    sa1b_escape(e, 4 * n + 1, s, n);
    PyObject *u = PyUnicode_DecodeUTF8(e, (Py_ssize_t)strlen(e), "backslashreplace");
    PyMem_Free(e);
    return u;
}

PyObject *sa1bpy_raise(const sa1b_error *err, const char *what)
{
    PyObject *type = PyExc_ValueError;
    if (err->code == SA1B_EIO) type = PyExc_OSError;
    else if (err->code == SA1B_ENOMEM) type = PyExc_MemoryError;
    const char *msg = err->msg[0] ? err->msg : sa1b_strerror(err->code);
    /* the message may quote a path that is not UTF-8: escaped, not lost
     * (PyErr_SetString raised the exception without any message); and one
     * that holds a newline or another control character: escaped too */
    PyObject *m = one_line(msg), *w = what && m ? one_line(what) : NULL;
    if (!m || (what && !w)) {
        Py_XDECREF(m);
        return NULL;
    }
    if (what) PyErr_Format(type, "%U: %U", w, m);
    else PyErr_SetObject(type, m);
    Py_XDECREF(w);
    Py_DECREF(m);
    return NULL;
}

/* ---- View: a buffer over memory that another object owns --------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *owner; /* keeps the memory alive */
    void *ptr;
    Py_ssize_t len;
    int readonly;
} Sa1bView;

static int view_getbuffer(PyObject *self, Py_buffer *b, int flags)
{
    Sa1bView *v = (Sa1bView *)self;
    return PyBuffer_FillInfo(b, self, v->ptr, v->len, v->readonly, flags);
}

static PyBufferProcs view_as_buffer = {view_getbuffer, NULL};

static void view_dealloc(PyObject *self)
{
    Sa1bView *v = (Sa1bView *)self;
    Py_XDECREF(v->owner);
    Py_TYPE(self)->tp_free(self);
}

static PyObject *view_get_owner(PyObject *self, void *closure)
{
    Sa1bView *v = (Sa1bView *)self;
    return Py_NewRef(v->owner ? v->owner : Py_None);
}

static PyGetSetDef view_getset[] = {
    {"owner", view_get_owner, NULL, "the object whose memory this views", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject Sa1bView_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sa1b._sa1b.View",
    .tp_basicsize = sizeof(Sa1bView),
    .tp_dealloc = view_dealloc,
    .tp_as_buffer = &view_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Memory of a shard map or a loader batch, exported as a buffer; "
              "numpy arrays over it keep its owner alive.",
    .tp_getset = view_getset,
};

/* ---- numpy through its Python API ------------------------------------------ */

static PyObject *numpy_module;

PyObject *sa1bpy_numpy(const char *name)
{
    if (!numpy_module) {
        numpy_module = PyImport_ImportModule("numpy");
        if (!numpy_module) return NULL;
    }
    PyObject *f = PyObject_GetAttrString(numpy_module, name);
    if (!f) return NULL;
    Py_DECREF(f); /* the module keeps it */
    return f;
}

PyObject *sa1bpy_view(PyObject *owner, void *ptr, Py_ssize_t nbytes, const char *dtype,
                      PyObject *shape, int readonly)
{
    PyObject *frombuffer = sa1bpy_numpy("frombuffer");
    if (!frombuffer) return NULL;
    Sa1bView *v = PyObject_New(Sa1bView, &Sa1bView_Type);
    if (!v) return NULL;
    v->owner = Py_NewRef(owner);
    /* frombuffer refuses a NULL pointer even for 0 bytes */
    static char empty[64];
    v->ptr = nbytes ? ptr : empty;
    v->len = nbytes;
    v->readonly = readonly || !nbytes;
    PyObject *flat = PyObject_CallFunction(frombuffer, "Os", (PyObject *)v, dtype);
    Py_DECREF(v);
    if (!flat) return NULL;
    /* shaped in place, so that the array's base is the View itself */
    if (PyObject_SetAttrString(flat, "shape", shape) < 0) {
        Py_DECREF(flat);
        return NULL;
    }
    return flat;
}

PyObject *sa1bpy_empty(PyObject *shape, const char *dtype, char order, Py_buffer *buf)
{
    PyObject *empty = sa1bpy_numpy("empty");
    if (!empty) return NULL;
    char ord[2] = {order, 0};
    PyObject *arr = PyObject_CallFunction(empty, "Oss", shape, dtype, ord);
    if (!arr) return NULL;
    int flags = PyBUF_WRITABLE | (order == 'F' ? PyBUF_F_CONTIGUOUS : PyBUF_C_CONTIGUOUS);
    if (PyObject_GetBuffer(arr, buf, flags) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* ---- the module --------------------------------------------------------------- */

static PyObject *version(PyObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(PACKAGE_VERSION);
}

static PyMethodDef module_methods[] = {
    {"version", version, METH_NOARGS, "version() -> str: the libsa1b version built in"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "sa1b._sa1b",
    "The C part of the sa1b package: thin wrappers over libsa1b.", -1, module_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__sa1b(void);
PyMODINIT_FUNC PyInit__sa1b(void)
{
    PyTypeObject *types[] = {&Sa1bView_Type, &Sa1bShard_Type, &Sa1bLoader_Type,
                             &Sa1bBatchOwner_Type};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    if (PyModule_AddFunctions(m, sa1bpy_mask_methods) < 0 ||
        PyModule_AddFunctions(m, sa1bpy_shard_methods) < 0)
        goto fail;
    if (PyModule_AddObjectRef(m, "View", (PyObject *)&Sa1bView_Type) < 0 ||
        PyModule_AddObjectRef(m, "Shard", (PyObject *)&Sa1bShard_Type) < 0 ||
        PyModule_AddObjectRef(m, "Loader", (PyObject *)&Sa1bLoader_Type) < 0 ||
        PyModule_AddObjectRef(m, "Batch", (PyObject *)&Sa1bBatchOwner_Type) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
