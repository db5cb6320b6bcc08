/* A 2-rank MPI program for tests/test_prof.py: two non-blocking receives on rank 0, one whose
 * post-to-wait is spent computing (outside MPI), one whose post-to-wait is spent inside MPI_Test.
 * Rank 0: MPI_Irecv 100 B (tag 1), 20 ms of computation, MPI_Wait;
 *         MPI_Send of a token, MPI_Irecv 200 B (tag 2), MPI_Test until it completes.
 * Rank 1: MPI_Send 100 B (tag 1); MPI_Recv the token, 20 ms of computation, MPI_Send 200 B (tag 2). */
#include <mpi.h>
#include <time.h>

#define SPIN_S 0.02

static void compute(double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < seconds);
}

int main(int argc, char **argv)
{
    int rank, flag = 0, token = 0;
    char small[100] = {0}, large[200] = {0};
    MPI_Request r;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        MPI_Irecv(small, 100, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &r);
        compute(SPIN_S);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        MPI_Send(&token, 1, MPI_INT, 1, 3, MPI_COMM_WORLD);
        MPI_Irecv(large, 200, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &r);
        while (!flag)
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Send(small, 100, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        compute(SPIN_S);
        MPI_Send(large, 200, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
