/* A minimal MPI ping-pong, the reference `hmb check` sets hmb-bench's p2p latency against.
 * Deliberately independent of the harness (no shared code): ranks 0 and 1 exchange a message
 * of each size; a sample is BATCH back-to-back round trips timed together with MPI_Wtime, and
 * rank 0 prints one line per size, "SIZE MEDIAN_ONE_WAY_US", the median sample / (2 BATCH) --
 * the same statistic as hmb-bench p2p --mode latency --batch BATCH.
 *
 *   mpiexec -n 2 hmb-pingpong ITERS BATCH SIZE [SIZE ...]
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 3 ? atoi(argv[1]) : 0, batch = argc > 3 ? atoi(argv[2]) : 0;
    if (size < 2 || iters < 1 || batch < 1) {
        if (rank == 0)
            fprintf(stderr, "usage: mpiexec -n 2 %s ITERS BATCH SIZE [SIZE ...]\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    double *round_trip_s = malloc((size_t)iters * sizeof *round_trip_s);
    for (int a = 3; a < argc; a++) {
        size_t bytes = (size_t)strtoull(argv[a], NULL, 10);
        char *buf = malloc(bytes ? bytes : 1);
        memset(buf, rank, bytes ? bytes : 1);
        int warmup = iters / 10 + 1;
        for (int i = -warmup; i < iters; i++) {
            if (rank == 0) {
                double t0 = MPI_Wtime();
                for (int b = 0; b < batch; b++) {
                    MPI_Send(buf, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
                if (i >= 0)
                    round_trip_s[i] = (MPI_Wtime() - t0) / batch;
            } else if (rank == 1) {
                for (int b = 0; b < batch; b++) {
                    MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
                }
            }
        }
        if (rank == 0) {
            qsort(round_trip_s, (size_t)iters, sizeof *round_trip_s, cmp_double);
            double median = iters % 2 ? round_trip_s[iters / 2]
                                      : 0.5 * (round_trip_s[iters / 2 - 1] + round_trip_s[iters / 2]);
            printf("%zu %.4f\n", bytes, 0.5 * median * 1e6);
            fflush(stdout);
        }
        free(buf);
    }
    free(round_trip_s);
    MPI_Finalize();
    return 0;
}
