/* Receive-buffer poison that does not dirty the buffer (pure: also in libhmbcore for the tests). */
#include <string.h>

#include "hmb/hmb.h"

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
