/* The HTTP client: HTTP/1.1 over non-blocking sockets (TLS by OpenSSL's libssl) driven by sd-event sources
 * on the loop, with an idle keep-alive pool. Host names are resolved by a short-lived thread per lookup that
 * wakes the loop through a socket pair; everything else runs on the loop thread.
 *
 * Errors: connection refused -ECONNREFUSED (or the socket's errno), unresolvable -EHOSTUNREACH, timeouts
 * -ETIMEDOUT, a connection lost before the answer was complete -ECONNRESET, TLS verification and handshake
 * failures -EBADMSG, a malformed answer -EPROTO (and a header block over 64 KiB -EBADMSG), a body over
 * max_body -EFBIG. */
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "core/http_internal.h"

#define HTTP_TIMEOUT_USEC         (30ULL * 1000000ULL)
#define HTTP_CONNECT_TIMEOUT_USEC (5ULL * 1000000ULL)
#define HTTP_MAX_BODY             ((size_t)16 * 1024 * 1024)
#define HTTP_MAX_HEADER           ((size_t)64 * 1024)
#define HTTP_MAX_CHUNK_LINE       ((size_t)4096)
#define POOL_IDLE_USEC            (30ULL * 1000000ULL)
#define POOL_MAX_PER_KEY          8
#define POOL_MAX                  64

enum call_state {
        ST_START,
        ST_RESOLVE,
        ST_CONNECT,
        ST_PROXY_SEND,
        ST_PROXY_RECV,
        ST_HANDSHAKE,
        ST_SEND,
        ST_HEADERS,
        ST_BODY,
};

enum body_mode {
        BODY_NONE,
        BODY_LENGTH,
        BODY_CHUNKED,
        BODY_UNTIL_CLOSE,
};

enum chunk_state {
        CHUNK_SIZE,
        CHUNK_DATA,
        CHUNK_DATA_END,
        CHUNK_TRAILER,
};

struct http_ctx;

struct http_conn {
        struct http_ctx *ctx;
        struct http_call *call; /* the call using it; NULL while idle in the pool */
        int fd;
        SSL *ssl;
        sd_event_source *io;
        sd_event_source *idle_timer;
        uint32_t events;
        /* Pool key: the target (not the proxy) and the TLS settings. */
        char *host;
        uint16_t port;
        bool https;
        struct http_tls_entry *tls;
        bool reused;
        struct http_conn *prev, *next; /* idle list, oldest first */
};

/* Shared by the loop and the resolver thread; the last one to let go frees it. */
struct resolve_job {
        atomic_int refs;
        int fd; /* the thread's end of the socket pair */
        char *host;
        char port[8];
        struct addrinfo *result;
        int gai_error;
};

struct http_call {
        struct http_ctx *ctx;
        struct http_call *prev, *next;
        http_done_fn done;
        void *userdata;
        int (*on_data)(const char *data, size_t len, void *userdata);
        enum call_state state;

        /* The request. */
        struct http_url url;
        char *method;
        bool idempotent;
        bool head;
        struct buf request; /* head and body, ready to send */
        size_t sent;
        struct buf proxy_request;
        char *proxy_host;
        uint16_t proxy_port;
        struct http_tls_entry *tls;
        uint64_t timeout_usec, connect_timeout_usec;
        uint64_t deadline; /* CLOCK_MONOTONIC, UINT64_MAX = none */
        size_t max_body;

        sd_event_source *start;
        sd_event_source *timer;
        struct resolve_job *job;
        sd_event_source *job_io;
        struct addrinfo *addrs, *next_addr;
        int connect_errno;
        struct http_conn *conn;
        bool retried;

        /* The answer. */
        struct buf head_buf;
        size_t head_scanned; /* head_buf holds no end of the header block before this */
        bool got_bytes;
        bool streaming;
        bool keep_alive;
        enum body_mode body_mode;
        uint64_t remaining;
        enum chunk_state chunk_state;
        struct buf line;
        struct buf body;

        unsigned in_callback;
        bool cancelled;
        bool finishing;
        struct http_response resp;
};

struct http_ctx {
        struct loop *loop;
        struct http_call *calls;
        struct http_conn *idle, *idle_tail;
        unsigned n_idle;
        struct http_tls_entry *tls_entries;
};

static int call_drive(struct http_call *c);
static int call_connect_next(struct http_call *c);
static int call_resolve(struct http_call *c);

/* ---- resolver ---- */

static void job_unref(struct resolve_job *j)
{
        if (atomic_fetch_sub(&j->refs, 1) != 1)
                return;
        if (j->fd >= 0)
                close(j->fd);
        if (j->result)
                freeaddrinfo(j->result);
        free(j->host);
        free(j);
}

