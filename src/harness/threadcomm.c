/* MPI + threads communication resources (seed 003): communicators carrying the MPI 4.0 info
 * assertions, and MPICH's MPIX streams with a communicator each. One home for what mt's lanes
 * and halo3d --thread-comm both create (hmb/threads.h). */
#include <stdio.h>

#include "hmb/bench.h"

MPI_Comm hmb_comm_dup_asserting(MPI_Comm base, const char *const *keys, int n, char (*kept)[64])
{
    MPI_Info info, got;
    MPI_Comm comm;
    MPI_Info_create(&info);
    for (int k = 0; k < n; k++)
        MPI_Info_set(info, keys[k], "true");
    MPI_Comm_dup_with_info(base, info, &comm);
    MPI_Info_free(&info);
    MPI_Comm_get_info(comm, &got);
    for (int k = 0; k < n; k++) {
        int flag = 0;
#ifdef HMB_HAVE_MPI_INFO_GET_STRING
        int buflen = 64;
        MPI_Info_get_string(got, keys[k], &buflen, kept[k], &flag);
#else
        MPI_Info_get(got, keys[k], 63, kept[k], &flag);
#endif
        if (!flag)
            snprintf(kept[k], 64, "(not kept)");
    }
    MPI_Info_free(&got);
    return comm;
}

const char *hmb_streams_unsupported(hmb_ctx *ctx, int nstreams, char *buf, size_t len)
{
    if (!HMB_HAVE_STREAMS)
        return "stream: this MPI has no MPIX_Stream_create/MPIX_Stream_comm_create (an MPICH extension)";
    long long reserve = -1;
    if (!hmb_mpit_cvar_int("MPIR_CVAR_CH4_RESERVE_VCIS", &reserve))
        return "stream: MPIR_CVAR_CH4_RESERVE_VCIS is not exposed through MPI_T";
    if (!hmb_all_agree(ctx, reserve >= nstreams)) {
        snprintf(buf, len, "stream: needs MPIR_CVAR_CH4_RESERVE_VCIS >= %d, got %lld (a reserved VCI per stream)",
                 nstreams, reserve);
        return buf;
    }
    return NULL;
}

void hmb_stream_create(hmb_stream *stream)
{
#if HMB_HAVE_STREAMS
    MPIX_Stream_create(MPI_INFO_NULL, stream);
#else
    *stream = 0; /* unreachable: hmb_streams_unsupported said no */
#endif
}

void hmb_stream_comm(MPI_Comm base, hmb_stream stream, MPI_Comm *comm)
{
#if HMB_HAVE_STREAMS
    MPIX_Stream_comm_create(base, stream, comm);
#else
    (void)base, (void)stream;
    *comm = MPI_COMM_NULL; /* unreachable: hmb_streams_unsupported said no */
#endif
}

void hmb_stream_free(hmb_stream *stream)
{
#if HMB_HAVE_STREAMS
    MPIX_Stream_free(stream);
#else
    (void)stream;
#endif
}
