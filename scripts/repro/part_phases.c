/* Reproducer, outside HMB, of MPICH's bimodal `part --partitions 1 --compute 1ms` launches:
 * which phase changes between launches? Per iteration, three phases like hmb-bench part
 * (src/bench/part/pattern.c), each after a barrier, the sender spinning C µs before its send:
 *   single:      MPI_Send of the whole message; the receiver sits in MPI_Recv. t = recv end - join
 *   persistent:  MPI_Send_init/MPI_Recv_init made once; receive started before the barrier.
 *   partitioned: MPI_Psend_init/MPI_Precv_init with 1 partition, both started before the barrier;
 *                MPI_Pready at the join; the receiver polls MPI_Parrived. t = first arrival - Pready
 * Ranks on one host: CLOCK_MONOTONIC is one time base. Prints the median of each phase and
 * the ratios partitioned/single (HMB's overhead) and partitioned/persistent, plus the CPU each
 * rank ran on at the start and end (sched_getcpu), one line per launch.
 * Build: mpicc -O2 -o part_phases part_phases.c; run: mpiexec -n 2 -bind-to core ./part_phases
 * [bytes=1048576 compute_us=1000 iters=30 poll=0]; poll=1: the single phase's receiver polls
 * MPI_Test on an MPI_Irecv instead of blocking in MPI_Recv. Run several launches: one launch is
 * not the library. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void spin(double seconds) /* compute with no MPI call */
{
    double end = now() + seconds;
    while (now() < end)
        ;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
    const double c = (argc > 2 ? atof(argv[2]) : 1000) * 1e-6;
    const int iters = argc > 3 ? atoi(argv[3]) : 30;
    const int poll = argc > 4 && atoi(argv[4]) == 1; /* single: MPI_Irecv + MPI_Test loop, not MPI_Recv */
    const int cpu0 = sched_getcpu();
    unsigned char *sbuf = malloc(n), *r1 = malloc(n), *r2 = malloc(n), *r3 = malloc(n);
    memset(sbuf, 1, n);
    memset(r1, 0, n), memset(r2, 0, n), memset(r3, 0, n);
    MPI_Request pers, part;
    if (rank == 0) {
        MPI_Send_init(sbuf, n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &pers);
        MPI_Psend_init(sbuf, 1, n, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &part);
    } else {
        MPI_Recv_init(r2, n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &pers);
        MPI_Precv_init(r3, 1, n, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &part);
    }
    double *t[3];
    for (int p = 0; p < 3; p++)
        t[p] = calloc(iters, sizeof(double));
    for (int i = -2; i < iters; i++) { /* two warm-up iterations */
        double join[3] = {0}, end[3] = {0};
        /* single */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            spin(c);
            join[0] = now();
            MPI_Send(sbuf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        } else {
            if (poll) {
                MPI_Request q;
                int done = 0;
                MPI_Irecv(r1, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &q);
                while (!done)
                    MPI_Test(&q, &done, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(r1, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            end[0] = now();
        }
        /* persistent */
        if (rank == 1)
            MPI_Start(&pers);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            spin(c);
            join[1] = now();
            MPI_Start(&pers);
            MPI_Wait(&pers, MPI_STATUS_IGNORE);
        } else {
            MPI_Wait(&pers, MPI_STATUS_IGNORE);
            end[1] = now();
        }
        /* partitioned */
        MPI_Start(&part);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            spin(c);
            join[2] = now();
            MPI_Pready(0, part);
            int done = 0;
            while (!done)
                MPI_Test(&part, &done, MPI_STATUS_IGNORE);
        } else {
            int arrived = 0;
            while (!arrived)
                MPI_Parrived(part, 0, &arrived);
            end[2] = now();
            MPI_Wait(&part, MPI_STATUS_IGNORE);
        }
        /* both ranks on one host: the receiver's end times against the sender's joins */
        MPI_Bcast(join, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Bcast(end, 3, MPI_DOUBLE, 1, MPI_COMM_WORLD);
        for (int p = 0; p < 3 && i >= 0; p++)
            t[p][i] = end[p] - join[p];
    }
    int cpus[2] = {cpu0, sched_getcpu()}, peer[2] = {-1, -1};
    if (rank == 1)
        MPI_Send(cpus, 2, MPI_INT, 0, 9, MPI_COMM_WORLD);
    else
        MPI_Recv(peer, 2, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 0) {
        double s = median(t[0], iters), ps = median(t[1], iters), pa = median(t[2], iters);
        printf("%s bytes %d compute %.0f us: single %.1f us  persistent %.1f us  partitioned %.1f us  "
               "part/single %.2f  part/persistent %.2f  cpus sender %d->%d receiver %d->%d\n",
               poll ? "poll" : "block", n, c * 1e6, s * 1e6, ps * 1e6, pa * 1e6, pa / s, pa / ps, cpus[0], cpus[1], peer[0], peer[1]);
    }
    MPI_Request_free(&pers);
    MPI_Request_free(&part);
    MPI_Finalize();
    return 0;
}
