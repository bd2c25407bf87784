/* The HTTP client: libcurl's multi-socket API on the sd-event loop. One easy handle per request; one multi
 * handle per loop, whose sockets and single timer are sd-event sources (curl's "multi_socket" model).
 * libcurl does the protocol: HTTP/1.1 and HTTP/2 (multiplexed over one TLS connection where the server
 * offers it), TLS through OpenSSL, proxies from the environment (HTTPS_PROXY, NO_PROXY with CIDR entries),
 * happy eyeballs and a connect timeout split over a name's addresses, keep-alive pooling, its timeouts.
 *
 * What this file adds on top: the plain-http allowlist, refusing header injection, the answer's header
 * and body limits, TLS settings as blobs (a CA file is re-read when it changes, so a rotated CA is used by
 * the next connection), no certificate CN fallback, tls-server-name, and the rule that a call which timed
 * out before any answer came shuts its connection down: with HTTP/2 libcurl would otherwise keep queueing
 * new streams on a connection that a NAT gateway or proxy silently stopped passing.
 *
 * Errors: connection refused -ECONNREFUSED (or the socket's errno), unresolvable -EHOSTUNREACH, timeouts
 * -ETIMEDOUT, a connection lost before the answer was complete -ECONNRESET, TLS verification and handshake
 * failures -EBADMSG, a malformed answer -EPROTO (and a header block over 64 KiB -EBADMSG), a body over
 * max_body -EFBIG. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>

#include "spotdrain/core.h"

_Static_assert(sizeof(((struct http_response *)0)->errbuf) >= CURL_ERROR_SIZE, "errbuf too small for curl");

#define HTTP_TIMEOUT_USEC         (30ULL * 1000000ULL)
#define HTTP_CONNECT_TIMEOUT_USEC (5ULL * 1000000ULL)
#define HTTP_STREAM_IDLE_USEC     (10ULL * 1000000ULL)
#define HTTP_STALL_CAUTION_USEC   (60ULL * 1000000ULL)
#define HTTP_MAX_BODY             ((size_t)16 * 1024 * 1024)
#define HTTP_MAX_HEADER           ((size_t)64 * 1024)
/* Files larger than this are no certificate bundle. */
#define HTTP_MAX_PEM_FILE ((off_t)4 * 1024 * 1024)

struct http_ctx;

/* One socket curl asked us to watch. */
struct curl_sock {
        struct http_ctx *ctx;
        sd_event_source *source;
        struct curl_sock *prev, *next;
};

/* A PEM file read into memory, re-read when its identity or modification time changes. */
struct pem_file {
        char *path;
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        char *data;
        struct pem_file *next;
};

struct http_call {
        struct http_ctx *ctx;
        CURL *easy;
        CURLU *url;
        struct curl_slist *headers;
        struct curl_slist *connect_to;
        http_done_fn done;
        void *userdata;
        int (*on_data)(const char *data, size_t len, void *userdata);
        char *verify_name;  /* the name (or address) the certificate must be made out for */
        bool streaming;     /* on_data and a 2xx answer: chunks go to on_data */
        bool status_known;  /* streaming decided */
        bool cancelled;     /* cancelled from inside a curl callback; freed by http_dispatch() */
        bool pending_add;   /* started from inside a curl callback; added by http_dispatch() */
        bool finishing;     /* done is running; freed when it returns */
        bool idle_limited;  /* LOW_SPEED set: a -ETIMEDOUT may be the idle limit */
        bool method_head;   /* a HEAD request: no body is expected */
        size_t header_size; /* bytes of header lines so far, interim answers included */
        size_t max_body;
        struct buf body;
        int abort_error; /* why the write or header callback stopped the transfer */
        struct http_response resp;
        struct http_call *prev, *next;
};

/* Per-loop state, created on the first request. */
struct http_ctx {
        struct loop *loop;
        CURLM *multi;
        sd_event_source *timer;
        struct curl_sock *socks;
        struct http_call *calls;
        struct pem_file *pem_files;
        unsigned in_curl;    /* depth of curl_multi_socket_action(): no handle removal allowed inside */
        uint64_t last_stall; /* CLOCK_MONOTONIC usec when a call last timed out; 0 = never */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
        /* OpenSSL's start, before libcurl's: libssl's error strings are kept (a TLS failure reads "wrong
         * version number", "certificate verify failed"), libcrypto's 1,500 or so are not loaded, which keeps
         * about 90 KiB of heap (hash nodes and their malloc overhead) out of every process; a failure inside
         * libcrypto then shows its code, "error:1E08010C:lib(30)::reason(268)", which `openssl errstr
         * 1E08010C` reads. An OpenSSL option, run once: libcurl's own OPENSSL_init_ssl() that follows does
         * not load them again. */
        OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS, NULL);
        curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

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

