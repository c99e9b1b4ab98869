/*
 * loader.c - sa1b.Loader: the C prefetching loader as a Python iterator of
 * dicts of numpy arrays that view the loader's batch buffers (no copy).
 *
 * Lifetime.  Each delivered batch is owned by a Batch object; every array
 * of the batch's dict has a View of it as its base, so the Batch lives as
 * long as any array (or the dict) does, and its deallocation gives the
 * buffer back to the loader (sa1b_loader_release).  A Batch holds a
 * reference to its Loader, so the C loader, which frees every buffer when
 * closed, is closed only once no batch is left (close() refuses while one
 * is).  The C loader never recycles a buffer its caller holds: holding all
 * `depth` of them and asking for another raises ValueError saying so.
 *
 * Threads.  The GIL is released while next() waits for the workers (they
 * never touch Python).  One thread at a time may call next(); releases
 * from other threads (an array dying there) are safe: the C release takes
 * the loader's lock.
 *
 * Fork.  A child forked while a loader is open (multiprocessing, DataLoader
 * workers) inherits a copy of it without its worker threads: the copy is
 * never used there (next() raises RuntimeError) and never closed (joining
 * threads that are not there would wait for ever), only dropped.
 */
#include "sa1bpy.h"
#include "sa1b_prep.h"

#include <string.h>
#include <unistd.h>

#include "sa1b_loader.h"
#include "sa1b_manifest.h"

typedef struct {
    PyObject_HEAD
    sa1b_loader *L;
    Py_ssize_t held;    /* Batch objects alive */
    int busy;           /* a thread is inside next() */
    int done;           /* SA1B_EOF seen */
    int closing;        /* __exit__ ran while next() ran or batches lived: closed once neither is so */
    pid_t pid;          /* the process that opened L */
} Sa1bLoader;

typedef struct {
    PyObject_HEAD
    Sa1bLoader *loader; /* strong reference: the loader outlives its batches */
    sa1b_batch *batch;
} Sa1bBatch;

/* ---- Batch ------------------------------------------------------------------------ */

/* L was opened by the parent of this forked process: a copy whose workers
 * are not here */
static int forked(const Sa1bLoader *ld)
{
    return ld->L && ld->pid != getpid();
}

static void loader_free_c(Sa1bLoader *ld)
{
    sa1b_loader *L = ld->L;
    if (forked(ld)) { /* the parent's copy: dropped (its memory is this process's to leak) */
        ld->L = NULL;
        return;
    }
    ld->L = NULL;
    if (!L) return;
    Py_BEGIN_ALLOW_THREADS
    sa1b_loader_close(L); /* joins the workers */
    Py_END_ALLOW_THREADS
}

static void batch_dealloc(PyObject *self)
{
    Sa1bBatch *b = (Sa1bBatch *)self;
    if (b->loader) {
        Sa1bLoader *ld = b->loader;
        if (ld->L && !forked(ld)) sa1b_loader_release(ld->L, b->batch);
        ld->held--;
        if (ld->closing && ld->held == 0 && !ld->busy) loader_free_c(ld); /* the with block's close */
        Py_DECREF(ld);
    }
    Py_TYPE(self)->tp_free(self);
}

PyTypeObject Sa1bBatchOwner_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sa1b.Batch",
    .tp_basicsize = sizeof(Sa1bBatch),
    .tp_dealloc = batch_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch buffer of a Loader, held while any array of the batch lives; "
              "given back to the loader when the last one dies.",
};

/* ---- Loader ------------------------------------------------------------------------ */


/* paths: a str / os.PathLike (one shard) or a sequence of them, into
 * fs-encoded bytes objects (*list, a new list). */
static int paths_of(PyObject *paths, PyObject **list)
{
    PyObject *seq;
    if (PyUnicode_Check(paths) || PyBytes_Check(paths) || PyObject_HasAttrString(paths, "__fspath__"))
        seq = Py_BuildValue("(O)", paths);
    else
        seq = PySequence_Tuple(paths);
    if (!seq) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (!out) {
        Py_DECREF(seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = NULL;
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(seq, i), &b)) {
            Py_DECREF(out);
            Py_DECREF(seq);
            return -1;
        }
        PyList_SET_ITEM(out, i, b);
    }
    Py_DECREF(seq);
    *list = out;
    return 0;
}

/* o as an unsigned integer through __index__ (numpy's integers too);
 * (unsigned long long)-1 with an error set when it is not an integer or
 * is negative */
static unsigned long long index_arg(PyObject *o)
{
    PyObject *i = PyNumber_Index(o);
    if (!i) return (unsigned long long)-1;
    unsigned long long v = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    return v;
}

