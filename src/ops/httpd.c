/* The operations endpoint: /metrics, /healthz, /readyz on a thread of its own, over plain sockets. The
 * thread poll()s the listener and at most MAX_CONNS connections, each with a deadline: a slow or silent
 * client holds one slot until its deadline, never the thread. Every answer closes its connection
 * (Prometheus and kubelet probes cope), so there is no keep-alive or pipelining state. libmicrohttpd served
 * this before; Debian links it with GnuTLS, whose libraries cost over a MiB of RSS before main(). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/metrics.h"

#define DEFAULT_STALL_USEC (30ULL * 1000000ULL)

#define MAX_CONNS 16
/* The request line and headers together; a probe or a scrape sends a few hundred bytes. */
#define HEAD_MAX   8192
#define READ_USEC  (5ULL * 1000000ULL) /* for the whole request head, from accept */
#define WRITE_USEC (5ULL * 1000000ULL) /* for the whole answer */
/* After the answer, what the client still sends is read and dropped for up to this long before close:
 * closing a socket with unread input sends a reset, which can destroy the answer before it is read. */
#define LINGER_USEC (1ULL * 1000000ULL)
/* accept() out of descriptors or memory leaves the listener readable: rest rather than spin. */
#define ACCEPT_PAUSE_USEC 100000ULL
/* Read per turn from a lingering client, so that a fast sender cannot hold the thread. */
#define LINGER_CHUNKS 16

struct check {
        char *name;
        httpd_check_fn fn; /* NULL: a condition published with httpd_set_ready() */
        void *userdata;
        bool ready;
        char *reason;
};

struct check_list {
        struct check *items;
        size_t n;
};

enum conn_state {
        CONN_READ,   /* the request head is arriving */
        CONN_WRITE,  /* the answer is going out */
        CONN_LINGER, /* answered and shut down for writing; waiting for the client to close */
};

struct conn {
        int fd;
        enum conn_state state;
        uint64_t accepted; /* the oldest goes when every slot is taken */
        uint64_t deadline; /* of the current state, CLOCK_MONOTONIC usec */
        struct buf in;     /* the request head so far */
        struct buf out;    /* the answer */
        size_t sent;
};

struct httpd {
        int listen_fd;
        int wake_fd; /* an eventfd: httpd_free() stops the thread through it */
        pthread_t thread;
        bool thread_started;
        uint16_t port;
        /* The server thread's alone. */
        struct conn *conns[MAX_CONNS];
        uint64_t accept_pause_until;

        pthread_mutex_t lock; /* the check lists */
        struct check_list ready, health;
        sd_event_source *heartbeat;
        uint64_t stall_usec;
        _Atomic uint64_t last_beat; /* CLOCK_MONOTONIC usec; 0 = no loop watched */
};

static void check_list_clear(struct check_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->items[i].name);
                free(l->items[i].reason);
        }
        free(l->items);
        l->items = NULL;
        l->n = 0;
}

static struct check *check_list_find(struct check_list *l, const char *name)
{
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->items[i].name, name))
                        return &l->items[i];
        return NULL;
}

static int check_list_add(struct check_list *l, const char *name, httpd_check_fn fn, void *userdata,
                          struct check **ret)
{
        struct check *n;
        char *copy;

        if (check_list_find(l, name))
                return -EEXIST;
        copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        n = realloc(l->items, (l->n + 1) * sizeof(*n));
        if (!n) {
                free(copy);
                return -ENOMEM;
        }
        l->items = n;
        l->items[l->n] = (struct check){ .name = copy, .fn = fn, .userdata = userdata, .ready = true };
        if (ret)
                *ret = &l->items[l->n];
        l->n++;
        return 0;
}

