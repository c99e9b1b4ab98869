/*
 * backend_cuda_pick.h - what auto's attention check (backend_cuda_attn_check.cu)
 * decides, in plain C so that every build compiles it and a test runs it
 * with made-up results (tests/test-attn-pick.c): the candidate paths of a
 * shape and their order, the comparison of a candidate's results with the
 * blocked reference's, the first candidate that passes, the line that
 * says why one was refused, and the table of the paths chosen by shape.
 * Internal to the CUDA backend.
 */
#ifndef SA1B_TRAINER_BACKEND_CUDA_PICK_H
#define SA1B_TRAINER_BACKEND_CUDA_PICK_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* An attention call's shape as the choice sees it: everything of
 * tr_attn_dims but N and the batch strides (which no path's choice
 * depends on), and the operands' type. */
typedef struct tr_attn_key {
    int Tq, Tk, heads, dh, ldq, ldk, ldv, ldo, dt;
} tr_attn_key;

tr_attn_key tr_attn_key_of(const tr_attn_dims *d, int dt);

/* "Tq=4096 Tk=4096 heads=12 dh=64 bf16" */
void tr_attn_key_text(const tr_attn_key *k, char *buf, size_t len);

/* The paths (TR_CUDA_ATTN_*) auto tries for the shape, in order, into
 * out[4]: cuDNN (16-bit operands; cudnn_built: cuDNN could be
 * opened on the device), flash (16-bit, heads of at most 64 dimensions, at most
 * 65535 tiles of 64 rows), the rule's (blocked for Tq and Tk of 64 and
 * more, else fused, which takes heads of at most 128 dimensions), then
 * blocked when the rule's is fused.  The last is the reference path,
 * which is never refused.  fp32 operands: the rule's path alone (today's
 * choice, not checked).  Their number. */
int tr_attn_candidates(const tr_attn_dims *d, int dt, int cudnn_built, int out[4]);

/* 1 when the path (TR_CUDA_ATTN_*) can take the call with operands of
 * type dt, as far as the shape and the type say (cuDNN: 16-bit; whether
 * cuDNN is there and supports it is the backend's to say); 0 when it
 * leaves the call to the rule. */
int tr_attn_path_takes(const tr_attn_dims *d, int dt, int path);

/* One tensor of a candidate's results against the reference's, both
 * read as floats over the region the call writes (rows of `cols`
 * elements): the largest error relative to the reference's largest
 * magnitude, where it is, the NaNs and infinities, and the elements left
 * as the poison (an element whose bits are the poison's was not
 * written). */
typedef struct tr_attn_diff {
    const char *what;    /* "out", "stats", "dq", "dk", "dv" */
    double err, tol;     /* max |c - r| / max(max |r|, 1e-30), and the bound */
    size_t at, n;        /* the worst element (its index in the region), elements compared */
    double got, want;    /* the candidate's and the reference's value there */
    size_t nan, unwritten;
} tr_attn_diff;

/* The bound of a tensor's error for operands of type dt: 16-bit outputs
 * and gradients, fp32 statistics (log-sum-exp), fp32 anything. */
double tr_attn_tolerance(const char *what, int dt);

/* Compares n elements of type dt (values TR_PREC_*: 16-bit as stored,
 * fp32) at cand and ref; poison: the bit pattern that marks an element not
 * written (0xffff, or 0xffffffff for fp32; any other NaN counts as a NaN). */
void tr_attn_compare(tr_attn_diff *r, const char *what, int dt, const void *cand, const void *ref, size_t n);

/* A diff's verdict: 1 when it passes (no NaN, nothing unwritten, the
 * error within the bound). */
int tr_attn_diff_ok(const tr_attn_diff *r);

/* A candidate's outcome: a library error (lib non-empty), or its diffs. */
typedef struct tr_attn_verdict {
    char lib[240];
    tr_attn_diff diff[5];
    int n_diff;
} tr_attn_verdict;

/* 1 when v passes; else the first failing diff (or NULL: the library's
 * error) in *bad. */
int tr_attn_verdict_ok(const tr_attn_verdict *v, const tr_attn_diff **bad);

/* The line of a path refused for a shape: "attention: cudnn refused for
 * Tq=4096 ... bf16: dq: error 0.31 > 0.05 (element 1234: 0.51, blocked
 * 0.20); flash for this shape" (numbers, NaNs, unwritten elements, or the
 * library's message). */
void tr_attn_pin_line(char *buf, size_t len, const tr_attn_key *k, int path, const tr_attn_verdict *v, int next);

/* The driver: tries the candidates in order (try_path(ctx, path, v): 0
 * with the verdict filled, -1 when the reference itself failed, which
 * ends the check), logs one line for each one refused, returns the first
 * that passes (the last candidate, the reference, passes by definition and
 * is not tried), or -1. */
typedef int (*tr_attn_try)(void *ctx, int path, tr_attn_verdict *v);
int tr_attn_pick(const tr_attn_key *k, const int *cands, int n, tr_attn_try try_path, void *ctx,
                 void (*log)(void *ctx, const char *line), void *log_ctx);

/* The paths chosen, by shape. */
#define TR_ATTN_TABLE_MAX 32
typedef struct tr_attn_table {
    int n;
    tr_attn_key key[TR_ATTN_TABLE_MAX];
    int path[TR_ATTN_TABLE_MAX];
} tr_attn_table;

/* The shape's path, or -1 (not checked). */
int tr_attn_table_find(const tr_attn_table *t, const tr_attn_key *k);
/* Sets the shape's path; -1 when the table is full. */
int tr_attn_table_set(tr_attn_table *t, const tr_attn_key *k, int path);

/* The name of a path ("auto", "fused", "blocked", "flash", "cudnn"). */
const char *tr_attn_path_name(int path);

#endif
