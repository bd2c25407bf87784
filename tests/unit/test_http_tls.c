/* The HTTP client's TLS rules and idle limits, against servers made for each case: certificates without a
 * subjectAltName, tls-server-name, a CA file rotated under the client, a body cut without close_notify, a
 * stream that goes silent and a server that never answers. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "spotdrain/core.h"
#include "tls_certs.h"

#define WAIT_BOUND_MS 10000

/* ---- a libmicrohttpd TLS server answering "ok" ---- */

static enum MHD_Result ok_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
        char **host = cls;
        const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
        free(*host);
        *host = h ? strdup(h) : NULL;
        struct MHD_Response *r = MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
}

static struct MHD_Daemon *tls_daemon(const char *cert, const char *key, char **host, uint16_t *ret_port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        struct MHD_Daemon *d =
            MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS,
                             0, NULL, NULL, ok_handler, host, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_END);
        assert_non_null(d);
        *ret_port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
        return d;
}

static int get(const char *url, const struct http_tls *tls, struct http_response *resp)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        return http_send_sync(l, &(struct http_request){ .url = url, .tls = tls }, resp);
}

/* A certificate whose only name is its CN is not made out for that name: the CN is never consulted. */
static void test_no_cn_fallback(void **state)
{
        _cleanup_free_ char *cert = NULL, *key = NULL, *good = NULL, *gkey = NULL, *url = NULL, *host = NULL;
        struct http_response resp;
        uint16_t port;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        tls_test_cert("localhost", NULL, &cert, &key);
        struct MHD_Daemon *d = tls_daemon(cert, key, &host, &port);
        url = strprintf("https://localhost:%u/", port);
        assert_non_null(url);
        assert_int_equal(get(url, &(struct http_tls){ .ca_pem = cert }, &resp), -EBADMSG);
        assert_int_equal(resp.status, 0);
        assert_non_null(strstr(resp.errbuf, "mismatch"));
        http_response_clear(&resp);
        MHD_stop_daemon(d);

        /* The same name in the subjectAltName is accepted. */
        tls_test_cert("localhost", "DNS:localhost", &good, &gkey);
        d = tls_daemon(good, gkey, &host, &port);
        free(url);
        url = strprintf("https://localhost:%u/", port);
        assert_non_null(url);
        assert_int_equal(get(url, &(struct http_tls){ .ca_pem = good }, &resp), 0);
        assert_string_equal(resp.body, "ok");
        http_response_clear(&resp);
        MHD_stop_daemon(d);
}

/* tls-server-name: the certificate is checked against that name; the connection and Host stay the URL's. */
static void test_tls_server_name(void **state)
{
        _cleanup_free_ char *cert = NULL, *key = NULL, *url = NULL, *host = NULL, *want = NULL;
        struct http_response resp;
        uint16_t port;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        tls_test_cert("kube", "DNS:kube.internal", &cert, &key);
        struct MHD_Daemon *d = tls_daemon(cert, key, &host, &port);
        url = strprintf("https://127.0.0.1:%u/", port);
        want = strprintf("127.0.0.1:%u", port);
        assert_true(url && want);
        assert_int_equal(get(url, &(struct http_tls){ .ca_pem = cert }, &resp), -EBADMSG);
        http_response_clear(&resp);
        assert_int_equal(
            get(url, &(struct http_tls){ .ca_pem = cert, .server_name = "kube.internal" }, &resp), 0);
        assert_string_equal(resp.body, "ok");
        assert_string_equal(host, want);
        http_response_clear(&resp);
        /* Another name is no way around the check. */
        assert_int_equal(
            get(url, &(struct http_tls){ .ca_pem = cert, .server_name = "other.internal" }, &resp),
            -EBADMSG);
        http_response_clear(&resp);
        MHD_stop_daemon(d);
}

