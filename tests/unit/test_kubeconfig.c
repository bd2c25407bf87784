/* kubeconfig and in-cluster loading, and the credentials they lead to. Runs from the repository root: the
 * data files are under tests/unit/data/kubeconfig/ (see the README there); scratch files go to a mkdtemp
 * dir. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "spotdrain/core.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/util.h"

#define DATA "tests/unit/data/kubeconfig"

struct tmpdir {
        char path[64];
};

static void tmpdir_make(struct tmpdir *t)
{
        strcpy(t->path, "/tmp/spotdrain-kc-XXXXXX");
        assert_non_null(mkdtemp(t->path));
}

static void tmpdir_remove(struct tmpdir *t)
{
        const char *names[] = { "runs",  "exec-info.json", "go",        "pid",
                                "token", "ca.crt",         "namespace", "kc.yaml" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                _cleanup_free_ char *p = strprintf("%s/%s", t->path, names[i]);
                assert_non_null(p);
                unlink(p);
        }
        assert_int_equal(rmdir(t->path), 0);
}

static void write_in(const struct tmpdir *t, const char *name, const char *text)
{
        _cleanup_free_ char *p = strprintf("%s/%s", t->path, name);
        assert_non_null(p);
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0600), 0);
}

static char *read_in(const struct tmpdir *t, const char *name)
{
        _cleanup_free_ char *p = strprintf("%s/%s", t->path, name);
        char *s = NULL;
        size_t len;
        assert_non_null(p);
        assert_int_equal(read_file_full(p, 65536, &s, &len), 0);
        return s;
}

static int runs(const struct tmpdir *t)
{
        _cleanup_free_ char *s = read_in(t, "runs");
        return atoi(s);
}

static char *data_abs(const char *name)
{
        char *dir = realpath(DATA, NULL);
        assert_non_null(dir);
        char *p = strprintf("%s/%s", dir, name);
        free(dir);
        assert_non_null(p);
        return p;
}

static void test_ca_data_and_token(void **state)
{
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/basic.yaml", NULL, &c, NULL), 0);
        assert_string_equal(c->context, "prod");
        assert_string_equal(c->source, DATA "/basic.yaml");
        assert_string_equal(c->server, "https://api.prod.example.com:6443");
        assert_string_equal(c->namespace, "team-a");
        assert_string_equal(c->tls_server_name, "kubernetes.default.svc");
        assert_non_null(c->ca_pem);
        assert_true(startswith(c->ca_pem, "-----BEGIN CERTIFICATE-----\n"));
        assert_null(c->ca_file);
        assert_null(c->exec);
        const char *tok = NULL;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "static-token-value");
        kube_config_invalidate(c);
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "static-token-value");
}

static void test_client_cert_data_and_basic(void **state)
{
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/basic.yaml", "certs", &c, NULL), 0);
        assert_string_equal(c->namespace, "default");
        assert_true(startswith(c->cert_pem, "-----BEGIN CERTIFICATE-----\n"));
        assert_true(startswith(c->key_pem, "-----BEGIN PRIVATE KEY-----\n"));
        const char *tok = "unset";
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_null(tok);

        _cleanup_(kube_config_freep) struct kube_config *b = NULL;
        assert_int_equal(kube_config_load_file(DATA "/basic.yaml", "basic", &b, NULL), 0);
        /* a bare host means https, as in client-go */
        assert_string_equal(b->server, "https://api.bare.example.com");
        assert_string_equal(b->username, "admin");
        assert_string_equal(b->password, "s3cret");
        assert_null(b->ca_pem);
}

static void test_files_relative_to_kubeconfig(void **state)
{
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/files.yaml", NULL, &c, NULL), 0);
        _cleanup_free_ char *ca = data_abs("ca.pem"), *crt = data_abs("client.crt"),
                            *key = data_abs("client.key");
        assert_string_equal(c->ca_file, ca);
        assert_string_equal(c->cert_file, crt);
        assert_string_equal(c->key_file, key);
        assert_null(c->ca_pem);
        assert_null(c->cert_pem);
        assert_null(c->key_pem);
        assert_string_equal(c->server, "https://127.0.0.1:6443");
}

