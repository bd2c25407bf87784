/* HTTP client against an in-process libmicrohttpd server on 127.0.0.1 with scripted answers. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"
#include "spotdrain/core.h"
#include "tls_certs.h"

#define WAIT_BOUND_USEC (10ULL * 1000000ULL)
#define N_CHUNKS        5

/* ---- the scripted server ---- */

struct server {
        struct MHD_Daemon *daemon;
        uint16_t port;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool release;        /* lets hanging handlers finish */
        size_t client_bytes; /* streamed bytes the client reported receiving */
        unsigned hits_echo;
        unsigned connections; /* TCP connections accepted */
        /* The last request to /echo. */
        char *method, *url, *body, *xtest, *auth, *agent, *ctype;
        size_t body_len;
};

static struct server srv;

struct req_state {
        struct buf body;
        int chunk;
};

/* Waits (bounded) until pred() holds; called with srv.lock held. */
static bool server_wait(bool (*pred)(void *), void *arg)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += WAIT_BOUND_USEC / 1000000ULL;
        while (!pred(arg))
                if (pthread_cond_timedwait(&srv.cond, &srv.lock, &ts) != 0)
                        return pred(arg);
        return true;
}

static bool released(void *arg)
{
        return srv.release;
}

static bool client_caught_up(void *arg)
{
        return srv.release || srv.client_bytes >= *(size_t *)arg;
}

static ssize_t hang_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        pthread_mutex_lock(&srv.lock);
        server_wait(released, NULL);
        pthread_mutex_unlock(&srv.lock);
        return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Sends chunk i only after the client reported chunk i-1, so that each chunk is a separate delivery. */
static ssize_t chunk_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        struct req_state *st = cls;
        if (st->chunk == N_CHUNKS)
                return MHD_CONTENT_READER_END_OF_STREAM;
        size_t want = (size_t)pos;
        pthread_mutex_lock(&srv.lock);
        server_wait(client_caught_up, &want);
        pthread_mutex_unlock(&srv.lock);
        int n = snprintf(buf, max, "chunk%d\n", st->chunk++);
        return n;
}

/* One chunk, then hangs until released. */
static ssize_t stream_hang_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
        if (pos == 0)
                return snprintf(buf, max, "first\n");
        return hang_reader(cls, pos, buf, max);
}

static char *dup_value(struct MHD_Connection *conn, const char *name)
{
        const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
        return v ? strdup(v) : NULL;
}

static enum MHD_Result queue(struct MHD_Connection *conn, unsigned status, const char *body,
                             const char *ctype)
{
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        if (ctype)
                MHD_add_response_header(r, "Content-Type", ctype);
        enum MHD_Result ret = MHD_queue_response(conn, status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result queue_callback(struct MHD_Connection *conn, MHD_ContentReaderCallback crc, void *cls)
{
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, crc, cls, NULL);
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls)
{
        struct req_state *st = *con_cls;

        if (!st) {
                st = calloc(1, sizeof(*st));
                if (!st)
                        return MHD_NO;
                *con_cls = st;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                if (buf_append(&st->body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }

        if (streq(url, "/echo")) {
                pthread_mutex_lock(&srv.lock);
                srv.hits_echo++;
                free(srv.method);
                free(srv.url);
                free(srv.body);
                free(srv.xtest);
                free(srv.auth);
                free(srv.agent);
                free(srv.ctype);
                srv.method = strdup(method);
                srv.url = strdup(url);
                srv.body = st->body.data ? malloc(st->body.len + 1) : NULL;
                if (srv.body)
                        memcpy(srv.body, st->body.data, st->body.len + 1);
                srv.body_len = st->body.len;
                srv.xtest = dup_value(conn, "X-Test");
                srv.auth = dup_value(conn, "Authorization");
                srv.agent = dup_value(conn, "User-Agent");
                srv.ctype = dup_value(conn, "Content-Type");
                pthread_mutex_unlock(&srv.lock);
                return queue(conn, MHD_HTTP_OK, "{\"ok\":true}", "application/json");
        }
        if (streq(url, "/status/404"))
                return queue(conn, MHD_HTTP_NOT_FOUND, "not found", "text/plain");
        if (streq(url, "/status/500"))
                return queue(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "boom", "text/plain");
        if (streq(url, "/retry")) {
                struct MHD_Response *r =
                    MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                MHD_add_response_header(r, "Retry-After", "7");
                enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_TOO_MANY_REQUESTS, r);
                MHD_destroy_response(r);
                return ret;
        }
        if (streq(url, "/redirect")) {
                struct MHD_Response *r =
                    MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                MHD_add_response_header(r, "Location", "/echo");
                enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_FOUND, r);
                MHD_destroy_response(r);
                return ret;
        }
        if (streq(url, "/big")) {
                char big[10000];
                memset(big, 'x', sizeof(big) - 1);
                big[sizeof(big) - 1] = 0;
                return queue(conn, MHD_HTTP_OK, big, "text/plain");
        }
        if (streq(url, "/hang"))
                return queue_callback(conn, hang_reader, st);
        if (streq(url, "/chunks") || streq(url, "/bigchunked"))
                return queue_callback(conn, chunk_reader, st);
        if (streq(url, "/stream-hang"))
                return queue_callback(conn, stream_hang_reader, st);
        return queue(conn, MHD_HTTP_NOT_FOUND, "no route", NULL);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
        struct req_state *st = *con_cls;
        if (st) {
                buf_free(&st->body);
                free(st);
                *con_cls = NULL;
        }
}

static void connection_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode toe)
{
        if (toe != MHD_CONNECTION_NOTIFY_STARTED)
                return;
        pthread_mutex_lock(&srv.lock);
        srv.connections++;
        pthread_mutex_unlock(&srv.lock);
}