static int u32_arg(PyObject *o, const char *name, uint32_t *out)
{
    if (!o || o == Py_None) return 0;
    unsigned long long v = index_arg(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "Loader: %s must be an integer in 0..2^32-1", name);
        return -1;
    }
    if (v > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "Loader: %s must be an integer in 0..2^32-1", name);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int u64_arg(PyObject *o, const char *name, uint64_t *out)
{
    if (!o || o == Py_None) return 0;
    unsigned long long v = index_arg(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "Loader: %s must be an integer in 0..2^64-1", name);
        return -1;
    }
    *out = v;
    return 0;
}

static int loader_init(PyObject *self, PyObject *args, PyObject *kw)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    static char *kwlist[] = {"paths", "batch", "masks", "points", "seed", "epoch", "rank",
                             "world", "threads", "flip", "consumed", "epochs", "depth",
                             "normalize", "verify", "drop_last", "stored_point", "mask_size",
                             "mask_resample", NULL};
    PyObject *paths, *o_batch = NULL, *o_masks = NULL, *o_points = NULL, *o_seed = NULL,
                     *o_epoch = NULL, *o_rank = NULL, *o_world = NULL, *o_threads = NULL,
                     *o_consumed = NULL, *o_epochs = NULL, *o_depth = NULL, *o_mask_size = NULL;
    const char *mask_resample = "area";
    double flip = 0;
    int normalize = 0, verify = 0, drop_last = 0, stored_point = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOOOOOOOdOOOppppOs:Loader", kwlist, &paths,
                                     &o_batch, &o_masks, &o_points, &o_seed, &o_epoch, &o_rank,
                                     &o_world, &o_threads, &flip, &o_consumed, &o_epochs,
                                     &o_depth, &normalize, &verify, &drop_last, &stored_point,
                                     &o_mask_size, &mask_resample))
        return -1;
    if (ld->L) {
        PyErr_SetString(PyExc_ValueError, "Loader: already opened");
        return -1;
    }
    sa1b_loader_config cfg;
    sa1b_loader_config_init(&cfg);
    cfg.max_epochs = 1;
    if (u32_arg(o_batch, "batch", &cfg.batch_size) < 0 || u32_arg(o_masks, "masks", &cfg.max_masks) < 0 ||
        u32_arg(o_points, "points", &cfg.points) < 0 || u64_arg(o_seed, "seed", &cfg.seed) < 0 ||
        u64_arg(o_epoch, "epoch", &cfg.epoch) < 0 || u32_arg(o_rank, "rank", &cfg.rank) < 0 ||
        u32_arg(o_world, "world", &cfg.world) < 0 || u32_arg(o_threads, "threads", &cfg.threads) < 0 ||
        u64_arg(o_consumed, "consumed", &cfg.consumed) < 0 || u32_arg(o_depth, "depth", &cfg.depth) < 0)
        return -1;
    if (o_epochs == Py_None) cfg.max_epochs = 0; /* forever */
    else if (u64_arg(o_epochs, "epochs", &cfg.max_epochs) < 0) return -1;
    else if (o_epochs && cfg.max_epochs == 0) {
        PyErr_SetString(PyExc_ValueError, "Loader: epochs must be >= 1 (None: forever)");
        return -1;
    }
    if (o_world && o_world != Py_None && cfg.world == 0) {
        PyErr_SetString(PyExc_ValueError, "Loader: world must be >= 1");
        return -1;
    }
    if (o_threads && o_threads != Py_None && cfg.threads == 0) {
        PyErr_SetString(PyExc_ValueError, "Loader: threads must be >= 1 (None: automatic)");
        return -1;
    }
    if (o_depth && o_depth != Py_None && cfg.depth == 0) {
        PyErr_SetString(PyExc_ValueError, "Loader: depth must be >= 1 (None: threads + 2)");
        return -1;
    }
    /* masks at R x R from shards that keep them at their source size (or any R) */
    if (u32_arg(o_mask_size, "mask_size", &cfg.mask_size) < 0) return -1;
    if (o_mask_size && o_mask_size != Py_None && (cfg.mask_size == 0 || cfg.mask_size > 4096)) {
        PyErr_SetString(PyExc_ValueError, "Loader: mask_size must be in 1..4096 (None: the shards')");
        return -1;
    }
    if (strcmp(mask_resample, "area") == 0) cfg.mask_resample = SA1B_MASK_AREA;
    else if (strcmp(mask_resample, "nearest") == 0) cfg.mask_resample = SA1B_MASK_NEAREST;
    else {
        /* quoted as repr() does: control characters escaped, one line */
        PyObject *r = PyUnicode_FromString(mask_resample);
        if (r) PyErr_Format(PyExc_ValueError, "Loader: mask_resample must be 'area' or 'nearest', not %R", r);
        Py_XDECREF(r);
        return -1;
    }
    cfg.flip_prob = flip;
    cfg.normalize = normalize;
    cfg.verify = verify;
    cfg.drop_last = drop_last;
    cfg.stored_point = stored_point;
    PyObject *list;
    if (paths_of(paths, &list) < 0) return -1;
    Py_ssize_t n = PyList_GET_SIZE(list);
    const char **p = PyMem_Calloc(n ? (size_t)n : 1, sizeof *p);
    if (!p) {
        Py_DECREF(list);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) p[i] = PyBytes_AS_STRING(PyList_GET_ITEM(list, i));
    cfg.paths = p;
    cfg.n_paths = (size_t)n;
    if (n == 1 && sa1b_manifest_is_name(p[0])) { /* a manifest (*.json): its shards, checked against it */
        cfg.glob = p[0];
        cfg.paths = NULL;
        cfg.n_paths = 0;
    }
    sa1b_loader *L = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    if (n == 0) {
        rc = sa1b_error_set(&err, SA1B_EINVAL, -1, "Loader: no shards");
    } else {
        Py_BEGIN_ALLOW_THREADS
        rc = sa1b_loader_open(&L, &cfg, &err);
        Py_END_ALLOW_THREADS
    }
    PyMem_Free(p);
    Py_DECREF(list);
    if (rc != SA1B_OK) {
        sa1bpy_raise(&err, NULL);
        return -1;
    }
    if (ld->L) { /* another thread's __init__ opened one meanwhile: kept (replaced, its threads
                  * and buffers would leak) */
        Py_BEGIN_ALLOW_THREADS
        sa1b_loader_close(L);
        Py_END_ALLOW_THREADS
        PyErr_SetString(PyExc_ValueError, "Loader: already opened");
        return -1;
    }
    ld->L = L;
    ld->pid = getpid();
    ld->done = 0;
    ld->closing = 0;
    return 0;
}

