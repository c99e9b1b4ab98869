/*
 * sa1b_loader.h - the prefetching loader: shards in, training batches out.
 *
 * Implements: DESIGN.md section 7.  The loader maps a list of shards (all
 * with the same S, R and payload format), validates them with the shard
 * reader and delivers batches in a fixed order while worker threads fill
 * the next ones.  Everything it delivers is a pure function of the
 * configuration (shards, seed, epoch, consumed, rank, world, B, M, K, flip
 * probability, drop_last): never of the thread count, the depth or the
 * timing of the consumer.
 *
 * Order.  N = the number of images of all shards, numbered globally in
 * shard order (shard 0's images first; a glob is expanded sorted).  Epoch e
 * visits the permutation perm_e of 0..N-1 made by Fisher-Yates
 * (for i = N-1 down to 1: j = rng_below(r, i+1), swap perm[i], perm[j],
 * starting from the identity) with r = rng_seed(seed, e) of pipeline/rng.h.
 * Every image is visited exactly once per epoch.  Positions of the epoch
 * are cut into global batches of G = B*world images, starting at position
 * 0 (or at `consumed` on resume); the last global batch of an epoch may be
 * short (G' = N mod G images).  Rank r takes the contiguous slice
 * [floor(r*G'/world), floor((r+1)*G'/world)) of every global batch of G'
 * images: B images at positions r*B.. of a full one, a balanced (possibly
 * empty) share of a short one.  A short batch is delivered short (count <
 * B), never padded with repeats; with drop_last it is skipped on every
 * rank.  Every rank sees the same number of batches per epoch.  Epochs
 * follow each other (epoch, epoch+1, ...) until max_epochs have been
 * delivered.  Resume: opening with (epoch, consumed) where consumed is a
 * batch boundary of the uninterrupted stream (batch->next_position of a
 * delivered batch: a multiple of G, or N after the epoch's last batch, when
 * the stream goes on with epoch+1) reproduces the remaining stream
 * exactly, including masks, points and flips.
 *
 * Per image randomness.  Each image draws from its own generator
 * rng_seed(splitmix64(seed ^ (epoch+1)*0x9E3779B97F4A7C15), gidx) (gidx =
 * the global image number; splitmix64 is rng_splitmix64 of rng.h applied
 * once to that value), in this order: (1) flip = rng_unit < flip_prob; (2)
 * when the image has n > M masks, M distinct masks by a partial
 * Fisher-Yates over 0..n-1 (for i = 0..M-1: j = i + rng_below(n-i), swap),
 * then sorted by their index in the shard; with n <= M all masks, in shard
 * order; (3) for each selected mask in order, its K points (below).
 *
 * Geometry.  An image of orig_w x orig_h is letterboxed top-left: its
 * content is w x h = round(orig * S / max(orig_w, orig_h)) pixels of the S
 * x S canvas (halves round up, each >= 1; the batch's content_size), and
 * w_R x h_R cells of the R x R mask grid by the same rule with R for S.
 * Padding (right and below the content) is exactly 0 in images (also when
 * normalised) and in masks.
 *
 * Points (pixel-index convention of MODEL.md: x = column, y = row, a pixel
 * of index i covers [i - 0.5, i + 0.5)).  Mask cell (row c_y, column c_x)
 * covers input pixels x in [c_x*S/R - 0.5, (c_x+1)*S/R - 0.5), so that
 * MODEL.md's normalisation u = (x + 0.5)/S falls inside the cell; a point in
 * the cell is x = (c_x + u_x)*S/R - 0.5, y = (c_y + u_y)*S/R - 0.5 with u_x,
 * u_y = rng_unit (drawn x first).  Point k of a mask (k = 0..K-1):
 *   - k even (0, 2, 4, ...): positive, label 1: a cell drawn uniformly
 *     among the mask's set cells (rng_below(count), in row-major order),
 *   - k odd (1, 3, ...): negative, label 0: a cell drawn uniformly among
 *     the cells of the content region (w_R x h_R) that are not in the mask.
 * So point 0 of a valid pair is always positive and uniformly distributed
 * inside the mask (by area); K = 2 gives one positive and one negative.  A
 * negative point that has no cell to land on (a mask covering the whole
 * content) is padding: label -1, coordinates (0, 0).  A mask with no set
 * cell at R (one that vanished at the mask resolution: sa1b-shard drops
 * them unless --keep-empty-masks, shards made before it did hold them) is
 * not a valid pair: valid 0, all its points padding, its id kept; its
 * negative points are drawn as for any mask and then dropped, so that the
 * draws of the masks after it are the same.  Points of padding masks are
 * padding too.  Points are drawn before the flip and then mirrored with
 * the mask (below).
 *
 * Flip.  When flip is drawn, the image is mirrored within its content:
 * pixel column i < w goes to w-1-i, padding stays right/below; the masks
 * are mirrored within their content w_R: column c < w_R goes to w_R-1-c;
 * points are mirrored with the masks: x' = w_R*S/R - 1 - x (so every point
 * stays in the same, mirrored, cell).  When w_R*S/R != w (S not a multiple
 * of R, or rounding), image and mask mirror axes differ by less than half a
 * mask cell, as their contents already do.
 *
 * Output layout.  Unnormalised: images [B,S,S,3] uint8 (NHWC, RGB).
 * Normalised: images [B,3,S,S] float32 (NCHW), (v/255 - mean)/std with
 * MODEL.md's mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225)
 * inside the content and exactly 0 in the padding.  Rows of a short batch
 * beyond count are zero with ids -1, labels -1 and valid 0.
 *
 * Threads.  threads workers fill the slots of batches (one image per job;
 * a job writes only its own slot) and batches are delivered in order; at
 * most depth batch buffers exist, counting the ones the caller holds, so
 * memory is bounded by depth * sa1b_loader_batch_bytes() plus fixed
 * per-thread scratch, whatever the number of batches.  The pages of the
 * images of upcoming batches are requested in permutation order with
 * madvise(MADV_WILLNEED).  JPEG payloads are decoded in the workers.
 *
 * Damaged samples.  When verification is on, every sample's payload and
 * mask block are checked against their CRC32C; a mismatch (or any other
 * failure to read a sample, e.g. a corrupt JPEG) makes sa1b_loader_next
 * return the error (SA1B_ECHECKSUM, SA1B_EFORMAT, ...) with a message
 * naming the shard path and the image index in that shard ("'a.shard'
 * image 12 (id 1234): ...") and err->offset the byte offset in that shard;
 * sa1b_loader_damaged() gives the same as fields.  The caller either stops
 * (sa1b_loader_close) or skips: calling sa1b_loader_next again delivers
 * the same batch without that sample (the samples after it move up one
 * slot, count is one less; the batch keeps its epoch, step and positions;
 * with pad_damaged its row stays as padding instead, count unchanged).
 * Several damaged samples in one batch are reported one call at a time.
 *
 * Thread safety: one consumer thread calls next/release/stats/close; the
 * loader's own workers are internal.  No global state.
 */
