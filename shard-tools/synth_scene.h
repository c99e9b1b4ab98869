/*
 * synth_scene.h - synthetic scenes with exact masks, the picture half of
 * sa1b-synth (the SA-1B dressing, JSON and tar live in sa1b-synth.c).
 *
 * A scene is a textured background split into a few large regions, with
 * overlapping shapes (rotated ellipses, star and regular polygons, rings) at
 * several scales painted back to front.  Every pixel belongs to exactly one
 * "atom": a background region, a whole shape, or one half of a shape that is
 * split in two parts.  The atoms are rasterised once into a label buffer;
 * the picture is painted from that buffer (each object its own colour and
 * texture, the two halves of a split object visibly different shades) and
 * the masks are computed from the same buffer, so a mask is exactly the set
 * of pixels painted for what it names.  Masks nest like SAM's
 * multi-granularity output:
 *
 *   SYNTH_REGION  a background region (visible part)
 *   SYNTH_OBJECT  one shape (its visible part: later shapes occlude it)
 *   SYNTH_PART    one half of a split shape (visible part)
 *   SYNTH_UNION   the union of two touching shapes
 *
 * Masks with fewer than synth_min_area(w, h) pixels are never produced, nor
 * a part equal to its whole shape.  The number of masks is a target: the
 * scene reaches it exactly unless the shapes leave too few candidates.
 *
 * Everything is a pure function of (width, height, seed, target): the same
 * arguments give the same pixels and masks on every machine (integer and
 * IEEE double arithmetic only, no libm transcendental in the rasteriser's
 * decisions beyond sqrt, which is exact-rounded).
 */
#ifndef SYNTH_SCENE_H
#define SYNTH_SCENE_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"
#include "sa1b_rle.h"

/* Largest accepted width or height, and pixel count. */
#define SYNTH_MAX_SIDE 16384u
#define SYNTH_MAX_PIXELS (UINT64_C(1) << 27)
/* Default shape sizes (synth_scene.size_min, size_max). */
#define SYNTH_SIZE_MIN 0.015
#define SYNTH_SIZE_MAX 0.28
/* Largest mask target (annotation ids reserve 1000 per image). */
#define SYNTH_MAX_MASKS 999u

typedef enum synth_kind { SYNTH_REGION, SYNTH_OBJECT, SYNTH_PART, SYNTH_UNION } synth_kind;

typedef struct synth_mask {
    synth_kind kind;
    sa1b_rle rle;            /* exact runs, height x width, column-major */
    uint64_t area;           /* foreground pixel count */
    uint32_t x0, y0, x1, y1; /* inclusive pixel bounds of the foreground */
    uint32_t px, py;         /* a pixel deep inside the mask (the prompt point) */
} synth_mask;

typedef struct synth_work synth_work;

typedef struct synth_scene {
    uint32_t width, height;
    double size_min, size_max; /* shape radii as fractions of the shorter side
                                  (synth_scene_new: 0.015 and 0.28; a shape's
                                  radius is min + (max - min) * u^3, u uniform,
                                  and at least 2.5 pixels) */
    uint8_t *rgb;       /* [height][width][3], row-major, 8-bit RGB */
    size_t n_masks;
    synth_mask *masks;  /* [n_masks], kinds mixed in a shuffled order */
    synth_work *work;   /* private buffers, reused from one render to the next */
} synth_scene;

/* A scene of width x height pixels (each 1..SYNTH_MAX_SIDE, product at most
 * SYNTH_MAX_PIXELS), or NULL when out of memory or out of range. */
synth_scene *synth_scene_new(uint32_t width, uint32_t height);
/* Frees everything; s may be NULL. */
void synth_scene_free(synth_scene *s);

/* Which masks a scene gets.  FULL: the nested set above (regions,
 * objects, parts, unions).  FLAT: of the same selection only the regions
 * and the objects, so that every pixel lies in at most one mask (a
 * partition of part of the picture, without the ambiguity of nested masks
 * for a single point prompt); the picture is the FULL one, pixel for pixel,
 * and the count falls short of the target by the parts and unions left
 * out. */
typedef enum synth_nesting { SYNTH_NESTING_FULL, SYNTH_NESTING_FLAT } synth_nesting;

/* Renders the scene of the given seed into s->rgb and s->masks, aiming at
 * target masks (0..SYNTH_MAX_MASKS), with the given nesting.  Errors:
 * SA1B_ENOMEM, or a code forwarded from the RLE codec. */
int synth_scene_render(synth_scene *s, uint64_t seed, uint32_t target, synth_nesting nesting,
                       sa1b_error *err);

/* Smallest mask area produced at this size: max(4, width*height / 100000). */
uint64_t synth_min_area(uint32_t width, uint32_t height);

/* Name of a kind ("region", "object", "part", "union"). */
const char *synth_kind_name(synth_kind k);

#endif
