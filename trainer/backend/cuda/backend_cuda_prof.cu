// backend_cuda_prof.cu - SA1B_CUDA_PROFILE=FILE, a measuring aid of the CUDA
// backend: an event on the stream after every kernel launch and every GEMM
// (launched() of backend_cuda_impl.cuh, and the GEMMs by shape), so that
// the time between two events is the device time of the work enqueued
// between them (the launch just made, plus any copy or memset before it),
// summed by call site.  When the backend is freed FILE gets the table, the
// costliest site first (a rank of a job of several: FILE.RANK; of several
// backends in one process, the last freed writes it).  A host that cannot
// keep the device busy shows as time too: the sum of the rows is the wall
// time from the first event to the last.  Without the variable nothing
// here runs.
#include <cstdlib>
#include <cstring>

#include "backend_cuda_impl.cuh"

namespace sa1b_cuda {

namespace {

const int EVENTS = 1024, SITES = 512;

struct site {
    const char *name, *file;
    int line, dims[4]; // a GEMM's M, N, K and batch; 0 for a kernel
    long calls;
    double ms, first_ms, max_ms; // the first call's (module loading, cuBLAS's choice), the longest
};

} // namespace

struct prof_state {
    cudaEvent_t ev[EVENTS];
    int tag[EVENTS], n, n_sites, lost;
    site sites[SITES];
    char path[4096];
};

int prof_open(cuda_backend *c, const char *path)
{
    if (!path || !*path) return 0;
    prof_state *p = static_cast<prof_state *>(calloc(1, sizeof *p));
    if (!p) return -1;
    // a rank of a job of several (Open MPI, PMI, Slurm) writes FILE.RANK
    static const char *const job[][2] = {
        {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, {"PMI_SIZE", "PMI_RANK"}, {"SLURM_NTASKS", "SLURM_PROCID"}};
    const char *rank = nullptr;
    for (const auto &j : job) {
        const char *n = getenv(j[0]), *r = getenv(j[1]);
        if (n && r && atoi(n) > 1) {
            rank = r;
            break;
        }
    }
    if (rank) snprintf(p->path, sizeof p->path, "%s.%s", path, rank);
    else snprintf(p->path, sizeof p->path, "%s", path);
    for (int i = 0; i < EVENTS; i++)
        if (cudaEventCreate(&p->ev[i]) != cudaSuccess) {
            while (i-- > 0) cudaEventDestroy(p->ev[i]);
            free(p);
            return -1;
        }
    c->prof = p;
    return 0;
}

// the times of events 1..upto into their sites; event upto becomes the
// first (the start of the next interval), the later ones follow it.  A
// full ring drains its older half, so that the device still has the newer
// half's work queued while the host reads the times.
static void prof_drain(cuda_backend *c, int upto)
{
    prof_state *p = c->prof;
    if (upto < 1 || upto >= p->n || cudaEventSynchronize(p->ev[upto]) != cudaSuccess) return;
    for (int i = 1; i <= upto; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]) != cudaSuccess) continue;
        site *s = &p->sites[p->tag[i]];
        if (!s->calls) s->first_ms = ms;
        if (ms > s->max_ms) s->max_ms = ms;
        s->ms += ms, s->calls++;
    }
    cudaEvent_t done[EVENTS];
    memcpy(done, p->ev, (size_t)upto * sizeof *done); // events 0..upto-1: free again
    memmove(p->ev, p->ev + upto, (size_t)(p->n - upto) * sizeof *p->ev);
    memmove(p->tag, p->tag + upto, (size_t)(p->n - upto) * sizeof *p->tag);
    p->n -= upto;
    memcpy(p->ev + p->n, done, (size_t)upto * sizeof *done);
}

void prof_gemm(cuda_backend *c, const char *name, const char *file, int line, int M, int N, int K, int batch)
{
    prof_state *p = c->prof;
    const int dims[4] = {M, N, K, batch};
    int s = 0;
    while (s < p->n_sites && !(p->sites[s].name == name && p->sites[s].line == line &&
                               !memcmp(p->sites[s].dims, dims, sizeof dims)))
        s++;
    if (s == p->n_sites) {
        if (s >= SITES - 1) { // the table's last row sums every further site
            s = SITES - 1;
            if (!p->lost++) p->sites[s].name = "(other sites)", p->sites[s].file = "-", p->n_sites = SITES;
        } else {
            p->sites[s].name = name, p->sites[s].file = file, p->sites[s].line = line;
            memcpy(p->sites[s].dims, dims, sizeof dims);
            p->n_sites++;
        }
    }
    if (p->n == EVENTS) prof_drain(c, EVENTS / 2);
    if (p->n == EVENTS || cudaEventRecord(p->ev[p->n], c->st) != cudaSuccess) return;
    p->tag[p->n++] = s;
}

void prof_mark(cuda_backend *c, const char *name, const char *file, int line)
{
    prof_gemm(c, name, file, line, 0, 0, 0, 0);
}

static int by_time(const void *a, const void *b)
{
    double x = static_cast<const site *>(a)->ms, y = static_cast<const site *>(b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void prof_close(cuda_backend *c)
{
    prof_state *p = c->prof;
    if (!p) return;
    prof_drain(c, p->n - 1);
    qsort(p->sites, (size_t)p->n_sites, sizeof p->sites[0], by_time);
    double total = 0;
    for (int i = 0; i < p->n_sites; i++) total += p->sites[i].ms;
    FILE *f = fopen(p->path, "w");
    if (f) {
        fprintf(f, "# SA1B_CUDA_PROFILE: %.3f ms between the first event and the last, %d sites%s\n", total,
                p->n_sites, p->lost ? " ('(other sites)' sums those past the table's end)" : "");
        fprintf(f, "ms\tshare\tcalls\tus_per_call\tfirst_us\tmax_us\tsite\twhat\n");
        for (int i = 0; i < p->n_sites; i++) {
            const site *s = &p->sites[i];
            const char *base = strrchr(s->file, '/');
            char where[160];
            if (!strcmp(s->file, "-")) snprintf(where, sizeof where, "-");
            else snprintf(where, sizeof where, "%s:%d", base ? base + 1 : s->file, s->line);
            char what[96];
            if (s->dims[0])
                snprintf(what, sizeof what, "%s %dx%dx%d x%d", s->name, s->dims[0], s->dims[1], s->dims[2],
                         s->dims[3]);
            else
                snprintf(what, sizeof what, "%s", s->name);
            fprintf(f, "%.3f\t%.1f%%\t%ld\t%.1f\t%.1f\t%.1f\t%s\t%s\n", s->ms, total > 0 ? 100 * s->ms / total : 0.0,
                    s->calls, s->calls ? 1000 * s->ms / (double)s->calls : 0.0, 1000 * s->first_ms, 1000 * s->max_ms,
                    where, what);
        }
        fclose(f);
    }
    for (int i = 0; i < EVENTS; i++) cudaEventDestroy(p->ev[i]);
    free(p);
    c->prof = nullptr;
}

} // namespace sa1b_cuda