static void call_free(struct http_call *c)
{
        if (c->easy) {
                curl_multi_remove_handle(c->ctx->multi, c->easy);
                curl_easy_cleanup(c->easy);
        }
        curl_url_cleanup(c->url);
        curl_slist_free_all(c->headers);
        curl_slist_free_all(c->connect_to);
        free(c->verify_name);
        buf_free(&c->body);
        http_response_clear(&c->resp);
        call_unlink(c);
        free(c);
}

static void sock_free(struct curl_sock *s)
{
        sd_event_source_disable_unref(s->source);
        if (s->prev)
                s->prev->next = s->next;
        else
                s->ctx->socks = s->next;
        if (s->next)
                s->next->prev = s->prev;
        free(s);
}

static int curl_error_to_errno(struct http_call *c, CURLcode res)
{
        long os_errno = 0;

        switch (res) {
        case CURLE_OK:
                return 0;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_CONNECT:
                (void)curl_easy_getinfo(c->easy, CURLINFO_OS_ERRNO, &os_errno);
                return os_errno > 0 ? -(int)os_errno : -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
                (void)curl_easy_getinfo(c->easy, CURLINFO_OS_ERRNO, &os_errno);
                return os_errno > 0 ? -(int)os_errno : -ECONNRESET;
        case CURLE_WRITE_ERROR:
                return c->abort_error < 0 ? c->abort_error : -EIO;
        case CURLE_FILESIZE_EXCEEDED:
                return -EFBIG;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_UNSUPPORTED_PROTOCOL:
                return -EPROTONOSUPPORT;
        case CURLE_URL_MALFORMAT:
                return -EINVAL;
        case CURLE_ABORTED_BY_CALLBACK:
                return -ECANCELED;
        case CURLE_WEIRD_SERVER_REPLY:
        case CURLE_BAD_CONTENT_ENCODING:
                return -EPROTO;
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_SHUTDOWN_FAILED:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_USE_SSL_FAILED:
        case CURLE_SSL_CLIENTCERT:
                return -EBADMSG;
        default:
                return -EIO;
        }
}

/* A call that timed out before any answer came says its connection no longer passes bytes (a NAT gateway or
 * a proxy that dropped its state: no FIN, no RST). libcurl closes an HTTP/1.1 connection after such a
 * transfer, but keeps an HTTP/2 connection for its other streams and for new ones, which would all wait
 * for the same silence. Shutting the socket down makes libcurl see the connection end: its other streams
 * fail now (callers retry them on a new connection) and nothing new is queued on it. */