/* "ok\n", or one line per failing check: "NAME: reason\n". Under h->lock. */
static int check_list_run(const struct check_list *l, struct buf *out, bool *ret_ok)
{
        bool ok = true;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < l->n; i++) {
                const struct check *c = &l->items[i];
                const char *reason = NULL;
                bool pass = c->fn ? c->fn(c->userdata, &reason) : c->ready;

                if (!c->fn)
                        reason = c->reason;
                if (pass)
                        continue;
                ok = false;
                r = buf_printf(out, "%s: %s\n", c->name, reason ? reason : "not ready");
        }
        *ret_ok = ok;
        return r < 0 ? r : 0;
}

static bool loop_alive(struct httpd *h)
{
        uint64_t beat = atomic_load(&h->last_beat);
        return beat == 0 || now_monotonic_usec() - beat <= h->stall_usec;
}

/* ---- HTTP ---- */

static const char *status_reason(unsigned status)
{
        switch (status) {
        case 200:
                return "OK";
        case 400:
                return "Bad Request";
        case 404:
                return "Not Found";
        case 405:
                return "Method Not Allowed";
        case 414:
                return "URI Too Long";
        case 431:
                return "Request Header Fields Too Large";
        case 500:
                return "Internal Server Error";
        case 503:
                return "Service Unavailable";
        case 505:
                return "HTTP Version Not Supported";
        default:
                return "Unknown";
        }
}

static bool is_tchar(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch));
}

/* A visible US-ASCII character: what a request target is made of. */
static bool is_visible(char ch)
{
        return (unsigned char)ch > ' ' && (unsigned char)ch < 0x7f;
}

static bool is_digit(char ch)
{
        return ch >= '0' && ch <= '9';
}

/* The line starting at p, up to its '\n' (before end): its length without the line ending, or -1 when
 * the '\n' has not arrived. */
static ssize_t line_length(const char *p, const char *end, const char **ret_next)
{
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n;

        if (!nl)
                return -1;
        n = (size_t)(nl - p);
        if (n > 0 && p[n - 1] == '\r')
                n--;
        *ret_next = nl + 1;
        return (ssize_t)n;
}

struct request {
        bool get;  /* GET or HEAD */
        bool head; /* HEAD: the answer's headers only */
        const char *path;
        size_t path_len; /* without the query */
};

/* "METHOD SP TARGET SP HTTP/D.D": 0, or the status that refuses it. */
static unsigned request_line_parse(const char *p, size_t n, struct request *req)
{
        const char *end = p + n, *method = p, *target;
        size_t method_len, target_len;

        while (p < end && is_tchar(*p))
                p++;
        method_len = (size_t)(p - method);
        if (method_len == 0 || p == end || *p++ != ' ')
                return 400;
        target = p;
        while (p < end && is_visible(*p))
                p++;
        target_len = (size_t)(p - target);
        if (target_len == 0 || p == end || *p++ != ' ')
                return 400;
        if (end - p != 8 || memcmp(p, "HTTP/", 5) != 0 || !is_digit(p[5]) || p[6] != '.' || !is_digit(p[7]))
                return 400;
        if (p[5] != '1')
                return 505;

        req->head = method_len == 4 && memcmp(method, "HEAD", 4) == 0;
        req->get = req->head || (method_len == 3 && memcmp(method, "GET", 3) == 0);

        /* The absolute form ("http://host:port/path"), which proxies send: a server must accept it. */
        if (target_len > 7 && strncasecmp(target, "http://", 7) == 0) {
                const char *slash = memchr(target + 7, '/', target_len - 7);
                if (!slash) {
                        req->path = "/";
                        req->path_len = 1;
                        return 0;
                }
                target_len -= (size_t)(slash - target);
                target = slash;
        } else if (target[0] != '/')
                return req->get ? 400 : 0; /* "*" goes with OPTIONS, refused below */
        req->path = target;
        req->path_len = strcspn(target, "?# ");
        if (req->path_len > target_len)
                req->path_len = target_len;
        return 0;
}

/* Looks at the request head received so far: 0 while it is incomplete, else the status to answer (200
 * for a GET or HEAD to route, *req filled). A malformed request line is refused as soon as it is in. */
