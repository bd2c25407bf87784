/* The tests' TCP relay (relay.h). */
#include "relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"

static bool send_all(int fd, const char *buf, size_t len)
{
        return len == 0 || send(fd, buf, len, MSG_NOSIGNAL) == (ssize_t)len;
}

/* The Content-Length of a request head (NUL-terminated), 0 without one. A chunked request body is not
 * framed here: such a request fails the test rather than be passed on wrong. */
static size_t content_length(const char *head)
{
        for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
                assert_true(strncasecmp(l + 2, "Transfer-Encoding:", 18) != 0);
                if (strncasecmp(l + 2, "Content-Length:", 15) == 0)
                        return (size_t)strtoull(l + 17, NULL, 10);
        }
        return 0;
}

/* Takes what p->head holds, under hold: a request's body passes on, a whole head passes on too, or is held
 * (the pair frozen) when its request line starts with r->hold; an unfinished head waits for more. */
static bool take_heads(struct relay *r, struct relay_pair *p)
{
        while (p->head_len > 0 && !p->frozen) {
                size_t n = p->head_len;
                if (p->body_left > 0) {
                        n = n < p->body_left ? n : p->body_left;
                        p->body_left -= n;
                } else {
                        p->head[p->head_len] = '\0';
                        char *end = strstr(p->head, "\r\n\r\n");
                        if (!end)
                                return true;
                        if (strncmp(p->head, r->hold, strlen(r->hold)) == 0) {
                                p->frozen = true;
                                atomic_fetch_add(&r->held, 1);
                                return true;
                        }
                        n = (size_t)(end + 4 - p->head);
                        end[2] = '\0';
                        p->body_left = content_length(p->head);
                        end[2] = '\r';
                }
                if (!send_all(p->b, p->head, n))
                        return false;
                p->head_len -= n;
                memmove(p->head, p->head + n, p->head_len);
        }
        return true;
}

/* Client bytes under hold: a body passes on as it comes, request heads go through take_heads(). */
static bool pass_requests(struct relay *r, struct relay_pair *p, const char *buf, size_t len)
{
        while (len > 0 && !p->frozen) {
                size_t n = len;
                if (p->body_left > 0 && p->head_len == 0) {
                        n = n < p->body_left ? n : p->body_left;
                        if (!send_all(p->b, buf, n))
                                return false;
                        p->body_left -= n;
                } else {
                        size_t room = RELAY_HEAD_MAX - 1 - p->head_len;
                        assert_true(room > 0); /* a request head of 16 KiB is not what a test sends */
                        n = n < room ? n : room;
                        memcpy(p->head + p->head_len, buf, n);
                        p->head_len += n;
                        if (!take_heads(r, p))
                                return false;
                }
                buf += n;
                len -= n;
        }
        return true;
}

/* Moves what is readable on one side of p to the other; false when that side ended. */
static bool pass(struct relay *r, struct relay_pair *p, bool from_client)
{
        char buf[16384];
        int from = from_client ? p->a : p->b, to = from_client ? p->b : p->a;
        ssize_t n = recv(from, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN))
                return false;
        if (n < 0)
                return true;
        if (from_client && !p->lagged && r->lag_prefix) {
                /* A request line at the start of what came (a client sends a request's head at once): the
                 * connection lags from the first that matches on. */
                const char *eol = memchr(buf, '\n', (size_t)n);
                size_t line = eol ? (size_t)(eol - buf) : (size_t)n;
                p->lagged = line >= strlen(r->lag_prefix) &&
                            strncmp(buf, r->lag_prefix, strlen(r->lag_prefix)) == 0 &&
                            memmem(buf, line, r->lag_contains, strlen(r->lag_contains)) != NULL;
                if (p->lagged)
                        atomic_fetch_add(&r->lagged, 1);
        }
        if (from_client && r->hold)
                return pass_requests(r, p, buf, (size_t)n);
        return send_all(to, buf, (size_t)n);
}

static void pair_close(struct relay_pair *p)
{
        close(p->a);
        close(p->b);
        free(p->head);
        *p = (struct relay_pair){ .a = -1, .b = -1 };
}

static void accept_pair(struct relay *r)
{
        size_t i = 0;
        while (i < r->n && r->pairs[i].a >= 0)
                i++;
        int a = accept4(r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (a < 0)
                return;
        int b = i < RELAY_MAX_PAIRS ? connect_loopback(r->target) : -1;
        char *head = b >= 0 && r->hold ? malloc(RELAY_HEAD_MAX) : NULL;
        if (b < 0 || (r->hold && !head)) {
                close(a);
                if (b >= 0)
                        close(b);
                return;
        }
        r->pairs[i] = (struct relay_pair){ .a = a, .b = b, .head = head };
        if (i == r->n)
                r->n++;
        atomic_fetch_add(&r->accepted, 1);
}

static void *relay_run(void *arg)
{
        struct relay *r = arg;
        for (;;) {
                struct pollfd pfd[2 + 2 * RELAY_MAX_PAIRS];
                size_t idx[2 + 2 * RELAY_MAX_PAIRS], n = 0;
                if (atomic_exchange(&r->freeze, false))
                        for (size_t i = 0; i < r->n; i++)
                                r->pairs[i].frozen = true;
                pfd[n++] = (struct pollfd){ .fd = r->stop[0], .events = POLLIN };
                pfd[n++] = (struct pollfd){ .fd = r->listen_fd, .events = POLLIN };
                for (size_t i = 0; i < r->n; i++) {
                        if (r->pairs[i].frozen || r->pairs[i].a < 0)
                                continue;
                        idx[n] = i;
                        pfd[n++] = (struct pollfd){ .fd = r->pairs[i].a, .events = POLLIN };
                        if (r->pairs[i].lagged && atomic_load(&r->lagging))
                                continue; /* the server's bytes wait in its socket */
                        idx[n] = i;
                        pfd[n++] = (struct pollfd){ .fd = r->pairs[i].b, .events = POLLIN };
                }
                /* Short turns, so that a freeze asked for is applied before more bytes pass. */
                if (poll(pfd, n, 20) < 0 || (pfd[0].revents & POLLIN))
                        break;
                if (pfd[1].revents & POLLIN)
                        accept_pair(r);
                for (size_t k = 2; k < n; k++) {
                        struct relay_pair *p = &r->pairs[idx[k]];
                        if (p->a < 0 || p->frozen || !(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        if (!pass(r, p, pfd[k].fd == p->a))
                                pair_close(p);
                }
        }
        for (size_t i = 0; i < r->n; i++)
                if (r->pairs[i].a >= 0)
                        pair_close(&r->pairs[i]);
        return NULL;
}

void relay_start(struct relay *r, uint16_t target, const char *hold)
{
        memset(r, 0, sizeof(*r));
        r->target = target;
        r->hold = hold;
        r->listen_fd = listen_loopback(&r->port);
        assert_int_equal(pipe2(r->stop, O_CLOEXEC), 0);
        assert_int_equal(pthread_create(&r->thread, NULL, relay_run, r), 0);
}

void relay_set_lag(struct relay *r, const char *prefix, const char *contains)
{
        r->lag_prefix = prefix;
        r->lag_contains = contains ? contains : "";
}

void relay_stop(struct relay *r)
{
        assert_int_equal(write(r->stop[1], "x", 1), 1);
        assert_int_equal(pthread_join(r->thread, NULL), 0);
        close(r->stop[0]);
        close(r->stop[1]);
        close(r->listen_fd);
}