static int server_start(void **state)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

        pthread_mutex_init(&srv.lock, NULL);
        pthread_cond_init(&srv.cond, NULL);
        /* Thread per connection: a hanging handler blocks only its own connection. */
        srv.daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                                      NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                                      MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                                      MHD_OPTION_NOTIFY_CONNECTION, connection_notify, NULL, MHD_OPTION_END);
        if (!srv.daemon)
                return -1;
        srv.port = MHD_get_daemon_info(srv.daemon, MHD_DAEMON_INFO_BIND_PORT)->port;
        return 0;
}

static int server_stop(void **state)
{
        pthread_mutex_lock(&srv.lock);
        srv.release = true;
        pthread_cond_broadcast(&srv.cond);
        pthread_mutex_unlock(&srv.lock);
        MHD_stop_daemon(srv.daemon);
        free(srv.method);
        free(srv.url);
        free(srv.body);
        free(srv.xtest);
        free(srv.auth);
        free(srv.agent);
        free(srv.ctype);
        pthread_cond_destroy(&srv.cond);
        pthread_mutex_destroy(&srv.lock);
        return 0;
}

static char *url_for(const char *path)
{
        char *u = strprintf("http://127.0.0.1:%u%s", srv.port, path);
        assert_non_null(u);
        return u;
}

/* ---- tests ---- */

static void test_get(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/echo");
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "{\"ok\":true}");
        assert_int_equal(resp.body_len, strlen("{\"ok\":true}"));
        assert_string_equal(resp.content_type, "application/json");
        assert_null(resp.retry_after);
        pthread_mutex_lock(&srv.lock);
        assert_string_equal(srv.method, "GET");
        assert_null(srv.auth);
        assert_true(startswith(srv.agent, "spotdrain/"));
        pthread_mutex_unlock(&srv.lock);
        http_response_clear(&resp);
}

static unsigned server_connections(void)
{
        pthread_mutex_lock(&srv.lock);
        unsigned n = srv.connections;
        pthread_mutex_unlock(&srv.lock);
        return n;
}

static void test_connection_reuse(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/echo");
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        unsigned before = server_connections();
        for (int i = 0; i < 3; i++) {
                assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
                assert_int_equal(resp.status, 200);
                http_response_clear(&resp);
        }
        assert_int_equal(server_connections() - before, 1);
}

static void test_post_body_headers_bearer(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/echo");
        static const char body[] = "{\"a\":1}\0tail";
        struct http_response resp;
        struct http_request req = {
                .method = "POST",
                .url = url,
                .headers = (const char *const[]){ "X-Test: yes", "Content-Type: application/json", NULL },
                .body = body,
                .body_len = sizeof(body) - 1,
                .bearer_token = "s3cret",
        };

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &req, &resp), 0);
        assert_int_equal(resp.status, 200);
        pthread_mutex_lock(&srv.lock);
        assert_string_equal(srv.method, "POST");
        assert_int_equal(srv.body_len, sizeof(body) - 1);
        assert_memory_equal(srv.body, body, sizeof(body) - 1);
        assert_string_equal(srv.xtest, "yes");
        assert_string_equal(srv.ctype, "application/json");
        assert_string_equal(srv.auth, "Bearer s3cret");
        pthread_mutex_unlock(&srv.lock);
        http_response_clear(&resp);

        /* PATCH with a NUL-terminated body (body_len 0 = strlen). */
        req.method = "PATCH";
        req.body = "{\"b\":2}";
        req.body_len = 0;
        req.bearer_token = NULL;
        assert_int_equal(http_send_sync(l, &req, &resp), 0);
        pthread_mutex_lock(&srv.lock);
        assert_string_equal(srv.method, "PATCH");
        assert_string_equal(srv.body, "{\"b\":2}");
        assert_null(srv.auth);
        pthread_mutex_unlock(&srv.lock);
        http_response_clear(&resp);
}

static void test_statuses(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *u404 = url_for("/status/404");
        _cleanup_free_ char *u500 = url_for("/status/500");
        _cleanup_free_ char *uretry = url_for("/retry");
        _cleanup_free_ char *uredir = url_for("/redirect");
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = u404 }, &resp), 0);
        assert_int_equal(resp.status, 404);
        assert_string_equal(resp.body, "not found");
        assert_int_equal(http_status_to_errno(resp.status), -ENOENT);
        http_response_clear(&resp);

        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = u500 }, &resp), 0);
        assert_int_equal(resp.status, 500);
        assert_int_equal(http_status_to_errno(resp.status), -EIO);
        http_response_clear(&resp);

        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = uretry }, &resp), 0);
        assert_int_equal(resp.status, 429);
        assert_string_equal(resp.retry_after, "7");
        assert_string_equal(resp.body, "");
        assert_int_equal(http_status_to_errno(resp.status), -EBUSY);
        http_response_clear(&resp);

        /* Redirects are reported, never followed. */
        pthread_mutex_lock(&srv.lock);
        unsigned hits = srv.hits_echo;
        pthread_mutex_unlock(&srv.lock);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = uredir }, &resp), 0);
        assert_int_equal(resp.status, 302);
        pthread_mutex_lock(&srv.lock);
        assert_int_equal(srv.hits_echo, hits);
        pthread_mutex_unlock(&srv.lock);
        http_response_clear(&resp);
}

