/*
 * backend_meta.h - the counting backend (backend_meta.c): every op of
 * backend.h, computing nothing, over memory that is read-only zeros, so
 * that the planner (train/plan.h) counts the peak of a target backend.
 */
#ifndef SA1B_TRAINER_BACKEND_META_H
#define SA1B_TRAINER_BACKEND_META_H

#include "backend/backend.h"

/* The counting backend for a target backend of those sizes and traits
 * (NULL: the CPU's); NULL when out of memory. */
tr_backend *tr_backend_meta_create(const tr_sizes *sizes, const tr_traits *traits);

#endif
