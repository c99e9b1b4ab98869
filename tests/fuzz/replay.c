/*
 * replay.c - replays fuzz corpora through a libFuzzer target in every build
 * (sqlite's fuzzcheck idea): linked with one tests/fuzz/fuzz-NAME.c, it
 * feeds each file of the directories (or files) named on the command line to
 * LLVMFuzzerTestOneInput and prints one TAP line per input.  Without
 * arguments it replays FUZZ_CORPUS, a directory fixed at build time.  A crash or a
 * sanitizer report fails the test run; the target itself asserts nothing.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_file(const char *path, int *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("not ok %d - cannot open %s\n", ++*n, path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        printf("not ok %d - out of memory reading %s\n", ++*n, path);
        return 1;
    }
    /* an exact-size copy so that ASan sees any read past the input */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    printf("ok %d - %s\n", ++*n, path);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0, bad = 0;
#ifdef FUZZ_CORPUS
    /* built as a test: no arguments means the target's own corpus */
    static char *deflt[] = {NULL, FUZZ_CORPUS, NULL};
    if (argc < 2) {
        deflt[0] = argv[0];
        argv = deflt;
        argc = 2;
    }
#endif
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            printf("not ok %d - missing corpus %s\n", ++n, argv[a]);
            bad++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += replay_file(argv[a], &n);
            continue;
        }
        DIR *d = opendir(argv[a]);
        char **names = NULL;
        size_t k = 0, cap = 0;
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            if (k == cap) names = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof *names);
            names[k++] = strdup(e->d_name);
        }
        if (d) closedir(d);
        qsort(names, k, sizeof *names, cmp);
        for (size_t i = 0; i < k; i++) {
            size_t m = strlen(argv[a]) + strlen(names[i]) + 2;
            char *p = malloc(m);
            snprintf(p, m, "%s/%s", argv[a], names[i]);
            bad += replay_file(p, &n);
            free(p);
            free(names[i]);
        }
        free(names);
    }
    printf("1..%d\n", n);
    return bad ? 1 : 0;
}
