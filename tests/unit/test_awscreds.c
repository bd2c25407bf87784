/* The credential chain: source order, each provider against in-process endpoints (the simulator's STS
 * surface, a fake container endpoint and a fake IMDS), refresh before expiry on a scaled engine clock,
 * backoff after failures, readable errors, no secret in the log, the STS/JSON parsers on the fixtures
 * (../shared/fixtures or $SPOTDRAIN_FIXTURES), and the region helpers. */
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/sigv4_check.h"
#include "sim/sts_surface.h"
#include "spotdrain/awscreds.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/core.h"
#include "spotdrain/imds.h"
#include "spotdrain/sigv4.h"

#define WAIT_LIMIT (10ULL * 1000000ULL)

static char *fixture(const char *rel, size_t *len)
{
        const char *base = getenv("SPOTDRAIN_FIXTURES") ?: "../shared/fixtures";
        _cleanup_free_ char *path = strprintf("%s/%s", base, rel);
        char *s = NULL;
        size_t n;

        assert_non_null(path);
        assert_int_equal(read_file_full(path, 1 << 20, &s, &n), 0);
        if (len)
                *len = n;
        return s;
}

/* A JWT shaped like a projected ServiceAccount token, expiring exp_offset seconds from now. */
static char *make_jwt(long exp_offset)
{
        _cleanup_free_ char *h = NULL, *c = NULL, *claims = NULL;
        claims =
            strprintf("{\"aud\":[\"sts.amazonaws.com\"],\"exp\":%lld,\"iss\":\"https://oidc.example/id/X\","
                      "\"sub\":\"system:serviceaccount:kube-system:spotdrain\"}",
                      (long long)(now_realtime_usec() / 1000000) + exp_offset);
        h = base64_encode((const unsigned char *)"{\"alg\":\"RS256\"}", 15);
        c = base64_encode((const unsigned char *)claims, strlen(claims));
        assert_non_null(h);
        assert_non_null(c);
        /* base64url, unpadded */
        for (char *s = c; *s; s++)
                *s = *s == '+' ? '-' : *s == '/' ? '_' : *s;
        for (char *s = h; *s; s++)
                *s = *s == '+' ? '-' : *s == '/' ? '_' : *s;
        c[strcspn(c, "=")] = '\0';
        h[strcspn(h, "=")] = '\0';
        return strprintf("%s.%s.c2lnbmF0dXJl", h, c);
}

static char *write_tmp(const char *content)
{
        char path[] = "/tmp/spotdrain-awscreds-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        close(fd);
        return strdup(path);
}

/* ---- a fake HTTP endpoint (container credentials and IMDS) ---- */

struct fake {
        struct MHD_Daemon *d;
        char url[64];
        pthread_mutex_t lock;
        char last_auth[256];
        unsigned requests;
        char *creds_json;
};

static enum MHD_Result fake_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                    const char *version, const char *upload, size_t *upload_size, void **con)
{
        struct fake *f = cls;
        const char *body = NULL;
        unsigned status = 200;
        struct MHD_Response *resp;
        enum MHD_Result ret;

        if (!*con) {
                *con = f;
                return MHD_YES;
        }
        *upload_size = 0;
        pthread_mutex_lock(&f->lock);
        f->requests++;
        const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        snprintf(f->last_auth, sizeof(f->last_auth), "%s", auth ? auth : "");
        if (streq(method, "PUT") && streq(url, "/latest/api/token"))
                body = "fake-imds-token";
        else if (streq(url, "/latest/meta-data/iam/security-credentials/"))
                body = "node-role\n";
        else if (streq(url, "/latest/meta-data/iam/security-credentials/node-role") ||
                 streq(url, "/v1/credentials"))
                body = f->creds_json;
        else if (streq(url, "/latest/meta-data/placement/region"))
                body = "eu-west-3";
        else {
                status = 404;
                body = "not found";
        }
        resp = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        pthread_mutex_unlock(&f->lock);
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static void fake_start(struct fake *f, const char *akid, const char *secret, const char *token)
{
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        char exp[40];

        *f = (struct fake){ 0 };
        pthread_mutex_init(&f->lock, NULL);
        format_rfc3339(now_realtime_usec() + 6 * 3600 * 1000000ULL, exp, sizeof(exp));
        f->creds_json = strprintf("{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"%s\","
                                  "\"SecretAccessKey\":\"%s\",\"Token\":\"%s\",\"Expiration\":\"%s\"}",
                                  akid, secret, token, exp);
        f->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
                                NULL, fake_handler, f, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_END);
        assert_non_null(f->d);
        snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u",
                 MHD_get_daemon_info(f->d, MHD_DAEMON_INFO_BIND_PORT)->port);
}

