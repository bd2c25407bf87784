/* Test helper: loopback sockets for the tests' own servers and relays. */
#pragma once

#include <stdint.h>

/* A TCP socket listening on 127.0.0.1 at a port the kernel picks (backlog 16), close-on-exec; the port in
 * *ret_port. Fails the running test on error. */
int listen_loopback(uint16_t *ret_port);
/* A socket connected to 127.0.0.1:port, close-on-exec; -1 when the connect fails. */
int connect_loopback(uint16_t port);