static void test_http_loopback(void **state)
{
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/http.yaml", "local", &c, NULL), 0);
        assert_string_equal(c->server, "http://127.0.0.1:8080");
}

static void test_token_file_reread(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        write_in(&t, "token", "first-token\n");
        write_in(&t, "kc.yaml",
                 "current-context: c\n"
                 "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                 "users: [{name: u, user: {tokenFile: token}}]\n"
                 "contexts: [{name: c, context: {cluster: c, user: u}}]\n");
        _cleanup_free_ char *path = strprintf("%s/kc.yaml", t.path);
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(path, NULL, &c, NULL), 0);
        _cleanup_free_ char *tf = strprintf("%s/token", t.path);
        assert_string_equal(c->token_file, tf);
        assert_int_equal(c->token_reread_usec, 60ULL * 1000000ULL);

        const char *tok = NULL;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "first-token");
        /* a rotated file is not seen before the re-read period ... */
        write_in(&t, "token", "second-token\n");
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "first-token");
        /* ... but is after a 401 */
        kube_config_invalidate(c);
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "second-token");
        /* ... and once the token read is older than the period (aged by hand rather than by waiting) */
        write_in(&t, "token", "third-token");
        c->token_read_usec -= c->token_reread_usec;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "third-token");
        /* a file that vanishes keeps the last token until a 401 says it is bad */
        unlink(tf);
        c->token_read_usec -= c->token_reread_usec;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "third-token");
        kube_config_invalidate(c);
        _cleanup_free_ char *err = NULL;
        assert_int_equal(kube_config_token(c, &tok, &err), -ENOENT);
        assert_non_null(strstr(err, tf));
        tmpdir_remove(&t);
}

static void plugin_env(const struct tmpdir *t, const char *expiry)
{
        assert_int_equal(setenv("PLUGIN_STATE_DIR", t->path, 1), 0);
        if (expiry)
                assert_int_equal(setenv("PLUGIN_EXPIRY", expiry, 1), 0);
        else
                unsetenv("PLUGIN_EXPIRY");
        unsetenv("PLUGIN_EXIT");
        unsetenv("PLUGIN_ANSWER_VERSION");
        unsetenv("PLUGIN_CERT");
        unsetenv("PLUGIN_WAIT_FOR");
        unsetenv("PLUGIN_HANG");
        unsetenv("PLUGIN_FLOOD");
}

static void rfc3339_from_now(int64_t seconds, char *buf, size_t len)
{
        uint64_t now = now_realtime_usec();
        assert_int_equal(format_rfc3339((uint64_t)((int64_t)now + seconds * 1000000), buf, len), 0);
}

static void test_exec_v1_cached_until_invalidate(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        char exp[64];
        rfc3339_from_now(3600, exp, sizeof(exp));
        plugin_env(&t, exp);

        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/exec-v1.yaml", NULL, &c, NULL), 0);
        assert_non_null(c->exec);
        assert_string_equal(c->exec->api_version, "client.authentication.k8s.io/v1");
        _cleanup_free_ char *cmd = data_abs("exec-plugin.sh");
        assert_string_equal(c->exec->argv[0], cmd);
        assert_string_equal(c->exec->argv[1], "client.authentication.k8s.io/v1");
        assert_null(c->exec->argv[2]);
        assert_string_equal(c->exec->env[0], "GREETING=hello");
        assert_string_equal(c->exec->interactive_mode, "Never");
        assert_true(c->exec->provide_cluster_info);

        const char *tok = NULL;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-1");
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-1");
        assert_int_equal(runs(&t), 1);
        kube_config_invalidate(c);
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-2");
        assert_int_equal(runs(&t), 2);

        _cleanup_free_ char *info = read_in(&t, "exec-info.json");
        assert_non_null(strstr(info, "\"apiVersion\":\"client.authentication.k8s.io/v1\""));
        assert_non_null(strstr(info, "\"kind\":\"ExecCredential\""));
        assert_non_null(strstr(info, "\"interactive\":false"));
        assert_non_null(strstr(info, "\"server\":\"https://ABCDEF.gr7.us-east-1.eks.amazonaws.com\""));
        assert_non_null(strstr(info, "\"certificate-authority-data\":\"LS0tLS1CRUdJTi"));
        tmpdir_remove(&t);
}