static void loader_dealloc(PyObject *self)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    loader_free_c(ld); /* no Batch is left: each holds a reference */
    Py_TYPE(self)->tp_free(self);
}

static int ready(Sa1bLoader *ld)
{
    if (forked(ld)) {
        PyErr_Format(PyExc_RuntimeError,
                     "Loader: opened in process %ld, used in process %ld forked from it (its "
                     "worker threads are not there): open a Loader in the child "
                     "(sa1b.torch.ShardDataset opens one in each DataLoader worker)",
                     (long)ld->pid, (long)getpid());
        return -1;
    }
    if (!ld->L || ld->closing) {
        PyErr_SetString(PyExc_ValueError, "Loader: closed");
        return -1;
    }
    return 0;
}

/* dict[key] = a view of n elements of dtype at ptr, of the given shape */
static int put_view(PyObject *dict, PyObject *owner, const char *key, void *ptr, size_t bytes,
                    const char *dtype, PyObject *shape)
{
    if (!shape) return -1;
    PyObject *arr = sa1bpy_view(owner, ptr, (Py_ssize_t)bytes, dtype, shape, 0);
    Py_DECREF(shape);
    if (!arr) return -1;
    int rc = PyDict_SetItemString(dict, key, arr);
    Py_DECREF(arr);
    return rc;
}

static int put_u64(PyObject *dict, const char *key, unsigned long long v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (!o) return -1;
    int rc = PyDict_SetItemString(dict, key, o);
    Py_DECREF(o);
    return rc;
}