static void drop_silent_connection(struct http_call *c, CURLcode res)
{
        curl_socket_t fd = CURL_SOCKET_BAD;

        if (res != CURLE_OPERATION_TIMEDOUT)
                return;
        c->ctx->last_stall = now_monotonic_usec();
        if (c->resp.status != 0)
                return;
        if (curl_easy_getinfo(c->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD)
                return;
        log_debug("http: no answer on a connection in time; closing it");
        (void)shutdown(fd, SHUT_RDWR);
}

/* Over TLS, an HTTP/1.x body that only the connection's close delimits (no Content-Length, not chunked) may
 * have been cut short by anyone on the path: libcurl takes a TCP close without TLS close_notify as its end.
 * The servers spotdrain talks to always state a length, so such an answer is refused. */
static bool tls_body_until_close(struct http_call *c)
{
        long version = 0;
        curl_off_t length = -1;
        struct curl_header *te = NULL;
        char *url = NULL;
        bool https = false;

        if (c->method_head || c->resp.status == 204 || c->resp.status == 304 || c->body.len == 0)
                return false;
        if (curl_easy_getinfo(c->easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK && url)
                https = startswith(url, "https:");
        if (!https || curl_easy_getinfo(c->easy, CURLINFO_HTTP_VERSION, &version) != CURLE_OK ||
            (version != CURL_HTTP_VERSION_1_0 && version != CURL_HTTP_VERSION_1_1))
                return false;
        if (curl_easy_getinfo(c->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK &&
            length >= 0)
                return false;
        return curl_easy_header(c->easy, "Transfer-Encoding", 0, CURLH_HEADER, -1, &te) != CURLHE_OK ||
               !strcasestr(te->value, "chunked");
}

/* Takes the answer out of the finished easy handle, detaches the call, reports it, frees it. */
static void call_finish(struct http_call *c, CURLcode res)
{
        struct http_response *resp = &c->resp;
        const char *ct = NULL;
        struct curl_header *h = NULL;
        int r = 0;

        if (c->cancelled) {
                call_free(c);
                return;
        }

        (void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &resp->status);
        resp->error = curl_error_to_errno(c, res);
        drop_silent_connection(c, res);
        if (resp->error == 0 && !c->streaming && tls_body_until_close(c)) {
                resp->error = -EPROTO;
                snprintf(resp->errbuf, sizeof(resp->errbuf),
                         "answer over TLS delimited only by the connection's close: may be truncated");
        }
        long connect_code = 0;
        if (resp->error < 0 &&
            curl_easy_getinfo(c->easy, CURLINFO_HTTP_CONNECTCODE, &connect_code) == CURLE_OK &&
            connect_code != 0 && (connect_code < 200 || connect_code > 299)) {
                /* The proxy answered CONNECT with a refusal: no tunnel, nothing reached the server. */
                resp->error = -ECONNREFUSED;
                snprintf(resp->errbuf, sizeof(resp->errbuf), "the proxy refused the tunnel: %ld",
                         connect_code);
        } else if (c->abort_error == -EFBIG)
                snprintf(resp->errbuf, sizeof(resp->errbuf), "response body larger than %zu bytes",
                         c->max_body);
        else if (c->abort_error == -EBADMSG)
                snprintf(resp->errbuf, sizeof(resp->errbuf), "response header block larger than %zu bytes",
                         HTTP_MAX_HEADER);
        else if (resp->error < 0 && c->abort_error < 0 && res == CURLE_WRITE_ERROR)
                snprintf(resp->errbuf, sizeof(resp->errbuf), "transfer aborted by the receiver: %s",
                         strerror(-c->abort_error));
        else if (resp->error == -EFBIG)
                snprintf(resp->errbuf, sizeof(resp->errbuf), "response body larger than %zu bytes",
                         c->max_body);
        else if (res == CURLE_OPERATION_TIMEDOUT && c->idle_limited && resp->status != 0)
                snprintf(resp->errbuf, sizeof(resp->errbuf), "no data within the idle limit (%s)",
                         curl_easy_strerror(res));
        else if (resp->error < 0 && !resp->errbuf[0])
                snprintf(resp->errbuf, sizeof(resp->errbuf), "%s", curl_easy_strerror(res));
        /* A header block that was refused leaves no status to act on. */
        if (c->abort_error == -EBADMSG)
                resp->status = 0;

        if (curl_easy_getinfo(c->easy, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
                r = free_and_strdup(&resp->content_type, ct);
        if (r >= 0 && curl_easy_header(c->easy, "Retry-After", 0, CURLH_HEADER, -1, &h) == CURLHE_OK)
                r = free_and_strdup(&resp->retry_after, h->value);
        /* No body after a transport failure: what arrived is incomplete. */
        if (r >= 0 && !c->streaming && resp->error == 0) {
                /* Always a string, even for an empty answer, so callers can parse without NULL checks. */
                if (!c->body.data)
                        r = buf_append(&c->body, "", 0);
                if (r >= 0) {
                        resp->body_len = c->body.len;
                        resp->body = TAKE_PTR(c->body.data);
                        c->body = (struct buf){ 0 };
                }
        }
        if (r < 0 && resp->error == 0)
                resp->error = r;

        curl_multi_remove_handle(c->ctx->multi, c->easy);
        c->finishing = true;
        if (c->done)
                c->done(resp, c->userdata);
        call_free(c);
}

static struct http_call *find_deferred(struct http_ctx *ctx)
{
        for (struct http_call *c = ctx->calls; c; c = c->next)
                if (c->cancelled || c->pending_add)
                        return c;
        return NULL;
}

/* After curl_multi_socket_action(): report finished transfers, free calls cancelled from inside curl. */
static void http_dispatch(struct http_ctx *ctx)
{
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(ctx->multi, &left))) {
                char *priv = NULL;
                if (msg->msg != CURLMSG_DONE)
                        continue;
                /* msg is invalid once the handle is removed: copy what is needed first. */
                CURLcode res = msg->data.result;
                if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv) != CURLE_OK || !priv)
                        continue;
                call_finish((struct http_call *)(void *)priv, res);
        }

        /* Searched from the head each time: a done callback may cancel or start any other call. */
        for (struct http_call *c; (c = find_deferred(ctx));) {
                if (c->cancelled) {
                        call_free(c);
                        continue;
                }
                c->pending_add = false;
                if (curl_multi_add_handle(ctx->multi, c->easy) != CURLM_OK)
                        call_finish(c, CURLE_OUT_OF_MEMORY);
        }
}

static void http_socket_action(struct http_ctx *ctx, curl_socket_t fd, int action)
{
        int running;

        ctx->in_curl++;
        (void)curl_multi_socket_action(ctx->multi, fd, action, &running);
        ctx->in_curl--;
        http_dispatch(ctx);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct curl_sock *sock = userdata;
        int action = 0;

        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;
        /* sock may be freed by curl's socket callback during the action: only ctx is used from here on. */
        http_socket_action(sock->ctx, fd, action);
        return 0;
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
        struct http_ctx *ctx = userp;
        struct curl_sock *sock = socketp;
        uint32_t events = 0;
        int r;

        if (what == CURL_POLL_REMOVE) {
                if (sock) {
                        (void)curl_multi_assign(ctx->multi, fd, NULL);
                        sock_free(sock);
                }
                return 0;
        }

        if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
                events |= EPOLLIN;
        if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
                events |= EPOLLOUT;

        if (!sock) {
                sock = calloc(1, sizeof(*sock));
                if (!sock)
                        return -1;
                sock->ctx = ctx;
                r = sd_event_add_io(loop_event(ctx->loop), &sock->source, fd, events, on_io, sock);
                if (r < 0) {
                        free(sock);
                        return -1;
                }
                if (curl_multi_assign(ctx->multi, fd, sock) != CURLM_OK) {
                        sd_event_source_disable_unref(sock->source);
                        free(sock);
                        return -1;
                }
                sock->next = ctx->socks;
                if (ctx->socks)
                        ctx->socks->prev = sock;
                ctx->socks = sock;
        } else if (sd_event_source_set_io_events(sock->source, events) < 0)
                return -1;

        return sd_event_source_set_enabled(sock->source, events ? SD_EVENT_ON : SD_EVENT_OFF) < 0 ? -1 : 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        http_socket_action(userdata, CURL_SOCKET_TIMEOUT, 0);
        return 0;
}

/* curl wants one timer: re-armed (or stopped with -1) whenever its next timeout changes. Never calls into
 * curl from here; the loop does on the next iteration. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
        struct http_ctx *ctx = userp;
        uint64_t at;

        if (timeout_ms < 0)
                return ctx->timer && sd_event_source_set_enabled(ctx->timer, SD_EVENT_OFF) < 0 ? -1 : 0;

        at = now_monotonic_usec() + (uint64_t)timeout_ms * 1000ULL;
        if (!ctx->timer)
                return sd_event_add_time(loop_event(ctx->loop), &ctx->timer, CLOCK_MONOTONIC, at, 1,
                                         on_timer, ctx) < 0
                           ? -1
                           : 0;
        if (sd_event_source_set_time(ctx->timer, at) < 0 ||
            sd_event_source_set_enabled(ctx->timer, SD_EVENT_ONESHOT) < 0)
                return -1;
        return 0;
}

static void http_loop_cleanup(struct loop *l);

static int http_ctx_get(struct loop *l, struct http_ctx **ret)
{
        void **slot = loop_http_state(l, http_loop_cleanup);
        struct http_ctx *ctx = *slot;

        if (ctx) {
                *ret = ctx;
                return 0;
        }
        if (pthread_once(&curl_once, curl_init_once) != 0 || curl_init_result != CURLE_OK)
                return -EIO;

        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        ctx->loop = l;
        ctx->multi = curl_multi_init();
        if (!ctx->multi) {
                free(ctx);
                return -ENOMEM;
        }
        if (curl_multi_setopt(ctx->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
            curl_multi_setopt(ctx->multi, CURLMOPT_SOCKETDATA, ctx) != CURLM_OK ||
            curl_multi_setopt(ctx->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
            curl_multi_setopt(ctx->multi, CURLMOPT_TIMERDATA, ctx) != CURLM_OK ||
            curl_multi_setopt(ctx->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX) != CURLM_OK) {
                curl_multi_cleanup(ctx->multi);
                free(ctx);
                return -EIO;
        }
        *slot = ctx;
        *ret = ctx;
        return 0;
}

static void pem_files_free(struct pem_file *f)
{
        while (f) {
                struct pem_file *next = f->next;
                free(f->path);
                if (f->data)
                        explicit_bzero(f->data, strlen(f->data));
                free(f->data);
                free(f);
                f = next;
        }
}

static void http_loop_cleanup(struct loop *l)
{
        void **slot = loop_http_state(l, http_loop_cleanup);
        struct http_ctx *ctx = *slot;

        if (!ctx)
                return;
        /* In-flight calls are dropped without callbacks; removing them makes curl release their sockets. */
        while (ctx->calls)
                call_free(ctx->calls);
        curl_multi_cleanup(ctx->multi);
        /* Whatever curl did not report as removed (cached connections) is released here. */
        while (ctx->socks)
                sock_free(ctx->socks);
        sd_event_source_disable_unref(ctx->timer);
        pem_files_free(ctx->pem_files);
        free(ctx);
        *slot = NULL;
}