static void test_status_to_errno(void **state)
{
        assert_int_equal(http_status_to_errno(200), 0);
        assert_int_equal(http_status_to_errno(201), 0);
        assert_int_equal(http_status_to_errno(0), -EIO);
        assert_int_equal(http_status_to_errno(400), -EINVAL);
        assert_int_equal(http_status_to_errno(401), -EACCES);
        assert_int_equal(http_status_to_errno(403), -EPERM);
        assert_int_equal(http_status_to_errno(404), -ENOENT);
        assert_int_equal(http_status_to_errno(409), -EEXIST);
        assert_int_equal(http_status_to_errno(410), -ESTALE);
        assert_int_equal(http_status_to_errno(422), -EINVAL);
        assert_int_equal(http_status_to_errno(429), -EBUSY);
        assert_int_equal(http_status_to_errno(500), -EIO);
        assert_int_equal(http_status_to_errno(502), -EIO);
        assert_int_equal(http_status_to_errno(503), -EAGAIN);
        assert_int_equal(http_status_to_errno(504), -ETIMEDOUT);
        assert_int_equal(http_status_to_errno(302), -EPROTO);
        assert_int_equal(http_status_to_errno_method("POST", 409), -EEXIST);
        assert_int_equal(http_status_to_errno_method("PATCH", 409), -ESTALE);
        assert_int_equal(http_status_to_errno_method("PUT", 404), -ENOENT);
}

static void test_body_cap(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *ubig = url_for("/big");
        _cleanup_free_ char *uchunked = url_for("/bigchunked");
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        /* Known length beyond the cap. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = ubig, .max_body = 1000 }, &resp),
                         -EFBIG);
        assert_int_equal(resp.error, -EFBIG);
        assert_null(resp.body);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);

        /* Chunked (no length): the cap is enforced while receiving. */
        pthread_mutex_lock(&srv.lock);
        srv.client_bytes = SIZE_MAX; /* nobody reports progress here: let the server send freely */
        pthread_mutex_unlock(&srv.lock);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = uchunked, .max_body = 10 }, &resp),
                         -EFBIG);
        http_response_clear(&resp);

        /* Exactly at the cap is fine. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = ubig, .max_body = 9999 }, &resp),
                         0);
        assert_int_equal(resp.body_len, 9999);
        http_response_clear(&resp);
}

static void test_timeout(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/hang");
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(
            http_send_sync(l, &(struct http_request){ .url = url, .timeout_usec = 200000 }, &resp),
            -ETIMEDOUT);
        assert_int_equal(resp.error, -ETIMEDOUT);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
}

static void test_refused(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t len = sizeof(sa);
        struct http_response resp;
        int fd;

        /* A port that was just bound and released: nothing listens there. */
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
        close(fd);
        _cleanup_free_ char *url = strprintf("http://127.0.0.1:%u/", ntohs(sa.sin_port));

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), -ECONNREFUSED);
        assert_int_equal(resp.status, 0);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
}

static void test_tls_to_plain_server(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = strprintf("https://127.0.0.1:%u/echo", srv.port);
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), -EBADMSG);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
}

/* ---- TLS: a self-signed certificate for 127.0.0.1, made for the test ---- */

static void make_cert_san(const char *san, char **ret_cert, char **ret_key)
{
        tls_test_cert("127.0.0.1", san, ret_cert, ret_key);
}

static void make_cert(char **ret_cert, char **ret_key)
{
        make_cert_san("IP:127.0.0.1", ret_cert, ret_key);
}

static void test_tls_verified(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL, *url = NULL;
        char ca_path[] = "/tmp/spotdrain-test-ca-XXXXXX";
        struct sockaddr_in sa = { .sin_family = AF_INET };
        struct http_response resp;
        struct MHD_Daemon *d;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        make_cert(&cert, &key);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS,
                             0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_HTTPS_MEM_KEY, key,
                             MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_END);
        assert_non_null(d);
        url =
            strprintf("https://127.0.0.1:%u/echo", MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
        assert_non_null(url);
        assert_int_equal(loop_new(&l), 0);

        /* Trusted through the in-memory PEM. */
        struct http_tls tls = { .ca_pem = cert };
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls }, &resp), 0);
        assert_int_equal(resp.status, 200);
        http_response_clear(&resp);

        /* A client certificate and key from memory are accepted (this server does not ask for one). */
        tls = (struct http_tls){ .ca_pem = cert, .cert_pem = cert, .key_pem = key };
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls }, &resp), 0);
        assert_int_equal(resp.status, 200);
        http_response_clear(&resp);

        /* Trusted through a CA file. */
        int fd = mkstemp(ca_path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, cert, strlen(cert)), (ssize_t)strlen(cert));
        close(fd);
        tls = (struct http_tls){ .ca_file = ca_path };
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls }, &resp), 0);
        assert_int_equal(resp.status, 200);
        http_response_clear(&resp);
        unlink(ca_path);

        /* Not trusted by the system bundle: verification is on. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), -EBADMSG);
        assert_int_equal(resp.status, 0);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);

        MHD_stop_daemon(d);
}

static struct MHD_Daemon *start_tls_daemon(const char *cert, const char *key, uint16_t *ret_port)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        struct MHD_Daemon *d;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_TLS,
                             0, NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
                             MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_HTTPS_MEM_KEY, key,
                             MHD_OPTION_HTTPS_MEM_CERT, cert, MHD_OPTION_END);
        assert_non_null(d);
        *ret_port = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port;
        return d;
}

struct stream_state {
        struct buf data;
        unsigned calls;
        bool done;
        int error;
        long status;
        bool cancel_in_data;
        struct http_call *call;
        unsigned done_calls;
        bool got_data;
        struct loop *loop;
        bool send_in_data; /* starts another request from on_data */
        unsigned side_done;
        bool side_finished;
};