static unsigned request_examine(const char *data, size_t len, struct request *req)
{
        const char *end = data + len, *p;
        ssize_t n;
        unsigned status;

        n = line_length(data, end, &p);
        if (n < 0)
                return len >= HEAD_MAX ? 414 : 0;
        status = request_line_parse(data, (size_t)n, req);
        if (status != 0)
                return status;

        /* Header lines are only checked for form: nothing here depends on their values. */
        for (;;) {
                const char *line = p, *colon;

                n = line_length(line, end, &p);
                if (n < 0)
                        return len >= HEAD_MAX ? 431 : 0;
                if (n == 0)
                        break;
                colon = memchr(line, ':', (size_t)n);
                if (!colon || colon == line)
                        return 400;
                for (const char *c = line; c < colon; c++)
                        if (!is_tchar(*c))
                                return 400; /* also an obsolete folded line, which starts with a space */
        }
        return req->get ? 200 : 405;
}

/* Puts the whole answer into c->out; on failure c->out is left empty. */
static int conn_reply(struct conn *c, unsigned status, const char *type, const char *body, size_t len,
                      bool head)
{
        int r;

        r = buf_printf(&c->out,
                       "HTTP/1.1 %u %s\r\n"
                       "Content-Type: %s\r\n"
                       "Content-Length: %zu\r\n"
                       "Cache-Control: no-store\r\n"
                       "%s"
                       "Connection: close\r\n"
                       "\r\n",
                       status, status_reason(status), type, len,
                       status == 405 ? "Allow: GET, HEAD\r\n" : "");
        if (r >= 0 && !head && len > 0)
                r = buf_append(&c->out, body, len);
        if (r < 0) {
                buf_free(&c->out); /* a half-built answer must not go out ahead of another */
                return r;
        }
        return 0;
}

static int conn_reply_text(struct conn *c, unsigned status, const char *text, bool head)
{
        return conn_reply(c, status, "text/plain; charset=utf-8", text, strlen(text), head);
}

static bool path_is(const struct request *req, const char *path)
{
        return req->path_len == strlen(path) && memcmp(req->path, path, req->path_len) == 0;
}

static int conn_answer(struct httpd *h, struct conn *c, unsigned status, const struct request *req)
{
        bool head = req->head;

        switch (status) {
        case 200:
                break;
        case 405:
                return conn_reply_text(c, status, "method not allowed\n", head);
        case 414:
        case 431:
                return conn_reply_text(c, status, "request head too large\n", head);
        case 505:
                return conn_reply_text(c, status, "HTTP/1.x only\n", head);
        default:
                return conn_reply_text(c, status, "bad request\n", head);
        }

        if (path_is(req, "/metrics")) {
                _cleanup_free_ char *text = NULL;

                if (metrics_render(&text) < 0)
                        return conn_reply_text(c, 500, "out of memory\n", head);
                return conn_reply(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text),
                                  head);
        }
        if (path_is(req, "/readyz") || path_is(req, "/healthz")) {
                bool health = path_is(req, "/healthz"), ok;
                struct buf b = {};
                int r;

                pthread_mutex_lock(&h->lock);
                r = check_list_run(health ? &h->health : &h->ready, &b, &ok);
                pthread_mutex_unlock(&h->lock);
                if (r >= 0 && health && !loop_alive(h)) {
                        ok = false;
                        r = buf_printf(&b, "loop: no heartbeat for more than %llu s\n",
                                       (unsigned long long)(h->stall_usec / 1000000ULL));
                }
                if (r >= 0 && ok)
                        r = buf_printf(&b, "ok\n");
                if (r >= 0)
                        r = conn_reply(c, ok ? 200 : 503, "text/plain; charset=utf-8", b.data, b.len, head);
                buf_free(&b);
                if (r < 0)
                        return conn_reply_text(c, 500, "out of memory\n", head);
                return 0;
        }
        return conn_reply_text(c, 404, "not found\n", head);
}