/* A PEM file's contents, read again only when the file changed (a rotated CA, a renewed client certificate):
 * the next connection uses the new contents; libcurl does not reuse a connection made with other ones. */
static int pem_file_get(struct http_ctx *ctx, const char *path, const char **ret, char *errbuf,
                        size_t errlen)
{
        struct pem_file *f;
        struct stat st;

        if (stat(path, &st) < 0) {
                int r = -errno;
                snprintf(errbuf, errlen, "%s: %s", path, strerror(-r));
                return r;
        }
        for (f = ctx->pem_files; f; f = f->next)
                if (streq(f->path, path))
                        break;
        if (f && f->dev == st.st_dev && f->ino == st.st_ino && f->size == st.st_size &&
            f->mtime.tv_sec == st.st_mtim.tv_sec && f->mtime.tv_nsec == st.st_mtim.tv_nsec) {
                *ret = f->data;
                return 0;
        }
        if (!S_ISREG(st.st_mode) || st.st_size > HTTP_MAX_PEM_FILE) {
                snprintf(errbuf, errlen, "%s: not a certificate or key file", path);
                return -EINVAL;
        }
        _cleanup_free_ char *data = NULL;
        int r = read_file_full(path, (size_t)HTTP_MAX_PEM_FILE, &data, NULL);
        if (r < 0) {
                snprintf(errbuf, errlen, "%s: %s", path, strerror(-r));
                return r;
        }
        if (!f) {
                f = calloc(1, sizeof(*f));
                if (!f || !(f->path = strdup(path))) {
                        free(f);
                        return -ENOMEM;
                }
                f->next = ctx->pem_files;
                ctx->pem_files = f;
        }
        if (f->data)
                explicit_bzero(f->data, strlen(f->data));
        free(f->data);
        f->data = TAKE_PTR(data);
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->size = st.st_size;
        f->mtime = st.st_mtim;
        *ret = f->data;
        return 0;
}