static void side_done(const struct http_response *resp, void *userdata)
{
        struct stream_state *s = userdata;
        s->side_done++;
        s->side_finished = resp->error == 0 && resp->status == 200;
}

static int on_chunk(const char *data, size_t len, void *userdata)
{
        struct stream_state *s = userdata;
        s->calls++;
        s->got_data = true;
        assert_int_equal(buf_append(&s->data, data, len), 0);
        pthread_mutex_lock(&srv.lock);
        srv.client_bytes = s->data.len;
        pthread_cond_broadcast(&srv.cond);
        pthread_mutex_unlock(&srv.lock);
        if (s->cancel_in_data)
                s->call = http_cancel(s->call);
        if (s->send_in_data && s->calls == 1) {
                _cleanup_free_ char *url = url_for("/echo");
                assert_int_equal(
                    http_send(s->loop, &(struct http_request){ .url = url }, side_done, s, NULL), 0);
                /* Not from inside http_send. */
                assert_int_equal(s->side_done, 0);
        }
        return 0;
}

static void stream_done(const struct http_response *resp, void *userdata)
{
        struct stream_state *s = userdata;
        s->done_calls++;
        s->done = true;
        s->error = resp->error;
        s->status = resp->status;
        assert_null(resp->body);
        s->call = NULL;
}

static void test_streaming(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/chunks");
        struct stream_state s = { .send_in_data = true };

        pthread_mutex_lock(&srv.lock);
        srv.client_bytes = 0;
        pthread_mutex_unlock(&srv.lock);

        assert_int_equal(loop_new(&l), 0);
        s.loop = l;
        assert_int_equal(http_send(l, &(struct http_request){ .url = url, .on_data = on_chunk }, stream_done,
                                   &s, &s.call),
                         0);
        assert_int_equal(loop_run_until(l, &s.done, WAIT_BOUND_USEC), 0);
        assert_int_equal(s.error, 0);
        assert_int_equal(s.status, 200);
        assert_int_equal(s.done_calls, 1);
        assert_string_equal(s.data.data, "chunk0\nchunk1\nchunk2\nchunk3\nchunk4\n");
        assert_true(s.calls >= N_CHUNKS);
        buf_free(&s.data);
        /* The request started from on_data completes too. */
        assert_int_equal(loop_run_until(l, &s.side_finished, WAIT_BOUND_USEC), 0);
        assert_int_equal(s.side_done, 1);
}

static void count_done(const struct http_response *resp, void *userdata)
{
        unsigned *n = userdata;
        (*n)++;
}

static void test_cancel(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *uhang = url_for("/hang");
        _cleanup_free_ char *ustream = url_for("/stream-hang");
        _cleanup_free_ char *uecho = url_for("/echo");
        struct stream_state s = { .cancel_in_data = true };
        unsigned cancelled_done = 0;
        struct http_call *c = NULL;
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);

        /* Cancelled before the loop ever ran. */
        assert_int_equal(
            http_send(l, &(struct http_request){ .url = uhang }, count_done, &cancelled_done, &c), 0);
        c = http_cancel(c);
        assert_null(c);

        /* Cancelled from inside on_data, while curl is on the stack. */
        assert_int_equal(http_send(l, &(struct http_request){ .url = ustream, .on_data = on_chunk },
                                   stream_done, &s, &s.call),
                         0);
        assert_int_equal(loop_run_until(l, &s.got_data, WAIT_BOUND_USEC), 0);
        assert_null(s.call);
        assert_string_equal(s.data.data, "first\n");

        /* The loop keeps serving other requests; the cancelled ones never report. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = uecho }, &resp), 0);
        http_response_clear(&resp);
        assert_int_equal(cancelled_done, 0);
        assert_int_equal(s.done_calls, 0);
        buf_free(&s.data);
}

static void test_plain_http_refused(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct http_response resp;
        struct http_call *c = NULL;
        unsigned n = 0;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(
            http_send(l, &(struct http_request){ .url = "http://192.0.2.1/" }, count_done, &n, &c),
            -EPROTONOSUPPORT);
        assert_null(c);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = "http://example.com/x" }, &resp),
                         -EPROTONOSUPPORT);
        http_response_clear(&resp);
        assert_int_equal(
            http_send(l, &(struct http_request){ .url = "http://169.254.169.253/" }, count_done, &n, &c),
            -EPROTONOSUPPORT);
        assert_int_equal(
            http_send(l, &(struct http_request){ .url = "ftp://127.0.0.1/" }, count_done, &n, &c),
            -EPROTONOSUPPORT);
        assert_int_equal(
            http_send(l, &(struct http_request){ .url = "file:///etc/passwd" }, count_done, &n, &c),
            -EPROTONOSUPPORT);
        assert_int_equal(http_send(l, &(struct http_request){ .url = "not a url" }, count_done, &n, &c),
                         -EINVAL);

        /* Allowed without TLS: loopback and IMDS. They are cancelled before the loop runs, so nothing is
         * sent. */
        static const char *const ok[] = {
                "http://127.0.0.1:1/",        "http://127.1.2.3:1/",
                "http://localhost:1/",        "http://[::1]:1/",
                "http://169.254.169.254/x",   "http://[fd00:ec2::254]/",
                "https://192.0.2.1/",         "http://169.254.170.23/v1/credentials",
                "http://169.254.170.2/creds", "http://[fd00:ec2::23]/v1/credentials",
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                assert_int_equal(http_send(l, &(struct http_request){ .url = ok[i] }, count_done, &n, &c),
                                 0);
                c = http_cancel(c);
        }
        assert_int_equal(n, 0);
}