/* A CA file rewritten (a rotated cluster CA) is used by the next connection, in the same loop. */
static void test_ca_file_rotation(void **state)
{
        _cleanup_free_ char *c1 = NULL, *k1 = NULL, *c2 = NULL, *k2 = NULL, *u1 = NULL, *u2 = NULL;
        _cleanup_free_ char *h1 = NULL, *h2 = NULL;
        _cleanup_(loop_freep) struct loop *l = NULL;
        char path[] = "/tmp/spotdrain-test-ca-XXXXXX";
        struct http_response resp;
        uint16_t p1, p2;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        tls_test_cert("old", "IP:127.0.0.1", &c1, &k1);
        tls_test_cert("new", "IP:127.0.0.1", &c2, &k2);
        struct MHD_Daemon *d1 = tls_daemon(c1, k1, &h1, &p1), *d2 = tls_daemon(c2, k2, &h2, &p2);
        u1 = strprintf("https://127.0.0.1:%u/", p1);
        u2 = strprintf("https://127.0.0.1:%u/", p2);
        assert_true(u1 && u2);
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(write_file_atomic(path, c1, strlen(c1), 0600), 0);
        assert_int_equal(loop_new(&l), 0);
        struct http_tls tls = { .ca_file = path };

        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = u1, .tls = &tls }, &resp), 0);
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = u2, .tls = &tls }, &resp),
                         -EBADMSG);
        http_response_clear(&resp);
        assert_int_equal(write_file_atomic(path, c2, strlen(c2), 0600), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = u2, .tls = &tls }, &resp), 0);
        assert_string_equal(resp.body, "ok");
        http_response_clear(&resp);
        /* The old server is no longer trusted. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = u1, .tls = &tls }, &resp),
                         -EBADMSG);
        http_response_clear(&resp);
        unlink(path);
        MHD_stop_daemon(d1);
        MHD_stop_daemon(d2);
}

/* ---- raw servers on a thread: one connection, scripted ---- */

enum raw_mode {
        RAW_TLS_CUT,       /* TLS: an answer read until close, then the TCP connection closed */
        RAW_TLS_CLOSE,     /* the same answer, ended with close_notify */
        RAW_TLS_LENGTH,    /* an answer with Content-Length, then the TCP connection closed */
        RAW_STREAM_SILENT, /* a chunk of a streamed answer, then nothing */
        RAW_NO_ANSWER,     /* the request is read, nothing is sent */
};

struct raw {
        int fd;
        uint16_t port;
        enum raw_mode mode;
        const char *cert, *key;
        pthread_t thread;
        bool client_closed; /* the client ended the connection while the server was silent */
};

static bool readable(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLIN };
        return poll(&p, 1, WAIT_BOUND_MS) == 1;
}

/* Reads until the end of a request head; false at EOF, error or after the bound. */
static bool read_head(int fd, SSL *ssl)
{
        char buf[4096];
        size_t n = 0;

        while (n + 1 < sizeof(buf)) {
                if (!ssl || SSL_pending(ssl) == 0)
                        if (!readable(fd))
                                return false;
                int k = ssl ? SSL_read(ssl, buf + n, 1) : (int)recv(fd, buf + n, 1, 0);
                if (k <= 0)
                        return false;
                n++;
                if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
                        return true;
        }
        return false;
}

static SSL_CTX *server_ctx(const char *cert, const char *key)
{
        SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
        BIO *bc = BIO_new_mem_buf(cert, -1), *bk = BIO_new_mem_buf(key, -1);
        X509 *x = PEM_read_bio_X509(bc, NULL, NULL, NULL);
        EVP_PKEY *pk = PEM_read_bio_PrivateKey(bk, NULL, NULL, NULL);
        assert_true(ctx && x && pk);
        assert_int_equal(SSL_CTX_use_certificate(ctx, x), 1);
        assert_int_equal(SSL_CTX_use_PrivateKey(ctx, pk), 1);
        X509_free(x);
        EVP_PKEY_free(pk);
        BIO_free(bc);
        BIO_free(bk);
        return ctx;
}

