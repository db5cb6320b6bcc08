/* Minimal reproducer, outside HMB: does a partitioned receive buffer stay untouched between the
 * completion of one round and the MPI_Start of the next (MPI 4.0 §4.2: an inactive request's
 * buffer belongs to the application)?
 *
 * Rank 1 sends K partitioned messages (one partition each, K requests initialised in the same
 * order on both sides, tags 7, 8, ...) to rank 0, ROUNDS times, with no synchronisation between
 * rounds: the sender starts round r + 1 as soon as its own requests of round r completed. Rank 0,
 * after its Waitall of round r, waits 5 ms and then checks every buffer still holds round r's
 * bytes. Build with the MPI's mpicc; run on 2 ranks:  ./partitioned_rounds [bytes K rounds]
 * Seen on this project's machine (docs/findings.md): Open MPI 5.0.11 (wheel) with K = 2 and
 * 1 KB: request 1's buffer holds round r + 1's bytes while still inactive, then the run hangs;
 * MPICH 5.0.2: ok. K = 1: ok on both. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int provided, rank, bad = 0;
    int n = argc > 1 ? atoi(argv[1]) : 1024, K = argc > 2 ? atoi(argv[2]) : 2, rounds = argc > 3 ? atoi(argv[3]) : 5;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    unsigned char *buf = malloc((size_t)n * K);
    MPI_Request *req = malloc(K * sizeof *req);
    for (int k = 0; k < K; k++) {
        if (rank == 1)
            MPI_Psend_init(buf + (size_t)k * n, 1, n, MPI_BYTE, 0, 7 + k, MPI_COMM_WORLD, MPI_INFO_NULL, &req[k]);
        else
            MPI_Precv_init(buf + (size_t)k * n, 1, n, MPI_BYTE, 1, 7 + k, MPI_COMM_WORLD, MPI_INFO_NULL, &req[k]);
    }
    for (int r = 0; r < rounds; r++) {
        if (rank == 1)
            for (int k = 0; k < K; k++)
                memset(buf + (size_t)k * n, (r * K + k) % 251 + 1, n);
        MPI_Startall(K, req);
        if (rank == 1)
            for (int k = 0; k < K; k++)
                MPI_Pready(0, req[k]);
        MPI_Waitall(K, req, MPI_STATUSES_IGNORE);
        if (rank == 0) {
            usleep(5000); /* the sender may run ahead into round r + 1 meanwhile */
            for (int k = 0; k < K; k++) {
                int want = (r * K + k) % 251 + 1, first = buf[(size_t)k * n], last = buf[(size_t)k * n + n - 1];
                if (first != want || last != want) {
                    printf("round %d request %d: buffer holds %d..%d, want %d (round %d's bytes: %s)\n", r, k, first,
                           last, want, r, first == want + K ? "the next round's, written while inactive" : "other");
                    fflush(stdout);
                    bad++;
                }
            }
        }
    }
    if (rank == 0)
        printf("%d bytes, %d requests, %d rounds: %s\n", n, K, rounds, bad ? "WRONG DATA" : "ok");
    for (int k = 0; k < K; k++)
        MPI_Request_free(&req[k]);
    free(req);
    free(buf);
    MPI_Finalize();
    return bad != 0;
}