struct many_state {
        unsigned done, ok;
        bool all;
};

static void many_done(const struct http_response *resp, void *userdata)
{
        struct many_state *m = userdata;
        m->done++;
        if (resp->error == 0 && resp->status == 200 && streq(resp->body, "{\"ok\":true}"))
                m->ok++;
        m->all = m->done == 50;
}

static void test_many_concurrent(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/echo");
        struct many_state m = { 0 };

        assert_int_equal(loop_new(&l), 0);
        for (int i = 0; i < 50; i++)
                assert_int_equal(http_send(l, &(struct http_request){ .url = url }, many_done, &m, NULL), 0);
        /* done is never called from inside http_send. */
        assert_int_equal(m.done, 0);
        assert_int_equal(loop_run_until(l, &m.all, WAIT_BOUND_USEC), 0);
        assert_int_equal(m.ok, 50);
}

static void test_free_with_calls_in_flight(void **state)
{
        _cleanup_free_ char *uhang = url_for("/hang");
        _cleanup_free_ char *uecho = url_for("/echo");
        struct loop *l = NULL;
        struct http_response resp;
        unsigned n = 0;

        assert_int_equal(loop_new(&l), 0);
        for (int i = 0; i < 3; i++)
                assert_int_equal(http_send(l, &(struct http_request){ .url = uhang }, count_done, &n, NULL),
                                 0);
        /* Let them connect and send while another request completes. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = uecho }, &resp), 0);
        http_response_clear(&resp);
        l = loop_free(l);
        assert_int_equal(n, 0);
}

/* ---- a raw HTTP server thread with a script of answers, for what libmicrohttpd does not send ---- */

#define RAW_CLOSE ((const char *)1) /* in a script: read the request, then close without answering */

struct raw_server {
        int fd;
        uint16_t port;
        pthread_t thread;
        const char *const *script; /* one answer per request, NULL-terminated */
        bool close_after;          /* close the connection after each answer */
        unsigned accepted, requests;
};

/* Waits (bounded) for fd to become readable. */
static bool wait_readable(int fd)
{
        struct pollfd p = { .fd = fd, .events = POLLIN };
        return poll(&p, 1, (int)(WAIT_BOUND_USEC / 1000)) == 1;
}

/* Reads one request head (no body) from fd: false at EOF or error. */
static bool read_request(int fd, char *buf, size_t size)
{
        size_t n = 0;

        while (n + 1 < size) {
                if (!wait_readable(fd))
                        return false;
                ssize_t k = recv(fd, buf + n, 1, 0);
                if (k <= 0)
                        return false;
                n++;
                buf[n] = 0;
                if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
                        return true;
        }
        return false;
}

static void *raw_server_run(void *arg)
{
        struct raw_server *rs = arg;
        char req[8192];

        while (rs->script[rs->requests]) {
                if (!wait_readable(rs->fd))
                        break;
                int c = accept4(rs->fd, NULL, NULL, SOCK_CLOEXEC);
                if (c < 0)
                        break;
                rs->accepted++;
                while (rs->script[rs->requests] && read_request(c, req, sizeof(req))) {
                        const char *answer = rs->script[rs->requests++];
                        if (answer == RAW_CLOSE)
                                break;
                        (void)send(c, answer, strlen(answer), MSG_NOSIGNAL);
                        if (rs->close_after)
                                break;
                }
                close(c);
        }
        return NULL;
}

static void raw_server_start(struct raw_server *rs, const char *const *script, bool close_after)
{
        *rs = (struct raw_server){ .script = script, .close_after = close_after };
        rs->fd = listen_loopback(&rs->port);
        assert_int_equal(pthread_create(&rs->thread, NULL, raw_server_run, rs), 0);
}

static void raw_server_stop(struct raw_server *rs)
{
        assert_int_equal(pthread_join(rs->thread, NULL), 0);
        close(rs->fd);
}

static char *raw_url(const struct raw_server *rs, const char *path)
{
        char *u = strprintf("http://127.0.0.1:%u%s", rs->port, path);
        assert_non_null(u);
        return u;
}

static void test_chunked_extensions_trailers(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n"
                "5;ext=1\r\nhello\r\n7 ; name=\"v\"\r\n, world\r\n0\r\nX-Trailer: yes\r\n\r\n",
                /* The same connection, still in step after the trailers. */
                "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, false);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "hello, world");
        assert_int_equal(resp.body_len, 12);
        assert_string_equal(resp.content_type, "text/plain");
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "ok");
        http_response_clear(&resp);
        raw_server_stop(&rs);
        assert_int_equal(rs.accepted, 1);
}

static void test_chunked_malformed(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, true);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        /* libcurl reports a broken chunk as a receive error: the call fails either way, without a body. */
        int r = http_send_sync(l, &(struct http_request){ .url = url }, &resp);
        assert_true(r == -EPROTO || r == -ECONNRESET);
        assert_null(resp.body);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
        raw_server_stop(&rs);
}