static void fake_stop(struct fake *f)
{
        MHD_stop_daemon(f->d);
        free(f->creds_json);
        pthread_mutex_destroy(&f->lock);
}

/* ---- getting credentials synchronously for the tests ---- */

struct got {
        bool done;
        int error;
        struct aws_credentials c;
        char *message;
};

static void got_cb(int error, const struct aws_credentials *c, const char *message, void *userdata)
{
        struct got *g = userdata;
        g->done = true;
        g->error = error;
        if (c)
                assert_int_equal(aws_credentials_copy(&g->c, c), 0);
        if (message)
                g->message = strdup(message);
}

static void got_clear(struct got *g)
{
        aws_credentials_clear(&g->c);
        free(g->message);
        *g = (struct got){ 0 };
}

static void get_sync(struct loop *l, struct aws_creds_provider *p, struct got *g)
{
        *g = (struct got){ 0 };
        assert_int_equal(aws_creds_get(p, got_cb, g), 0);
        /* never answered from inside aws_creds_get */
        assert_false(g->done);
        assert_int_equal(loop_run_until(l, &g->done, WAIT_LIMIT), 0);
}

static int new_provider(struct loop *l, const char *const *env, struct aws_creds_provider **ret)
{
        struct aws_creds_options o = { .env = env, .backoff_base_usec = 3600ULL * 1000000ULL };
        return aws_creds_provider_new(l, &o, ret);
}

/* ---- tests ---- */