static void *resolve_thread(void *arg)
{
        struct resolve_job *j = arg;
        struct addrinfo hints = { .ai_family = AF_UNSPEC,
                                  .ai_socktype = SOCK_STREAM,
                                  .ai_flags = AI_ADDRCONFIG };
        char byte = 1;

        j->gai_error = getaddrinfo(j->host, j->port, &hints, &j->result);
        /* The loop may have given up on the lookup: then nobody reads, and the write fails quietly. */
        (void)send(j->fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        job_unref(j);
        return NULL;
}

/* ---- connections ---- */

static void conn_free(struct http_conn *conn)
{
        if (!conn)
                return;
        sd_event_source_disable_unref(conn->io);
        sd_event_source_disable_unref(conn->idle_timer);
        SSL_free(conn->ssl);
        if (conn->fd >= 0)
                close(conn->fd);
        http_tls_entry_unref(conn->tls);
        free(conn->host);
        free(conn);
}

static void pool_unlink(struct http_conn *conn)
{
        struct http_ctx *ctx = conn->ctx;

        if (conn->prev)
                conn->prev->next = conn->next;
        else
                ctx->idle = conn->next;
        if (conn->next)
                conn->next->prev = conn->prev;
        else
                ctx->idle_tail = conn->prev;
        conn->prev = conn->next = NULL;
        ctx->n_idle--;
        conn->idle_timer = sd_event_source_disable_unref(conn->idle_timer);
}

static int conn_set_events(struct http_conn *conn, uint32_t events)
{
        if (conn->events == events)
                return 0;
        conn->events = events;
        return sd_event_source_set_io_events(conn->io, events);
}

/* A pooled connection is alive while nothing arrived on it: data or EOF while idle means the server closed
 * it (or broke the protocol). TLS may carry session tickets, which OpenSSL consumes without returning data.
 */
static bool conn_idle_alive(struct http_conn *conn)
{
        char b;

        if (conn->ssl) {
                ERR_clear_error();
                int n = SSL_peek(conn->ssl, &b, 1);
                int e = n > 0 ? SSL_ERROR_NONE : SSL_get_error(conn->ssl, n);
                ERR_clear_error();
                return e == SSL_ERROR_WANT_READ;
        }
        ssize_t n = recv(conn->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

static int on_conn_idle_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct http_conn *conn = userdata;

        pool_unlink(conn);
        conn_free(conn);
        return 0;
}

static bool conn_same_key(const struct http_conn *a, const struct http_conn *b)
{
        return a->https == b->https && a->port == b->port && a->tls == b->tls && streq(a->host, b->host);
}

static void pool_put(struct http_ctx *ctx, struct http_conn *conn)
{
        unsigned same = 0;

        conn->call = NULL;
        conn->reused = true;
        if (!conn_idle_alive(conn) ||
            sd_event_add_time_relative(loop_event(ctx->loop), &conn->idle_timer, CLOCK_MONOTONIC,
                                       POOL_IDLE_USEC, 0, on_conn_idle_timer, conn) < 0 ||
            conn_set_events(conn, EPOLLIN) < 0) {
                conn_free(conn);
                return;
        }
        /* Over a cap, the oldest idle connections go. */
        for (struct http_conn *i = ctx->idle; i; i = i->next)
                if (conn_same_key(i, conn))
                        same++;
        for (struct http_conn *i = ctx->idle, *n; i && (same >= POOL_MAX_PER_KEY || ctx->n_idle >= POOL_MAX);
             i = n) {
                bool k = conn_same_key(i, conn);
                n = i->next;
                if (ctx->n_idle >= POOL_MAX || (k && same >= POOL_MAX_PER_KEY)) {
                        if (k)
                                same--;
                        pool_unlink(i);
                        conn_free(i);
                }
        }
        conn->prev = ctx->idle_tail;
        if (ctx->idle_tail)
                ctx->idle_tail->next = conn;
        else
                ctx->idle = conn;
        ctx->idle_tail = conn;
        ctx->n_idle++;
}

/* The most recently used idle connection for the call's target, checked for life first. */
static struct http_conn *pool_take(struct http_call *c)
{
        struct http_ctx *ctx = c->ctx;

        for (struct http_conn *i = ctx->idle_tail, *p; i; i = p) {
                p = i->prev;
                if (i->https != c->url.https || i->port != c->url.port || i->tls != c->tls ||
                    !streq(i->host, c->url.host))
                        continue;
                pool_unlink(i);
                if (!conn_idle_alive(i)) {
                        conn_free(i);
                        continue;
                }
                return i;
        }
        return NULL;
}

static const char *connect_host(struct http_call *c)
{
        return c->proxy_host ? c->proxy_host : c->url.host;
}

static uint16_t connect_port(struct http_call *c)
{
        return c->proxy_host ? c->proxy_port : c->url.port;
}

/* ---- call lifetime ---- */

static void call_unlink(struct http_call *c)
{
        if (c->prev)
                c->prev->next = c->next;
        else if (c->ctx->calls == c)
                c->ctx->calls = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
}

static void call_drop_resolve(struct http_call *c)
{
        c->job_io = sd_event_source_disable_unref(c->job_io);
        if (c->job) {
                job_unref(c->job);
                c->job = NULL;
        }
}

static void call_free(struct http_call *c)
{
        sd_event_source_disable_unref(c->start);
        sd_event_source_disable_unref(c->timer);
        call_drop_resolve(c);
        if (c->addrs)
                freeaddrinfo(c->addrs);
        conn_free(c->conn);
        http_tls_entry_unref(c->tls);
        http_url_clear(&c->url);
        free(c->method);
        /* The request holds the bearer token, the proxy request the proxy credentials. */
        if (c->request.data)
                explicit_bzero(c->request.data, c->request.len);
        if (c->proxy_request.data)
                explicit_bzero(c->proxy_request.data, c->proxy_request.len);
        buf_free(&c->request);
        buf_free(&c->proxy_request);
        free(c->proxy_host);
        buf_free(&c->head_buf);
        buf_free(&c->line);
        buf_free(&c->body);
        http_response_clear(&c->resp);
        call_unlink(c);
        free(c);
}

/* Reports the call and frees it. The connection goes back to the pool when the answer left it reusable. */
static void call_finish(struct http_call *c, int error)
{
        struct http_response *resp = &c->resp;

        c->start = sd_event_source_disable_unref(c->start);
        c->timer = sd_event_source_disable_unref(c->timer);
        call_drop_resolve(c);
        resp->error = error;
        if (error == 0 && c->conn && c->keep_alive)
                pool_put(c->ctx, TAKE_PTR(c->conn));
        else
                c->conn = (conn_free(c->conn), NULL);

        /* No body after a transport failure: what arrived is incomplete. */
        if (error == 0 && !c->streaming) {
                /* Always a string, even for an empty answer, so callers can parse without NULL checks. */
                if (!c->body.data && buf_append(&c->body, "", 0) < 0)
                        resp->error = -ENOMEM;
                else {
                        resp->body_len = c->body.len;
                        resp->body = TAKE_PTR(c->body.data);
                        c->body = (struct buf){ 0 };
                }
        }
        if (resp->error < 0 && !resp->errbuf[0])
                snprintf(resp->errbuf, sizeof(resp->errbuf), "%s", strerror(-resp->error));

        c->finishing = true;
        if (c->done)
                c->done(resp, c->userdata);
        call_free(c);
}

static void call_fail(struct http_call *c, int error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void call_fail(struct http_call *c, int error, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(c->resp.errbuf, sizeof(c->resp.errbuf), fmt, ap);
        va_end(ap);
        call_finish(c, error);
}

/* ---- timers ---- */

static int on_call_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct http_call *c = userdata;
        bool connecting = c->state < ST_SEND;

        if (connecting && (c->deadline == UINT64_MAX || usec < c->deadline))
                call_fail(c, -ETIMEDOUT, "Connection timed out after %llu milliseconds",
                          (unsigned long long)(c->connect_timeout_usec / 1000));
        else
                call_fail(c, -ETIMEDOUT,
                          "Operation timed out after %llu milliseconds with %zu bytes received",
                          (unsigned long long)(c->timeout_usec / 1000), c->body.len);
        return 0;
}

/* Arms the call's one timer: the connect deadline while connecting (bounded by the whole-request deadline),
 * then the whole-request deadline alone. */
static int call_arm_timer(struct http_call *c, bool connecting)
{
        uint64_t at = c->deadline;

        if (connecting) {
                uint64_t now = now_monotonic_usec();
                uint64_t cd = now + c->connect_timeout_usec;
                if (cd < at)
                        at = cd;
        }
        if (at == UINT64_MAX)
                return c->timer ? sd_event_source_set_enabled(c->timer, SD_EVENT_OFF) : 0;
        if (!c->timer)
                return sd_event_add_time(loop_event(c->ctx->loop), &c->timer, CLOCK_MONOTONIC, at, 1,
                                         on_call_timer, c);
        int r = sd_event_source_set_time(c->timer, at);
        return r < 0 ? r : sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

/* ---- reading and writing ---- */

/* Both return bytes moved, 0 at EOF (read), -EAGAIN after setting the events to wait for, <0 errno. */
static int conn_read(struct http_conn *conn, char *p, size_t n)
{
        if (conn->ssl) {
                ERR_clear_error();
                int k = SSL_read(conn->ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
                if (k > 0)
                        return k;
                int saved = errno;
                switch (SSL_get_error(conn->ssl, k)) {
                case SSL_ERROR_ZERO_RETURN:
                        return 0;
                case SSL_ERROR_WANT_READ:
                        return conn_set_events(conn, EPOLLIN) < 0 ? -EIO : -EAGAIN;
                case SSL_ERROR_WANT_WRITE:
                        return conn_set_events(conn, EPOLLOUT) < 0 ? -EIO : -EAGAIN;
                case SSL_ERROR_SYSCALL:
                        ERR_clear_error();
                        return saved > 0 && k < 0 ? -saved : 0;
                default:
                        ERR_clear_error();
                        return -EPROTO;
                }
        }
        ssize_t k = recv(conn->fd, p, n, 0);
        if (k >= 0)
                return (int)k;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return conn_set_events(conn, EPOLLIN) < 0 ? -EIO : -EAGAIN;
        return -errno;
}

static int conn_write(struct http_conn *conn, const char *p, size_t n)
{
        if (conn->ssl) {
                ERR_clear_error();
                int k = SSL_write(conn->ssl, p, (int)(n > INT32_MAX ? INT32_MAX : n));
                if (k > 0)
                        return k;
                int saved = errno;
                switch (SSL_get_error(conn->ssl, k)) {
                case SSL_ERROR_WANT_READ:
                        return conn_set_events(conn, EPOLLIN) < 0 ? -EIO : -EAGAIN;
                case SSL_ERROR_WANT_WRITE:
                        return conn_set_events(conn, EPOLLOUT) < 0 ? -EIO : -EAGAIN;
                case SSL_ERROR_SYSCALL:
                        ERR_clear_error();
                        return saved > 0 ? -saved : -ECONNRESET;
                default:
                        ERR_clear_error();
                        return -ECONNRESET;
                }
        }
        ssize_t k = send(conn->fd, p, n, MSG_NOSIGNAL);
        if (k >= 0)
                return (int)k;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return conn_set_events(conn, EPOLLOUT) < 0 ? -EIO : -EAGAIN;
        return -errno;
}

/* ---- the answer ---- */

static void header_value(const char *line, size_t name_len, size_t line_len, const char **ret,
                         size_t *ret_len)
{
        const char *v = line + name_len + 1, *e = line + line_len;

        while (v < e && (*v == ' ' || *v == '\t'))
                v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        *ret = v;
        *ret_len = (size_t)(e - v);
}

static bool token_in_list(const char *v, size_t n, const char *token)
{
        size_t tn = strlen(token);

        for (size_t i = 0; i < n;) {
                while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
                        i++;
                size_t s = i;
                while (i < n && v[i] != ',')
                        i++;
                size_t e = i;
                while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
                        e--;
                if (e - s == tn && strncasecmp(v + s, token, tn) == 0)
                        return true;
        }
        return false;
}

/* The status line "HTTP/1.x NNN reason". */
static int parse_status_line(const char *p, size_t n, long *ret_status, int *ret_minor)
{
        if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
                return -EPROTO;
        /* Three digits, the first 1 to 9: there are no status codes below 100. */
        if (p[9] < '1' || p[9] > '9')
                return -EPROTO;
        for (int i = 10; i < 12; i++)
                if (p[i] < '0' || p[i] > '9')
                        return -EPROTO;
        if (n > 12 && p[12] != ' ' && p[12] != '\r' && p[12] != '\n')
                return -EPROTO;
        *ret_status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
        *ret_minor = p[7] - '0';
        return 0;
}

/* Finds the end of a header block: the offset after the empty line, or 0 when it is not complete. The
 * search starts at from, where the previous one left off (an answer trickling in a byte at a time must not
 * cost a scan of everything before each byte). */
static size_t head_end(const char *p, size_t n, size_t from)
{
        for (size_t i = from; i + 1 < n; i++) {
                if (p[i] != '\n')
                        continue;
                if (p[i + 1] == '\n')
                        return i + 2;
                if (p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n')
                        return i + 3;
        }
        return 0;
}

static int store_header(char **dst, const char *v, size_t n)
{
        char *s = strndup(v, n);
        if (!s)
                return -ENOMEM;
        free(*dst);
        *dst = s;
        return 0;
}

/* Parses a final answer's header block (status line included, end excluded) and sets up the body. */
static int parse_head(struct http_call *c, const char *p, size_t n)
{
        const char *eol = memchr(p, '\n', n);
        size_t ll = eol ? (size_t)(eol - p) : n;
        bool chunked = false, other_coding = false, have_length = false, close = false,
             keep_alive_header = false;
        uint64_t length = 0;
        int minor, r;

        r = parse_status_line(p, ll && p[ll - 1] == '\r' ? ll - 1 : ll, &c->resp.status, &minor);
        if (r < 0)
                return r;

        for (const char *line = eol ? eol + 1 : p + n; line < p + n;) {
                const char *le = memchr(line, '\n', (size_t)(p + n - line));
                const char *next = le ? le + 1 : p + n;
                size_t len = (size_t)((le ? le : p + n) - line);
                if (len > 0 && line[len - 1] == '\r')
                        len--;
                const char *colon = memchr(line, ':', len);
                const char *v;
                size_t vn;

                if (len == 0) {
                        line = next;
                        continue;
                }
                /* Obsolete line folding and lines without a name are not HTTP/1.1 as servers speak it now.
                 */
                if (!colon || colon == line || line[0] == ' ' || line[0] == '\t')
                        return -EPROTO;
                size_t name_len = (size_t)(colon - line);
                header_value(line, name_len, len, &v, &vn);

#define IS(name) (name_len == strlen(name) && strncasecmp(line, name, name_len) == 0)
                if (IS("Content-Length")) {
                        uint64_t x = 0;
                        if (vn == 0 || vn > 19)
                                return -EPROTO;
                        for (size_t i = 0; i < vn; i++) {
                                if (v[i] < '0' || v[i] > '9')
                                        return -EPROTO;
                                x = x * 10 + (uint64_t)(v[i] - '0');
                        }
                        if (have_length && x != length)
                                return -EPROTO;
                        have_length = true;
                        length = x;
                } else if (IS("Transfer-Encoding")) {
                        /* Chunked must be the last coding; anything else is read until close. */
                        const char *last = v + vn;
                        while (last > v && last[-1] != ',')
                                last--;
                        chunked = token_in_list(last, (size_t)(v + vn - last), "chunked");
                        other_coding = !chunked;
                } else if (IS("Connection")) {
                        if (token_in_list(v, vn, "close"))
                                close = true;
                        if (token_in_list(v, vn, "keep-alive"))
                                keep_alive_header = true;
                } else if (IS("Content-Type")) {
                        if ((r = store_header(&c->resp.content_type, v, vn)) < 0)
                                return r;
                } else if (IS("Retry-After")) {
                        if ((r = store_header(&c->resp.retry_after, v, vn)) < 0)
                                return r;
                }
#undef IS
                line = next;
        }

        c->keep_alive = !close && (minor == 1 || keep_alive_header);
        long st = c->resp.status;
        if (c->head || st == 204 || st == 304)
                c->body_mode = BODY_NONE;
        else if (chunked) {
                c->body_mode = BODY_CHUNKED;
                c->chunk_state = CHUNK_SIZE;
        } else if (have_length && !other_coding) {
                c->body_mode = length ? BODY_LENGTH : BODY_NONE;
                c->remaining = length;
        } else {
                c->body_mode = BODY_UNTIL_CLOSE;
                c->keep_alive = false;
        }
        c->streaming = c->on_data && st >= 200 && st < 300;
        if (!c->streaming && c->body_mode == BODY_LENGTH && length > c->max_body)
                return -EFBIG;
        return 0;
}

/* Hands decoded body bytes over: to on_data when streaming, else into the buffer. -ECANCELED when the call
 * was cancelled from on_data. */
static int deliver(struct http_call *c, const char *p, size_t n)
{
        if (n == 0)
                return 0;
        if (c->streaming) {
                c->in_callback++;
                int r = c->on_data(p, n, c->userdata);
                c->in_callback--;
                if (c->cancelled)
                        return -ECANCELED;
                if (r < 0) {
                        snprintf(c->resp.errbuf, sizeof(c->resp.errbuf),
                                 "transfer aborted by the receiver: %s", strerror(-r));
                        return r;
                }
                return 0;
        }
        if (n > c->max_body - c->body.len)
                return -EFBIG;
        return buf_append(&c->body, p, n);
}

/* Feeds body bytes; 1 when the body is complete. */
static int feed_body(struct http_call *c, const char *p, size_t n)
{
        int r;

        switch (c->body_mode) {
        case BODY_NONE:
                return 1;
        case BODY_UNTIL_CLOSE:
                return deliver(c, p, n);
        case BODY_LENGTH: {
                size_t take = n < c->remaining ? n : (size_t)c->remaining;
                if ((r = deliver(c, p, take)) < 0)
                        return r;
                c->remaining -= take;
                if (c->remaining > 0)
                        return 0;
                /* Bytes beyond the answer: the connection is out of step. */
                if (take < n)
                        c->keep_alive = false;
                return 1;
        }
        case BODY_CHUNKED:
                break;
        }

        for (size_t i = 0; i < n;) {
                if (c->chunk_state == CHUNK_DATA) {
                        size_t take = n - i < c->remaining ? n - i : (size_t)c->remaining;
                        if ((r = deliver(c, p + i, take)) < 0)
                                return r;
                        i += take;
                        c->remaining -= take;
                        if (c->remaining == 0)
                                c->chunk_state = CHUNK_DATA_END;
                        continue;
                }
                /* Line-oriented states: the size line, the CRLF after the data, the trailers. */
                const char *nl = memchr(p + i, '\n', n - i);
                size_t take = nl ? (size_t)(nl - (p + i)) + 1 : n - i;
                if (c->line.len + take > HTTP_MAX_CHUNK_LINE)
                        return -EPROTO;
                if ((r = buf_append(&c->line, p + i, take)) < 0)
                        return r;
                i += take;
                if (!nl)
                        continue;
                size_t ll = c->line.len - 1;
                if (ll > 0 && c->line.data[ll - 1] == '\r')
                        ll--;
                const char *l = c->line.data;
                c->line.len = 0;

                switch (c->chunk_state) {
                case CHUNK_SIZE: {
                        uint64_t size = 0;
                        size_t k = 0;
                        for (; k < ll; k++) {
                                int d = l[k] >= '0' && l[k] <= '9'   ? l[k] - '0'
                                        : l[k] >= 'a' && l[k] <= 'f' ? l[k] - 'a' + 10
                                        : l[k] >= 'A' && l[k] <= 'F' ? l[k] - 'A' + 10
                                                                     : -1;
                                if (d < 0)
                                        break;
                                if (size >> 60)
                                        return -EPROTO;
                                size = size * 16 + (uint64_t)d;
                        }
                        /* Digits, then optional blanks and extensions (";name=value"), which are ignored. */
                        while (k < ll && (l[k] == ' ' || l[k] == '\t'))
                                k++;
                        if (k == 0 || (k < ll && l[k] != ';'))
                                return -EPROTO;
                        if (size == 0)
                                c->chunk_state = CHUNK_TRAILER;
                        else {
                                c->remaining = size;
                                c->chunk_state = CHUNK_DATA;
                        }
                        break;
                }
                case CHUNK_DATA_END:
                        if (ll != 0)
                                return -EPROTO;
                        c->chunk_state = CHUNK_SIZE;
                        break;
                case CHUNK_TRAILER:
                        if (ll == 0) {
                                if (i < n)
                                        c->keep_alive = false;
                                return 1;
                        }
                        break;
                case CHUNK_DATA:
                        break;
                }
        }
        return 0;
}

/* Feeds bytes of the answer; 1 when it is complete. */
static int feed(struct http_call *c, const char *p, size_t n)
{
        int r;

        if (c->state == ST_BODY)
                return feed_body(c, p, n);

        if ((r = buf_append(&c->head_buf, p, n)) < 0)
                return r;
        for (;;) {
                size_t end = head_end(c->head_buf.data, c->head_buf.len, c->head_scanned);
                if (end == 0) {
                        if (c->head_buf.len > HTTP_MAX_HEADER)
                                return -EBADMSG;
                        /* The last two bytes may start the end ("\n\r", then "\n"). */
                        c->head_scanned = c->head_buf.len > 2 ? c->head_buf.len - 2 : 0;
                        return 0;
                }
                if (end > HTTP_MAX_HEADER)
                        return -EBADMSG;
                long status = 0;
                int minor;
                r = parse_status_line(c->head_buf.data, c->head_buf.len, &status, &minor);
                if (r < 0)
                        return r;
                size_t rest = c->head_buf.len - end;
                if (status >= 100 && status < 200 && status != 101) {
                        /* Interim answers (100 Continue, 103 Early Hints) precede the real one. */
                        memmove(c->head_buf.data, c->head_buf.data + end, rest);
                        c->head_buf.len = rest;
                        c->head_scanned = 0;
                        continue;
                }
                r = parse_head(c, c->head_buf.data, end);
                if (r < 0)
                        return r;
                c->state = ST_BODY;
                if (c->body_mode == BODY_NONE) {
                        if (rest > 0)
                                c->keep_alive = false;
                        return 1;
                }
                /* The rest is moved out first: on_data may run, and the header buffer is done with. */
                struct buf tail = c->head_buf;
                c->head_buf = (struct buf){ 0 };
                r = feed_body(c, tail.data + end, rest);
                buf_free(&tail);
                return r;
        }
}

/* ---- the parser alone, for the fuzzer ---- */

static int fuzz_sink(const char *data, size_t len, void *userdata)
{
        struct http_fuzz_result *res = userdata;
        for (size_t i = 0; i < len; i++)
                res->sum = res->sum * 31 + (unsigned char)data[i];
        res->body += len;
        return 0;
}

int http_fuzz_feed(const char *data, size_t n, const size_t *cuts, size_t n_cuts, bool head, bool stream,
                   size_t max_body, struct http_fuzz_result *ret)
{
        struct http_call c = { .state = ST_HEADERS, .head = head, .max_body = max_body };
        int r = 0;

        *ret = (struct http_fuzz_result){ 0 };
        if (stream) {
                c.on_data = fuzz_sink;
                c.userdata = ret;
        }
        for (size_t k = 0, off = 0; r == 0 && off < n; k++) {
                size_t end = k < n_cuts && cuts[k] > off && cuts[k] < n ? cuts[k] : n;
                r = feed(&c, data + off, end - off);
                off = end;
        }
        ret->status = c.resp.status;
        if (!c.streaming) {
                ret->body = 0;
                (void)fuzz_sink(c.body.data, c.body.len, ret);
        }
        buf_free(&c.head_buf);
        buf_free(&c.line);
        buf_free(&c.body);
        http_response_clear(&c.resp);
        return r;
}

/* ---- driving a call ---- */

static int call_request_error(struct http_call *c, int r, const char *what)
{
        if (r == -ECANCELED && c->cancelled) {
                call_free(c);
                return r;
        }
        if (c->resp.errbuf[0])
                call_finish(c, r);
        else if (r == -EFBIG)
                call_fail(c, r, "response body larger than %zu bytes", c->max_body);
        else if (r == -EBADMSG)
                call_fail(c, r, "header block of the answer larger than %zu bytes", HTTP_MAX_HEADER);
        else if (r == -EPROTO)
                call_fail(c, r, "malformed answer from the server (%s)", what);
        else
                call_fail(c, r, "%s: %s", what, strerror(-r));
        return r;
}

/* The connection broke before the answer was complete. A reused connection that gave nothing back was most
 * likely closed by the server while idle: idempotent requests go again, once, on a new connection. */
static int call_connection_lost(struct http_call *c, int error, const char *what)
{
        if (c->conn && c->conn->reused && !c->got_bytes && c->idempotent && !c->retried) {
                c->retried = true;
                c->conn = (conn_free(c->conn), NULL);
                c->sent = 0;
                c->state = ST_START;
                int r = call_arm_timer(c, true);
                if (r < 0)
                        return call_request_error(c, r, "timer");
                r = call_resolve(c);
                if (r < 0)
                        call_fail(c, r, "cannot resolve %s: %s", connect_host(c), strerror(-r));
                return r;
        }
        if (error == 0)
                error = -ECONNRESET;
        if (!c->got_bytes)
                call_fail(c, error, "Empty reply from server (%s)", what);
        else
                call_fail(c, error, "Connection closed before the answer was complete (%s)", what);
        return error;
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct http_conn *conn = userdata;

        if (!conn->call) {
                /* Idle: the server closed it, or sent something it should not have. */
                if (!conn_idle_alive(conn)) {
                        pool_unlink(conn);
                        conn_free(conn);
                }
                return 0;
        }
        (void)call_drive(conn->call);
        return 0;
}

static int conn_new(struct http_call *c, int fd, struct http_conn **ret)
{
        struct http_conn *conn = calloc(1, sizeof(*conn));

        if (!conn)
                return -ENOMEM;
        conn->ctx = c->ctx;
        conn->fd = fd;
        conn->port = c->url.port;
        conn->https = c->url.https;
        conn->host = strdup(c->url.host);
        if (!conn->host) {
                free(conn);
                return -ENOMEM;
        }
        conn->events = EPOLLOUT;
        int r = sd_event_add_io(loop_event(c->ctx->loop), &conn->io, fd, EPOLLOUT, on_conn_io, conn);
        if (r < 0) {
                free(conn->host);
                free(conn);
                return r;
        }
        if (c->tls) {
                conn->tls = c->tls;
                c->tls->refs++;
        }
        *ret = conn;
        return 0;
}

static void set_socket_options(int fd)
{
        int one = 1, idle = 30, intvl = 10;

        /* Small requests go out at once; dead peers of long watches are noticed. */
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
}

/* Starts a connection to the next address; fails the call when none is left (then <0: it is gone). */
static int call_connect_next(struct http_call *c)
{
        while (c->next_addr) {
                struct addrinfo *ai = c->next_addr;
                c->next_addr = ai->ai_next;

                int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (fd < 0) {
                        c->connect_errno = errno;
                        continue;
                }
                set_socket_options(fd);
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
                        c->connect_errno = errno;
                        close(fd);
                        continue;
                }
                int r = conn_new(c, fd, &c->conn);
                if (r < 0) {
                        close(fd);
                        call_fail(c, r, "cannot watch the socket: %s", strerror(-r));
                        return r;
                }
                c->conn->call = c;
                c->state = ST_CONNECT;
                return 0;
        }
        int e = c->connect_errno ? c->connect_errno : ECONNREFUSED;
        call_fail(c, -e, "Failed to connect to %s port %u: %s", connect_host(c), connect_port(c),
                  strerror(e));
        return -e;
}

static int on_resolved(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct http_call *c = userdata;
        struct resolve_job *j = c->job;
        int e = j->gai_error;

        /* The thread stored its result before writing to the socket pair, and the read orders it. */
        char byte;
        (void)recv(fd, &byte, 1, MSG_DONTWAIT);
        if (e == 0) {
                c->addrs = TAKE_PTR(j->result);
                c->next_addr = c->addrs;
        }
        call_drop_resolve(c);
        if (e != 0) {
                call_fail(c, -EHOSTUNREACH, "Could not resolve host: %s (%s)", connect_host(c),
                          gai_strerror(e));
                return 0;
        }
        (void)call_connect_next(c);
        return 0;
}

/* Addresses for the host: IP literals at once, names by a resolver thread. */
static int call_resolve(struct http_call *c)
{
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
        char port[8];
        int sv[2], r;

        snprintf(port, sizeof(port), "%u", connect_port(c));
        if (c->addrs) {
                freeaddrinfo(c->addrs);
                c->addrs = c->next_addr = NULL;
        }
        if (getaddrinfo(connect_host(c), port, &hints, &c->addrs) == 0) {
                c->next_addr = c->addrs;
                (void)call_connect_next(c);
                return 0;
        }
        c->addrs = NULL;

        struct resolve_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        atomic_init(&j->refs, 1);
        j->fd = -1;
        memcpy(j->port, port, sizeof(port));
        j->host = strdup(connect_host(c));
        if (!j->host || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
                r = j->host ? -errno : -ENOMEM;
                job_unref(j);
                return r;
        }
        j->fd = sv[1];
        c->job = j;
        r = sd_event_add_io(loop_event(c->ctx->loop), &c->job_io, sv[0], EPOLLIN, on_resolved, c);
        if (r < 0) {
                close(sv[0]);
                return r;
        }
        (void)sd_event_source_set_io_fd_own(c->job_io, true);

        pthread_attr_t attr;
        pthread_t t;
        if (pthread_attr_init(&attr) != 0)
                return -ENOMEM;
        (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add(&j->refs, 1);
        r = pthread_create(&t, &attr, resolve_thread, j);
        pthread_attr_destroy(&attr);
        if (r != 0) {
                atomic_fetch_sub(&j->refs, 1);
                return -r;
        }
        c->state = ST_RESOLVE;
        return 0;
}

static int on_start(sd_event_source *s, void *userdata)
{
        struct http_call *c = userdata;
        int r;

        c->start = sd_event_source_disable_unref(c->start);
        r = call_arm_timer(c, true);
        if (r < 0) {
                call_fail(c, r, "cannot arm the timer: %s", strerror(-r));
                return 0;
        }
        c->conn = pool_take(c);
        if (c->conn) {
                c->conn->call = c;
                c->state = ST_SEND;
                r = call_arm_timer(c, false);
                if (r < 0) {
                        call_fail(c, r, "cannot arm the timer: %s", strerror(-r));
                        return 0;
                }
                (void)call_drive(c);
                return 0;
        }
        r = call_resolve(c);
        if (r < 0)
                call_fail(c, r, "cannot resolve %s: %s", connect_host(c), strerror(-r));
        return 0;
}

/* After the TCP connection (and the proxy tunnel): the TLS handshake, or the request for plain http. */
static int call_connected(struct http_call *c)
{
        int r;

        if (!c->url.https) {
                c->state = ST_SEND;
                return call_arm_timer(c, false);
        }
        r = http_tls_entry_ctx(c->tls, c->resp.errbuf, sizeof(c->resp.errbuf));
        if (r < 0)
                return r;
        r = http_tls_new(c->tls->ssl_ctx, c->conn->fd, c->url.host, c->url.ip_literal, &c->conn->ssl);
        if (r < 0) {
                snprintf(c->resp.errbuf, sizeof(c->resp.errbuf), "cannot set up TLS for %s", c->url.host);
                return r;
        }
        c->state = ST_HANDSHAKE;
        return 0;
}

/* The proxy's answer to CONNECT: 2xx opens the tunnel. */
static int proxy_answer(struct http_call *c, bool *ret_done)
{
        size_t end = head_end(c->head_buf.data, c->head_buf.len, c->head_scanned);
        long status;
        int minor;

        if (end == 0) {
                if (c->head_buf.len > HTTP_MAX_HEADER)
                        return -EPROTO;
                c->head_scanned = c->head_buf.len > 2 ? c->head_buf.len - 2 : 0;
                *ret_done = false;
                return 0;
        }
        if (parse_status_line(c->head_buf.data, c->head_buf.len, &status, &minor) < 0 ||
            end != c->head_buf.len) {
                snprintf(c->resp.errbuf, sizeof(c->resp.errbuf), "malformed answer from the proxy %s",
                         c->proxy_host);
                return -EPROTO;
        }
        if (status < 200 || status >= 300) {
                snprintf(c->resp.errbuf, sizeof(c->resp.errbuf),
                         "CONNECT tunnel through %s failed, response %ld", c->proxy_host, status);
                return -ECONNREFUSED;
        }
        c->head_buf.len = 0;
        c->head_scanned = 0;
        *ret_done = true;
        return 0;
}

/* Moves the call as far as the socket allows. The call may be gone when this returns (finished, failed,
 * cancelled from on_data), whatever the result: callers never touch it afterwards. */
static int call_drive(struct http_call *c)
{
        char data[16384];
        int r, n;

        for (;;) {
                switch (c->state) {
                case ST_START:
                case ST_RESOLVE:
                        return 0;

                case ST_CONNECT: {
                        int err = 0;
                        socklen_t len = sizeof(err);
                        if (getsockopt(c->conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                                err = errno;
                        if (err == 0) {
                                /* Writable without an error is connected, unless it is not yet. */
                                struct sockaddr_storage peer;
                                socklen_t plen = sizeof(peer);
                                if (getpeername(c->conn->fd, (struct sockaddr *)&peer, &plen) < 0) {
                                        if (errno == ENOTCONN)
                                                return 0;
                                        err = errno;
                                }
                        }
                        if (err != 0) {
                                c->connect_errno = err;
                                c->conn = (conn_free(c->conn), NULL);
                                return call_connect_next(c);
                        }
                        if (c->proxy_host) {
                                c->state = ST_PROXY_SEND;
                                c->sent = 0;
                                break;
                        }
                        r = call_connected(c);
                        if (r < 0)
                                return call_request_error(c, r, "connect");
                        break;
                }

                case ST_PROXY_SEND:
                        while (c->sent < c->proxy_request.len) {
                                n = conn_write(c->conn, c->proxy_request.data + c->sent,
                                               c->proxy_request.len - c->sent);
                                if (n == -EAGAIN)
                                        return 0;
                                if (n < 0) {
                                        call_fail(c, n, "cannot talk to the proxy %s: %s", c->proxy_host,
                                                  strerror(-n));
                                        return n;
                                }
                                c->sent += (size_t)n;
                        }
                        c->sent = 0;
                        c->state = ST_PROXY_RECV;
                        if ((r = conn_set_events(c->conn, EPOLLIN)) < 0)
                                return call_request_error(c, r, "proxy");
                        break;

                case ST_PROXY_RECV: {
                        bool tunnel = false;
                        /* Byte by byte: whatever follows the proxy's answer belongs to TLS. */
                        n = conn_read(c->conn, data, 1);
                        if (n == -EAGAIN)
                                return 0;
                        if (n <= 0) {
                                call_fail(c, n == 0 ? -ECONNRESET : n, "the proxy %s closed the connection",
                                          c->proxy_host);
                                return -ECONNRESET;
                        }
                        if ((r = buf_append(&c->head_buf, data, 1)) < 0 ||
                            (r = proxy_answer(c, &tunnel)) < 0)
                                return call_request_error(c, r, "proxy");
                        if (!tunnel)
                                break;
                        r = call_connected(c);
                        if (r < 0)
                                return call_request_error(c, r, "connect");
                        break;
                }

                case ST_HANDSHAKE: {
                        ERR_clear_error();
                        int k = SSL_connect(c->conn->ssl);
                        if (k == 1) {
                                c->state = ST_SEND;
                                if ((r = call_arm_timer(c, false)) < 0)
                                        return call_request_error(c, r, "timer");
                                break;
                        }
                        int saved = errno;
                        int e = SSL_get_error(c->conn->ssl, k);
                        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                                r = conn_set_events(c->conn, e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT);
                                return r < 0 ? call_request_error(c, r, "handshake") : 0;
                        }
                        http_tls_explain(c->conn->ssl, e, saved, c->resp.errbuf, sizeof(c->resp.errbuf));
                        call_finish(c, -EBADMSG);
                        return -EBADMSG;
                }

                case ST_SEND:
                        while (c->sent < c->request.len) {
                                n = conn_write(c->conn, c->request.data + c->sent, c->request.len - c->sent);
                                if (n == -EAGAIN)
                                        return 0;
                                if (n < 0)
                                        return call_connection_lost(c, n, "sending the request");
                                c->sent += (size_t)n;
                        }
                        c->state = ST_HEADERS;
                        if ((r = conn_set_events(c->conn, EPOLLIN)) < 0)
                                return call_request_error(c, r, "socket");
                        break;

                case ST_HEADERS:
                case ST_BODY:
                        n = conn_read(c->conn, data, sizeof(data));
                        if (n == -EAGAIN)
                                return 0;
                        if (n == 0 && c->state == ST_BODY && c->body_mode == BODY_UNTIL_CLOSE) {
                                c->keep_alive = false;
                                call_finish(c, 0);
                                return -ECONNRESET;
                        }
                        if (n <= 0)
                                return call_connection_lost(c, n, "receiving the answer");
                        c->got_bytes = true;
                        r = feed(c, data, (size_t)n);
                        if (r < 0)
                                return call_request_error(c, r, "receiving the answer");
                        if (r > 0) {
                                call_finish(c, 0);
                                return -ECONNRESET;
                        }
                        break;
                }
        }
}

/* ---- the per-loop state ---- */

static int http_ctx_get(struct loop *l, struct http_ctx **ret)
{
        void **slot = loop_http_state(l);
        struct http_ctx *ctx = *slot;

        if (!ctx) {
                ctx = calloc(1, sizeof(*ctx));
                if (!ctx)
                        return -ENOMEM;
                ctx->loop = l;
                *slot = ctx;
        }
        *ret = ctx;
        return 0;
}

void http_loop_cleanup(struct loop *l)
{
        void **slot = loop_http_state(l);
        struct http_ctx *ctx = *slot;

        if (!ctx)
                return;
        /* In-flight calls are dropped without callbacks. */
        while (ctx->calls)
                call_free(ctx->calls);
        while (ctx->idle) {
                struct http_conn *conn = ctx->idle;
                pool_unlink(conn);
                conn_free(conn);
        }
        http_tls_entries_free(&ctx->tls_entries);
        free(ctx);
        *slot = NULL;
}

/* ---- requests ---- */

static bool header_is(const char *h, const char *name)
{
        size_t n = strlen(name);
        return strncasecmp(h, name, n) == 0 && (h[n] == ':' || h[n] == ';');
}

static bool caller_has(const char *const *headers, const char *name)
{
        for (const char *const *h = headers; h && *h; h++)
                if (header_is(*h, name))
                        return true;
        return false;
}

static int build_request(struct http_call *c, const struct http_request *req)
{
        const char *method = c->method;
        size_t body_len = req->body && req->body_len == 0 ? strlen(req->body) : req->body_len;
        bool with_body =
            req->body || streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH");
        struct buf *b = &c->request;
        int r;

        for (const char *p = method; *p; p++)
                if (*p <= ' ' || *p >= 0x7f)
                        return -EINVAL;
        if ((r = buf_printf(b, "%s %s HTTP/1.1\r\n", method, c->url.target)) < 0)
                return r;
        /* Caller headers override the defaults; "Name:" with no value only removes one (as with curl). */
        if (!caller_has(req->headers, "Host") && (r = buf_printf(b, "Host: %s\r\n", c->url.hostport)) < 0)
                return r;
        if (!caller_has(req->headers, "User-Agent") &&
            (r = buf_printf(b, "User-Agent: spotdrain/" SPOTDRAIN_VERSION "\r\n")) < 0)
                return r;
        if (!caller_has(req->headers, "Accept") && (r = buf_printf(b, "Accept: */*\r\n")) < 0)
                return r;
        if (req->bearer_token) {
                if (strpbrk(req->bearer_token, "\r\n"))
                        return -EINVAL;
                if ((r = buf_printf(b, "Authorization: Bearer %s\r\n", req->bearer_token)) < 0)
                        return r;
        }
        for (const char *const *h = req->headers; h && *h; h++) {
                const char *colon = strchr(*h, ':'), *semi = strchr(*h, ';');
                if (strpbrk(*h, "\r\n"))
                        return -EINVAL;
                if (colon) {
                        const char *v = colon + 1;
                        while (*v == ' ' || *v == '\t')
                                v++;
                        if (!*v)
                                continue;
                        if (header_is(*h, "Content-Length") || header_is(*h, "Transfer-Encoding") ||
                            header_is(*h, "Expect") || header_is(*h, "Connection"))
                                continue;
                        r = buf_printf(b, "%s\r\n", *h);
                } else if (semi && !semi[1])
                        r = buf_printf(b, "%.*s:\r\n", (int)(semi - *h), *h);
                else
                        return -EINVAL;
                if (r < 0)
                        return r;
        }
        if (with_body && (r = buf_printf(b, "Content-Length: %zu\r\n", body_len)) < 0)
                return r;
        if ((r = buf_append(b, "\r\n", 2)) < 0)
                return r;
        if (with_body && body_len > 0 && (r = buf_append(b, req->body, body_len)) < 0)
                return r;
        return 0;
}

static int build_proxy_request(struct http_call *c, const char *auth)
{
        struct buf *b = &c->proxy_request;
        const char *fmt = strchr(c->url.host, ':') ? "[%s]:%u" : "%s:%u";
        _cleanup_free_ char *target = strprintf(fmt, c->url.host, c->url.port);
        int r;

        if (!target)
                return -ENOMEM;
        if ((r = buf_printf(b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)) < 0)
                return r;
        if (auth && (r = buf_printf(b, "Proxy-Authorization: %s\r\n", auth)) < 0)
                return r;
        return buf_printf(b, "User-Agent: spotdrain/" SPOTDRAIN_VERSION "\r\n\r\n");
}

static int call_setup(struct http_call *c, const struct http_request *req)
{
        bool streaming = req->on_data != NULL;
        int r;

        r = http_url_parse(req->url, &c->url);
        if (r < 0)
                return r;
        if (!c->url.https && !http_host_is_local(c->url.host))
                return -EPROTONOSUPPORT;
        c->method = strdup(req->method ? req->method : "GET");
        if (!c->method)
                return -ENOMEM;
        c->head = streq(c->method, "HEAD");
        c->idempotent = c->head || streq(c->method, "GET") || streq(c->method, "PUT") ||
                        streq(c->method, "DELETE") || streq(c->method, "OPTIONS");
        c->on_data = req->on_data;
        c->max_body = req->max_body ? req->max_body : HTTP_MAX_BODY;
        c->timeout_usec = req->timeout_usec ? req->timeout_usec : streaming ? 0 : HTTP_TIMEOUT_USEC;
        c->connect_timeout_usec =
            req->connect_timeout_usec ? req->connect_timeout_usec : HTTP_CONNECT_TIMEOUT_USEC;
        c->deadline = c->timeout_usec ? now_monotonic_usec() + c->timeout_usec : UINT64_MAX;
        r = build_request(c, req);
        if (r < 0)
                return r;

        if (c->url.https) {
                _cleanup_free_ char *auth = NULL;
                r = http_tls_init();
                if (r < 0)
                        return r;
                r = http_tls_entry_get(&c->ctx->tls_entries, req->tls, &c->tls);
                if (r < 0)
                        return r;
                r = http_proxy_for(c->url.host, &c->proxy_host, &c->proxy_port, &auth);
                if (r < 0)
                        return r;
                if (c->proxy_host)
                        r = build_proxy_request(c, auth);
                if (auth)
                        explicit_bzero(auth, strlen(auth));
                if (r < 0)
                        return r;
        }
        return 0;
}

int http_send(struct loop *l, const struct http_request *req, http_done_fn done, void *userdata,
              struct http_call **ret)
{
        struct http_ctx *ctx;
        struct http_call *c;
        int r;

        if (!req || !req->url)
                return -EINVAL;
        r = http_ctx_get(l, &ctx);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->ctx = ctx;
        c->done = done;
        c->userdata = userdata;
        r = call_setup(c, req);
        if (r < 0)
                goto fail;
        /* The work starts from the loop, so done is never called from inside http_send. */
        r = sd_event_add_defer(loop_event(l), &c->start, on_start, c);
        if (r < 0)
                goto fail;

        c->next = ctx->calls;
        if (ctx->calls)
                ctx->calls->prev = c;
        ctx->calls = c;
        if (ret)
                *ret = c;
        return 0;

fail:
        call_free(c);
        return r;
}

struct http_call *http_cancel(struct http_call *c)
{
        if (!c)
                return NULL;
        c->done = NULL;
        /* A call whose done is running is freed when done returns; one whose on_data is running is freed
         * when on_data returns. */
        if (c->finishing)
                return NULL;
        if (c->in_callback > 0) {
                c->cancelled = true;
                return NULL;
        }
        call_free(c);
        return NULL;
}

struct sync_state {
        bool done;
        struct http_response *out;
};

static char *memdup_str(const char *s, size_t len)
{
        char *d = malloc(len + 1);
        if (d) {
                memcpy(d, s, len);
                d[len] = 0;
        }
        return d;
}

static void sync_done(const struct http_response *resp, void *userdata)
{
        struct sync_state *st = userdata;
        struct http_response *out = st->out;

        out->status = resp->status;
        out->error = resp->error;
        memcpy(out->errbuf, resp->errbuf, sizeof(out->errbuf));
        out->body_len = resp->body_len;
        if ((resp->body && !(out->body = memdup_str(resp->body, resp->body_len))) ||
            (resp->content_type && !(out->content_type = strdup(resp->content_type))) ||
            (resp->retry_after && !(out->retry_after = strdup(resp->retry_after))))
                out->error = -ENOMEM;
        st->done = true;
}

int http_send_sync(struct loop *l, const struct http_request *req, struct http_response *resp)
{
        struct sync_state st = { .out = resp };
        struct http_call *c = NULL;
        int r;

        *resp = (struct http_response){ 0 };
        r = http_send(l, req, sync_done, &st, &c);
        if (r < 0)
                return r;
        /* The call's own timeouts bound the wait; streaming requests without a timeout wait for the end. */
        r = loop_run_until(l, &st.done, UINT64_MAX);
        if (r < 0) {
                http_cancel(c);
                return r;
        }
        return resp->error;
}

void http_response_clear(struct http_response *resp)
{
        if (!resp)
                return;
        free(resp->body);
        free(resp->content_type);
        free(resp->retry_after);
        *resp = (struct http_response){ 0 };
}

int http_status_to_errno(long status)
{
        if (status >= 200 && status < 300)
                return 0;
        switch (status) {
        case 0:
                return -EIO;
        case 400:
        case 422:
                return -EINVAL;
        case 401:
                return -EACCES;
        case 403:
                return -EPERM;
        case 404:
                return -ENOENT;
        case 409:
                return -EEXIST;
        case 410:
                return -ESTALE;
        case 429:
                return -EBUSY;
        case 503:
                return -EAGAIN;
        case 504:
                return -ETIMEDOUT;
        }
        if (status >= 500 && status < 600)
                return -EIO;
        if (status >= 400 && status < 500)
                return -EINVAL;
        return -EPROTO;
}

int http_status_to_errno_method(const char *method, long status)
{
        if (status == 409 && method && !streq(method, "POST"))
                return -ESTALE;
        return http_status_to_errno(status);
}