static void test_read_until_close(void **state)
{
        static const char *const script[] = {
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall of it, until the end",
                "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nagain",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, true);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "all of it, until the end");
        http_response_clear(&resp);
        /* Such a connection is not reused: the next request opens another. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "again");
        http_response_clear(&resp);
        raw_server_stop(&rs);
        assert_int_equal(rs.accepted, 2);
}

static void test_truncated_body(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, true);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), -ECONNRESET);
        assert_null(resp.body);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
        raw_server_stop(&rs);
}

static void test_idle_close_retried(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none",
                /* The reused connection takes the request and closes without an answer, as a server does
                 * when its idle timeout strikes just then. */
                RAW_CLOSE,
                "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo",
                RAW_CLOSE,
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nthree",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, false);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "one");
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "two");
        http_response_clear(&resp);
        /* libcurl sends a POST again too when the reused connection closed before any byte of an answer:
         * every POST spotdrain makes is safe to repeat (core.h). */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .method = "POST" }, &resp),
                         0);
        assert_string_equal(resp.body, "three");
        http_response_clear(&resp);
        raw_server_stop(&rs);
        assert_int_equal(rs.accepted, 3);
        assert_int_equal(rs.requests, 5);
}

static void test_server_closed_idle_connection(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none",
                "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        /* Keep-alive answers, but the server closes each connection right after: never an error. */
        raw_server_start(&rs, script, true);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "one");
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "two");
        http_response_clear(&resp);
        raw_server_stop(&rs);
        assert_int_equal(rs.accepted, 2);
}

static void test_header_too_large(void **state)
{
        _cleanup_free_ char *big = malloc(70 * 1024 + 64);
        assert_non_null(big);
        strcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ");
        size_t n = strlen(big);
        memset(big + n, 'a', 70 * 1024);
        strcpy(big + n + 70 * 1024, "\r\n\r\n");
        const char *const script[] = { big, NULL };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, true);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), -EBADMSG);
        assert_int_equal(resp.status, 0);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
        raw_server_stop(&rs);
}

static void test_interim_and_no_body_statuses(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
                "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nRetry-After: 3\r\n\r\nhi",
                "HTTP/1.1 204 No Content\r\n\r\n",
                "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, false);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 201);
        assert_string_equal(resp.body, "hi");
        assert_string_equal(resp.retry_after, "3");
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 204);
        assert_string_equal(resp.body, "");
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_int_equal(resp.status, 304);
        http_response_clear(&resp);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "x");
        http_response_clear(&resp);
        raw_server_stop(&rs);
        assert_int_equal(rs.accepted, 1);
}

static void test_head(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/echo");
        struct http_response resp;

        assert_int_equal(loop_new(&l), 0);
        unsigned before = server_connections();
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .method = "HEAD" }, &resp),
                         0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "");
        assert_int_equal(resp.body_len, 0);
        assert_string_equal(resp.content_type, "application/json");
        http_response_clear(&resp);
        /* The announced length was not waited for: the connection serves the next request. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url }, &resp), 0);
        assert_string_equal(resp.body, "{\"ok\":true}");
        http_response_clear(&resp);
        assert_int_equal(server_connections() - before, 1);
}

static void test_tls_wrong_host(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL, *url = NULL, *url_ip = NULL;
        struct http_response resp;
        uint16_t port;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        /* Trusted, but made out for another name than the one asked for. */
        make_cert_san("DNS:other.example", &cert, &key);
        struct MHD_Daemon *d = start_tls_daemon(cert, key, &port);
        url = strprintf("https://localhost:%u/echo", port);
        url_ip = strprintf("https://127.0.0.1:%u/echo", port);
        assert_true(url && url_ip);
        assert_int_equal(loop_new(&l), 0);

        struct http_tls tls = { .ca_pem = cert };
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls }, &resp),
                         -EBADMSG);
        assert_int_equal(resp.status, 0);
        assert_non_null(strstr(resp.errbuf, "mismatch"));
        http_response_clear(&resp);
        /* An IP literal is checked against IP addresses, not against names. */
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url_ip, .tls = &tls }, &resp),
                         -EBADMSG);
        assert_non_null(strstr(resp.errbuf, "mismatch"));
        http_response_clear(&resp);
        MHD_stop_daemon(d);
}

static void test_tls_reuse(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL, *url = NULL;
        struct http_response resp;
        uint16_t port;

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        make_cert(&cert, &key);
        struct MHD_Daemon *d = start_tls_daemon(cert, key, &port);
        url = strprintf("https://127.0.0.1:%u/echo", port);
        assert_non_null(url);
        assert_int_equal(loop_new(&l), 0);
        unsigned before = server_connections();
        for (int i = 0; i < 3; i++) {
                /* A fresh copy each time: settings are matched by content, not by address. */
                _cleanup_free_ char *ca = strdup(cert);
                assert_non_null(ca);
                struct http_tls tls = { .ca_pem = ca };
                assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls }, &resp),
                                 0);
                assert_string_equal(resp.body, "{\"ok\":true}");
                http_response_clear(&resp);
        }
        /* This daemon does not count connections: the shared one must have seen none. */
        assert_int_equal(server_connections(), before);
        MHD_stop_daemon(d);
}

/* ---- a CONNECT proxy thread ---- */

struct proxy {
        int fd;
        uint16_t port;
        uint16_t target_port; /* where every tunnel goes (127.0.0.1) */
        pthread_t thread;
        unsigned tunnels;
        char request[4096];
};

static void relay(int a, int b)
{
        char buf[16384];

        for (;;) {
                struct pollfd p[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };
                if (poll(p, 2, (int)(WAIT_BOUND_USEC / 1000)) <= 0)
                        return;
                for (int i = 0; i < 2; i++) {
                        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                                continue;
                        ssize_t n = recv(p[i].fd, buf, sizeof(buf), 0);
                        if (n <= 0 || send(p[1 - i].fd, buf, (size_t)n, MSG_NOSIGNAL) != n)
                                return;
                }
        }
}

