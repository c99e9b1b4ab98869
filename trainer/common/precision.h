/*
 * precision.h - the one home of a tensor's precision: the TR_PREC_* codes
 * (the storage type of activations, compute weights and typed operands),
 * their names on the command line, in the run record and in the planner's
 * table, and their sizes.  kernels.h converts between them.
 */
#ifndef SA1B_TRAINER_PRECISION_H
#define SA1B_TRAINER_PRECISION_H

#include <stddef.h>
#include <string.h>

/* fp32; bf16 (8 exponent bits, 7 mantissa bits); IEEE 754 binary16 (5
 * exponent, 10 mantissa bits) */
enum { TR_PREC_FP32 = 0, TR_PREC_BF16 = 1, TR_PREC_FP16 = 2, TR_PREC_COUNT = 3 };

/* "fp32", "bf16" or "fp16"; "?" for a code that is none of them. */
static inline const char *tr_prec_name(int prec)
{
    static const char *const names[TR_PREC_COUNT] = {"fp32", "bf16", "fp16"};
    return prec >= 0 && prec < TR_PREC_COUNT ? names[prec] : "?";
}

/* The TR_PREC_* of a name ("fp32", "bf16", "fp16"), or -1. */
static inline int tr_prec_parse(const char *name)
{
    for (int p = 0; p < TR_PREC_COUNT; p++)
        if (name && strcmp(name, tr_prec_name(p)) == 0) return p;
    return -1;
}

/* Bytes of one element of precision prec. */
static inline size_t tr_prec_size(int prec) { return prec == TR_PREC_FP32 ? 4 : 2; }

/* 1 when prec is a 16-bit type. */
static inline int tr_prec_16(int prec) { return prec != TR_PREC_FP32; }

#endif
