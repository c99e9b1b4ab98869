/*
 * mpi-count.c - a PMPI shim for t1770 (LD_PRELOAD'ed into sa1b-train's
 * ranks): counts the floats each rank hands to MPI's float collectives
 * (MPI_Allreduce, MPI_Reduce_scatter, MPI_Allgatherv) and passes every call
 * on to the library (PMPI_*); at MPI_Finalize rank R writes its counts to
 * $SA1B_MPI_COUNT.R, one "name floats calls" line per collective.  So a
 * test sees which collective moved the gradients, not what the trainer
 * says it did.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { ALLREDUCE, REDUCE, ALLGATHERV, N_COLL };
static const char *const names[N_COLL] = {"allreduce", "reduce", "allgatherv"};
static unsigned long long floats[N_COLL], calls[N_COLL];

static void count(int which, MPI_Datatype dt, unsigned long long n)
{
    if (dt != MPI_FLOAT) return;
    floats[which] += n, calls[which]++;
}

/* the sum of the world's counts[] */
static unsigned long long total(MPI_Comm comm, const int counts[])
{
    int world = 0;
    PMPI_Comm_size(comm, &world);
    unsigned long long n = 0;
    for (int r = 0; r < world; r++) n += (unsigned long long)counts[r];
    return n;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int n, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    count(ALLREDUCE, dt, (unsigned long long)n);
    return PMPI_Allreduce(sendbuf, recvbuf, n, dt, op, comm);
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int n, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm)
{
    count(REDUCE, dt, (unsigned long long)n);
    return PMPI_Reduce(sendbuf, recvbuf, n, dt, op, root, comm);
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                   const int displs[], MPI_Datatype recvtype, MPI_Comm comm)
{
    count(ALLGATHERV, recvtype, total(comm, recvcounts));
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
}

int MPI_Finalize(void)
{
    const char *to = getenv("SA1B_MPI_COUNT");
    int rank = 0;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[4096];
    FILE *f = NULL;
    if (to && snprintf(path, sizeof path, "%s.%d", to, rank) < (int)sizeof path) f = fopen(path, "w");
    if (f) {
        for (int k = 0; k < N_COLL; k++) fprintf(f, "%s %llu %llu\n", names[k], floats[k], calls[k]);
        fclose(f);
    }
    return PMPI_Finalize();
}
