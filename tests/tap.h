/*
 * tap.h - a tiny TAP producer for the C unit tests (header only).
 *
 *   int main(void) {
 *       tap_plan(3);                 // or tap_plan(0) + tap_done() at the end
 *       tap_ok(1 + 1 == 2, "adds");
 *       tap_is_int(f(), 4, "f gives 4");
 *       tap_skip(1, "needs a GPU");
 *       return tap_done();
 *   }
 *
 * tap_skip_all() prints "1..0 # SKIP why" and exits 77; tests/tap-wrap.sh turns
 * that into a clean skip for automake's TAP driver.  Everything goes to stdout
 * except diagnostics ("# ..."), which also go to stdout so the driver logs them.
 */
#ifndef SA1B_TAP_H
#define SA1B_TAP_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n_ = 0, tap_failed_ = 0, tap_planned_ = -1;

static inline void tap_plan(int n)
{
    if (n > 0) { printf("1..%d\n", n); tap_planned_ = n; }
    fflush(stdout);
}

static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    tap_n_++;
    printf("%sok %d - ", cond ? "" : "not ", tap_n_);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) tap_failed_++;
    fflush(stdout);
    return cond;
}

#define tap_is_int(got, want, ...)                                             \
    do {                                                                       \
        long long tap_g_ = (long long)(got), tap_w_ = (long long)(want);       \
        if (!tap_ok(tap_g_ == tap_w_, __VA_ARGS__))                            \
            tap_diag("got %lld, want %lld", tap_g_, tap_w_);                   \
    } while (0)

#define tap_is_str(got, want, ...)                                             \
    do {                                                                       \
        const char *tap_g_ = (got), *tap_w_ = (want);                          \
        int tap_c_ = tap_g_ && tap_w_ && strcmp(tap_g_, tap_w_) == 0;          \
        if (!tap_ok(tap_c_, __VA_ARGS__))                                      \
            tap_diag("got \"%s\", want \"%s\"", tap_g_ ? tap_g_ : "(null)",    \
                     tap_w_ ? tap_w_ : "(null)");                              \
    } while (0)

/* |got - want| <= tol * max(1, |want|) */
#define tap_is_close(got, want, tol, ...)                                      \
    do {                                                                       \
        double tap_g_ = (got), tap_w_ = (want);                                \
        double tap_s_ = fabs(tap_w_) > 1.0 ? fabs(tap_w_) : 1.0;               \
        if (!tap_ok(fabs(tap_g_ - tap_w_) <= (tol) * tap_s_, __VA_ARGS__))     \
            tap_diag("got %.9g, want %.9g", tap_g_, tap_w_);                   \
    } while (0)

static inline void tap_skip(int n, const char *why)
{
    for (int i = 0; i < n; i++) printf("ok %d # SKIP %s\n", ++tap_n_, why);
    fflush(stdout);
}

static inline void tap_skip_all(const char *why)
{
    printf("1..0 # SKIP %s\n", why);
    fflush(stdout);
    exit(77);
}

static inline int tap_done(void)
{
    if (tap_planned_ < 0) printf("1..%d\n", tap_n_);
    fflush(stdout);
    return tap_failed_ ? 1 : 0;
}

#endif