static void test_exec_v1beta1_expired_reruns(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        char exp[64];
        rfc3339_from_now(-60, exp, sizeof(exp));
        plugin_env(&t, exp);

        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/exec-v1beta1.yaml", NULL, &c, NULL), 0);
        assert_string_equal(c->exec->interactive_mode, "IfAvailable");
        assert_false(c->exec->provide_cluster_info);
        const char *tok = NULL;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-1");
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-2");
        _cleanup_free_ char *info = read_in(&t, "exec-info.json");
        assert_non_null(strstr(info, "\"apiVersion\":\"client.authentication.k8s.io/v1beta1\""));
        assert_null(strstr(info, "\"cluster\""));

        /* without an expiry the token stays until a 401 */
        plugin_env(&t, NULL);
        kube_config_invalidate(c);
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-3");
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "hello-3");
        assert_int_equal(runs(&t), 3);
        tmpdir_remove(&t);
}

static void test_exec_client_cert(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_CERT", "1", 1), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/exec-v1beta1.yaml", NULL, &c, NULL), 0);
        const char *tok = "unset";
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_null(tok);
        assert_true(startswith(c->cert_pem, "-----BEGIN CERTIFICATE-----\n"));
        assert_true(startswith(c->key_pem, "-----BEGIN PRIVATE KEY-----\n"));
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_int_equal(runs(&t), 1);
        unsetenv("PLUGIN_CERT");
        tmpdir_remove(&t);
}

static void test_exec_failures(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_EXIT", "3", 1), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(DATA "/exec-v1.yaml", NULL, &c, NULL), 0);
        const char *tok = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(kube_config_token(c, &tok, &err), -EIO);
        assert_non_null(strstr(err,
                               "exec-plugin.sh: exited with status 3 (stderr: exec-plugin.sh: failing on "
                               "purpose)"));

        /* an answer in another apiVersion than asked is refused */
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_ANSWER_VERSION", "client.authentication.k8s.io/v1beta1", 1), 0);
        _cleanup_free_ char *err2 = NULL;
        assert_int_equal(kube_config_token(c, &tok, &err2), -EBADMSG);
        assert_non_null(strstr(err2, "returned apiVersion 'client.authentication.k8s.io/v1beta1', expected "
                                     "'client.authentication.k8s.io/v1'"));
        unsetenv("PLUGIN_ANSWER_VERSION");
        assert_int_equal(runs(&t), 2);

        /* a command that does not exist */
        free(c->exec->argv[0]);
        c->exec->argv[0] = strdup("/nonexistent/spotdrain-plugin");
        assert_non_null(c->exec->argv[0]);
        _cleanup_free_ char *err3 = NULL;
        assert_int_equal(kube_config_token(c, &tok, &err3), -EIO);
        if (!strstr(err3, "status 127"))
                fail_msg("message: %s", err3);
        tmpdir_remove(&t);
}

/* ---- the asynchronous path, on an event loop ---- */

#define WAIT_USEC (10ULL * 1000000ULL)

struct got {
        bool done;
        int error;
        char *token, *message;
};

static void got_token(int error, const char *token, const char *message, void *userdata)
{
        struct got *g = userdata;
        assert_false(g->done);
        g->done = true;
        g->error = error;
        g->token = token ? strdup(token) : NULL;
        g->message = message ? strdup(message) : NULL;
}

static void got_clear(struct got *g)
{
        free(g->token);
        free(g->message);
        *g = (struct got){ 0 };
}

/* Starts an async token request that must wait; got_token fills g later. */
static void ask_waiting(struct kube_config *c, struct loop *l, struct got *g, struct kube_token_wait **w)
{
        const char *tok = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(kube_config_token_async(c, l, &tok, got_token, g, w, &err), 0);
        assert_null(err);
}