#ifndef SA1B_LOADER_H
#define SA1B_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "sa1b_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where batch memory comes from (e.g. pinned host memory for CUDA).  alloc
 * returns size bytes aligned to at least 64 or NULL; free receives the
 * pointer and the size that alloc was asked for.  Called from the
 * consumer's and the workers' threads (must be thread-safe). */
typedef struct sa1b_allocator {
    void *(*alloc)(size_t size, void *ctx);
    void (*free)(void *ptr, size_t size, void *ctx);
    void *ctx;
} sa1b_allocator;

typedef struct sa1b_loader_config {
    const char *const *paths; /* [n_paths] shard files, in this order (one
                                 named twice is read twice) */
    size_t n_paths;
    const char *glob;         /* used when n_paths == 0: glob(3) pattern, sorted;
                                 a name ending in ".json" is a manifest
                                 (sa1b_manifest.h): its files, in its order,
                                 each with the size and image count it lists;
                                 two names of one file (a link beside its
                                 target, a row through another folder) are
                                 refused (SA1B_EINVAL) */
    uint32_t batch_size;      /* B: images per rank per batch, >= 1 */
    uint32_t max_masks;       /* M: masks per image, >= 1 */
    uint32_t points;          /* K: points per mask, >= 1 */
    uint64_t seed;
    uint64_t epoch;           /* first epoch */
    uint64_t consumed;        /* images of that epoch already consumed by all
                                 ranks together (resume; <= N) */
    uint64_t max_epochs;      /* epochs to deliver, the first one included
                                 (partial when consumed > 0); 0 = forever */
    uint32_t rank, world;     /* rank in 0..world-1; world 0 counts as 1 */
    uint32_t threads;         /* workers; 0 = online cores - 1, at least 1 */
    uint32_t depth;           /* batch buffers in flight; 0 = threads + 2; >= 1 */
    double flip_prob;         /* horizontal flip probability in [0, 1] */
    int normalize;            /* 0: u8 NHWC; 1: normalised f32 NCHW */
    int verify;               /* 1: check each sample's CRC32C before use */
    int drop_last;            /* 1: skip the short last global batch of each epoch */
    int stored_point;         /* 1: point 0 of a mask is its stored SA-1B point
                                 (point_coords[0] in S x S pixels, mirrored with
                                 the flip) when the shard has one; the random
                                 draws are made as usual, so every other point
                                 and the stream stay the same */
    const sa1b_allocator *allocator; /* NULL: malloc/free */
    uint32_t mask_size;       /* R of the batches: 0 = the shards'; needed for shards of
                                 source-size masks (sa1b-shard --mask-size source), which
                                 are resampled to it, and then equal to the R of any other
                                 shard in the list */
    int mask_resample;        /* source-size masks: SA1B_MASK_AREA (0) or SA1B_MASK_NEAREST
                                 (1) of sa1b_prep.h, as sa1b-shard --mask-resample */
    int pad_damaged;          /* 1: a damaged sample that is skipped leaves its row in place
                                 as padding (image id -1, no mask, every pair invalid; count
                                 unchanged), so that every other sample keeps its slot; 0:
                                 the row is removed (see "Damaged samples" above) */
} sa1b_loader_config;

