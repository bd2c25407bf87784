/* The HTTP client's setup of one request (http.c runs it): the plain-http allowlist and URL checks, refusing
 * header injection, the answer's header and body limits, TLS settings as blobs from PEM files read again
 * when they change, no certificate CN fallback, tls-server-name. */
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

void http_pem_files_free(struct pem_file *f)
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

void http_url_parts_clear(struct url_parts *p)
{
        curl_free(p->host);
        *p = (struct url_parts){ 0 };
}

int http_check_url(CURLU *u, const char *url, struct url_parts *ret)
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

int http_setup_request(struct http_call *c, const struct http_request *req, const struct url_parts *u)
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
