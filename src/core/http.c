/* The HTTP client: libcurl's multi-socket API on the sd-event loop. One easy handle per request; one multi
 * handle per loop, whose sockets and single timer are sd-event sources (curl's "multi_socket" model).
 * libcurl does the protocol: HTTP/1.1 and HTTP/2 (multiplexed over one TLS connection where the server
 * offers it), TLS through OpenSSL, proxies from the environment (HTTPS_PROXY, NO_PROXY with CIDR entries),
 * happy eyeballs and a connect timeout split over a name's addresses, keep-alive pooling, its timeouts.
 *
 * What http_setup.c adds on top when it sets a request up: the plain-http allowlist, refusing header
 * injection, the answer's header and body limits, TLS settings as blobs (a CA file is re-read when it
 * changes, so a rotated CA is used by the next connection), no certificate CN fallback, tls-server-name.
 * What this file adds: the rule that a call which timed out before any answer came shuts its connection
 * down: with HTTP/2 libcurl would otherwise keep queueing new streams on a connection that a NAT gateway or
 * proxy silently stopped passing.
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

#include "core/http_internal.h"
#include "spotdrain/core.h"

_Static_assert(sizeof(((struct http_response *)0)->errbuf) >= CURL_ERROR_SIZE, "errbuf too small for curl");

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
                /* Answers are read before the ordinary timers' work (timer_urgent()). */
                (void)sd_event_source_set_priority(sock->source, SD_EVENT_PRIORITY_IMPORTANT);
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
        if (!ctx->timer) {
                if (sd_event_add_time(loop_event(ctx->loop), &ctx->timer, CLOCK_MONOTONIC, at, 1, on_timer,
                                      ctx) < 0)
                        return -1;
                (void)sd_event_source_set_priority(ctx->timer, SD_EVENT_PRIORITY_IMPORTANT);
                return 0;
        }
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
        http_pem_files_free(ctx->pem_files);
        free(ctx);
        *slot = NULL;
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
        r = http_check_url(c->url, req->url, &u);
        if (r < 0)
                goto fail;
        r = http_setup_request(c, req, &u);
        if (r < 0) {
                if (c->resp.errbuf[0])
                        log_debug("http: %s", c->resp.errbuf);
                goto fail;
        }
        http_url_parts_clear(&u);

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
        http_url_parts_clear(&u);
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

struct http_call *http_cancel_silent(struct http_call *c)
{
        if (c)
                c->ctx->last_stall = now_monotonic_usec();
        return http_cancel(c);
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
