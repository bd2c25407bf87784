/* Loopback sockets for the tests' servers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"

int listen_loopback(uint16_t *ret_port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 16), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        *ret_port = ntohs(sa.sin_port);
        return fd;
}

int connect_loopback(uint16_t port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                close(fd);
                fd = -1;
        }
        return fd;
}
