/*
 * sa1bpy.h - what the parts of the sa1b._sa1b extension share.
 *
 * Implements: the error mapping (a libsa1b error becomes ValueError,
 * OSError or MemoryError carrying the library's message), the View type (a
 * read-only or writable buffer over memory owned by another Python object,
 * the base of every zero-copy numpy array the extension hands out), and the
 * calls into numpy made through its Python API (the extension is built
 * without numpy's C headers, so one binary works with any numpy).
 */
#ifndef SA1BPY_H
#define SA1BPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "sa1b_error.h"

/* Raises the Python exception for err (SA1B_EIO: OSError, SA1B_ENOMEM:
 * MemoryError, anything else: ValueError); the message is
 * "<what>: <err->msg>" or err->msg when what is NULL.  Returns NULL. */
PyObject *sa1bpy_raise(const sa1b_error *err, const char *what);

/* A numpy array of dtype and shape (a tuple) viewing nbytes at ptr without
 * copying; the array keeps owner alive (through a View as its base).
 * readonly: the array refuses writes. */
PyObject *sa1bpy_view(PyObject *owner, void *ptr, Py_ssize_t nbytes, const char *dtype,
                      PyObject *shape, int readonly);

/* numpy.empty(shape, dtype, order) with its buffer acquired writable into
 * *buf (release with PyBuffer_Release).  order 'C' or 'F'. */
PyObject *sa1bpy_empty(PyObject *shape, const char *dtype, char order, Py_buffer *buf);

/* Cached numpy attribute (e.g. "frombuffer"); borrowed reference. */
PyObject *sa1bpy_numpy(const char *name);

extern PyTypeObject Sa1bView_Type;
extern PyTypeObject Sa1bShard_Type;
extern PyTypeObject Sa1bLoader_Type;
extern PyTypeObject Sa1bBatchOwner_Type;

/* Method tables of the parts (NULL-terminated), merged by module.c. */
extern PyMethodDef sa1bpy_mask_methods[];
extern PyMethodDef sa1bpy_shard_methods[];

#endif
