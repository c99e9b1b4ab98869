/*
 * backend_cuda_pick.c - the pure part of auto's attention check
 * (backend_cuda_pick.h): candidates, comparison, verdicts, the log line,
 * the table of choices.
 */
#include "backend_cuda_pick.h"
#include "backend_cuda.h"
#include "common/kernels.h"
#include "common/precision.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

tr_attn_key tr_attn_key_of(const tr_attn_dims *d, int dt)
{
    tr_attn_key k = {d->Tq, d->Tk, d->heads, d->dh, d->ldq, d->ldk, d->ldv, d->ldo, dt};
    return k;
}

void tr_attn_key_text(const tr_attn_key *k, char *buf, size_t len)
{
    snprintf(buf, len, "Tq=%d Tk=%d heads=%d dh=%d %s", k->Tq, k->Tk, k->heads, k->dh, tr_prec_name(k->dt));
}

const char *tr_attn_path_name(int path)
{
    static const char *const names[] = {"auto", "fused", "blocked", "flash", "cudnn"};
    return path >= 0 && path < (int)(sizeof names / sizeof *names) ? names[path] : "?";
}

/* backend_cuda_flash.cu's flash_takes (its FD = 64, FR = 64) */
static int flash_would_take(const tr_attn_dims *d, int dt)
{
    return tr_prec_16(dt) && d->dh >= 1 && d->dh <= 64 && d->heads >= 1 && d->Tq >= 1 && d->Tk >= 1 &&
           (d->Tq + 63) / 64 <= 65535 && (d->Tk + 63) / 64 <= 65535;
}

int tr_attn_path_takes(const tr_attn_dims *d, int dt, int path)
{
    switch (path) {
    case TR_CUDA_ATTN_CUDNN: return tr_prec_16(dt);
    case TR_CUDA_ATTN_FLASH: return flash_would_take(d, dt);
    case TR_CUDA_ATTN_FUSED: return d->dh >= 1 && d->dh <= 128;
    case TR_CUDA_ATTN_BLOCKED: return 1;
    default: return 0;
    }
}

int tr_attn_candidates(const tr_attn_dims *d, int dt, int cudnn_built, int out[4])
{
    int n = 0, rule = tr_cuda_attn_blocked(d, TR_CUDA_ATTN_AUTO) ? TR_CUDA_ATTN_BLOCKED : TR_CUDA_ATTN_FUSED;
    if (!tr_prec_16(dt)) { /* fp32: the rule, unchecked (no other path takes fp32; fused and blocked differ by
                            * their sums' order, and with --tf32 blocked rounds its inputs: neither is wrong) */
        out[n++] = rule;
        return n;
    }
    if (cudnn_built) out[n++] = TR_CUDA_ATTN_CUDNN;
    if (flash_would_take(d, dt)) out[n++] = TR_CUDA_ATTN_FLASH;
    out[n++] = rule;
    if (rule != TR_CUDA_ATTN_BLOCKED) out[n++] = TR_CUDA_ATTN_BLOCKED;
    return n;
}

double tr_attn_tolerance(const char *what, int dt)
{
    int stats = !strcmp(what, "stats"), grad = what[0] == 'd';
    if (stats) return tr_prec_16(dt) ? 2e-3 : 1e-5;       /* fp32 log-sum-exp of the same scores */
    if (dt == TR_PREC_FP32) return grad ? 1e-4 : 2e-5;
    if (dt == TR_PREC_BF16) return grad ? 5e-2 : 2e-2;    /* 8 bits of mantissa: a few roundings of 2^-8 */
    return grad ? 1e-2 : 4e-3;                            /* fp16: 11 bits */
}