static PyObject *batch_dict(Sa1bBatch *owner)
{
    const sa1b_batch *b = owner->batch;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    PyObject *o = (PyObject *)owner;
    size_t B = b->B, M = b->M, K = b->K, S = b->S, R = b->R;
    int bad =
        (b->normalized
             ? put_view(d, o, "image", b->images, B * 3 * S * S * 4, "float32",
                        Py_BuildValue("(nnnn)", (Py_ssize_t)B, (Py_ssize_t)3, (Py_ssize_t)S, (Py_ssize_t)S))
             : put_view(d, o, "image", b->images, B * S * S * 3, "uint8",
                        Py_BuildValue("(nnnn)", (Py_ssize_t)B, (Py_ssize_t)S, (Py_ssize_t)S, (Py_ssize_t)3))) ||
        put_view(d, o, "masks", b->masks, B * M * R * R, "uint8",
                 Py_BuildValue("(nnnn)", (Py_ssize_t)B, (Py_ssize_t)M, (Py_ssize_t)R, (Py_ssize_t)R)) ||
        put_view(d, o, "points", b->points, B * M * K * 2 * 4, "float32",
                 Py_BuildValue("(nnnn)", (Py_ssize_t)B, (Py_ssize_t)M, (Py_ssize_t)K, (Py_ssize_t)2)) ||
        put_view(d, o, "labels", b->labels, B * M * K * 4, "int32",
                 Py_BuildValue("(nnn)", (Py_ssize_t)B, (Py_ssize_t)M, (Py_ssize_t)K)) ||
        put_view(d, o, "valid", b->valid, B * M, "uint8",
                 Py_BuildValue("(nn)", (Py_ssize_t)B, (Py_ssize_t)M)) ||
        put_view(d, o, "image_id", b->image_ids, B * 8, "int64", Py_BuildValue("(n)", (Py_ssize_t)B)) ||
        put_view(d, o, "mask_id", b->mask_ids, B * M * 8, "int64",
                 Py_BuildValue("(nn)", (Py_ssize_t)B, (Py_ssize_t)M)) ||
        put_view(d, o, "n_masks", b->n_masks, B * 4, "int32", Py_BuildValue("(n)", (Py_ssize_t)B)) ||
        put_view(d, o, "n_masks_total", b->n_masks_total, B * 4, "int32",
                 Py_BuildValue("(n)", (Py_ssize_t)B)) ||
        put_view(d, o, "content_size", b->content_size, B * 2 * 4, "int32",
                 Py_BuildValue("(nn)", (Py_ssize_t)B, (Py_ssize_t)2)) ||
        put_view(d, o, "flipped", b->flipped, B, "uint8", Py_BuildValue("(n)", (Py_ssize_t)B)) ||
        put_view(d, o, "shard", b->shard, B * 4, "uint32", Py_BuildValue("(n)", (Py_ssize_t)B)) ||
        put_view(d, o, "shard_index", b->shard_index, B * 8, "uint64",
                 Py_BuildValue("(n)", (Py_ssize_t)B)) ||
        put_u64(d, "count", b->count) || put_u64(d, "epoch", b->epoch) ||
        put_u64(d, "step", b->step) || put_u64(d, "position", b->position) ||
        put_u64(d, "next_position", b->next_position);
    if (bad) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *loader_next(PyObject *self)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    if (ready(ld) < 0) return NULL;
    if (ld->done) return NULL; /* StopIteration */
    if (ld->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Loader: next() is running in another thread");
        return NULL;
    }
    ld->busy = 1;
    sa1b_batch *batch = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc;
    sa1b_loader *L = ld->L;
    Py_BEGIN_ALLOW_THREADS
    rc = sa1b_loader_next(L, &batch, &err);
    Py_END_ALLOW_THREADS
    ld->busy = 0;
    if (ld->closing) { /* __exit__ ran meanwhile (another thread): no batch, the loader closes */
        if (rc == SA1B_OK) sa1b_loader_release(L, batch);
        if (ld->held == 0) loader_free_c(ld);
        PyErr_SetString(PyExc_ValueError, "Loader: closed");
        return NULL;
    }
    if (rc == SA1B_EOF) {
        ld->done = 1;
        return NULL;
    }
    if (rc == SA1B_EINVAL && ld->held > 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %zd batches are still alive (arrays of earlier batches are kept); "
                     "drop them (or copy what you keep) before asking for the next",
                     err.msg, ld->held);
        return NULL;
    }
    if (rc != SA1B_OK) return sa1bpy_raise(&err, NULL);
    Sa1bBatch *owner = PyObject_New(Sa1bBatch, &Sa1bBatchOwner_Type);
    if (!owner) {
        sa1b_loader_release(L, batch);
        return NULL;
    }
    owner->loader = (Sa1bLoader *)Py_NewRef(self);
    owner->batch = batch;
    ld->held++;
    PyObject *d = batch_dict(owner);
    Py_DECREF(owner); /* the arrays hold it now (or it is released here) */
    return d;
}

static PyObject *loader_close(PyObject *self, PyObject *noargs)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    if (forked(ld)) { /* the parent's copy: nothing runs or is freed here */
        loader_free_c(ld);
        Py_RETURN_NONE;
    }
    if (ld->busy) {
        PyErr_SetString(PyExc_RuntimeError, "Loader: next() is running in another thread");
        return NULL;
    }
    if (ld->held > 0) {
        PyErr_Format(PyExc_ValueError,
                     "Loader.close: %zd batches are still alive; their arrays view the loader's "
                     "memory (drop them first, or let the loader be collected with them)",
                     ld->held);
        return NULL;
    }
    loader_free_c(ld);
    Py_RETURN_NONE;
}

