/* hmb-pvar-selftest: the MPI_T pvar module against cases with a known answer (tests/test_pvar.py).
 *
 *   mpiexec -n 2 hmb-pvar-selftest N
 *
 * Rank 0 posts N receives that nothing matches yet and reads the posted-queue length; then rank 1
 * sends N messages nobody has asked for, rank 0 waits until the last is probe-able (messages
 * from one sender arrive in order, so all N wait in the unexpected queue) and reads the
 * unexpected-queue length. Each queue is read again after it was drained. Rank 0 prints one JSON
 * line with what it read; the test holds the known answers. Every received message is checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

enum { TAG_POSTED = 100, TAG_UNEXPECTED = 10000 };

/* Queue variables of the libraries we know: Open MPI's ob1 (bound to a communicator, one value
 * per peer) and MPICH's --enable-mpit-pvars=recvq (bound to nothing, one value; its timers also
 * exist as counters of passes, picked by the class prefix); and one Open MPI variable bound to a
 * window, which the module cannot bind (must come out unavailable). */
static const char *const names[] = {
    "pml_ob1_posted_recvq_length",  "pml_ob1_unexpected_msgq_length",  "posted_recvq_length",
    "unexpected_recvq_length",      "posted_recvq_match_attempts",     "unexpected_recvq_match_attempts",
    "time_failed_matching_postedq", "time_matching_unexpectedq",       "counter:time_matching_unexpectedq",
    "osc_rdma_put_retry_count",
};
enum { NVARS = sizeof names / sizeof names[0] };

/* Every variable's value for the peer: the peer's slot of per-peer variables, else the one value. */
static void sample(hmb_pvars *pv, int peer, double *out)
{
    for (int i = 0; i < NVARS; i++) {
        double values[4096];
        int count = hmb_pvars_count(pv, i);
        out[i] = NAN; /* unavailable: printed as null */
        if (count > 0 && count <= 4096 && hmb_pvars_read(pv, i, values) == count)
            out[i] = values[count > 1 ? peer : 0];
    }
}

static void put_sample(hmb_json *j, const char *key, const double *values)
{
    hmb_json_open_obj(j, key);
    for (int i = 0; i < NVARS; i++) {
        hmb_json_num(j, names[i], values[i]); /* NaN -> null */
    }
    hmb_json_close_obj(j);
}

static void check_payload(long got, long want, const char *phase)
{
    if (got != want) {
        fprintf(stderr, "hmb-pvar-selftest: %s: received %ld, expected %ld\n", phase, got, want);
        exit(HMB_EXIT_VALIDATION);
    }
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long n = argc == 2 ? strtol(argv[1], &end, 10) : 0;
    if (argc != 2 || *end != '\0' || n < 1 || n > 1000) {
        fprintf(stderr, "hmb-pvar-selftest: usage: mpiexec -n 2 hmb-pvar-selftest N (1..1000 messages)\n");
        return HMB_EXIT_USAGE;
    }
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "hmb-pvar-selftest: needs exactly 2 ranks (got %d)\n", size);
        MPI_Finalize();
        return HMB_EXIT_USAGE;
    }
    hmb_pvars *pv = hmb_pvars_open(NULL, names, NVARS, comm);
    hmb_pvars_start(pv);
    long *payload = calloc((size_t)n, sizeof *payload);
    MPI_Request *reqs = calloc((size_t)n, sizeof *reqs);
    double at_start[NVARS], posted[NVARS], posted_drained[NVARS], unexpected[NVARS], unexpected_drained[NVARS];
    const int peer = 1 - rank;

    /* Posted queue: N receives with nothing to match until rank 1 hears "go". */
    if (rank == 0) {
        sample(pv, peer, at_start);
        for (long k = 0; k < n; k++)
            MPI_Irecv(&payload[k], 1, MPI_LONG, peer, TAG_POSTED + (int)k, comm, &reqs[k]);
        sample(pv, peer, posted);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* another communicator: the queues of comm stay as they are */
    if (rank == 1)
        for (long k = 0; k < n; k++)
            MPI_Send(&k, 1, MPI_LONG, peer, TAG_POSTED + (int)k, comm);
    else {
        for (long k = 0; k < n; k++) /* MPI_Waitall with MPI_STATUSES_IGNORE trips gcc's access check */
            MPI_Wait(&reqs[k], MPI_STATUS_IGNORE);
        for (long k = 0; k < n; k++)
            check_payload(payload[k], k, "posted-queue case");
        sample(pv, peer, posted_drained);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* Unexpected queue: N sends nobody has asked for yet. */
    if (rank == 1)
        for (long k = 0; k < n; k++) {
            long value = n + k;
            MPI_Send(&value, 1, MPI_LONG, peer, TAG_UNEXPECTED + (int)k, comm);
        }
    else {
        int arrived = 0;
        while (!arrived)
            MPI_Iprobe(peer, TAG_UNEXPECTED + (int)n - 1, comm, &arrived, MPI_STATUS_IGNORE);
        sample(pv, peer, unexpected);
        for (long k = 0; k < n; k++) {
            MPI_Recv(&payload[k], 1, MPI_LONG, peer, TAG_UNEXPECTED + (int)k, comm, MPI_STATUS_IGNORE);
            check_payload(payload[k], n + k, "unexpected-queue case");
        }
        sample(pv, peer, unexpected_drained);
    }
    hmb_pvars_stop(pv);

    if (rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(version, &len);
        version[strcspn(version, "\n")] = '\0';
        hmb_json j;
        hmb_json_init(&j);
        hmb_json_open_obj(&j, NULL);
        hmb_json_str(&j, "library", version);
        hmb_json_int(&j, "n", n);
        hmb_json_int(&j, "peer", peer);
        hmb_json_open_obj(&j, "vars");
        for (int i = 0; i < NVARS; i++) {
            hmb_json_open_obj(&j, names[i]);
            hmb_json_bool(&j, "available", hmb_pvars_available(pv, i));
            hmb_json_str(&j, "class", hmb_pvars_class(pv, i));
            hmb_json_int(&j, "count", hmb_pvars_count(pv, i));
            hmb_json_str(&j, "unit", hmb_pvars_unit(pv, i));
            hmb_json_close_obj(&j);
        }
        hmb_json_close_obj(&j);
        put_sample(&j, "at_start", at_start);
        put_sample(&j, "posted", posted);
        put_sample(&j, "posted_drained", posted_drained);
        put_sample(&j, "unexpected", unexpected);
        put_sample(&j, "unexpected_drained", unexpected_drained);
        /* What a benchmark's annotate() would put on its result record. */
        hmb_ctx ctx = {0};
        hmb_pvars_record(&ctx, pv, "pvar.");
        hmb_extras_write(&j, "record", &ctx.out.result_extra);
        hmb_extras_clear(&ctx.out.result_extra);
        free(ctx.out.result_extra.items);
        hmb_json_close_obj(&j);
        printf("%.*s\n", (int)j.len, j.data);
        hmb_json_free(&j);
    }
    hmb_pvars_close(pv);
    free(payload);
    free(reqs);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return HMB_EXIT_OK;
}
