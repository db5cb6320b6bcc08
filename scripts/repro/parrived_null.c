/* Minimal reproducer, outside HMB: MPI 4.0 §4.2.2 says MPI_Parrived on MPI_REQUEST_NULL returns
 * flag = true. Build with the library's mpicc, run on 1 rank. Seen here (docs/findings.md): MPICH 5.0.2
 * and Intel MPI 2021 (wheels) die with a segmentation fault; Open MPI 5.0.11: rc=0 flag=1. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int flag = 0;
    printf("calling MPI_Parrived(MPI_REQUEST_NULL)\n"); fflush(stdout);
    int rc = MPI_Parrived(MPI_REQUEST_NULL, 0, &flag);
    printf("rc=%d flag=%d\n", rc, flag);
    MPI_Finalize();
    return 0;
}
