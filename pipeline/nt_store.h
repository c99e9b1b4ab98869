/*
 * nt_store.h - copies and zero fills with streaming (non-temporal) stores,
 * for buffers that this thread writes but does not read back: a writer's
 * staging buffer read next by the disk's DMA, a batch row read next by the
 * loader's consumer.  Their lines are then neither fetched into the cache
 * before being written nor left in it to push the thread's own data out.
 * Without SSE2, plain memcpy and memset.  The stores are weakly ordered:
 * call nt_fence() before another thread or a system call reads the bytes.
 * Internal to the pipeline (header only, no state).
 */
#ifndef SA1B_NT_STORE_H
#define SA1B_NT_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define NT_HAVE_SSE2 1
#endif

/* dst[0..n) = src[0..n) (no overlap). */
static inline void nt_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
#ifdef NT_HAVE_SSE2
    size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (head > n) head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)src);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + 48));
        _mm_stream_si128((__m128i *)(void *)dst, a);
        _mm_stream_si128((__m128i *)(void *)(dst + 16), b);
        _mm_stream_si128((__m128i *)(void *)(dst + 32), c);
        _mm_stream_si128((__m128i *)(void *)(dst + 48), d);
    }
#endif
    memcpy(dst, src, n);
}

/* dst[0..n) = 0. */
static inline void nt_zero(uint8_t *dst, size_t n)
{
#ifdef NT_HAVE_SSE2
    size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (head > n) head = n;
    memset(dst, 0, head);
    dst += head, n -= head;
    const __m128i z = _mm_setzero_si128();
    for (; n >= 64; n -= 64, dst += 64) {
        _mm_stream_si128((__m128i *)(void *)dst, z);
        _mm_stream_si128((__m128i *)(void *)(dst + 16), z);
        _mm_stream_si128((__m128i *)(void *)(dst + 32), z);
        _mm_stream_si128((__m128i *)(void *)(dst + 48), z);
    }
#endif
    memset(dst, 0, n);
}

/* Orders the streaming stores before what follows. */
static inline void nt_fence(void)
{
#ifdef NT_HAVE_SSE2
    _mm_sfence();
#endif
}

#endif