/* Plain http is allowed only where there is no network to eavesdrop on: loopback, and the link-local AWS
 * services, which speak only http. */
static bool host_is_local(const char *host)
{
        char buf[64];
        size_t n = strlen(host);
        struct in_addr a4;
        struct in6_addr a6, svc6;

        if (strcasecmp(host, "localhost") == 0)
                return true;
        if (inet_pton(AF_INET, host, &a4) == 1) {
                uint32_t a = ntohl(a4.s_addr);
                /* 127.0.0.0/8; IMDS 169.254.169.254; EKS Pod Identity 169.254.170.23; ECS 169.254.170.2 */
                return (a >> 24) == 127 || a == 0xa9fea9feU || a == 0xa9feaa17U || a == 0xa9feaa02U;
        }
        if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
                if (n - 2 >= sizeof(buf))
                        return false;
                memcpy(buf, host + 1, n - 2);
                buf[n - 2] = 0;
                host = buf;
        }
        if (inet_pton(AF_INET6, host, &a6) != 1)
                return false;
        if (IN6_IS_ADDR_LOOPBACK(&a6))
                return true;
        /* IMDS and EKS Pod Identity over IPv6 */
        static const char *const link_local_services[] = { "fd00:ec2::254", "fd00:ec2::23" };
        for (size_t i = 0; i < ARRAY_SIZE(link_local_services); i++)
                if (inet_pton(AF_INET6, link_local_services[i], &svc6) == 1 &&
                    memcmp(&a6, &svc6, sizeof(a6)) == 0)
                        return true;
        return false;
}

static bool is_ip_literal(const char *host)
{
        struct in_addr a4;
        struct in6_addr a6;
        char buf[64];
        size_t n = strlen(host);

        if (n >= 2 && host[0] == '[' && host[n - 1] == ']' && n - 2 < sizeof(buf)) {
                memcpy(buf, host + 1, n - 2);
                buf[n - 2] = 0;
                return inet_pton(AF_INET6, buf, &a6) == 1;
        }
        return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

struct url_parts {
        bool https;
        bool local;
        char *host; /* as curl gives it: IPv6 literals in brackets */
        long port;
};

static void url_parts_clear(struct url_parts *p)
{
        curl_free(p->host);
        *p = (struct url_parts){ 0 };
}

static int check_url(CURLU *u, const char *url, struct url_parts *ret)
{
        char *scheme = NULL, *user = NULL, *port = NULL;
        int r = 0;

        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
                return -EINVAL;
        if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK)
                return -EINVAL;
        if (!streq(scheme, "https") && !streq(scheme, "http"))
                r = -EPROTONOSUPPORT;
        /* Credentials in a URL end up in logs; nothing here uses them. */
        else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK)
                r = -EINVAL;
        else if (curl_url_get(u, CURLUPART_HOST, &ret->host, 0) != CURLUE_OK || isempty(ret->host))
                r = -EINVAL;
        else if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
                r = -EINVAL;
        if (r == 0) {
                ret->https = streq(scheme, "https");
                ret->local = host_is_local(ret->host);
                ret->port = strtol(port, NULL, 10);
                if (!ret->https && !ret->local)
                        r = -EPROTONOSUPPORT;
        }
        curl_free(scheme);
        curl_free(user);
        curl_free(port);
        return r;
}

/* A header value or token that would end a line early would let a caller's input forge other headers. */
static bool has_line_break(const char *s)
{
        return s && strpbrk(s, "\r\n") != NULL;
}

