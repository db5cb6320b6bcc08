/* Receive-buffer poison that does not dirty the buffer, and what poison in a wrong buffer says (pure:
 * also in libhmbcore for the tests). */
#include <stdio.h>
#include <string.h>

#include "hmb/data.h"

void hmb_poison_pages(void *buf, size_t len)
{
    unsigned char *p = buf;
    if (len < 16) {
        memset(p, HMB_POISON_BYTE, len);
        return;
    }
    for (size_t off = 0; off + 8 <= len; off += 4096)
        memset(p + off, HMB_POISON_BYTE, 8);
    memset(p + len - 8, HMB_POISON_BYTE, 8);
}

static int all_bytes(const unsigned char *p, size_t len, unsigned char byte)
{
    for (size_t k = 0; k < len; k++)
        if (p[k] != byte)
            return 0;
    return len > 0;
}

/* The one byte every wrong byte of got holds (want: what it should hold), or -1: none wrong, or wrong
 * bytes that differ. How many are wrong goes to *wrong. */
static int wrong_bytes_are(const unsigned char *got, const unsigned char *want, size_t len, size_t *wrong)
{
    int byte = -1;
    *wrong = 0;
    for (size_t k = 0; k < len; k++) {
        if (got[k] == want[k])
            continue;
        if (byte >= 0 && got[k] != byte)
            return -1;
        byte = got[k];
        ++*wrong;
    }
    return byte;
}

void hmb_poison_why(const unsigned char *got, const unsigned char *want, size_t len, char *why, size_t whylen)
{
    size_t wrong = 0;
    int byte = wrong_bytes_are(got, want, len, &wrong);
    if (whylen)
        why[0] = '\0';
    if (all_bytes(got, len, HMB_POISON_BYTE))
        snprintf(why, whylen, " (the piece is still the receive poison: never written although its requests "
                              "completed, library conformance problem)");
    else if (all_bytes(got, len, HMB_SENT_BYTE))
        snprintf(why, whylen, " (the piece is the sender's poison: its buffer read after its send completed, library "
                              "conformance problem)");
    else if (byte == HMB_SENT_BYTE) /* Open MPI 5.0.11 partitioned, once in a make test: a halo face's byte 0 */
        snprintf(why, whylen, " (its %zu wrong byte(s) of %zu all hold the sender's poison: part of the send buffer "
                              "read after its send completed, library conformance problem)", wrong, len);
    else if (byte == HMB_POISON_BYTE)
        snprintf(why, whylen, " (its %zu wrong byte(s) of %zu all hold the receive poison: part of the piece never "
                              "written although its requests completed, library conformance problem)", wrong, len);
}
