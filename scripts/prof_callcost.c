/* CPU cost of libhmbprof.so per wrapped call, free of machine load: one rank exchanges 8 B with
 * itself (MPI_Irecv + MPI_Isend + MPI_Waitall, 3 wrapped calls, 2 tracked requests) and reports the
 * thread's CPU time per exchange (CLOCK_THREAD_CPUTIME_ID: time descheduled does not count), the
 * median of 7 batches. Run by scripts/prof_overhead.py --case callcost, with and without the preload. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCHES 7
#define PER_BATCH 50000

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    char out[8] = "hmbprof", in[8];
    double ns[BATCHES];
    MPI_Init(&argc, &argv);
    for (int b = 0; b < BATCHES; b++) {
        double t0 = cpu_s();
        for (int i = 0; i < PER_BATCH; i++) {
            MPI_Request r[2];
            MPI_Irecv(in, 8, MPI_BYTE, 0, 0, MPI_COMM_SELF, &r[0]);
            MPI_Isend(out, 8, MPI_BYTE, 0, 0, MPI_COMM_SELF, &r[1]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        }
        ns[b] = 1e9 * (cpu_s() - t0) / PER_BATCH;
    }
    qsort(ns, BATCHES, sizeof ns[0], cmp);
    printf("cpu_ns_per_exchange %.1f\n", ns[BATCHES / 2]);
    MPI_Finalize();
    return 0;
}
