/* A 2-rank MPI program with a known traffic, for tests/test_prof.py (counts computed by hand there).
 * Rank 0 -> 1: 3 MPI_Send of 100 B; 2 MPI_Isend of 1250 doubles (10000 B) + MPI_Waitall;
 * 1 MPI_Issend of 7 ints (28 B) on a communicator with reversed ranks + MPI_Test loop;
 * 1 MPI_Sendrecv (5 B out, 9 B in). Rank 1 receives with MPI_ANY_SOURCE, MPI_Waitany + MPI_Wait.
 * Then, with MPI_THREAD_MULTIPLE, 2 threads per rank exchange 50 messages of 64 B each way
 * (MPI_Isend + MPI_Irecv + MPI_Waitall, tag = thread). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

#define THREAD_MSGS 50

static int rank;

static void *exchange(void *arg)
{
    int tag = 100 + (int)(long)arg;
    char out[64] = {0}, in[64];
    for (int i = 0; i < THREAD_MSGS; i++) {
        MPI_Request r[2];
        MPI_Irecv(in, 64, MPI_BYTE, 1 - rank, tag, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(out, 64, MPI_BYTE, 1 - rank, tag, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    static char buf[2][20000];
    MPI_Request r[2];
    MPI_Comm rev;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &rev);
    if (rank == 0) {
        for (int i = 0; i < 3; i++)
            MPI_Send(buf[0], 100, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        for (int i = 0; i < 2; i++)
            MPI_Isend(buf[i], 1250, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, &r[i]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        MPI_Issend(buf[0], 7, MPI_INT, 0, 2, rev, &r[0]);
        for (int flag = 0; !flag;)
            MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
        MPI_Sendrecv(buf[0], 5, MPI_BYTE, 1, 3, buf[1], 20000, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        for (int i = 0; i < 3; i++)
            MPI_Recv(buf[0], 20000, MPI_BYTE, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < 2; i++)
            MPI_Irecv(buf[i], 20000, MPI_BYTE, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &r[i]);
        int idx;
        MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE);
        MPI_Wait(&r[1 - idx], MPI_STATUS_IGNORE);
        MPI_Irecv(buf[0], 20000, MPI_BYTE, 1, 2, rev, &r[0]);
        MPI_Wait(&r[0], MPI_STATUS_IGNORE);
        MPI_Sendrecv(buf[0], 9, MPI_BYTE, 0, 3, buf[1], 20000, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (provided == MPI_THREAD_MULTIPLE) {
        pthread_t t[2];
        for (long i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, exchange, (void *)i);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    }
    MPI_Comm_free(&rev);
    MPI_Finalize();
    printf("provided %d\n", provided);
    return 0;
}
