/* Test helper: a TCP relay 127.0.0.1:port → 127.0.0.1:target, run by a thread of its own. It can freeze
 * every connection open now (bytes neither passed nor refused, no FIN, no RST: a NAT gateway that dropped
 * its state), and it can hold HTTP/1.1 requests (plain text, not TLS): a request whose request line starts
 * with hold is never passed on, nor is anything after it on its connection, so its client waits for an
 * answer that never comes while every other request goes through. And it can make answers lag: while lagging
 * is set, nothing the server sends on a connection that carried a request whose line starts with lag_prefix
 * and holds lag_contains is passed on (a watch whose events fall behind); cleared, all of it follows. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_MAX_PAIRS 64
#define RELAY_HEAD_MAX  16384

struct relay_pair {
        int a, b;    /* client side, server side; -1 when closed */
        bool frozen; /* never read or written again */
        bool lagged; /* its answers wait while relay.lagging */
        /* With hold: the request head being read (not passed on yet), and the body bytes still to pass. */
        char *head; /* RELAY_HEAD_MAX bytes, allocated with hold */
        size_t head_len;
        size_t body_left;
};

struct relay {
        int listen_fd;
        uint16_t port, target;
        const char *hold; /* request-line prefix of the requests held; NULL: pass everything */
        int stop[2];
        pthread_t thread;
        atomic_bool freeze; /* freeze every connection open now */
        atomic_uint accepted;
        atomic_uint held;                      /* requests held so far */
        const char *lag_prefix, *lag_contains; /* NULL: nothing lags */
        atomic_bool lagging;
        atomic_uint lagged; /* connections that lag */
        struct relay_pair pairs[RELAY_MAX_PAIRS];
        size_t n;
};

/* Starts the relay (hold may be NULL); fails the running test on error. */
void relay_start(struct relay *r, uint16_t target, const char *hold);
/* Answers on connections that carried a request whose line starts with prefix and holds contains lag while
 * r->lagging is set. After relay_start, before its client connects. */
void relay_set_lag(struct relay *r, const char *prefix, const char *contains);
void relay_stop(struct relay *r);