/* Fills *cfg with the defaults: B 1, M 1, K 1, world 1, everything else 0
 * (threads and depth automatic, no flip, u8 output, no verification). */
void sa1b_loader_config_init(sa1b_loader_config *cfg);

/* One batch.  All arrays live in one block from the allocator and stay
 * valid until sa1b_loader_release.  Row b < count holds a sample. */
typedef struct sa1b_batch {
    uint32_t B, M, K, S, R;   /* capacities and sizes */
    uint32_t count;           /* samples in this batch (<= B; short at an epoch's end,
                                 one less per skipped damaged sample; with pad_damaged
                                 such a sample's row counts, its image id -1) */
    uint64_t epoch;
    uint64_t step;            /* global batch index within the epoch:
                                 position / (B * world) */
    uint64_t position;        /* epoch position of the global batch's first image */
    uint64_t next_position;   /* position of the next global batch: the `consumed` to
                                 resume after this batch (N at the epoch's end) */
    int normalized;           /* layout of images, as configured */
    void *images;             /* u8 [B][S][S][3] or f32 [B][3][S][S] */
    int32_t *content_size;    /* [B][2]: w, h of the image content in S pixels */
    uint8_t *masks;           /* [B][M][R][R] 0/1 bytes, row-major */
    int32_t *n_masks;         /* [B] masks delivered (min(M, masks of the image)), valid
                                 or not (a mask empty at R is delivered, valid 0) */
    int32_t *n_masks_total;   /* [B] masks the image has in the shard */
    uint8_t *valid;           /* [B][M] 1 for a delivered mask with a set cell at R, 0 for
                                 padding and for a mask empty at R */
    float *points;            /* [B][M][K][2] x, y in input pixels (see above) */
    int32_t *labels;          /* [B][M][K] 1 positive, 0 negative, -1 padding */
    int64_t *image_ids;       /* [B] SA-1B image ids; -1 beyond count */
    int64_t *mask_ids;        /* [B][M] SA-1B annotation ids (a mask empty at R too); -1
                                 for padding */
    uint8_t *flipped;         /* [B] 1 when the sample was mirrored */
    uint32_t *shard;          /* [B] index of the sample's shard in the list */
    uint64_t *shard_index;    /* [B] index of the sample in its shard */
} sa1b_batch;