static PyObject *loader_stats(PyObject *self, PyObject *noargs)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    if (ready(ld) < 0) return NULL;
    sa1b_loader_stats st;
    sa1b_loader_stats_get(ld->L, &st);
    return Py_BuildValue("{s:K,s:K,s:K,s:d,s:d,s:d,s:d,s:I,s:I}", "images",
                         (unsigned long long)st.images, "batches", (unsigned long long)st.batches,
                         "bytes_read", (unsigned long long)st.bytes_read, "elapsed_s", st.elapsed_s,
                         "images_per_s", st.images_per_s, "consumer_wait_s", st.consumer_wait_s,
                         "worker_idle_s", st.worker_idle_s, "threads", st.threads, "depth", st.depth);
}

static PyObject *loader_info(PyObject *self, void *c)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    if (ready(ld) < 0) return NULL;
    uint64_t n;
    uint32_t S, R, threads, depth;
    int format;
    size_t n_shards;
    sa1b_loader_info(ld->L, &n, &S, &R, &format, &n_shards, &threads, &depth);
    return Py_BuildValue("{s:K,s:I,s:I,s:s,s:n,s:I,s:I,s:n}", "n_images", (unsigned long long)n,
                         "image_size", S, "mask_size", R, "format",
                         format == 0 ? "raw" : "jpeg", "n_shards", (Py_ssize_t)n_shards, "threads",
                         threads, "depth", depth, "batch_bytes",
                         (Py_ssize_t)sa1b_loader_batch_bytes(ld->L));
}

static PyObject *loader_held(PyObject *self, void *c)
{
    return PyLong_FromSsize_t(((Sa1bLoader *)self)->held);
}

static PyObject *loader_enter(PyObject *self, PyObject *noargs)
{
    return Py_NewRef(self);
}

static PyObject *loader_exit(PyObject *self, PyObject *args)
{
    Sa1bLoader *ld = (Sa1bLoader *)self;
    /* closed now, or once next() in another thread returns and the last
     * batch alive dies (close() refuses both); meanwhile it is closed to
     * every call */
    ld->closing = 1;
    if (!ld->busy && ld->held == 0) loader_free_c(ld);
    Py_RETURN_FALSE;
}

static PyMethodDef loader_methods[] = {
    {"close", loader_close, METH_NOARGS,
     "close(): stops the workers and frees the buffers; ValueError while batches are alive"},
    {"stats", loader_stats, METH_NOARGS,
     "stats() -> dict: images, batches, bytes_read, elapsed_s, images_per_s, "
     "consumer_wait_s, worker_idle_s, threads, depth"},
    {"__enter__", loader_enter, METH_NOARGS, NULL},
    {"__exit__", loader_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef loader_getset[] = {
    {"info", loader_info, NULL,
     "dict: n_images, image_size, mask_size, format, n_shards, threads, depth, batch_bytes", NULL},
    {"held", loader_held, NULL, "batches whose arrays are still alive", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject Sa1bLoader_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "sa1b.Loader",
    .tp_basicsize = sizeof(Sa1bLoader),
    .tp_dealloc = loader_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Loader(paths, batch=1, masks=1, points=1, seed=0, epoch=0, rank=0, world=1,\n"
        "       threads=None, flip=0.0, consumed=0, epochs=1, depth=None, normalize=False,\n"
        "       verify=False, drop_last=False, stored_point=False)\n\n"
        "The C prefetching loader (sa1b_loader.h) over shard files: iterating gives one\n"
        "dict per batch, of numpy arrays viewing the loader's buffers (no copy):\n"
        "image [B,S,S,3] uint8 (normalize: [B,3,S,S] float32), masks [B,M,R,R] uint8,\n"
        "points [B,M,K,2] float32, labels [B,M,K] int32, valid [B,M] uint8, image_id [B]\n"
        "int64 (-1 in rows that pad a short batch), mask_id [B,M] int64, n_masks,\n"
        "n_masks_total [B] int32, content_size [B,2] int32, flipped [B] uint8, shard [B]\n"
        "uint32, shard_index [B] uint64; and the ints count, epoch, step, position,\n"
        "next_position (the `consumed` to resume after this batch).  A batch's buffer\n"
        "goes back to the loader when its last array dies; epochs=None runs forever.",
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = loader_next,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
    .tp_init = loader_init,
    .tp_new = PyType_GenericNew,
};