/* ---- connections (all on the server thread) ---- */

static struct conn *conn_free(struct conn *c)
{
        if (!c)
                return NULL;
        close(c->fd);
        buf_free(&c->in);
        buf_free(&c->out);
        free(c);
        return NULL;
}

/* Each step returns false when the connection is done with (closed by the caller). */
static bool conn_write(struct conn *c)
{
        while (c->sent < c->out.len) {
                ssize_t n =
                    send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN || errno == EWOULDBLOCK;
                }
                c->sent += (size_t)n;
        }
        buf_free(&c->out);
        if (shutdown(c->fd, SHUT_WR) < 0)
                return false;
        c->state = CONN_LINGER;
        c->deadline = now_monotonic_usec() + LINGER_USEC;
        return true;
}

static bool conn_read(struct httpd *h, struct conn *c)
{
        char chunk[1024];

        for (;;) {
                size_t room = HEAD_MAX - c->in.len;
                struct request req = {};
                unsigned status;
                ssize_t n;

                n = recv(c->fd, chunk, room < sizeof(chunk) ? room : sizeof(chunk), MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN || errno == EWOULDBLOCK;
                }
                if (n == 0)
                        return false; /* gone before its request was complete: nobody to answer */
                if (buf_append(&c->in, chunk, (size_t)n) < 0)
                        return false;
                status = request_examine(c->in.data, c->in.len, &req);
                if (status == 0)
                        continue; /* room > 0 here: a full head without its end is answered */
                if (conn_answer(h, c, status, &req) < 0)
                        return false;
                buf_free(&c->in);
                c->state = CONN_WRITE;
                c->deadline = now_monotonic_usec() + WRITE_USEC;
                return conn_write(c);
        }
}

static bool conn_linger(struct conn *c)
{
        char chunk[1024];

        for (unsigned i = 0; i < LINGER_CHUNKS; i++) {
                ssize_t n = recv(c->fd, chunk, sizeof(chunk), MSG_DONTWAIT);
                if (n == 0)
                        return false;
                if (n < 0)
                        return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK;
        }
        return true;
}

static bool conn_step(struct httpd *h, struct conn *c)
{
        switch (c->state) {
        case CONN_READ:
                return conn_read(h, c);
        case CONN_WRITE:
                return conn_write(c);
        case CONN_LINGER:
                return conn_linger(c);
        }
        return false;
}

/* A new connection takes a free slot, or the oldest connection's: requests from the probes and scrapers
 * this serves take milliseconds, so the oldest is the likeliest to be stalled. */
static void httpd_accept(struct httpd *h)
{
        for (unsigned i = 0; i < MAX_CONNS; i++) {
                struct conn *c;
                size_t slot = 0;
                int fd;

                fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK) {
                                log_debug_errno(errno, "operations endpoint: accept failed");
                                h->accept_pause_until = now_monotonic_usec() + ACCEPT_PAUSE_USEC;
                        }
                        return;
                }
                c = calloc(1, sizeof(*c));
                if (!c) {
                        close(fd);
                        h->accept_pause_until = now_monotonic_usec() + ACCEPT_PAUSE_USEC;
                        return;
                }
                for (size_t j = 0; j < MAX_CONNS; j++) {
                        if (!h->conns[j]) {
                                slot = j;
                                break;
                        }
                        if (h->conns[j]->accepted < h->conns[slot]->accepted)
                                slot = j;
                }
                if (h->conns[slot])
                        log_debug("operations endpoint: %d connections open, closing the oldest", MAX_CONNS);
                conn_free(h->conns[slot]);
                *c = (struct conn){ .fd = fd, .state = CONN_READ, .accepted = now_monotonic_usec() };
                c->deadline = c->accepted + READ_USEC;
                h->conns[slot] = c;
        }
}

