/*
 * sa1b-verify - checks shards completely: the structure (what the reader
 * validates at open), the layout (no overlaps, zero padding) and the
 * CRC32C of every image payload and mask block.  Each problem is reported
 * on stderr with its byte offset and record; one result line per file on
 * stdout.  Man page: sa1b-verify(1).
 */
#include "cli.h"
#include "sa1b_shard.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct options {
    int stats, quiet;
} options;

static void usage(void)
{
    printf("Usage: %s [OPTIONS] FILE...\n"
           "Check sa1b shards: structure, layout and the CRC32C of every payload.\n"
           "Problems go to stderr with their byte offset and record; one line per\n"
           "file to stdout (\"FILE: ok ...\" or \"FILE: damaged ...\").\n"
           "\n"
           "Options:\n"
           "  -q, --quiet      no result lines on stdout (problems are still reported)\n"
           "  -s, --stats      report the throughput of every file on stderr (the\n"
           "                   default when stderr is a terminal)\n"
           "  -h, --help       show this help and exit\n"
           "  -V, --version    show the version and exit\n"
           "\n"
           "Exit status: 0 every file is intact, 1 a file is damaged or not a shard,\n"
           "2 usage error, 3 a file could not be read.\n",
           cli_prog());
}

static int verify(const char *file, const options *o)
{
    double t0 = cli_now();
    sa1b_shard *s = NULL;
    sa1b_error err;
    sa1b_error_clear(&err);
    int rc = sa1b_shard_open(&s, file, &err);
    if (rc) {
        cli_warn("'%s': %s", file, err.msg);
        if (rc == SA1B_EIO) return CLI_EXIT_FATAL;
        if (!o->quiet) printf("%s: damaged (%s)\n", file, sa1b_strerror(rc));
        return CLI_EXIT_PARTIAL;
    }
    const sa1b_shard_info info = *sa1b_shard_get_info(s); /* outlives the close below */
    const sa1b_shard_info *in = &info;
    uint64_t problems = 0;
    if (sa1b_shard_verify_layout(s, &err)) {
        cli_warn("'%s': %s", file, err.msg);
        problems++;
    }
    cli_progress prog;
    cli_progress_init(&prog, o->quiet);
    uint64_t done = 0;
    for (uint64_t i = 0; i < in->n_images; i++) {
        sa1b_shard_image_view im;
        if (sa1b_shard_image(s, i, &im, &err) || sa1b_shard_verify_image(s, i, &err)) {
            cli_progress_end(&prog);
            cli_warn("'%s': %s", file, err.msg);
            problems++;
            continue;
        }
        done += im.payload_len + im.masks_len;
        if ((i & 63) == 0) {
            double dt = cli_now() - t0;
            cli_progress_update(&prog, i, in->n_images, "%.2f GB/s",
                                dt > 0 ? (double)done / dt / 1e9 : 0.0);
        }
    }
    cli_progress_end(&prog);
    double dt = cli_now() - t0;
    sa1b_shard_close(s);
    if (!o->quiet) {
        if (problems)
            printf("%s: damaged (%llu problem%s)\n", file, (unsigned long long)problems,
                   problems == 1 ? "" : "s");
        else
            printf("%s: ok (%llu images, %llu masks, %llu bytes)\n", file,
                   (unsigned long long)in->n_images, (unsigned long long)in->n_masks,
                   (unsigned long long)in->file_size);
    }
    if (o->stats)
        cli_warn("'%s': %.3f GB checked in %.3f s: %.2f GB/s", file, (double)in->file_size / 1e9,
                 dt, dt > 0 ? (double)in->file_size / dt / 1e9 : 0.0);
    return problems ? CLI_EXIT_PARTIAL : CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    static const struct option longopts[] = {
        {"quiet", no_argument, NULL, 'q'}, {"stats", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},  {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    options o = {0, 0};
    o.stats = isatty(STDERR_FILENO);
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "qshV", longopts, NULL)) != -1) {
        switch (c) {
        case 'q': o.quiet = 1; break;
        case 's': o.stats = 1; break;
        case 'h': usage(); return CLI_EXIT_OK;
        case 'V': cli_version(); return CLI_EXIT_OK;
        default:
            if (optopt) cli_usage_error("unknown option '-%c'", optopt);
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) cli_usage_error("no shard file given");
    int status = CLI_EXIT_OK;
    for (int i = optind; i < argc; i++) {
        int r = verify(argv[i], &o);
        if (r > status) status = r;
    }
    fflush(stdout);
    return status;
}