static size_t on_curl_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct http_call *c = userdata;
        size_t n = size * nmemb;
        int r;

        if (c->cancelled)
                return 0;

        if (c->on_data && !c->status_known) {
                long status = 0;
                (void)curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
                c->streaming = status >= 200 && status < 300;
                c->status_known = true;
        }
        if (c->streaming) {
                r = c->on_data(ptr, n, c->userdata);
                if (r < 0) {
                        c->abort_error = r;
                        return 0;
                }
                return n;
        }

        if (n > c->max_body - c->body.len) {
                c->abort_error = -EFBIG;
                return 0;
        }
        r = buf_append(&c->body, ptr, n);
        if (r < 0) {
                c->abort_error = r;
                return 0;
        }
        return n;
}

/* Bounds the header block (libcurl allows 100 KiB per header): a larger one is no answer we can trust. */
static size_t on_curl_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
        struct http_call *c = userdata;
        size_t n = size * nmemb;

        if (c->cancelled)
                return 0;
        c->header_size += n;
        if (c->header_size > HTTP_MAX_HEADER) {
                c->abort_error = -EBADMSG;
                return 0;
        }
        return n;
}

/* The certificate must be made out for the name asked for, in its subjectAltName: OpenSSL checks it during
 * the handshake with the subject's CN never consulted (libcurl's own check would fall back to the CN of a
 * certificate without DNS names). */
static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *userdata)
{
        struct http_call *c = userdata;
        X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ssl_ctx);
        char buf[64];
        const char *name = c->verify_name;
        size_t n = strlen(name);
        int ok;

        /* A TLS connection with nothing to read or write (pooled, or a watch between events) gives its
         * record buffers (about 34 KiB) back. */
        SSL_CTX_set_mode(ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        if (n >= 2 && name[0] == '[' && name[n - 1] == ']' && n - 2 < sizeof(buf)) {
                memcpy(buf, name + 1, n - 2);
                buf[n - 2] = 0;
                ok = X509_VERIFY_PARAM_set1_ip_asc(param, buf);
        } else if (is_ip_literal(name))
                ok = X509_VERIFY_PARAM_set1_ip_asc(param, name);
        else
                ok = X509_VERIFY_PARAM_set1_host(param, name, 0);
        return ok == 1 ? CURLE_OK : CURLE_SSL_CERTPROBLEM;
}

static int curl_code_to_errno(CURLcode cc)
{
        switch (cc) {
        case CURLE_OK:
                return 0;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_UNKNOWN_OPTION:
        case CURLE_NOT_BUILT_IN:
                return -EOPNOTSUPP;
        default:
                return -EINVAL;
        }
}

#define SETOPT(easy, opt, val)                                                 \
        do {                                                                   \
                int _r = curl_code_to_errno(curl_easy_setopt(easy, opt, val)); \
                if (_r < 0)                                                    \
                        return _r;                                             \
        } while (0)

static int set_blob(CURL *easy, CURLoption opt, const char *pem)
{
        struct curl_blob blob = { .data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY };
        SETOPT(easy, opt, &blob);
        return 0;
}

/* One TLS input (CA, certificate or key) from memory or from a file, as a blob either way. */
static int set_pem(struct http_call *c, CURLoption opt, const char *pem, const char *file)
{
        const char *data = pem;
        if (!data && file) {
                int r = pem_file_get(c->ctx, file, &data, c->resp.errbuf, sizeof(c->resp.errbuf));
                if (r < 0)
                        return r;
        }
        return data ? set_blob(c->easy, opt, data) : 0;
}