/* An async token request answered at once. */
static const char *ask_ready(struct kube_config *c, struct loop *l)
{
        const char *tok = NULL;
        struct kube_token_wait *w = NULL;
        assert_int_equal(kube_config_token_async(c, l, &tok, got_token, NULL, &w, NULL), 1);
        assert_null(w);
        return tok;
}

/* Runs the loop until pred holds, checking it every few milliseconds, for at most WAIT_USEC. */
struct until {
        struct loop *loop;
        bool (*pred)(void *arg);
        void *arg;
        bool done;
};

static void until_check(void *userdata)
{
        struct until *u = userdata;
        if (u->pred(u->arg))
                u->done = true;
        else
                assert_int_equal(timer_start_in(u->loop, 5000, until_check, u, NULL), 0);
}

static void run_until(struct loop *l, bool (*pred)(void *arg), void *arg)
{
        struct until u = { .loop = l, .pred = pred, .arg = arg };
        until_check(&u);
        assert_int_equal(loop_run_until(l, &u.done, WAIT_USEC), 0);
}

struct go {
        const struct tmpdir *t;
        const bool *waiting_done; /* the credential's arrival, seen from the timer */
        bool fired, fired_while_waiting;
};

static void create_go(void *userdata)
{
        struct go *g = userdata;
        g->fired = true;
        g->fired_while_waiting = !*g->waiting_done;
        write_in(g->t, "go", "");
}

static struct kube_config *load_exec(const char *file)
{
        struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_file(file, NULL, &c, NULL), 0);
        return c;
}

static void test_exec_async_loop_runs_meanwhile(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        /* the plugin answers only after a loop timer has created its file: a blocked loop never gets there
         * (the plugin is killed at this deadline instead) */
        assert_int_equal(setenv("PLUGIN_WAIT_FOR", "go", 1), 0);
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = load_exec(DATA "/exec-v1.yaml");
        c->exec_timeout_usec = WAIT_USEC / 2;

        struct got g = { 0 };
        struct kube_token_wait *w = NULL;
        ask_waiting(c, l, &g, &w);
        assert_false(g.done);
        struct go go = { .t = &t, .waiting_done = &g.done };
        assert_int_equal(timer_start_in(l, 1000, create_go, &go, NULL), 0);
        assert_int_equal(loop_run_until(l, &g.done, WAIT_USEC), 0);
        assert_true(go.fired_while_waiting);
        assert_int_equal(g.error, 0);
        assert_string_equal(g.token, "hello-1");
        assert_string_equal(ask_ready(c, l), "hello-1");
        assert_int_equal(runs(&t), 1);
        got_clear(&g);
        unsetenv("PLUGIN_WAIT_FOR");
        tmpdir_remove(&t);
}

static void test_exec_async_one_run_serves_all(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_WAIT_FOR", "go", 1), 0);
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = load_exec(DATA "/exec-v1.yaml");

        struct got g[4] = { 0 };
        struct kube_token_wait *w[4] = { 0 };
        for (size_t i = 0; i < ARRAY_SIZE(g); i++)
                ask_waiting(c, l, &g[i], &w[i]);
        /* a cancelled wait is never called back; the others are */
        w[1] = kube_token_wait_cancel(w[1]);
        struct go go = { .t = &t, .waiting_done = &g[3].done };
        assert_int_equal(timer_start_in(l, 1000, create_go, &go, NULL), 0);
        assert_int_equal(loop_run_until(l, &g[3].done, WAIT_USEC), 0);
        for (size_t i = 0; i < ARRAY_SIZE(g); i++) {
                if (i == 1) {
                        assert_false(g[i].done);
                        continue;
                }
                assert_true(g[i].done);
                assert_int_equal(g[i].error, 0);
                assert_string_equal(g[i].token, "hello-1");
                got_clear(&g[i]);
        }
        assert_int_equal(runs(&t), 1);
        unsetenv("PLUGIN_WAIT_FOR");
        tmpdir_remove(&t);
}

