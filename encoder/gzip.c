/*
 * gzip.c wraps zlib to produce one gzip member, the form pprof expects on the
 * wire (it sniffs the 1f 8b magic), at the best-speed level Go uses. It is
 * entered only from the agent's own threads after a profile is serialized;
 * never from a signal handler. zlib allocates through plain malloc, which is
 * fine here because the caller's reentrancy flag sends those calls straight
 * to the host allocator.
 */
#include "encoder/encoder.h"
#include "agent/core/libs.h"

#include <errno.h>
#include <limits.h>
#include <zlib.h>

/* Output is produced through a small stack window and appended to the
 * buffer, so a large profile never needs a second full-size copy. */
#define GZIP_CHUNK 16384

/* Feeding zlib at most this much per call keeps avail_in within uInt even
 * for inputs larger than 4 GiB. */
#define GZIP_MAX_IN ((size_t)1 << 30)

/* windowBits 15 + 16 asks zlib for a gzip header and trailer. */
#define GZIP_WINDOW_BITS 31
#define GZIP_MEM_LEVEL 8

/* Gives zlib the next piece of input once it has used the last one. */
static void feed(z_stream *zs, const uint8_t **src, size_t *left)
{
    if (zs->avail_in != 0 || *left == 0)
        return;
    size_t take = *left < GZIP_MAX_IN ? *left : GZIP_MAX_IN;
    zs->next_in = (Bytef *)(uintptr_t)*src;
    zs->avail_in = (uInt)take;
    *src += take;
    *left -= take;
}

int gzip_compress(const void *in, size_t n, struct pbuf *out)
{
    if (libs_load() != 0)
        return -EIO;
    z_stream zs = {0};
    int rc = deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, GZIP_WINDOW_BITS,
                          GZIP_MEM_LEVEL, Z_DEFAULT_STRATEGY);
    if (rc != Z_OK)
        return rc == Z_MEM_ERROR ? -ENOMEM : -EIO;

    const uint8_t *src = in;
    size_t left = n;
    unsigned char chunk[GZIP_CHUNK];
    int ret = 0;
    for (;;) {
        feed(&zs, &src, &left);
        int flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
        zs.next_out = chunk;
        zs.avail_out = sizeof chunk;
        rc = deflate(&zs, flush);
        if (rc == Z_STREAM_ERROR) {
            ret = -EIO;
            break;
        }
        pbuf_append(out, chunk, sizeof chunk - zs.avail_out);
        if (out->oom) {
            ret = -ENOMEM;
            break;
        }
        if (rc == Z_STREAM_END)
            break;
    }
    deflateEnd(&zs);
    return ret;
}

/* The inverse, for the agent's own reader of its profiles (the flame
 * graph reads a profile handler's output back). Multi-member
 * input is accepted, as Go's reader accepts it. */
int gzip_decompress(const void *in, size_t n, size_t max, struct pbuf *out)
{
    if (libs_load() != 0)
        return -EIO;
    z_stream zs = {0};
    int rc = inflateInit2(&zs, GZIP_WINDOW_BITS);
    if (rc != Z_OK)
        return rc == Z_MEM_ERROR ? -ENOMEM : -EIO;

    const uint8_t *src = in;
    size_t left = n;
    size_t produced = 0;
    unsigned char chunk[GZIP_CHUNK];
    int ret = 0;
    for (;;) {
        feed(&zs, &src, &left);
        zs.next_out = chunk;
        zs.avail_out = sizeof chunk;
        rc = inflate(&zs, Z_NO_FLUSH);
        size_t got = sizeof chunk - zs.avail_out;
        produced += got;
        if (produced > max) {
            ret = -EFBIG;
            break;
        }
        pbuf_append(out, chunk, got);
        if (out->oom) {
            ret = -ENOMEM;
            break;
        }
        if (rc == Z_STREAM_END) {
            if (zs.avail_in == 0 && left == 0)
                break;
            /* Another member follows. */
            if (inflateReset(&zs) != Z_OK) {
                ret = -EINVAL;
                break;
            }
            continue;
        }
        if (rc == Z_MEM_ERROR) {
            ret = -ENOMEM;
            break;
        }
        if (rc != Z_OK || (got == 0 && zs.avail_in == 0 && left == 0)) {
            /* Z_DATA_ERROR, Z_NEED_DICT, or the input ended mid-stream. */
            ret = -EINVAL;
            break;
        }
    }
    inflateEnd(&zs);
    return ret;
}