static void *proxy_run(void *arg)
{
        struct proxy *px = arg;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(px->target_port) };
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (!wait_readable(px->fd))
                return NULL;
        int c = accept4(px->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
                return NULL;
        if (read_request(c, px->request, sizeof(px->request))) {
                int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (t >= 0 && connect(t, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
                    send(c, ok, strlen(ok), MSG_NOSIGNAL) == (ssize_t)strlen(ok)) {
                        px->tunnels++;
                        relay(c, t);
                }
                if (t >= 0)
                        close(t);
        }
        close(c);
        return NULL;
}

static void test_connect_proxy(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *cert = NULL, *key = NULL, *url = NULL, *proxy_url = NULL;
        struct http_response resp;
        struct proxy px = { 0 };

        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
                skip();
        /* A name nobody resolves: only the proxy knows where it is. */
        make_cert_san("DNS:spotdrain-test.invalid", &cert, &key);
        struct MHD_Daemon *d = start_tls_daemon(cert, key, &px.target_port);
        px.fd = listen_loopback(&px.port);
        assert_int_equal(pthread_create(&px.thread, NULL, proxy_run, &px), 0);
        url = strprintf("https://spotdrain-test.invalid:%u/echo", px.target_port);
        proxy_url = strprintf("http://user:p%%40ss@127.0.0.1:%u/", px.port);
        assert_true(url && proxy_url);
        assert_int_equal(setenv("HTTPS_PROXY", proxy_url, 1), 0);
        assert_int_equal(loop_new(&l), 0);

        struct http_tls tls = { .ca_pem = cert };
        assert_int_equal(
            http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls, .bearer_token = "tok" },
                           &resp),
            0);
        assert_int_equal(resp.status, 200);
        assert_string_equal(resp.body, "{\"ok\":true}");
        http_response_clear(&resp);
        /* The tunnel is closed once the loop lets go of the connection. */
        l = loop_free(l);
        assert_int_equal(pthread_join(px.thread, NULL), 0);
        assert_int_equal(px.tunnels, 1);
        _cleanup_free_ char *line =
            strprintf("CONNECT spotdrain-test.invalid:%u HTTP/1.1\r\n", px.target_port);
        assert_non_null(line);
        assert_true(startswith(px.request, line));
        /* user:p@ss */
        assert_non_null(strstr(px.request, "Proxy-Authorization: Basic dXNlcjpwQHNz\r\n"));
        /* The bearer token travels inside the tunnel only. */
        assert_null(strstr(px.request, "tok"));

        /* Bypassed for no_proxy hosts: then the name does not resolve. */
        assert_int_equal(setenv("NO_PROXY", "example.com, .invalid", 1), 0);
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = url, .tls = &tls }, &resp),
                         -EHOSTUNREACH);
        assert_true(resp.errbuf[0] != 0);
        http_response_clear(&resp);
        /* Loopback is never proxied (the proxy thread is gone: this would fail if it were). */
        assert_int_equal(unsetenv("NO_PROXY"), 0);
        _cleanup_free_ char *direct = strprintf("https://127.0.0.1:%u/echo", px.target_port);
        assert_non_null(direct);
        assert_int_equal(http_send_sync(l, &(struct http_request){ .url = direct, .tls = &tls }, &resp),
                         -EBADMSG); /* the certificate names spotdrain-test.invalid, not 127.0.0.1 */
        assert_non_null(strstr(resp.errbuf, "mismatch"));
        http_response_clear(&resp);
        assert_int_equal(unsetenv("HTTPS_PROXY"), 0);
        close(px.fd);
        MHD_stop_daemon(d);
}

/* URLs refused before anything is sent: credentials, bad ports, no host, spaces, other schemes, and plain
 * http beyond loopback and the link-local AWS services. */
