/*
 * /debug/pprof/cmdline: the command line, arguments separated by NUL bytes
 * with no trailing NUL, as Go's handler writes os.Args.
 */
#include "http/http.h"
#include "agent/core/real.h"

#include "encoder/encoder.h"

#include "agent/host/fds.h"

#include <fcntl.h>
#include <unistd.h>

void handle_cmdline(struct request *r)
{
    struct pbuf b = {0};
    int fd = fds_open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char chunk[4096];
        ssize_t n;
        while ((n = real_read(fd, chunk, sizeof chunk)) > 0)
            pbuf_append(&b, chunk, (size_t)n);
        fds_close(fd);
    }
    /* The kernel ends every argument with a NUL; Go joins them instead. */
    if (b.len > 0 && b.data[b.len - 1] == '\0')
        b.len--;
    http_send_text(r, &b);
    pbuf_free(&b);
}