typedef struct sa1b_loader_stats {
    uint64_t images;          /* samples delivered */
    uint64_t batches;         /* batches delivered */
    uint64_t bytes_read;      /* payload and mask bytes read from the shards */
    double elapsed_s;         /* since open */
    double images_per_s;      /* images / elapsed_s */
    double consumer_wait_s;   /* time sa1b_loader_next blocked waiting for a batch */
    double worker_idle_s;     /* summed over workers: time spent waiting for work */
    uint32_t threads, depth;
} sa1b_loader_stats;

typedef struct sa1b_loader sa1b_loader;

/* Opens and validates the shards (sa1b_shard_open), checks that they agree
 * on S, R and format (SA1B_EMISMATCH; packed and run-length masks, format
 * versions 1 and 2, mix freely and give the same batches), checks the configuration (SA1B_EINVAL:
 * B, M or K zero, rank >= world, flip_prob outside [0, 1], no shards, a glob
 * matching nothing; SA1B_ERANGE: consumed > N, sizes overflowing, more
 * than 2^32-1 images; a manifest that cannot be read: SA1B_EIO, one that
 * is not valid: SA1B_EFORMAT or SA1B_EUNSUPPORTED, a shard whose size or
 * image count differs from its manifest row: SA1B_EMISMATCH), computes the
 * first permutation and starts the
 * workers.  On error *L is NULL and err names the shard when one is to
 * blame. */
int sa1b_loader_open(sa1b_loader **L, const sa1b_loader_config *cfg, sa1b_error *err);

/* Waits for the next batch of the stream and hands it out (*batch).
 * SA1B_EOF when max_epochs have been delivered (*batch NULL).  A damaged
 * sample gives its error (see the top of this file; *batch NULL): call
 * again to skip it.  SA1B_EINVAL when the caller already holds all depth
 * buffers (release one first).  SA1B_ENOMEM when the allocator fails. */
int sa1b_loader_next(sa1b_loader *L, sa1b_batch **batch, sa1b_error *err);

/* Gives a batch obtained from sa1b_loader_next back for reuse.  NULL is a
 * no-op. */
void sa1b_loader_release(sa1b_loader *L, sa1b_batch *batch);

/* After sa1b_loader_next reported a damaged sample: its shard path (valid
 * until close), index in the shard and image id; returns 1.  Returns 0
 * (outputs untouched) when the last call reported none.  Outputs may be
 * NULL. */
int sa1b_loader_damaged(const sa1b_loader *L, const char **shard_path, uint64_t *shard_index,
                        int64_t *image_id);

/* Counters so far (see sa1b_loader_stats). */
void sa1b_loader_stats_get(const sa1b_loader *L, sa1b_loader_stats *stats);

/* Dataset facts: images N of all shards, S, R, payload format
 * (SA1B_SHARD_RAW or SA1B_SHARD_JPEG), number of shards, threads and depth
 * in use.  Any output may be NULL. */
void sa1b_loader_info(const sa1b_loader *L, uint64_t *n_images, uint32_t *S, uint32_t *R,
                      int *format, size_t *n_shards, uint32_t *threads, uint32_t *depth);

/* Path of shard i (i < n_shards), valid until close; NULL otherwise. */
const char *sa1b_loader_shard_path(const sa1b_loader *L, size_t i);

/* Bytes of one batch buffer (what the allocator is asked for per buffer). */
size_t sa1b_loader_batch_bytes(const sa1b_loader *L);
/* The same for a loader of micro-batch B, M masks, K points, images of S
 * and masks of R (normalize: the config's), before any is opened (the
 * memory planner's); 0 when too large. */
size_t sa1b_loader_batch_bytes_for(uint32_t B, uint32_t M, uint32_t K, uint32_t S, uint32_t R, int normalize);

/* Stops the workers (also in the middle of an epoch), joins them, frees
 * every batch (also ones the caller still holds: do not use them after)
 * and unmaps the shards.  NULL is a no-op. */
void sa1b_loader_close(sa1b_loader *L);

#ifdef __cplusplus
}
#endif
#endif