static void test_bad_urls(void **state)
{
        static const struct {
                const char *url;
                int r;
        } cases[] = {
                { "https://user@host.example/", -EINVAL },      { "https://user:pw@host.example/", -EINVAL },
                { "https://host.example:99999/", -EINVAL },     { "https://host.example/a b", -EINVAL },
                { "gopher://host.example/", -EPROTONOSUPPORT }, { "http://kube.example/", -EPROTONOSUPPORT },
                { "http://10.0.0.1/", -EPROTONOSUPPORT },
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        unsigned n = 0;

        assert_int_equal(loop_new(&l), 0);
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
                assert_int_equal(
                    http_send(l, &(struct http_request){ .url = cases[i].url }, count_done, &n, NULL),
                    cases[i].r);
        assert_int_equal(n, 0);
}

static void test_header_injection_refused(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = url_for("/echo");
        unsigned n = 0;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(
            http_send(l,
                      &(struct http_request){ .url = url,
                                              .headers = (const char *const[]){ "X: a\r\nY: b", NULL } },
                      count_done, &n, NULL),
            -EINVAL);
        assert_int_equal(
            http_send(l, &(struct http_request){ .url = url, .bearer_token = "a\nb" }, count_done, &n, NULL),
            -EINVAL);
        assert_int_equal(n, 0);
}

struct abort_state {
        unsigned calls;
        bool done;
        int error;
        char errbuf[256];
};

static int abort_on_data(const char *data, size_t len, void *userdata)
{
        struct abort_state *st = userdata;
        st->calls++;
        return -EBADE;
}

static void abort_done(const struct http_response *resp, void *userdata)
{
        struct abort_state *st = userdata;
        st->done = true;
        st->error = resp->error;
        memcpy(st->errbuf, resp->errbuf, sizeof(st->errbuf));
}

static void test_on_data_abort(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\none\r\n3\r\ntwo\r\n0\r\n\r\n",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct abort_state st = { 0 };

        raw_server_start(&rs, script, true);
        _cleanup_free_ char *url = raw_url(&rs, "/");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(http_send(l, &(struct http_request){ .url = url, .on_data = abort_on_data },
                                   abort_done, &st, NULL),
                         0);
        assert_int_equal(loop_run_until(l, &st.done, WAIT_BOUND_USEC), 0);
        /* The receiver's error ends the call: the second piece is not handed over. */
        assert_int_equal(st.error, -EBADE);
        assert_int_equal(st.calls, 1);
        assert_non_null(strstr(st.errbuf, "aborted"));
        raw_server_stop(&rs);
}

static void test_proxy_refuses_tunnel(void **state)
{
        static const char *const script[] = {
                "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n",
                "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
                NULL,
        };
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct raw_server rs;
        struct http_response resp;

        raw_server_start(&rs, script, true);
        _cleanup_free_ char *proxy_url = strprintf("127.0.0.1:%u", rs.port); /* no scheme: http */
        assert_non_null(proxy_url);
        assert_int_equal(setenv("https_proxy", proxy_url, 1), 0);
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(
            http_send_sync(l, &(struct http_request){ .url = "https://spotdrain-test.invalid/" }, &resp),
            -ECONNREFUSED);
        assert_non_null(strstr(resp.errbuf, "407"));
        http_response_clear(&resp);
        /* A proxy of the call's own (the webhook's setting) is used without any in the environment. */
        assert_int_equal(unsetenv("https_proxy"), 0);
        _cleanup_free_ char *own = strprintf("http://127.0.0.1:%u", rs.port);
        assert_non_null(own);
        assert_int_equal(
            http_send_sync(
                l, &(struct http_request){ .url = "https://spotdrain-test.invalid/", .proxy = own }, &resp),
            -ECONNREFUSED);
        assert_non_null(strstr(resp.errbuf, "403"));
        http_response_clear(&resp);
        raw_server_stop(&rs);
        assert_int_equal(rs.accepted, 2);
}

/* The lookup of this name fails within milliseconds where a resolver answers, in another thread: the loop's
 * first iteration may find it done already (under valgrind, whose threads take turns, it did) and end both
 * calls, and then there is nothing to cancel. So it is tried again, with a fresh loop, until an iteration
 * leaves both lookups under way; the test fails if that never happens. */
static void test_cancel_while_resolving(void **state)
{
        bool cancelled = false;

        for (int attempt = 0; attempt < 50 && !cancelled; attempt++) {
                struct loop *l = NULL;
                struct http_call *c = NULL;
                unsigned n = 0, other = 0;

                assert_int_equal(loop_new(&l), 0);
                assert_int_equal(
                    http_send(l, &(struct http_request){ .url = "https://spotdrain-test.invalid/" },
                              count_done, &n, &c),
                    0);
                assert_int_equal(
                    http_send(l, &(struct http_request){ .url = "https://spotdrain-test.invalid/x" },
                              count_done, &other, NULL),
                    0);
                /* One iteration starts both calls: their lookups are under way in other threads. */
                assert_true(sd_event_run(loop_event(l), 0) >= 0);
                if (n == 0 && other == 0) {
                        c = http_cancel(c);
                        cancelled = true;
                }
                /* The other one goes with the loop; the lookup's thread finds nobody listening. */
                l = loop_free(l);
                if (cancelled) {
                        assert_int_equal(n, 0);
                        assert_int_equal(other, 0);
                }
        }
        assert_true(cancelled);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_get),
                cmocka_unit_test(test_connection_reuse),
                cmocka_unit_test(test_post_body_headers_bearer),
                cmocka_unit_test(test_statuses),
                cmocka_unit_test(test_status_to_errno),
                cmocka_unit_test(test_body_cap),
                cmocka_unit_test(test_timeout),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_tls_to_plain_server),
                cmocka_unit_test(test_tls_verified),
                cmocka_unit_test(test_streaming),
                cmocka_unit_test(test_cancel),
                cmocka_unit_test(test_plain_http_refused),
                cmocka_unit_test(test_many_concurrent),
                cmocka_unit_test(test_free_with_calls_in_flight),
                cmocka_unit_test(test_chunked_extensions_trailers),
                cmocka_unit_test(test_chunked_malformed),
                cmocka_unit_test(test_read_until_close),
                cmocka_unit_test(test_truncated_body),
                cmocka_unit_test(test_idle_close_retried),
                cmocka_unit_test(test_server_closed_idle_connection),
                cmocka_unit_test(test_header_too_large),
                cmocka_unit_test(test_interim_and_no_body_statuses),
                cmocka_unit_test(test_head),
                cmocka_unit_test(test_tls_wrong_host),
                cmocka_unit_test(test_tls_reuse),
                cmocka_unit_test(test_connect_proxy),
                cmocka_unit_test(test_bad_urls),
                cmocka_unit_test(test_header_injection_refused),
                cmocka_unit_test(test_on_data_abort),
                cmocka_unit_test(test_proxy_refuses_tunnel),
                cmocka_unit_test(test_cancel_while_resolving),
        };
        return cmocka_run_group_tests(tests, server_start, server_stop);
}