void tr_attn_compare(tr_attn_diff *r, const char *what, int dt, const void *cand, const void *ref, size_t n)
{
    memset(r, 0, sizeof *r);
    r->what = what, r->n = n, r->tol = tr_attn_tolerance(what, dt);
    double big = 0.0, worst = -1.0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n; i++) {
            double c, w;
            int poison;
            if (dt == TR_PREC_FP32) {
                uint32_t cb;
                memcpy(&cb, (const char *)cand + 4 * i, 4);
                poison = cb == 0xffffffffu;
                float cf, wf;
                memcpy(&cf, &cb, 4), memcpy(&wf, (const char *)ref + 4 * i, 4);
                c = cf, w = wf;
            } else {
                uint16_t cb, wb;
                memcpy(&cb, (const char *)cand + 2 * i, 2), memcpy(&wb, (const char *)ref + 2 * i, 2);
                poison = cb == 0xffff;
                c = tr_from_16(cb, dt), w = tr_from_16(wb, dt);
            }
            if (pass == 0) {
                if (isfinite(w) && fabs(w) > big) big = fabs(w);
                if (poison) r->unwritten++;
                else if (!isfinite(c)) r->nan++;
                continue;
            }
            if (poison || !isfinite(c) || !isfinite(w)) continue;
            double e = fabs(c - w);
            if (e > worst) worst = e, r->at = i, r->got = c, r->want = w;
        }
    r->err = worst < 0 ? 0.0 : worst / (big > 1e-30 ? big : 1e-30);
}

int tr_attn_diff_ok(const tr_attn_diff *r) { return !r->nan && !r->unwritten && r->err <= r->tol; }

int tr_attn_verdict_ok(const tr_attn_verdict *v, const tr_attn_diff **bad)
{
    *bad = NULL;
    if (v->lib[0]) return 0;
    for (int i = 0; i < v->n_diff; i++)
        if (!tr_attn_diff_ok(&v->diff[i])) return *bad = &v->diff[i], 0;
    return 1;
}

void tr_attn_pin_line(char *buf, size_t len, const tr_attn_key *k, int path, const tr_attn_verdict *v, int next)
{
    char shape[96], why[320];
    const tr_attn_diff *b;
    tr_attn_key_text(k, shape, sizeof shape);
    if (tr_attn_verdict_ok(v, &b)) snprintf(why, sizeof why, "passed");
    else if (!b) snprintf(why, sizeof why, "%s", v->lib);
    else if (b->unwritten) snprintf(why, sizeof why, "%s: %zu of %zu elements not written", b->what, b->unwritten, b->n);
    else if (b->nan) snprintf(why, sizeof why, "%s: %zu of %zu elements not finite", b->what, b->nan, b->n);
    else
        snprintf(why, sizeof why, "%s: error %.3g > %.3g of its largest magnitude (element %zu: %.6g, blocked %.6g)",
                 b->what, b->err, b->tol, b->at, b->got, b->want);
    snprintf(buf, len, "attention: %s refused for %s: %s; %s for this shape", tr_attn_path_name(path), shape, why,
             tr_attn_path_name(next));
}

int tr_attn_pick(const tr_attn_key *k, const int *cands, int n, tr_attn_try try_path, void *ctx,
                 void (*log)(void *ctx, const char *line), void *log_ctx)
{
    const tr_attn_diff *bad;
    char line[700];
    for (int i = 0; i + 1 < n; i++) {
        tr_attn_verdict v;
        memset(&v, 0, sizeof v);
        if (try_path(ctx, cands[i], &v) < 0) return -1;
        if (tr_attn_verdict_ok(&v, &bad)) return cands[i];
        tr_attn_pin_line(line, sizeof line, k, cands[i], &v, cands[i + 1]);
        if (log) log(log_ctx, line);
    }
    return n > 0 ? cands[n - 1] : -1;
}

static int key_eq(const tr_attn_key *a, const tr_attn_key *b)
{
    return a->Tq == b->Tq && a->Tk == b->Tk && a->heads == b->heads && a->dh == b->dh && a->ldq == b->ldq &&
           a->ldk == b->ldk && a->ldv == b->ldv && a->ldo == b->ldo && a->dt == b->dt;
}

int tr_attn_table_find(const tr_attn_table *t, const tr_attn_key *k)
{
    for (int i = 0; i < t->n; i++)
        if (key_eq(&t->key[i], k)) return t->path[i];
    return -1;
}

int tr_attn_table_set(tr_attn_table *t, const tr_attn_key *k, int path)
{
    for (int i = 0; i < t->n; i++)
        if (key_eq(&t->key[i], k)) return t->path[i] = path, 0;
    if (t->n == TR_ATTN_TABLE_MAX) return -1;
    t->key[t->n] = *k, t->path[t->n++] = path;
    return 0;
}
