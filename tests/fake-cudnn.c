/*
 * fake-cudnn.c - a stand-in libcudnn for test-cudnn-attn (built as the
 * shared object tests/.libs/libfakecudnn.so and loaded by
 * trainer/backend/cuda/cudnn_attn.c through its path, as the real one
 * would be): the functions that module resolves, over host structures,
 * with no device.  Its behaviour, read at each call from the environment:
 *   FAKE_CUDNN_VERSION  what cudnnGetVersion says (default 91900)
 *   FAKE_CUDNN_CREATE   "fail": cudnnCreate fails as without a device
 *   FAKE_CUDNN_SDPA_BWD_GRAPH  "refuse": an operation graph holding the SDPA
 *                       backward operation does not finalize (as in 9.19)
 *   FAKE_CUDNN_ENGINES  the heuristics' engine configs in order, each
 *                       "D:WS" (deterministic, WS bytes of workspace) or
 *                       "N:WS" (noted NONDETERMINISTIC), comma-separated;
 *                       "F:0" one whose plan does not finalize
 * fake_cudnn_last() tells the test what the last execution was given.
 */
#include <cudnn_graph.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-cudnn.h"

typedef struct fdesc {
    cudnnBackendDescriptorType_t type;
    int index;       /* an engine config's or engine's place in the heuristics' list; a plan's config's */
    int finalized;
} fdesc;

static fake_cudnn_exec last;
static int handle_token;

const fake_cudnn_exec *fake_cudnn_last(void) { return &last; }

size_t cudnnGetVersion(void)
{
    const char *v = getenv("FAKE_CUDNN_VERSION");
    return v ? (size_t)strtoul(v, NULL, 10) : 91900;
}

const char *cudnnGetErrorString(cudnnStatus_t status)
{
    return status == CUDNN_STATUS_NOT_INITIALIZED ? "CUDNN_STATUS_NOT_INITIALIZED" : "CUDNN_STATUS_FAKE";
}

void cudnnGetLastErrorString(char *message, size_t max_size)
{
    snprintf(message, max_size, "fake: no device\nsecond line");
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle)
{
    const char *c = getenv("FAKE_CUDNN_CREATE");
    if (c && strcmp(c, "fail") == 0) return CUDNN_STATUS_NOT_INITIALIZED;
    *handle = (cudnnHandle_t)&handle_token;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle)
{
    return handle == (cudnnHandle_t)&handle_token ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream)
{
    (void)stream;
    return handle == (cudnnHandle_t)&handle_token ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

/* the engines of FAKE_CUDNN_ENGINES: kind (D, N, F) and workspace */
static int engines(char kind[16], int64_t ws[16])
{
    const char *e = getenv("FAKE_CUDNN_ENGINES");
    int n = 0;
    while (e && *e && n < 16) {
        kind[n] = *e;
        ws[n] = e[1] == ':' ? strtoll(e + 2, NULL, 10) : 0;
        n++;
        e = strchr(e, ',');
        if (e) e++;
    }
    return n;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type, cudnnBackendDescriptor_t *descriptor)
{
    fdesc *d = calloc(1, sizeof *d);
    if (!d) return CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED;
    d->type = type;
    d->index = -1;
    *descriptor = d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    free(descriptor);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    fdesc *d = descriptor;
    const char *g = getenv("FAKE_CUDNN_SDPA_BWD_GRAPH");
    if (d->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR && d->index == 1 && g && strcmp(g, "refuse") == 0)
        return CUDNN_STATUS_BAD_PARAM;
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
        char kind[16];
        int64_t ws[16];
        int n = engines(kind, ws);
        if (d->index < 0 || d->index >= n || kind[d->index] == 'F') return CUDNN_STATUS_NOT_SUPPORTED;
    }
    d->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count, const void *array)
{
    fdesc *d = descriptor;
    if (d->finalized) return CUDNN_STATUS_BAD_PARAM;
    if (name == CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG) {
        const fdesc *cfg = *(fdesc *const *)array;
        d->index = cfg->index;
    } else if (name == CUDNN_ATTR_OPERATIONGRAPH_OPS) {
        for (int64_t i = 0; i < count; i++)
            if ((((fdesc *const *)array)[i])->type == CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR) d->index = 1;
    } else if (name == CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS) {
        last.n = (int)count;
        for (int64_t i = 0; i < count && i < 16; i++) last.uids[i] = ((const int64_t *)array)[i];
    } else if (name == CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS) {
        for (int64_t i = 0; i < count && i < 16; i++) last.ptrs[i] = ((void *const *)array)[i];
    } else if (name == CUDNN_ATTR_VARIANT_PACK_WORKSPACE) {
        last.ws = *(void *const *)array;
    }
    (void)type;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested, int64_t *count,
                                       void *array)
{
    const fdesc *d = descriptor;
    char kind[16];
    int64_t ws[16];
    int n = engines(kind, ws);
    (void)type;
    switch (name) {
    case CUDNN_ATTR_ENGINEHEUR_RESULTS:
        *count = requested == 0 ? n : (requested < n ? requested : n);
        for (int64_t i = 0; array && i < *count; i++) ((fdesc **)array)[i]->index = (int)i;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_ENGINECFG_ENGINE:
        *count = 1;
        (*(fdesc **)array)->index = d->index;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE:
        *count = 1;
        ((cudnnBackendNumericalNote_t *)array)[0] = d->index >= 0 && d->index < n && kind[d->index] == 'N'
                                                        ? CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
                                                        : CUDNN_NUMERICAL_NOTE_TENSOR_CORE;
        return CUDNN_STATUS_SUCCESS;
    case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
        *count = 1;
        *(int64_t *)array = d->index >= 0 && d->index < n ? ws[d->index] : 0;
        return CUDNN_STATUS_SUCCESS;
    default: return CUDNN_STATUS_NOT_SUPPORTED;
    }
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, cudnnBackendDescriptor_t pack)
{
    const fdesc *p = plan, *v = pack;
    if (handle != (cudnnHandle_t)&handle_token || !p->finalized || !v->finalized) return CUDNN_STATUS_BAD_PARAM;
    last.engine = p->index;
    last.scale = NAN;
    for (int i = 0; i < last.n && i < 16; i++)
        if (last.uids[i] == 6) last.scale = *(const float *)last.ptrs[i];
    last.runs++;
    return CUDNN_STATUS_SUCCESS;
}
