/* The HTTP client over HTTP/2 against a real HTTP/2 server (nghttp2's nghttpd, TLS with ALPN), through a
 * relay that can freeze its connections the way a NAT gateway that dropped its state does (bytes neither
 * passed nor refused; no FIN, no RST): concurrent calls share one connection, and after a freeze the next
 * call gives up on the silent connection and a later one gets a new connection instead of waiting on it. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "loopback.h"
#include "relay.h"
#include "spotdrain/core.h"
#include "tls_certs.h"

#define WAIT_BOUND_USEC (10ULL * 1000000ULL)

/* ---- nghttpd ---- */

struct h2_server {
        pid_t pid;
        uint16_t port;
        char dir[64];
        char *cert, *key;
};

static void write_file(const char *dir, const char *name, const char *data)
{
        _cleanup_free_ char *path = strprintf("%s/%s", dir, name);
        assert_non_null(path);
        assert_int_equal(write_file_atomic(path, data, strlen(data), 0600), 0);
}

static void h2_start(struct h2_server *s)
{
        uint16_t port;
        strcpy(s->dir, "/tmp/spotdrain-test-h2-XXXXXX");
        assert_non_null(mkdtemp(s->dir));
        tls_test_cert("127.0.0.1", "IP:127.0.0.1", &s->cert, &s->key);
        write_file(s->dir, "cert.pem", s->cert);
        write_file(s->dir, "key.pem", s->key);
        write_file(s->dir, "hello", "hello over h2");
        /* A free port: nghttpd takes no port 0. */
        close(listen_loopback(&port));
        s->port = port;
        _cleanup_free_ char *ports = strprintf("%u", port), *key = strprintf("%s/key.pem", s->dir),
                            *cert = strprintf("%s/cert.pem", s->dir);
        assert_true(ports && key && cert);
        s->pid = fork();
        assert_true(s->pid >= 0);
        if (s->pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, STDOUT_FILENO);
                dup2(null, STDERR_FILENO);
                execlp("nghttpd", "nghttpd", "-a", "127.0.0.1", "-d", s->dir, ports, key, cert,
                       (char *)NULL);
                _exit(127);
        }
        /* Ready when it accepts (bounded). */
        uint64_t until = now_monotonic_usec() + WAIT_BOUND_USEC;
        int fd;
        while ((fd = connect_loopback(port)) < 0) {
                int status;
                assert_int_equal(waitpid(s->pid, &status, WNOHANG), 0); /* nghttpd exited: not installed? */
                assert_true(now_monotonic_usec() < until);
                poll(NULL, 0, 20);
        }
        close(fd);
}

static void h2_stop(struct h2_server *s)
{
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        static const char *const names[] = { "cert.pem", "key.pem", "hello" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                _cleanup_free_ char *p = strprintf("%s/%s", s->dir, names[i]);
                unlink(p);
        }
        rmdir(s->dir);
        free(s->cert);
        free(s->key);
}

struct many {
        unsigned done, ok;
        bool all;
        unsigned want;
};

static void many_done(const struct http_response *resp, void *userdata)
{
        struct many *m = userdata;
        m->done++;
        if (resp->error == 0 && resp->status == 200 && streq(resp->body, "hello over h2"))
                m->ok++;
        m->all = m->done == m->want;
}

static void test_h2_multiplex_and_freeze(void **state)
{
        struct h2_server s;
        struct relay r;
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct http_response resp;

        h2_start(&s);
        relay_start(&r, s.port, NULL);
        _cleanup_free_ char *url = strprintf("https://127.0.0.1:%u/hello", r.port);
        assert_non_null(url);
        struct http_tls tls = { .ca_pem = s.cert };
        struct http_request req = { .url = url, .tls = &tls, .idle_timeout_usec = 1000000 };
        assert_int_equal(loop_new(&l), 0);

        /* Eight calls at once: one TLS connection carries them all. */
        struct many m = { .want = 8 };
        for (unsigned i = 0; i < m.want; i++)
                assert_int_equal(http_send(l, &req, many_done, &m, NULL), 0);
        assert_int_equal(loop_run_until(l, &m.all, WAIT_BOUND_USEC), 0);
        assert_int_equal(m.ok, m.want);
        assert_int_equal(atomic_load(&r.accepted), 1);

        /* The connection goes silent: the next call on it gets no answer within its idle limit. */
        atomic_store(&r.freeze, true);
        uint64_t until = now_monotonic_usec() + WAIT_BOUND_USEC;
        while (atomic_load(&r.freeze) && now_monotonic_usec() < until)
                poll(NULL, 0, 5); /* the relay thread takes the request within its next poll */
        assert_false(atomic_load(&r.freeze));
        assert_int_equal(http_send_sync(l, &req, &resp), -ETIMEDOUT);
        assert_int_equal(resp.status, 0);
        http_response_clear(&resp);
        /* The silent connection was given up: the next calls get a new one, and are answered. */
        m = (struct many){ .want = 4 };
        for (unsigned i = 0; i < m.want; i++)
                assert_int_equal(http_send(l, &req, many_done, &m, NULL), 0);
        assert_int_equal(loop_run_until(l, &m.all, WAIT_BOUND_USEC), 0);
        assert_int_equal(m.ok, m.want);
        assert_int_equal(atomic_load(&r.accepted), 2);

        l = loop_free(l);
        relay_stop(&r);
        h2_stop(&s);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_h2_multiplex_and_freeze),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
