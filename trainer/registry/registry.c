/*
 * registry.c - the trainer's backends by name (registry.h): the only code
 * that turns a name into a backend: its options (the environment's
 * SA1B_CUDA_* switches, the attention's paths by name), the backend, its sizes and traits, and the memory
 * it could still take.
 */
#include "registry.h"
#include "backend/cpu/backend_cpu.h"
#include "backend/cuda/backend_cuda.h"
#include "common/vmlimit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the attention's paths by name, in TR_CUDA_ATTN_* order */
static const char *const attn_names[] = {"auto", "fused", "blocked", "flash", "cudnn"};

int tr_backend_attention_parse(const char *name)
{
    for (int i = 0; name && i < (int)(sizeof attn_names / sizeof *attn_names); i++)
        if (!strcmp(name, attn_names[i])) return i;
    return -1;
}

const char *tr_backend_attention_name(int mode)
{
    return mode >= 0 && mode < (int)(sizeof attn_names / sizeof *attn_names) ? attn_names[mode] : "auto";
}

const char *tr_backend_attention_env(void)
{
    const char *am = getenv("SA1B_CUDA_ATTN");
    return am && *am ? am : NULL;
}

int tr_backend_check_attention(tr_backend *be, const tr_attn_dims *shapes, int n, int dt,
                               void (*log)(void *ctx, const char *line), void *ctx, char *err, size_t err_len)
{
    if (!be || strcmp(be->name, "cuda") != 0) return 0; /* one attention: nothing to choose */
    return tr_cuda_attn_choose(be, shapes, n, dt, log, ctx, err, err_len);
}

void tr_backend_opts_init(tr_backend_opts *o, int n_threads)
{
    memset(o, 0, sizeof *o);
    o->n_threads = n_threads;
    int am = tr_backend_attention_parse(tr_backend_attention_env());
    o->attention = am < 0 ? TR_CUDA_ATTN_AUTO : am;
    const char *sync = getenv("SA1B_CUDA_SYNC");
    o->sync_each = sync && *sync && strcmp(sync, "0") != 0;
    o->profile = getenv("SA1B_CUDA_PROFILE");
}

tr_backend *tr_backend_create_with(const char *name, const tr_backend_opts *o, char *err, size_t err_len)
{
    if (strcmp(name, "cpu") == 0) return tr_backend_cpu_create(o->n_threads, err, err_len);
    if (strcmp(name, "cuda") == 0) return tr_backend_cuda_create(o, err, err_len);
    snprintf(err, err_len, "%s backend not available in this build (have: cpu, cuda)", name);
    return NULL;
}

tr_backend *tr_backend_create(const char *name, int n_threads, char *err, size_t err_len)
{
    tr_backend_opts o;
    tr_backend_opts_init(&o, n_threads);
    return tr_backend_create_with(name, &o, err, err_len);
}

const tr_sizes *tr_backend_sizes(const char *name)
{
    if (strcmp(name, "cpu") == 0) return &tr_cpu_sizes;
    if (strcmp(name, "cuda") == 0) return &tr_cuda_sizes;
    return NULL;
}

const tr_traits *tr_backend_traits(const char *name)
{
    if (strcmp(name, "cpu") == 0) return &tr_cpu_traits;
    if (strcmp(name, "cuda") == 0) return &tr_cuda_traits;
    return NULL;
}

int tr_backend_free_memory(const char *name, uint64_t *bytes, const char **what, char *err, size_t err_len)
{
    *bytes = 0;
    if (strcmp(name, "cuda") == 0) {
        /* less what the backend takes outside its allocator, which the plan
         * does not count: cuBLAS's workspace (32 MiB a handle on Hopper),
         * the column sums' band (8 MiB), kernels loaded on first use,
         * NCCL's buffers */
        const uint64_t outside = (uint64_t)256 << 20;
        uint64_t total, f;
        *what = "the device's free memory less 256 MiB taken outside the allocator";
        if (tr_cuda_device_memory(&f, &total, err, err_len) < 0) return -1;
        if (f <= outside) return snprintf(err, err_len, "the device has %llu MiB free", (unsigned long long)(f >> 20)), -1;
        *bytes = f - outside;
        return 0;
    }
    if (strcmp(name, "cpu") != 0) return snprintf(err, err_len, "%s backend not available in this build", name), -1;
    uint64_t lim = tr_vm_limit(), now = tr_vm_size();
    *bytes = tr_vm_available(), *what = "the host's available memory";
    if (lim && (lim <= now || lim - now < *bytes)) *bytes = lim > now ? lim - now : 0, *what = "the address-space limit's room";
    if (!*bytes) return snprintf(err, err_len, "no memory available"), -1;
    return 0;
}