static bool cached_is(void *arg)
{
        void **a = arg;
        const struct kube_config *c = a[0];
        return streq(c->cached_token, a[1]);
}

static void test_exec_async_expiry(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        char exp[64];
        rfc3339_from_now(-60, exp, sizeof(exp));
        plugin_env(&t, exp);
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = load_exec(DATA "/exec-v1beta1.yaml");

        /* an answer that is already expired serves the calls that waited for it ... */
        struct got g = { 0 };
        struct kube_token_wait *w = NULL;
        ask_waiting(c, l, &g, &w);
        assert_int_equal(loop_run_until(l, &g.done, WAIT_USEC), 0);
        assert_string_equal(g.token, "hello-1");
        got_clear(&g);

        /* ... but a later call waits for a fresh one rather than use it */
        rfc3339_from_now(18, exp, sizeof(exp));
        assert_int_equal(setenv("PLUGIN_EXPIRY", exp, 1), 0);
        ask_waiting(c, l, &g, &w);
        assert_int_equal(loop_run_until(l, &g.done, WAIT_USEC), 0);
        assert_int_equal(g.error, 0);
        assert_string_equal(g.token, "hello-2");
        got_clear(&g);
        assert_int_equal(runs(&t), 2);

        /* hello-2 has 8 s left (18 s less the 10 s skew), under the 10 s refresh margin: it is still handed
         * out while one background run renews it */
        rfc3339_from_now(3600, exp, sizeof(exp));
        assert_int_equal(setenv("PLUGIN_EXPIRY", exp, 1), 0);
        assert_string_equal(ask_ready(c, l), "hello-2");
        assert_string_equal(ask_ready(c, l), "hello-2");
        void *arg[2] = { c, "hello-3" };
        run_until(l, cached_is, arg);
        assert_string_equal(ask_ready(c, l), "hello-3");
        assert_int_equal(runs(&t), 3);
        tmpdir_remove(&t);
}

static bool process_gone(void *arg)
{
        return kill(*(pid_t *)arg, 0) < 0 && errno == ESRCH;
}

static void test_exec_async_timeout_kills(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_HANG", "1", 1), 0);
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = load_exec(DATA "/exec-v1.yaml");
        c->exec_timeout_usec = 1000000;
        c->exec_retry_base_usec = 3600ULL * 1000000ULL; /* no retry unless aged by hand */

        struct got g[2] = { 0 };
        struct kube_token_wait *w[2] = { 0 };
        ask_waiting(c, l, &g[0], &w[0]);
        ask_waiting(c, l, &g[1], &w[1]);
        assert_int_equal(loop_run_until(l, &g[1].done, WAIT_USEC), 0);
        for (size_t i = 0; i < 2; i++) {
                assert_true(g[i].done);
                assert_int_equal(g[i].error, -ETIMEDOUT);
                assert_null(g[i].token);
                if (!strstr(g[i].message, "exec-plugin.sh: timed out after 1.0 s"))
                        fail_msg("message: %s", g[i].message);
                got_clear(&g[i]);
        }
        /* the plugin ignores SIGTERM: SIGKILL after the grace ends it, and it is reaped */
        _cleanup_free_ char *pid_text = read_in(&t, "pid");
        pid_t pid = (pid_t)atoi(pid_text);
        assert_true(pid > 1);
        run_until(l, process_gone, &pid);

        /* the next call does not run it again at once, it fails with the same words */
        const char *tok = NULL;
        _cleanup_free_ char *err = NULL;
        struct kube_token_wait *w2 = NULL;
        assert_int_equal(kube_config_token_async(c, l, &tok, got_token, &g[0], &w2, &err), -ETIMEDOUT);
        assert_null(w2);
        assert_non_null(strstr(err, "timed out after 1.0 s"));
        assert_non_null(strstr(err, "tried again in"));
        assert_int_equal(runs(&t), 1);

        /* once the backoff has passed (aged by hand), a call runs it again */
        unsetenv("PLUGIN_HANG");
        c->exec_retry_after_usec = 0;
        ask_waiting(c, l, &g[0], &w2);
        assert_int_equal(loop_run_until(l, &g[0].done, WAIT_USEC), 0);
        assert_string_equal(g[0].token, "hello-2");
        got_clear(&g[0]);
        tmpdir_remove(&t);
}