static void *raw_run(void *arg)
{
        struct raw *rs = arg;
        static const char cut[] = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nthe whole answer";
        static const char sized[] = "HTTP/1.1 200 OK\r\nContent-Length: 16\r\n\r\nthe whole answer";
        static const char chunk[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n";

        if (!readable(rs->fd))
                return NULL;
        int c = accept4(rs->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return NULL;
        if (rs->mode <= RAW_TLS_LENGTH) {
                SSL_CTX *ctx = server_ctx(rs->cert, rs->key);
                SSL *ssl = SSL_new(ctx);
                SSL_set_fd(ssl, c);
                if (SSL_accept(ssl) == 1 && read_head(c, ssl)) {
                        const char *a = rs->mode == RAW_TLS_LENGTH ? sized : cut;
                        SSL_write(ssl, a, (int)strlen(a));
                        if (rs->mode == RAW_TLS_CLOSE)
                                SSL_shutdown(ssl);
                }
                SSL_free(ssl);
                SSL_CTX_free(ctx);
        } else if (read_head(c, NULL)) {
                if (rs->mode == RAW_STREAM_SILENT)
                        (void)send(c, chunk, strlen(chunk), MSG_NOSIGNAL);
                /* Silent from here on: the client is expected to give up and close. */
                char b;
                rs->client_closed = readable(c) && recv(c, &b, 1, 0) <= 0;
        }
        close(c);
        return NULL;
}

static void raw_start(struct raw *rs, enum raw_mode mode, const char *cert, const char *key)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t len = sizeof(sa);

        *rs = (struct raw){ .mode = mode, .cert = cert, .key = key };
        rs->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(rs->fd >= 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(rs->fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(rs->fd, 4), 0);
        assert_int_equal(getsockname(rs->fd, (struct sockaddr *)&sa, &len), 0);
        rs->port = ntohs(sa.sin_port);
        assert_int_equal(pthread_create(&rs->thread, NULL, raw_run, rs), 0);
}

static void raw_stop(struct raw *rs)
{
        assert_int_equal(pthread_join(rs->thread, NULL), 0);
        close(rs->fd);
}

/* An answer over TLS that only the connection's close delimits may have been cut by anyone on the path
 * (libcurl takes a bare TCP close as its end): it is refused, with or without close_notify. The same
 * answer with a length is taken. */
static void test_tls_truncation(void **state)
{
        _cleanup_free_ char *cert = NULL, *key = NULL;
        struct http_response resp;
        struct raw rs;

        tls_test_cert("127.0.0.1", "IP:127.0.0.1", &cert, &key);
        struct http_tls tls = { .ca_pem = cert };
        for (int mode = RAW_TLS_CUT; mode <= RAW_TLS_LENGTH; mode++) {
                raw_start(&rs, mode, cert, key);
                _cleanup_free_ char *url = strprintf("https://127.0.0.1:%u/", rs.port);
                assert_non_null(url);
                int r = get(url, &tls, &resp);
                if (mode != RAW_TLS_LENGTH) {
                        assert_int_equal(r, -EPROTO);
                        assert_null(resp.body);
                } else {
                        assert_int_equal(r, 0);
                        assert_string_equal(resp.body, "the whole answer");
                }
                http_response_clear(&resp);
                raw_stop(&rs);
        }
}

struct stream {
        bool done;
        int error;
        long status;
        size_t bytes;
};

static int stream_data(const char *data, size_t len, void *userdata)
{
        struct stream *st = userdata;
        st->bytes += len;
        return 0;
}

static void stream_done(const struct http_response *resp, void *userdata)
{
        struct stream *st = userdata;
        st->done = true;
        st->error = resp->error;
        st->status = resp->status;
}

/* A stream that falls silent ends at its idle limit with the status it had (so a watch resumes), and a
 * server that never answers ends the call with no status; the connection is closed either way. */
static void test_idle_limits(void **state)
{
        for (int mode = RAW_STREAM_SILENT; mode <= RAW_NO_ANSWER; mode++) {
                _cleanup_(loop_freep) struct loop *l = NULL;
                struct stream st = { 0 };
                struct raw rs;

                raw_start(&rs, mode, NULL, NULL);
                _cleanup_free_ char *url = strprintf("http://127.0.0.1:%u/watch", rs.port);
                assert_non_null(url);
                assert_int_equal(loop_new(&l), 0);
                struct http_request req = { .url = url, .idle_timeout_usec = 1000000 };
                if (mode == RAW_STREAM_SILENT)
                        req.on_data = stream_data;
                assert_int_equal(http_send(l, &req, stream_done, &st, NULL), 0);
                assert_int_equal(loop_run_until(l, &st.done, (uint64_t)WAIT_BOUND_MS * 1000), 0);
                assert_int_equal(st.error, -ETIMEDOUT);
                assert_int_equal(st.status, mode == RAW_STREAM_SILENT ? 200 : 0);
                assert_int_equal(st.bytes, mode == RAW_STREAM_SILENT ? 6 : 0);
                l = loop_free(l);
                raw_stop(&rs);
                assert_true(rs.client_closed);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_cn_fallback),   cmocka_unit_test(test_tls_server_name),
                cmocka_unit_test(test_ca_file_rotation), cmocka_unit_test(test_tls_truncation),
                cmocka_unit_test(test_idle_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