static void test_chain_order(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        static const struct {
                const char *env[8];
                const char *source;
        } cases[] = {
                { { "AWS_ACCESS_KEY_ID=AKIDX", "AWS_SECRET_ACCESS_KEY=s",
                    "AWS_ROLE_ARN=arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE=/t",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1/", NULL },
                  "env" },
                { { "AWS_ROLE_ARN=arn:aws:iam::1:role/r", "AWS_WEB_IDENTITY_TOKEN_FILE=/t",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1/", NULL },
                  "web-identity" },
                { { "AWS_CONTAINER_CREDENTIALS_FULL_URI=http://127.0.0.1/v1/credentials",
                    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/creds", NULL },
                  "pod-identity" },
                { { "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/creds", NULL }, "ecs" },
                { { "AWS_ACCESS_KEY_ID=", "HOME=/root", NULL }, "imds" },
        };

        assert_int_equal(loop_new(&l), 0);
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
                assert_int_equal(new_provider(l, cases[i].env, &p), 0);
                assert_string_equal(aws_creds_provider_source(p), cases[i].source);
        }
        /* Incomplete configurations are errors, not a reason to fall through. */
        static const char *const half_env[] = { "AWS_ACCESS_KEY_ID=AKIDX", NULL };
        static const char *const half_irsa[] = { "AWS_ROLE_ARN=arn:aws:iam::1:role/r", NULL };
        struct aws_creds_provider *p = NULL;
        assert_int_equal(new_provider(l, half_env, &p), -EINVAL);
        assert_int_equal(new_provider(l, half_irsa, &p), -EINVAL);
        assert_null(p);
}

static void test_env(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        static const char *const env[] = { "AWS_ACCESS_KEY_ID=AKIDENV", "AWS_SECRET_ACCESS_KEY=envsecret",
                                           "AWS_SESSION_TOKEN=envtoken", NULL };
        struct got g;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(new_provider(l, env, &p), 0);
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        assert_string_equal(g.c.access_key_id, "AKIDENV");
        assert_string_equal(g.c.secret_access_key, "envsecret");
        assert_string_equal(g.c.session_token, "envtoken");
        assert_string_equal(g.c.source, "env");
        assert_int_equal(g.c.expiration_usec, 0);
        got_clear(&g);
}

struct irsa {
        struct sim_sts *sts;
        char *token_file, *token, *endpoint_env, *token_env;
        const char *env[6];
};

static void irsa_setup(struct irsa *s, const char *token)
{
        *s = (struct irsa){ 0 };
        assert_int_equal(sim_sts_start(NULL, NULL, &s->sts), 0);
        s->token = strdup(token);
        s->token_file = write_tmp(token);
        s->endpoint_env = strprintf("AWS_ENDPOINT_URL_STS=%s", sim_sts_url(s->sts));
        s->token_env = strprintf("AWS_WEB_IDENTITY_TOKEN_FILE=%s", s->token_file);
        s->env[0] = "AWS_ROLE_ARN=arn:aws:iam::123456789012:role/spotguard-irsa";
        s->env[1] = s->token_env;
        s->env[2] = s->endpoint_env;
        s->env[3] = "AWS_ROLE_SESSION_NAME=unit-test";
        s->env[4] = "AWS_REGION=us-east-1";
}

static void irsa_teardown(struct irsa *s)
{
        sim_sts_stop(s->sts);
        unlink(s->token_file);
        free(s->token_file);
        free(s->token);
        free(s->endpoint_env);
        free(s->token_env);
}

static void test_web_identity(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        _cleanup_free_ char *jwt = make_jwt(3600), *why = NULL;
        struct sim_sts_stats st;
        struct irsa s;
        struct got g;
        char **signed_headers = NULL;

        irsa_setup(&s, jwt);
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(new_provider(l, s.env, &p), 0);
        assert_string_equal(aws_creds_provider_source(p), "web-identity");
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        assert_true(startswith(g.c.access_key_id, "ASIA"));
        assert_non_null(g.c.session_token);
        assert_string_equal(g.c.source, "web-identity");
        assert_true(g.c.expiration_usec > now_realtime_usec() + 3000ULL * 1000000ULL);
        /* The call went out unsigned, and the STS accepted the token it carried. */
        sim_sts_stats(s.sts, &st);
        assert_int_equal(st.requests, 1);
        assert_int_equal(st.signed_requests, 0);
        assert_int_equal(st.issued, 1);

        /* Cached: a second get makes no request. */
        got_clear(&g);
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        sim_sts_stats(s.sts, &st);
        assert_int_equal(st.requests, 1);

        /* The simulated AWS surfaces accept signatures made with them. */
        struct sigv4_request r = { .method = "POST",
                                   .url = "http://127.0.0.1:9/",
                                   .body = "{}",
                                   .body_len = 2,
                                   .region = "us-east-1",
                                   .service = "sqs",
                                   .time_usec = now_realtime_usec() };
        assert_int_equal(sigv4_sign_headers(&r, &g.c, &signed_headers), 0);
        r.headers = (const char *const *)signed_headers;
        struct sim_sigv4_request sr = { .method = r.method,
                                        .target = r.url,
                                        .headers = r.headers,
                                        .body = r.body,
                                        .body_len = r.body_len,
                                        .region = r.region,
                                        .service = r.service,
                                        .now_usec = r.time_usec };
        assert_int_equal(sim_sigv4_check(&sr, sim_sts_secret_lookup, s.sts, NULL, &why), 0);
        assert_true(sim_sts_session_token_valid(s.sts, g.c.access_key_id, g.c.session_token));
        assert_false(sim_sts_session_token_valid(s.sts, g.c.access_key_id, "forged"));
        assert_null(sim_sts_secret_lookup("ASIANOTISSUED0000000", s.sts));
        sigv4_strv_free(signed_headers);
        got_clear(&g);
        irsa_teardown(&s);
}

static void test_web_identity_errors(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct sim_sts_stats st;
        struct irsa s;
        struct got g;

        assert_int_equal(loop_new(&l), 0);

        /* A garbage token: STS's answer, readable. */
        irsa_setup(&s, "garbage-token\n");
        {
                _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
                assert_int_equal(new_provider(l, s.env, &p), 0);
                get_sync(l, p, &g);
                assert_int_equal(g.error, -EINVAL);
                assert_non_null(
                    strstr(g.message, "InvalidIdentityToken: Couldn't parse web identity token."));
                assert_non_null(strstr(g.message, "sts:AssumeRoleWithWebIdentity"));
                got_clear(&g);
        }
        irsa_teardown(&s);

        /* An expired token. */
        _cleanup_free_ char *old = make_jwt(-60);
        irsa_setup(&s, old);
        {
                _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
                assert_int_equal(new_provider(l, s.env, &p), 0);
                get_sync(l, p, &g);
                assert_true(g.error < 0);
                assert_non_null(strstr(g.message, "ExpiredTokenException: Token expired"));
                got_clear(&g);
        }
        irsa_teardown(&s);

        /* A 500: an error, then backoff: asking again at once sends nothing. */
        _cleanup_free_ char *jwt = make_jwt(3600);
        irsa_setup(&s, jwt);
        assert_int_equal(sim_sts_set_fault(s.sts, &(struct sim_sts_fault){ .error_500 = 1 }), 0);
        {
                _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
                struct aws_creds_stats cs;
                assert_int_equal(new_provider(l, s.env, &p), 0);
                get_sync(l, p, &g);
                assert_int_equal(g.error, -EIO);
                assert_non_null(strstr(g.message, "InternalFailure"));
                got_clear(&g);
                get_sync(l, p, &g);
                assert_int_equal(g.error, -EIO);
                sim_sts_stats(s.sts, &st);
                assert_int_equal(st.requests, 1);
                aws_creds_provider_stats(p, &cs);
                assert_int_equal(cs.failures, 1);
                assert_int_equal(cs.fetches, 0);
                got_clear(&g);
        }
        irsa_teardown(&s);

        /* A missing token file. */
        static const char *const env[] = { "AWS_ROLE_ARN=arn:aws:iam::1:role/r",
                                           "AWS_WEB_IDENTITY_TOKEN_FILE=/nonexistent/token",
                                           "AWS_ENDPOINT_URL_STS=http://127.0.0.1:9", NULL };
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        assert_int_equal(new_provider(l, env, &p), 0);
        get_sync(l, p, &g);
        assert_int_equal(g.error, -ENOENT);
        assert_non_null(strstr(g.message, "/nonexistent/token"));
        got_clear(&g);
}

static void sts_call(struct loop *l, const char *method, const char *url, const char *body,
                     const char *extra_header, struct http_response *resp)
{
        const char *headers[] = { "Content-Type: application/x-www-form-urlencoded", extra_header, NULL };
        struct http_request req = { .method = method, .url = url, .headers = headers, .body = body };
        *resp = (struct http_response){ 0 };
        assert_int_equal(http_send_sync(l, &req, resp), 0);
}

static void assert_sts_error(const struct http_response *resp, long status, const char *code)
{
        struct aws_error e = { 0 };
        assert_int_equal(resp->status, status);
        assert_int_equal(aws_error_parse(resp->body, resp->body_len, &e), 0);
        assert_string_equal(e.code, code);
        assert_string_equal(e.type, status >= 500 ? "Receiver" : "Sender");
        assert_non_null(e.request_id);
        aws_error_clear(&e);
}

static void test_sts_surface(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *jwt = make_jwt(3600), *get_url = NULL, *ok_body = NULL, *msg = NULL;
        struct sim_sts *t = NULL;
        struct http_response resp;
        struct aws_credentials c = { 0 };
        struct sim_sts_stats st;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(sim_sts_start(NULL, NULL, &t), 0);
        assert_true(startswith(sim_sts_url(t), "http://127.0.0.1:"));
        assert_int_equal(aws_sts_web_identity_body("arn:aws:iam::123456789012:role/r", "s-1", jwt, &ok_body),
                         0);

        /* GET with the parameters in the query, answered like the form POST */
        get_url = strprintf("%s/?%s&DurationSeconds=900", sim_sts_url(t), ok_body);
        sts_call(l, "GET", get_url, NULL, NULL, &resp);
        assert_int_equal(resp.status, 200);
        assert_non_null(strstr(resp.content_type, "xml"));
        assert_int_equal(aws_sts_parse_web_identity(resp.status, resp.body, resp.body_len, &c, &msg), 0);
        assert_true(c.expiration_usec > now_realtime_usec() + 850ULL * 1000000ULL);
        assert_true(c.expiration_usec <= now_realtime_usec() + 900ULL * 1000000ULL);
        assert_string_equal(sim_sts_secret_lookup(c.access_key_id, t), c.secret_access_key);
        assert_string_equal(sim_sts_secret_lookup(SIM_STS_ACCESS_KEY_ID, t), SIM_STS_SECRET_ACCESS_KEY);
        aws_credentials_clear(&c);
        http_response_clear(&resp);

        sts_call(l, "POST", sim_sts_url(t), "Action=GetCallerIdentity&Version=2011-06-15", NULL, &resp);
        assert_sts_error(&resp, 400, "InvalidAction");
        http_response_clear(&resp);
        sts_call(l, "POST", sim_sts_url(t),
                 "Action=AssumeRoleWithWebIdentity&RoleSessionName=s1&WebIdentityToken=x", NULL, &resp);
        assert_sts_error(&resp, 400, "MissingParameter");
        http_response_clear(&resp);
        _cleanup_free_ char *short_duration = strprintf("%s&DurationSeconds=60", ok_body);
        sts_call(l, "POST", sim_sts_url(t), short_duration, NULL, &resp);
        assert_sts_error(&resp, 400, "ValidationError");
        http_response_clear(&resp);
        sts_call(l, "POST", sim_sts_url(t),
                 "Action=AssumeRoleWithWebIdentity&RoleArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr"
                 "&RoleSessionName=s1&WebIdentityToken=",
                 NULL, &resp);
        assert_sts_error(&resp, 400, "InvalidIdentityToken");
        http_response_clear(&resp);

        /* A signed call is answered too, and counted. */
        sts_call(l, "POST", sim_sts_url(t), ok_body, "Authorization: AWS4-HMAC-SHA256 Credential=x", &resp);
        assert_int_equal(resp.status, 200);
        http_response_clear(&resp);

        assert_int_equal(sim_sts_set_fault(t, &(struct sim_sts_fault){ .access_denied = true }), 0);
        sts_call(l, "POST", sim_sts_url(t), ok_body, NULL, &resp);
        assert_sts_error(&resp, 403, "AccessDenied");
        http_response_clear(&resp);

        sim_sts_stats(t, &st);
        assert_int_equal(st.requests, 7);
        assert_int_equal(st.issued, 2);
        assert_int_equal(st.signed_requests, 1);
        assert_int_equal(st.errors, 5);
        sim_sts_stop(t);
}

struct refresh_watch {
        unsigned n;
        bool done;
        char akid[2][32];
};

static void on_refresh(const struct aws_credentials *c, void *userdata)
{
        struct refresh_watch *w = userdata;
        if (w->n < 2)
                snprintf(w->akid[w->n], sizeof(w->akid[0]), "%s", c->access_key_id);
        if (++w->n >= 2)
                w->done = true;
}

static void test_refresh_before_expiry(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        _cleanup_free_ char *jwt = make_jwt(3600);
        struct refresh_watch w = { 0 };
        struct sim_sts_stats st;
        struct irsa s;
        struct got g;

        irsa_setup(&s, jwt);
        /* 15-minute credentials: the provider renews them 5 minutes before they expire. */
        assert_int_equal(sim_sts_set_fault(s.sts, &(struct sim_sts_fault){ .duration_cap = 900 }), 0);
        assert_int_equal(loop_new(&l), 0);
        struct aws_creds_options o = { .env = s.env, .on_refresh = on_refresh, .userdata = &w };
        assert_int_equal(aws_creds_provider_new(l, &o, &p), 0);
        /* The engine clock runs 1000 times faster (timers keep the scale they were armed with, so first):
         * the 10 minutes to the refresh pass in 0.6 s. The clock stays ahead afterwards: this test runs
         * last. */
        clk_set_scale(1000);
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        got_clear(&g);
        assert_int_equal(w.n, 1);
        assert_int_equal(loop_run_until(l, &w.done, WAIT_LIMIT), 0);
        clk_set_scale(1);
        assert_int_equal(w.n, 2);
        assert_string_not_equal(w.akid[0], w.akid[1]);
        sim_sts_stats(s.sts, &st);
        assert_int_equal(st.issued, 2);

        /* Renewed credentials are the ones handed out (a third renewal may have happened meanwhile). */
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        assert_string_not_equal(g.c.access_key_id, w.akid[0]);
        got_clear(&g);
        irsa_teardown(&s);
}

static void test_pod_identity(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        _cleanup_free_ char *tokfile = write_tmp("eks-pod-identity-token-value\n"), *url_env = NULL,
                            *file_env = NULL;
        struct fake f;
        struct got g;

        fake_start(&f, "ASIAPODID", "podsecret", "podtoken");
        url_env = strprintf("AWS_CONTAINER_CREDENTIALS_FULL_URI=%s/v1/credentials", f.url);
        file_env = strprintf("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=%s", tokfile);
        const char *env[] = { url_env, file_env, "AWS_CONTAINER_AUTHORIZATION_TOKEN=ignored", NULL };
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(new_provider(l, env, &p), 0);
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        assert_string_equal(g.c.access_key_id, "ASIAPODID");
        assert_string_equal(g.c.secret_access_key, "podsecret");
        assert_string_equal(g.c.session_token, "podtoken");
        assert_string_equal(g.c.source, "pod-identity");
        /* The token file's content, verbatim (no "Bearer"), wins over AWS_CONTAINER_AUTHORIZATION_TOKEN. */
        assert_string_equal(f.last_auth, "eks-pod-identity-token-value");
        got_clear(&g);
        fake_stop(&f);
        unlink(tokfile);
}

static void test_imds_role(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        struct fake f;
        struct got g;

        fake_start(&f, "ASIAIMDS", "imdssecret", "imdstoken");
        assert_int_equal(loop_new(&l), 0);
        static const char *const env[] = { NULL };
        struct aws_creds_options o = { .env = env, .imds_endpoint = f.url };
        assert_int_equal(aws_creds_provider_new(l, &o, &p), 0);
        assert_string_equal(aws_creds_provider_source(p), "imds");
        get_sync(l, p, &g);
        assert_int_equal(g.error, 0);
        assert_string_equal(g.c.access_key_id, "ASIAIMDS");
        assert_string_equal(g.c.session_token, "imdstoken");
        assert_string_equal(g.c.source, "imds");
        /* token PUT, role list, role credentials */
        assert_int_equal(f.requests, 3);
        got_clear(&g);
        fake_stop(&f);
}

/* No source has credentials (an empty environment, an IMDS that does not answer): the error names every
 * source tried and how to give one. */
static void test_none_found(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        struct got g;

        assert_int_equal(loop_new(&l), 0);
        static const char *const env[] = { NULL };
        struct aws_creds_options o = { .env = env,
                                       .imds_endpoint = "http://127.0.0.1:1",
                                       .backoff_base_usec = 3600ULL * 1000000ULL };
        assert_int_equal(aws_creds_provider_new(l, &o, &p), 0);
        get_sync(l, p, &g);
        assert_true(g.error < 0);
        assert_non_null(g.message);
        assert_true(startswith(g.message, "no AWS credentials: none in the environment"));
        static const char *const named[] = { "AWS_ACCESS_KEY_ID",
                                             "AWS_ROLE_ARN",
                                             "EKS Pod Identity",
                                             "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                             "IMDS",
                                             "give spotdrain an IAM role" };
        for (size_t i = 0; i < sizeof(named) / sizeof(*named); i++)
                assert_non_null(strstr(g.message, named[i]));
        got_clear(&g);
}

static void test_no_secret_in_log(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *jwt = make_jwt(3600), *logbuf = NULL;
        size_t loglen = 0;
        FILE *logf = open_memstream(&logbuf, &loglen);
        struct irsa s;
        struct got g;
        char secrets[2][128] = { 0 };

        assert_non_null(logf);
        log_setup(LOG_FORMAT_TEXT, LOG_DEBUG);
        log_set_output(logf);
        assert_int_equal(loop_new(&l), 0);
        irsa_setup(&s, jwt);
        {
                _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
                assert_int_equal(new_provider(l, s.env, &p), 0);
                get_sync(l, p, &g);
                assert_int_equal(g.error, 0);
                snprintf(secrets[0], sizeof(secrets[0]), "%s", g.c.secret_access_key);
                snprintf(secrets[1], sizeof(secrets[1]), "%s", g.c.session_token);
                got_clear(&g);
        }
        /* and a failure, whose message is logged at debug */
        assert_int_equal(sim_sts_set_fault(s.sts, &(struct sim_sts_fault){ .error_500 = 1 }), 0);
        {
                _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
                assert_int_equal(new_provider(l, s.env, &p), 0);
                get_sync(l, p, &g);
                assert_true(g.error < 0);
                got_clear(&g);
        }
        log_set_output(NULL);
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        fclose(logf);
        assert_non_null(strstr(logbuf, "AWS credentials from web-identity"));
        assert_non_null(strstr(logbuf, "InternalFailure"));
        assert_null(strstr(logbuf, secrets[0]));
        assert_null(strstr(logbuf, secrets[1]));
        assert_null(strstr(logbuf, s.token));
        irsa_teardown(&s);
}

static void test_sts_request_body(void **state)
{
        _cleanup_free_ char *expected = fixture("sts/assume-role-with-web-identity.request.form.txt", NULL);
        _cleanup_free_ char *params = fixture("sts/assume-role-with-web-identity.request.params.txt", NULL);
        _cleanup_free_ char *body = NULL;
        const char *tok = strstr(params, "WebIdentityToken=") + strlen("WebIdentityToken=");
        _cleanup_free_ char *token = strndup(tok, strcspn(tok, "\n"));

        /* botocore's body, without the DurationSeconds it sends explicitly (STS's default is the same 3600).
         */
        char *d = strstr(expected, "&DurationSeconds=3600");
        assert_non_null(d);
        *d = '\0';
        assert_int_equal(aws_sts_web_identity_body("arn:aws:iam::123456789012:role/spotguard-irsa",
                                                   "botocore-session-1715682113", token, &body),
                         0);
        assert_string_equal(body, expected);
}

static void test_sts_endpoint(void **state)
{
        static const struct {
                const char *env[4];
                const char *url;
        } cases[] = {
                { { "AWS_ENDPOINT_URL_STS=http://127.0.0.1:5000//", "AWS_ENDPOINT_URL=http://other",
                    "AWS_REGION=eu-west-1", NULL },
                  "http://127.0.0.1:5000/" },
                { { "AWS_ENDPOINT_URL=https://vpce.example", "AWS_REGION=eu-west-1", NULL },
                  "https://vpce.example/" },
                { { "AWS_DEFAULT_REGION=eu-west-1", NULL }, "https://sts.eu-west-1.amazonaws.com/" },
                { { "AWS_REGION=cn-north-1", NULL }, "https://sts.cn-north-1.amazonaws.com.cn/" },
                { { NULL }, "https://sts.amazonaws.com/" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *url = NULL;
                assert_int_equal(aws_sts_endpoint(cases[i].env, &url), 0);
                assert_string_equal(url, cases[i].url);
        }
}

static void test_sts_parse(void **state)
{
        size_t len;
        _cleanup_free_ char *ok = fixture("sts/assume-role-with-web-identity.response.xml", &len);
        struct aws_credentials c = { 0 };
        char *msg = NULL;
        uint64_t exp;

        assert_int_equal(aws_sts_parse_web_identity(200, ok, len, &c, &msg), 0);
        assert_string_equal(c.access_key_id, "ASIAEXAMPLEIRSA12345");
        assert_string_equal(c.secret_access_key, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY");
        assert_true(startswith(c.session_token, "IQoJb3JpZ2luX2VjEXAMPLEIRSA"));
        assert_int_equal(parse_rfc3339("2024-05-14T11:21:53Z", &exp), 0);
        assert_int_equal(c.expiration_usec, exp);
        aws_credentials_clear(&c);
        assert_null(c.secret_access_key);

        static const struct {
                const char *file;
                long status;
                int error;
                const char *message;
        } errs[] = {
                { "sts/error-invalid-identity-token.response.xml", 400, -EINVAL,
                  "InvalidIdentityToken: No OpenID" },
                { "sts/error-expired-token.response.xml", 400, -EINVAL,
                  "ExpiredTokenException: Token expired" },
                { "sts/error-access-denied.response.xml", 403, -EPERM, "AccessDenied: Not authorized" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(errs); i++) {
                _cleanup_free_ char *xml = fixture(errs[i].file, &len);
                assert_int_equal(aws_sts_parse_web_identity(errs[i].status, xml, len, &c, &msg),
                                 errs[i].error);
                assert_true(startswith(msg, errs[i].message));
                free(msg);
                msg = NULL;
        }
        assert_int_equal(aws_sts_parse_web_identity(200, "<x/>", 4, &c, &msg), -EBADMSG);
        free(msg);
        msg = NULL;
        assert_int_equal(aws_sts_parse_web_identity(502, "gateway", 7, &c, &msg), -EIO);
        assert_non_null(strstr(msg, "502"));
        free(msg);
}

static void test_json_parse(void **state)
{
        static const struct {
                const char *file, *akid, *token_start;
        } cases[] = {
                { "sts/eks-pod-identity.response.json", "ASIAEXAMPLEPODID1234",
                  "IQoJb3JpZ2luX2VjEXAMPLEPODID" },
                { "sts/ecs-container-credentials.response.json", "ASIAEXAMPLEECSTASK12",
                  "IQoJb3JpZ2luX2VjEXAMPLEECS" },
                { "sts/imds-role-credentials.json", "ASIAIOSFODNN7EXAMPLE", "IQoJb3JpZ2luX2VjEXAMPLETOKEN" },
        };
        struct aws_credentials c = { 0 };
        char *msg = NULL;

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *json = fixture(cases[i].file, NULL);
                assert_int_equal(aws_creds_parse_json(json, "x", &c, &msg), 0);
                assert_string_equal(c.access_key_id, cases[i].akid);
                assert_true(startswith(c.session_token, cases[i].token_start));
                assert_true(c.expiration_usec > 0);
                aws_credentials_clear(&c);
        }
        assert_int_equal(
            aws_creds_parse_json("{\"Code\":\"Failure\",\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"B\"}",
                                 "imds", &c, &msg),
            -EIO);
        free(msg);
        msg = NULL;
        assert_int_equal(aws_creds_parse_json("[1]", "imds", &c, &msg), -EBADMSG);
        free(msg);
        msg = NULL;
        assert_int_equal(aws_creds_parse_json("{\"AccessKeyId\":\"A\"}", "imds", &c, &msg), -EBADMSG);
        free(msg);
}

struct region_got {
        bool done;
        int error;
        char *region;
};

static void region_cb(int error, const char *region, void *userdata)
{
        struct region_got *g = userdata;
        g->done = true;
        g->error = error;
        g->region = region ? strdup(region) : NULL;
}

static void test_region(void **state)
{
        static const char *const both[] = { "AWS_DEFAULT_REGION=eu-west-1", "AWS_REGION=us-west-2", NULL };
        static const char *const def[] = { "AWS_DEFAULT_REGION=eu-west-1", NULL };
        static const char *const none[] = { "AWS_REGION=", NULL };
        static const struct {
                const char *url, *region;
        } urls[] = {
                { "https://sqs.us-east-1.amazonaws.com/123456789012/q", "us-east-1" },
                { "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q", "cn-north-1" },
                { "https://ap-southeast-2.queue.amazonaws.com/123456789012/q", "ap-southeast-2" },
                { "sqs.eu-central-1.amazonaws.com/123456789012/q", "eu-central-1" },
                { "http://127.0.0.1:4566/123456789012/q", NULL },
                { "https://sqs.amazonaws.com/123456789012/q", NULL },
                { "https://evil.com/sqs.us-east-1.amazonaws.com/q", NULL },
        };
        char *r = NULL;

        assert_int_equal(aws_region_from_env(both, &r), 0);
        assert_string_equal(r, "us-west-2");
        free(r);
        assert_int_equal(aws_region_from_env(def, &r), 0);
        assert_string_equal(r, "eu-west-1");
        free(r);
        r = NULL;
        assert_int_equal(aws_region_from_env(none, &r), -ENOENT);
        for (size_t i = 0; i < ARRAY_SIZE(urls); i++) {
                r = NULL;
                int k = aws_region_from_queue_url(urls[i].url, &r);
                if (urls[i].region) {
                        assert_int_equal(k, 0);
                        assert_string_equal(r, urls[i].region);
                } else
                        assert_int_equal(k, -EINVAL);
                free(r);
        }

        /* IMDS placement/region */
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct region_got got = { 0 };
        struct imds_client *c = NULL;
        struct fake f;
        fake_start(&f, "A", "B", "C");
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(imds_client_new(l, &(struct imds_options){ .endpoint = f.url }, &c), 0);
        assert_int_equal(aws_region_from_imds(c, region_cb, &got), 0);
        assert_int_equal(loop_run_until(l, &got.done, WAIT_LIMIT), 0);
        assert_int_equal(got.error, 0);
        assert_string_equal(got.region, "eu-west-3");
        free(got.region);
        imds_client_free(c);
        fake_stop(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_chain_order),
                cmocka_unit_test(test_env),
                cmocka_unit_test(test_web_identity),
                cmocka_unit_test(test_web_identity_errors),
                cmocka_unit_test(test_pod_identity),
                cmocka_unit_test(test_imds_role),
                cmocka_unit_test(test_none_found),
                cmocka_unit_test(test_no_secret_in_log),
                cmocka_unit_test(test_sts_request_body),
                cmocka_unit_test(test_sts_surface),
                cmocka_unit_test(test_sts_endpoint),
                cmocka_unit_test(test_sts_parse),
                cmocka_unit_test(test_json_parse),
                cmocka_unit_test(test_region),
                cmocka_unit_test(test_refresh_before_expiry), /* last: leaves the engine clock ahead */
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