static void test_exec_async_failure_words(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_EXIT", "3", 1), 0);
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = load_exec(DATA "/exec-v1.yaml");
        c->exec_retry_base_usec = 3600ULL * 1000000ULL;

        struct got g[2] = { 0 };
        struct kube_token_wait *w[2] = { 0 };
        ask_waiting(c, l, &g[0], &w[0]);
        ask_waiting(c, l, &g[1], &w[1]);
        assert_int_equal(loop_run_until(l, &g[1].done, WAIT_USEC), 0);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(g[i].error, -EIO);
                if (!strstr(g[i].message, "exec-plugin.sh: exited with status 3 (stderr: exec-plugin.sh: "
                                          "failing on purpose)"))
                        fail_msg("message: %s", g[i].message);
                got_clear(&g[i]);
        }
        const char *tok = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(kube_config_token_async(c, l, &tok, got_token, &g[0], &w[0], &err), -EIO);
        assert_non_null(strstr(err, "failing on purpose"));
        assert_int_equal(runs(&t), 1);
        unsetenv("PLUGIN_EXIT");
        tmpdir_remove(&t);
}

static void test_exec_output_cap(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        plugin_env(&t, NULL);
        assert_int_equal(setenv("PLUGIN_FLOOD", "100000", 1), 0);
        _cleanup_(loop_freep) struct loop *l = NULL;
        assert_int_equal(loop_new(&l), 0);
        _cleanup_(kube_config_freep) struct kube_config *c = load_exec(DATA "/exec-v1.yaml");
        c->exec_output_max = 4096;

        struct got g = { 0 };
        struct kube_token_wait *w = NULL;
        ask_waiting(c, l, &g, &w);
        assert_int_equal(loop_run_until(l, &g.done, WAIT_USEC), 0);
        assert_int_equal(g.error, -EFBIG);
        if (!strstr(g.message, "exec-plugin.sh: wrote more than 4096 bytes to stdout"))
                fail_msg("message: %s", g.message);
        got_clear(&g);
        /* the synchronous path has the same cap */
        const char *tok = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(kube_config_token(c, &tok, &err), -EFBIG);
        assert_non_null(strstr(err, "wrote more than 4096 bytes"));
        /* under the cap the same flood is only a bad answer */
        c->exec_output_max = 0;
        _cleanup_free_ char *err2 = NULL;
        assert_int_equal(kube_config_token(c, &tok, &err2), -EBADMSG);
        unsetenv("PLUGIN_FLOOD");
        tmpdir_remove(&t);
}

static void expect_load_error(const char *file, const char *context, const char *message)
{
        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        _cleanup_free_ char *err = NULL;
        assert_true(kube_config_load_file(file, context, &c, &err) < 0);
        assert_null(c);
        assert_non_null(err);
        if (!strstr(err, message))
                fail_msg("error '%s' lacks '%s'", err, message);
}

static void test_load_errors(void **state)
{
        expect_load_error(DATA "/malformed.yaml", NULL,
                          DATA "/malformed.yaml:12: users[0].user.exec.command: missing");
        expect_load_error(DATA "/basic.yaml", "x", DATA "/basic.yaml: context 'x' not found");
        expect_load_error(DATA "/basic.yaml", "missing-user",
                          DATA "/basic.yaml:44: contexts[3].context.user: user 'nobody' not found");
        expect_load_error(DATA "/insecure.yaml", NULL,
                          DATA
                          "/insecure.yaml:9: clusters[0].cluster.insecure-skip-tls-verify: TLS verification "
                          "cannot be disabled");
        expect_load_error(DATA "/bad-ca-data.yaml", NULL,
                          DATA
                          "/bad-ca-data.yaml:7: clusters[0].cluster.certificate-authority-data: not valid "
                          "base64");
        expect_load_error(
            DATA "/http.yaml", "remote",
            DATA "/http.yaml:8: clusters[1].cluster.server: 'http://api.example.com': plain http is "
                 "only allowed on loopback");
        expect_load_error(DATA "/nonexistent.yaml", NULL,
                          DATA "/nonexistent.yaml: No such file or directory");
}