static int setup_tls(struct http_call *c, const struct url_parts *u, const struct http_tls *tls)
{
        CURL *easy = c->easy;
        int r;

        SETOPT(easy, CURLOPT_SSL_VERIFYPEER, 1L);
        SETOPT(easy, CURLOPT_SSL_VERIFYHOST, 2L);
        SETOPT(easy, CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
        if (!u->https)
                return 0;
        const char *name = tls && !isempty(tls->server_name) ? tls->server_name : u->host;
        c->verify_name = strdup(name);
        if (!c->verify_name)
                return -ENOMEM;
        SETOPT(easy, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
        SETOPT(easy, CURLOPT_SSL_CTX_DATA, c);
        if (!tls)
                return 0;
        if ((r = set_pem(c, CURLOPT_CAINFO_BLOB, tls->ca_pem, tls->ca_file)) < 0 ||
            (r = set_pem(c, CURLOPT_SSLCERT_BLOB, tls->cert_pem, tls->cert_file)) < 0 ||
            (r = set_pem(c, CURLOPT_SSLKEY_BLOB, tls->key_pem, tls->key_file)) < 0)
                return r;
        if (tls->cert_file || tls->cert_pem)
                SETOPT(easy, CURLOPT_SSLCERTTYPE, "PEM");
        if (tls->key_file || tls->key_pem)
                SETOPT(easy, CURLOPT_SSLKEYTYPE, "PEM");
        if (!isempty(tls->server_name) && strcasecmp(tls->server_name, u->host) != 0) {
                /* tls-server-name: SNI and verification use it, the connection goes to the URL's host. The
                 * URL names the server name so that libcurl sends and checks it; CONNECT_TO sends the
                 * connection where the URL pointed; the Host header (or :authority) stays the URL's. */
                if (has_line_break(tls->server_name) || strchr(tls->server_name, ':'))
                        return -EINVAL;
                _cleanup_free_ char *route =
                    strprintf("%s:%ld:%s:%ld", tls->server_name, u->port, u->host, u->port);
                _cleanup_free_ char *host_hdr = strprintf("Host: %s:%ld", u->host, u->port);
                if (!route || !host_hdr)
                        return -ENOMEM;
                struct curl_slist *n = curl_slist_append(c->connect_to, route);
                if (!n)
                        return -ENOMEM;
                c->connect_to = n;
                if (curl_url_set(c->url, CURLUPART_HOST, tls->server_name, 0) != CURLUE_OK)
                        return -EINVAL;
                n = curl_slist_append(c->headers, host_hdr);
                if (!n)
                        return -ENOMEM;
                c->headers = n;
                SETOPT(easy, CURLOPT_CONNECT_TO, c->connect_to);
        }
        return 0;
}

static int slist_add(struct curl_slist **l, const char *s)
{
        struct curl_slist *n = curl_slist_append(*l, s);
        if (!n)
                return -ENOMEM;
        *l = n;
        return 0;
}

static int setup_request(struct http_call *c, const struct http_request *req, const struct url_parts *u)
{
        CURL *easy = c->easy;
        const char *method = req->method ? req->method : "GET";
        size_t body_len = req->body && req->body_len == 0 ? strlen(req->body) : req->body_len;
        bool streaming = req->on_data != NULL;
        uint64_t timeout = req->timeout_usec ? req->timeout_usec : streaming ? 0 : HTTP_TIMEOUT_USEC;
        uint64_t connect_timeout =
            req->connect_timeout_usec ? req->connect_timeout_usec : HTTP_CONNECT_TIMEOUT_USEC;
        uint64_t idle = req->idle_timeout_usec ? req->idle_timeout_usec
                        : streaming            ? HTTP_STREAM_IDLE_USEC
                                               : 0;
        int r;

        for (const char *const *h = req->headers; h && *h; h++)
                if (has_line_break(*h))
                        return -EINVAL;
        if (has_line_break(req->bearer_token) || has_line_break(method) || has_line_break(req->proxy))
                return -EINVAL;

        SETOPT(easy, CURLOPT_PROTOCOLS_STR, "http,https");
        SETOPT(easy, CURLOPT_REDIR_PROTOCOLS_STR, "https");
        SETOPT(easy, CURLOPT_FOLLOWLOCATION, 0L);
        SETOPT(easy, CURLOPT_NOSIGNAL, 1L);
        SETOPT(easy, CURLOPT_USERAGENT, "spotdrain/" SPOTDRAIN_VERSION);
        SETOPT(easy, CURLOPT_PRIVATE, c);
        SETOPT(easy, CURLOPT_ERRORBUFFER, c->resp.errbuf);
        SETOPT(easy, CURLOPT_WRITEFUNCTION, on_curl_write);
        SETOPT(easy, CURLOPT_WRITEDATA, c);
        SETOPT(easy, CURLOPT_HEADERFUNCTION, on_curl_header);
        SETOPT(easy, CURLOPT_HEADERDATA, c);
        SETOPT(easy, CURLOPT_TIMEOUT_MS, (long)(timeout / 1000));
        /* Split by libcurl over a name's addresses: a black-holed first address leaves time for the next. */
        SETOPT(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)(connect_timeout / 1000));
        SETOPT(easy, CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, 200L);
        if (idle) {
                /* No byte for this long (libcurl's low-speed rule at one byte a second) ends the call. */
                long secs = (long)((idle + 999999) / 1000000);
                SETOPT(easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
                SETOPT(easy, CURLOPT_LOW_SPEED_TIME, secs > 0 ? secs : 1L);
                c->idle_limited = true;
        }
        if (!streaming)
                SETOPT(easy, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)c->max_body);
        /* Request bodies here are small (a JSON patch, an SQS call): libcurl's least send buffer, not its
         * 64 KiB default, for each call in flight. */
        SETOPT(easy, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
        /* A stream (a watch) holds its receive buffer as long as it lasts, hours between events: 4 KiB
         * rather than libcurl's 16 KiB (an event larger than that comes in several chunks). */
        if (streaming)
                SETOPT(easy, CURLOPT_BUFFERSIZE, 4096L);
        SETOPT(easy, CURLOPT_TCP_KEEPALIVE, 1L);
        SETOPT(easy, CURLOPT_TCP_KEEPIDLE, 15L);
        SETOPT(easy, CURLOPT_TCP_KEEPINTVL, 5L);
        /* HTTP/2 where TLS offers it (kube-apiserver does), multiplexed: wait for a connection being set up
         * rather than opening another one beside it. */
        SETOPT(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        /* Only over TLS, where ALPN settles it at once: a plain HTTP/1.1 connection stays "maybe
         * multiplexed" until its first answer, and a waiting call would queue behind a long one. */
        if (u->https)
                SETOPT(easy, CURLOPT_PIPEWAIT, 1L);
        /* After a call timed out, the pooled connections that sat idle meanwhile may be as silent (a NAT
         * gateway that dropped its state drops it for all of them): for a while, only connections used
         * within the last two seconds are reused. */
        if (c->ctx->last_stall && now_monotonic_usec() - c->ctx->last_stall < HTTP_STALL_CAUTION_USEC)
                SETOPT(easy, CURLOPT_MAXAGE_CONN, 1L);
        if (u->local)
                SETOPT(easy, CURLOPT_NOPROXY, "*"); /* loopback and link-local: never through a proxy */
        else if (req->proxy)
                SETOPT(easy, CURLOPT_PROXY, req->proxy);
        r = setup_tls(c, u, req->tls);
        if (r < 0)
                return r;
        SETOPT(easy, CURLOPT_CURLU, c->url);

        if (streq(method, "GET"))
                SETOPT(easy, CURLOPT_HTTPGET, 1L);
        else if (streq(method, "HEAD")) {
                SETOPT(easy, CURLOPT_NOBODY, 1L);
                c->method_head = true;
        } else {
                if (!streq(method, "POST"))
                        SETOPT(easy, CURLOPT_CUSTOMREQUEST, method);
                /* POST, PUT and PATCH always carry a body (maybe empty, so Content-Length: 0 is sent). */
                if (req->body || streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH")) {
                        SETOPT(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
                        SETOPT(easy, CURLOPT_COPYPOSTFIELDS, req->body ? req->body : "");
                }
        }

        for (const char *const *h = req->headers; h && *h; h++)
                if ((r = slist_add(&c->headers, *h)) < 0)
                        return r;
        /* No "Expect: 100-continue" round trip for larger bodies: the servers we talk to answer directly. */
        if ((r = slist_add(&c->headers, "Expect:")) < 0)
                return r;
        if (req->bearer_token) {
                _cleanup_free_ char *auth = strprintf("Authorization: Bearer %s", req->bearer_token);
                if (!auth)
                        return -ENOMEM;
                r = slist_add(&c->headers, auth);
                explicit_bzero(auth, strlen(auth));
                if (r < 0)
                        return r;
        }
        SETOPT(easy, CURLOPT_HTTPHEADER, c->headers);
        return 0;
}

int http_send(struct loop *l, const struct http_request *req, http_done_fn done, void *userdata,
              struct http_call **ret)
{
        struct http_ctx *ctx;
        struct http_call *c;
        struct url_parts u = { 0 };
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
        c->on_data = req->on_data;
        c->max_body = req->max_body ? req->max_body : HTTP_MAX_BODY;
        c->url = curl_url();
        c->easy = curl_easy_init();
        if (!c->url || !c->easy) {
                r = -ENOMEM;
                goto fail;
        }
        r = check_url(c->url, req->url, &u);
        if (r < 0)
                goto fail;
        r = setup_request(c, req, &u);
        if (r < 0) {
                if (c->resp.errbuf[0])
                        log_debug("http: %s", c->resp.errbuf);
                goto fail;
        }
        url_parts_clear(&u);

        c->next = ctx->calls;
        if (ctx->calls)
                ctx->calls->prev = c;
        ctx->calls = c;
        /* Inside a curl callback (on_data) curl refuses new handles: http_dispatch() adds it once curl
         * returns. Otherwise adding only arms curl's timer: the transfer starts, and done is called, from
         * the loop. */
        if (ctx->in_curl > 0)
                c->pending_add = true;
        else if (curl_multi_add_handle(ctx->multi, c->easy) != CURLM_OK) {
                r = -ENOMEM;
                goto fail;
        }
        if (ret)
                *ret = c;
        return 0;

fail:
        url_parts_clear(&u);
        call_unlink(c);
        curl_easy_cleanup(TAKE_PTR(c->easy));
        call_free(c);
        return r;
}

struct http_call *http_cancel(struct http_call *c)
{
        if (!c)
                return NULL;
        c->done = NULL;
        /* A call whose done is running is freed when done returns; inside curl the handle cannot be removed
         * yet, so http_dispatch() frees it once curl returns. */
        if (c->finishing)
                return NULL;
        if (c->ctx->in_curl > 0) {
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
        /* curl's own timeouts bound the wait; streaming requests without a timeout wait for the end. */
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