static void *httpd_thread(void *userdata)
{
        struct httpd *h = userdata;
        struct pollfd fds[2 + MAX_CONNS];
        size_t slots[MAX_CONNS];

        for (;;) {
                uint64_t now = now_monotonic_usec(), next = UINT64_MAX;
                int timeout = -1;
                size_t n = 0;

                fds[0] = (struct pollfd){ .fd = h->wake_fd, .events = POLLIN };
                fds[1] = (struct pollfd){ .fd = h->listen_fd, .events = POLLIN };
                if (h->accept_pause_until > now) {
                        fds[1].fd = -1;
                        next = h->accept_pause_until;
                }
                for (size_t i = 0; i < MAX_CONNS; i++) {
                        struct conn *c = h->conns[i];

                        if (!c)
                                continue;
                        if (c->deadline <= now) {
                                h->conns[i] = conn_free(c);
                                continue;
                        }
                        if (c->deadline < next)
                                next = c->deadline;
                        fds[2 + n] = (struct pollfd){ .fd = c->fd,
                                                      .events = c->state == CONN_WRITE ? POLLOUT : POLLIN };
                        slots[n++] = i;
                }
                if (next != UINT64_MAX) {
                        uint64_t ms = (next - now + 999) / 1000;
                        timeout = ms < INT_MAX ? (int)ms : INT_MAX;
                }

                /* Only an interruption or a shortage of memory fails poll(); the next turn tries again. */
                if (poll(fds, 2 + n, timeout) < 0)
                        continue;
                if (fds[0].revents != 0)
                        break;
                for (size_t k = 0; k < n; k++) {
                        size_t i = slots[k];

                        if (fds[2 + k].revents != 0 && !conn_step(h, h->conns[i]))
                                h->conns[i] = conn_free(h->conns[i]);
                }
                if (fds[1].revents != 0)
                        httpd_accept(h);
        }
        return NULL;
}

/* ---- the server ---- */

/* Numeric addresses only, parsed by hand: getaddrinfo(), even for a numeric host, costs the process about
 * 380 KiB of RSS for good, and this agent's idle budget is 10 MiB. */
static int parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
        const char *colon = strrchr(s, ':'), *p;
        char host[INET6_ADDRSTRLEN + 2];
        struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6 };
        struct sockaddr_in sa4 = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
        unsigned long port = 0;
        size_t n;

        if (!colon || isempty(colon + 1))
                return -EINVAL;
        for (p = colon + 1; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                port = port * 10 + (unsigned long)(*p - '0');
                if (port > UINT16_MAX)
                        return -EINVAL;
        }
        n = (size_t)(colon - s);
        if (n >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, n);
        host[n] = '\0';

        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
                host[n - 1] = '\0';
                if (inet_pton(AF_INET6, host + 1, &sa6.sin6_addr) != 1)
                        return -EINVAL;
                sa6.sin6_port = htons((uint16_t)port);
                memcpy(ret, &sa6, sizeof(sa6));
                *ret_len = sizeof(sa6);
                return 0;
        }
        /* An IPv6 address needs its brackets; no host is any IPv4 address. */
        if (n > 0 && inet_pton(AF_INET, host, &sa4.sin_addr) != 1)
                return -EINVAL;
        sa4.sin_port = htons((uint16_t)port);
        memcpy(ret, &sa4, sizeof(sa4));
        *ret_len = sizeof(sa4);
        return 0;
}