static void test_incluster(void **state)
{
        struct tmpdir t;
        tmpdir_make(&t);
        write_in(&t, "token", "sa-token\n");
        write_in(&t, "ca.crt", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n");
        write_in(&t, "namespace", "kube-system");
        assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1), 0);
        assert_int_equal(setenv("KUBERNETES_SERVICE_PORT", "443", 1), 0);

        _cleanup_(kube_config_freep) struct kube_config *c = NULL;
        assert_int_equal(kube_config_load_incluster(t.path, &c, NULL), 0);
        assert_string_equal(c->source, "in-cluster");
        assert_string_equal(c->server, "https://10.96.0.1:443");
        assert_string_equal(c->namespace, "kube-system");
        _cleanup_free_ char *ca = strprintf("%s/ca.crt", t.path);
        assert_string_equal(c->ca_file, ca);
        const char *tok = NULL;
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "sa-token");
        /* the kubelet rotates the projected token: seen after a 401 */
        write_in(&t, "token", "sa-token-2");
        kube_config_invalidate(c);
        assert_int_equal(kube_config_token(c, &tok, NULL), 0);
        assert_string_equal(tok, "sa-token-2");

        assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1), 0);
        _cleanup_(kube_config_freep) struct kube_config *c6 = NULL;
        assert_int_equal(kube_config_load_incluster(t.path, &c6, NULL), 0);
        assert_string_equal(c6->server, "https://[fd00:10:96::1]:443");

        unsetenv("KUBERNETES_SERVICE_HOST");
        _cleanup_(kube_config_freep) struct kube_config *none = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(kube_config_load_incluster(t.path, &none, &err), -ENXIO);
        assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
        unsetenv("KUBERNETES_SERVICE_PORT");
        tmpdir_remove(&t);
}

static void test_load_auto(void **state)
{
        _cleanup_(kube_config_freep) struct kube_config *a = NULL;
        assert_int_equal(setenv("KUBECONFIG", DATA "/files.yaml:" DATA "/basic.yaml", 1), 0);
        assert_int_equal(kube_config_load_auto(DATA "/basic.yaml", NULL, &a, NULL), 0);
        assert_string_equal(a->source, DATA "/basic.yaml");
        _cleanup_(kube_config_freep) struct kube_config *b = NULL;
        assert_int_equal(kube_config_load_auto(NULL, NULL, &b, NULL), 0);
        assert_string_equal(b->source, DATA "/files.yaml");
        unsetenv("KUBECONFIG");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ca_data_and_token),
                cmocka_unit_test(test_client_cert_data_and_basic),
                cmocka_unit_test(test_files_relative_to_kubeconfig),
                cmocka_unit_test(test_http_loopback),
                cmocka_unit_test(test_token_file_reread),
                cmocka_unit_test(test_exec_v1_cached_until_invalidate),
                cmocka_unit_test(test_exec_v1beta1_expired_reruns),
                cmocka_unit_test(test_exec_client_cert),
                cmocka_unit_test(test_exec_failures),
                cmocka_unit_test(test_exec_async_loop_runs_meanwhile),
                cmocka_unit_test(test_exec_async_one_run_serves_all),
                cmocka_unit_test(test_exec_async_expiry),
                cmocka_unit_test(test_exec_async_timeout_kills),
                cmocka_unit_test(test_exec_async_failure_words),
                cmocka_unit_test(test_exec_output_cap),
                cmocka_unit_test(test_load_errors),
                cmocka_unit_test(test_incluster),
                cmocka_unit_test(test_load_auto),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