static int httpd_listen(const struct sockaddr_storage *sa, socklen_t len, int *ret_fd, uint16_t *ret_port)
{
        struct sockaddr_storage bound = {};
        socklen_t bound_len = sizeof(bound);
        int one = 1, fd, r;

        fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* An IPv6 address serves IPv6 alone, as libmicrohttpd's listener did: "[::]" and "0.0.0.0" on one
         * port can then both be bound. */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            (sa->ss_family == AF_INET6 &&
             setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)) {
                r = -errno;
                close(fd);
                return r;
        }
        if (bind(fd, (const struct sockaddr *)sa, len) < 0 || listen(fd, 64) < 0) {
                r = errno;
                close(fd);
                return r == EADDRINUSE || r == EADDRNOTAVAIL || r == EACCES ? -EADDRINUSE : -r;
        }
        if (getsockname(fd, (struct sockaddr *)&bound, &bound_len) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        *ret_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                      : ((struct sockaddr_in *)&bound)->sin_port);
        *ret_fd = fd;
        return 0;
}

int httpd_start(const char *listen, struct httpd **ret)
{
        struct sockaddr_storage sa = {};
        sigset_t all, old;
        socklen_t len;
        struct httpd *h;
        int r;

        if (!listen || isempty(listen) || streq(listen, "off")) {
                *ret = NULL;
                return 0;
        }
        r = parse_listen(listen, &sa, &len);
        if (r < 0)
                return r;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->listen_fd = h->wake_fd = -1;
        r = pthread_mutex_init(&h->lock, NULL);
        if (r != 0) {
                free(h);
                return -r;
        }
        r = httpd_listen(&sa, len, &h->listen_fd, &h->port);
        if (r < 0)
                goto fail;
        h->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (h->wake_fd < 0) {
                r = -errno;
                goto fail;
        }
        /* The thread takes no signal: the loop's thread handles them (sd-event blocks them there), and a
         * signal delivered here instead would find its default action. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&h->thread, NULL, httpd_thread, h);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0)
                goto fail;
        h->thread_started = true;
        *ret = h;
        return 0;
fail:
        httpd_free(h);
        return r;
}

struct httpd *httpd_free(struct httpd *h)
{
        if (!h)
                return NULL;
        if (h->thread_started) {
                uint64_t one = 1;

                /* An eventfd write fails only when the counter would overflow, and then it is readable. */
                (void)!write(h->wake_fd, &one, sizeof(one));
                pthread_join(h->thread, NULL);
        }
        for (size_t i = 0; i < MAX_CONNS; i++)
                h->conns[i] = conn_free(h->conns[i]);
        if (h->wake_fd >= 0)
                close(h->wake_fd);
        if (h->listen_fd >= 0)
                close(h->listen_fd);
        h->heartbeat = sd_event_source_disable_unref(h->heartbeat);
        check_list_clear(&h->ready);
        check_list_clear(&h->health);
        pthread_mutex_destroy(&h->lock);
        free(h);
        return NULL;
}

uint16_t httpd_port(const struct httpd *h)
{
        return h ? h->port : 0;
}

int httpd_add_ready_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata)
{
        int r;

        if (!h)
                return 0;
        if (isempty(name) || !fn)
                return -EINVAL;
        pthread_mutex_lock(&h->lock);
        r = check_list_add(&h->ready, name, fn, userdata, NULL);
        pthread_mutex_unlock(&h->lock);
        return r;
}

int httpd_add_health_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata)
{
        int r;

        if (!h)
                return 0;
        if (isempty(name) || !fn)
                return -EINVAL;
        pthread_mutex_lock(&h->lock);
        r = check_list_add(&h->health, name, fn, userdata, NULL);
        pthread_mutex_unlock(&h->lock);
        return r;
}

int httpd_set_ready(struct httpd *h, const char *name, bool ready, const char *reason)
{
        struct check *c;
        char *copy = NULL;
        int r = 0;

        if (!h)
                return 0;
        if (isempty(name))
                return -EINVAL;
        if (!ready && reason && !(copy = strdup(reason)))
                return -ENOMEM;
        pthread_mutex_lock(&h->lock);
        c = check_list_find(&h->ready, name);
        if (c && c->fn)
                r = -EEXIST; /* the name belongs to a check function */
        else if (!c)
                r = check_list_add(&h->ready, name, NULL, NULL, &c);
        if (r >= 0) {
                c->ready = ready;
                free(c->reason);
                c->reason = TAKE_PTR(copy);
        }
        pthread_mutex_unlock(&h->lock);
        free(copy);
        return r;
}

static int on_heartbeat(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct httpd *h = userdata;

        atomic_store(&h->last_beat, now_monotonic_usec());
        /* A quarter of the stall limit: a single late tick never fails /healthz. */
        if (sd_event_source_set_time_relative(s, h->stall_usec / 4) >= 0)
                (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int httpd_watch_loop(struct httpd *h, struct loop *l, uint64_t stall_usec)
{
        int r;

        if (!h)
                return 0;
        if (!l || h->heartbeat)
                return -EINVAL;
        h->stall_usec = stall_usec ? stall_usec : DEFAULT_STALL_USEC;
        r = sd_event_add_time_relative(loop_event(l), &h->heartbeat, CLOCK_MONOTONIC, h->stall_usec / 4, 0,
                                       on_heartbeat, h);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(h->heartbeat, "httpd-heartbeat");
        atomic_store(&h->last_beat, now_monotonic_usec());
        return 0;
}

/* ---- error budget ---- */

#define BUDGET_SLOTS 10

struct budget_slot {
        uint64_t epoch; /* now / slot length, +1 so that 0 means unused */
        unsigned ok, failed;
};

struct error_budget {
        pthread_mutex_t lock;
        uint64_t slot_usec;
        double max_ratio;
        unsigned min_failures;
        struct budget_slot slots[BUDGET_SLOTS];
};

int error_budget_new(uint64_t window_usec, double max_failure_ratio, unsigned min_failures,
                     struct error_budget **ret)
{
        struct error_budget *e;

        if (window_usec < BUDGET_SLOTS || !(max_failure_ratio >= 0 && max_failure_ratio <= 1))
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        if (pthread_mutex_init(&e->lock, NULL) != 0) {
                free(e);
                return -ENOMEM;
        }
        e->slot_usec = window_usec / BUDGET_SLOTS;
        e->max_ratio = max_failure_ratio;
        e->min_failures = min_failures;
        *ret = e;
        return 0;
}

struct error_budget *error_budget_free(struct error_budget *e)
{
        if (!e)
                return NULL;
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
}

void error_budget_record_at(struct error_budget *e, bool ok, uint64_t now_usec)
{
        uint64_t epoch;
        struct budget_slot *s;

        if (!e)
                return;
        epoch = now_usec / e->slot_usec + 1;
        pthread_mutex_lock(&e->lock);
        s = &e->slots[epoch % BUDGET_SLOTS];
        if (s->epoch != epoch)
                *s = (struct budget_slot){ .epoch = epoch };
        if (ok)
                s->ok++;
        else
                s->failed++;
        pthread_mutex_unlock(&e->lock);
}

void error_budget_record(struct error_budget *e, bool ok)
{
        error_budget_record_at(e, ok, now_monotonic_usec());
}

bool error_budget_ok_at(struct error_budget *e, uint64_t now_usec)
{
        uint64_t epoch, ok = 0, failed = 0;

        if (!e)
                return true;
        epoch = now_usec / e->slot_usec + 1;
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < BUDGET_SLOTS; i++) {
                const struct budget_slot *s = &e->slots[i];
                if (s->epoch == 0 || s->epoch > epoch || epoch - s->epoch >= BUDGET_SLOTS)
                        continue;
                ok += s->ok;
                failed += s->failed;
        }
        pthread_mutex_unlock(&e->lock);
        if (failed < e->min_failures)
                return true;
        return (double)failed <= e->max_ratio * (double)(ok + failed);
}

bool error_budget_check(void *userdata, const char **ret_reason)
{
        if (error_budget_ok_at(userdata, now_monotonic_usec()))
                return true;
        if (ret_reason)
                *ret_reason = "too many recent failures";
        return false;
}
