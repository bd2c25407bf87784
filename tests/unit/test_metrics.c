/* The metrics registry and its Prometheus encoding, the /metrics /healthz /readyz endpoint fetched over
 * HTTP and through plain sockets (malformed, split, oversized and stalled requests), readiness aggregation,
 * the loop watch, the error budget, and the sd_notify helpers. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <systemd/sd-event.h>

#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/metrics.h"
#include "spotdrain/ops.h"

/* The registry every test reports into and the endpoints render: a fresh one for the tests that set up. */
static struct metrics *M;

static int reset(void **state)
{
        M = metrics_free(M);
        return metrics_new(&M);
}

static int drop(void **state)
{
        M = metrics_free(M);
        return 0;
}

static char *render(void)
{
        char *text = NULL;
        assert_int_equal(metrics_render(M, &text), 0);
        assert_non_null(text);
        return text;
}

static void assert_contains(const char *haystack, const char *needle)
{
        if (!strstr(haystack, needle))
                fail_msg("expected to find\n%s\nin\n%s", needle, haystack);
}

static void test_predeclared(void **state)
{
        _cleanup_free_ char *text = render();

        assert_contains(text, "# HELP spotdrain_build_info ");
        assert_contains(
            text, "# TYPE spotdrain_build_info gauge\nspotdrain_build_info{version=\"" SPOTDRAIN_VERSION
                  "\"} 1\n");
        /* Families without labels show 0 before the first update; labelled ones only HELP and TYPE. */
        assert_contains(text, "# TYPE spotdrain_pods_forced_total counter\nspotdrain_pods_forced_total 0\n");
        assert_contains(text, "spotdrain_deadlines_missed_total 0\n");
        assert_contains(text, "spotdrain_leader 0\n");
        assert_contains(text, "# TYPE spotdrain_drains_total counter\n# HELP");
        assert_contains(text, "spotdrain_drain_duration_seconds_bucket{le=\"+Inf\"} 0\n");
        static const char *const names[] = {
                METRIC_NOTICES_RECEIVED,
                METRIC_DRAINS,
                METRIC_DRAIN_DURATION_SECONDS,
                METRIC_DRAIN_PREDICTED_SECONDS,
                METRIC_DRAIN_BUDGET_SECONDS,
                METRIC_EVICTIONS,
                METRIC_PODS_FORCED,
                METRIC_DEADLINES_MISSED,
                METRIC_QUEUE_RECEIVE_ERRORS,
                METRIC_MESSAGES,
                METRIC_API_REQUESTS,
                METRIC_REPLACEMENTS,
                METRIC_LEADER,
                METRIC_BUILD_INFO,
        };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                _cleanup_free_ char *type = strprintf("# TYPE %s ", names[i]);
                assert_contains(text, type);
        }
}

static void test_counters_and_gauges(void **state)
{
        double v = -1;

        assert_int_equal(metrics_counter_inc(M, METRIC_NOTICES_RECEIVED, "spot-interruption", "sqs", NULL),
                         0);
        assert_int_equal(metrics_counter_inc(M, METRIC_NOTICES_RECEIVED, "spot-interruption", "sqs", NULL),
                         0);
        assert_int_equal(
            metrics_counter_inc(M, METRIC_NOTICES_RECEIVED, "rebalance-recommendation", "imds", NULL), 0);
        assert_int_equal(metrics_counter_add(M, METRIC_API_REQUESTS, 3, "POST", "429", NULL), 0);
        assert_int_equal(metrics_counter_inc(M, METRIC_PODS_FORCED, NULL), 0);
        assert_int_equal(metrics_gauge_set(M, METRIC_DRAIN_BUDGET_SECONDS, 118.5, "spot-a", NULL), 0);
        assert_int_equal(metrics_gauge_set(M, METRIC_DRAIN_BUDGET_SECONDS, 0.1, "spot-b", NULL), 0);
        assert_int_equal(metrics_gauge_add(M, METRIC_DRAIN_BUDGET_SECONDS, -18.5, "spot-a", NULL), 0);
        assert_int_equal(metrics_gauge_set(M, METRIC_LEADER, 1, NULL), 0);

        assert_int_equal(metrics_get(M, METRIC_NOTICES_RECEIVED, &v, "spot-interruption", "sqs", NULL), 0);
        assert_true(v == 2);
        assert_int_equal(metrics_get(M, METRIC_DRAIN_BUDGET_SECONDS, &v, "spot-a", NULL), 0);
        assert_true(v == 100);
        assert_int_equal(metrics_get(M, METRIC_DRAINS, &v, "completed", NULL), -ENOENT);

        _cleanup_free_ char *text = render();
        assert_contains(text,
                        "spotdrain_notices_received_total{kind=\"spot-interruption\",source=\"sqs\"} 2\n"
                        "spotdrain_notices_received_total{kind=\"rebalance-recommendation\","
                        "source=\"imds\"} 1\n");
        assert_contains(text, "spotdrain_api_requests_total{verb=\"POST\",code=\"429\"} 3\n");
        assert_contains(text, "spotdrain_pods_forced_total 1\n");
        assert_contains(text, "spotdrain_drain_budget_seconds{node=\"spot-a\"} 100\n");
        assert_contains(text, "spotdrain_drain_budget_seconds{node=\"spot-b\"} 0.1\n");
        assert_contains(text, "spotdrain_leader 1\n");

        /* A node whose drain ended drops out. */
        assert_int_equal(metrics_remove(M, METRIC_DRAIN_BUDGET_SECONDS, "spot-a", NULL), 0);
        assert_int_equal(metrics_remove(M, METRIC_DRAIN_BUDGET_SECONDS, "spot-a", NULL), -ENOENT);
        _cleanup_free_ char *after = render();
        assert_null(strstr(after, "node=\"spot-a\""));
        assert_contains(after, "node=\"spot-b\"");
}

/* A module's running count brought into a counter: only what it gained since the last snapshot. */
static void test_counter_add_since(void **state)
{
        double v = -1;

        assert_int_equal(
            metrics_counter_add_since(M, METRIC_NOTICES_RECEIVED, 5, 2, "spot-interruption", "sqs", NULL),
            0);
        /* Behind or level (a count reset, or nothing new): nothing added, and no error. */
        assert_int_equal(
            metrics_counter_add_since(M, METRIC_NOTICES_RECEIVED, 1, 5, "spot-interruption", "sqs", NULL),
            0);
        assert_int_equal(
            metrics_counter_add_since(M, METRIC_NOTICES_RECEIVED, 5, 5, "spot-interruption", "sqs", NULL),
            0);
        assert_int_equal(metrics_get(M, METRIC_NOTICES_RECEIVED, &v, "spot-interruption", "sqs", NULL), 0);
        assert_true(v == 3);
        assert_int_equal(metrics_counter_add_since(M, METRIC_PODS_FORCED, 7, 0, NULL), 0);
        assert_int_equal(metrics_get(M, METRIC_PODS_FORCED, &v, NULL), 0);
        assert_true(v == 7);
        /* The labels are checked as for any counter. */
        assert_int_equal(metrics_counter_add_since(M, METRIC_PODS_FORCED, 9, 7, "extra", NULL), -EINVAL);
}

static void test_errors(void **state)
{
        assert_int_equal(metrics_counter_inc(M, "spotdrain_nope_total", NULL), -ENOENT);
        assert_int_equal(metrics_counter_inc(M, METRIC_LEADER, NULL), -ENOENT); /* a gauge */
        assert_int_equal(metrics_gauge_set(M, METRIC_DRAINS, 1, "x", NULL), -ENOENT);
        assert_int_equal(metrics_counter_inc(M, METRIC_DRAINS, NULL), -EINVAL);
        assert_int_equal(metrics_counter_inc(M, METRIC_DRAINS, "a", "b", NULL), -EINVAL);
        assert_int_equal(metrics_counter_inc(M, METRIC_DRAINS, "a", "b", "c", "d", "e", NULL), -EINVAL);
        assert_int_equal(metrics_counter_add(M, METRIC_DRAINS, -1, "completed", NULL), -EINVAL);
        assert_int_equal(metrics_gauge_set(M, METRIC_LEADER, NAN, NULL), -EINVAL);
        assert_int_equal(metrics_counter_inc(M, NULL, NULL), -ENOENT);
}

static void test_escaping(void **state)
{
        struct buf b = {};

        assert_int_equal(metrics_escape_label_value(&b, "a\\b\"c\nd"), 0);
        assert_string_equal(b.data, "a\\\\b\\\"c\\nd");
        buf_free(&b);

        assert_int_equal(
            metrics_counter_inc(M, METRIC_QUEUE_RECEIVE_ERRORS, "AccessDenied: \"sqs:Receive\"\\\n", NULL),
            0);
        _cleanup_free_ char *text = render();
        assert_contains(text, "spotdrain_queue_receive_errors_total{reason=\"AccessDenied: "
                              "\\\"sqs:Receive\\\"\\\\\\n\"} 1\n");

        static const char *const labels[] = { "x", NULL };
        struct metric_family_def def = { .name = "spotdrain_test_help",
                                         .type = METRIC_GAUGE,
                                         .help = "line one\nback\\slash" };
        memcpy(def.labels, labels, sizeof(labels));
        assert_int_equal(metrics_register(M, &def), 0);
        _cleanup_free_ char *help = render();
        assert_contains(help, "# HELP spotdrain_test_help line one\\nback\\\\slash\n");
}

static void test_histogram(void **state)
{
        static const double bounds[] = { 1, 2.5, 10 };
        struct metric_family_def def = { .name = "spotdrain_test_seconds",
                                         .type = METRIC_HISTOGRAM,
                                         .help = "test",
                                         .labels = { "node", NULL },
                                         .buckets = bounds,
                                         .n_buckets = ARRAY_SIZE(bounds) };
        double v;

        assert_int_equal(metrics_register(M, &def), 0);
        assert_int_equal(metrics_register(M, &def), 0); /* the same again is fine */
        def.n_buckets = 2;
        assert_int_equal(metrics_register(M, &def), -EEXIST);

        assert_int_equal(metrics_histogram_observe(M, "spotdrain_test_seconds", 0.5, "a", NULL), 0);
        assert_int_equal(metrics_histogram_observe(M, "spotdrain_test_seconds", 1, "a", NULL),
                         0); /* le is <= */
        assert_int_equal(metrics_histogram_observe(M, "spotdrain_test_seconds", 2, "a", NULL), 0);
        assert_int_equal(metrics_histogram_observe(M, "spotdrain_test_seconds", 50, "a", NULL), 0);
        assert_int_equal(metrics_histogram_observe(M, METRIC_DRAIN_DURATION_SECONDS, 41.25, NULL), 0);
        assert_int_equal(metrics_get(M, "spotdrain_test_seconds", &v, "a", NULL), 0);
        assert_true(v == 4);

        _cleanup_free_ char *text = render();
        assert_contains(text, "# TYPE spotdrain_test_seconds histogram\n"
                              "spotdrain_test_seconds_bucket{node=\"a\",le=\"1\"} 2\n"
                              "spotdrain_test_seconds_bucket{node=\"a\",le=\"2.5\"} 3\n"
                              "spotdrain_test_seconds_bucket{node=\"a\",le=\"10\"} 3\n"
                              "spotdrain_test_seconds_bucket{node=\"a\",le=\"+Inf\"} 4\n"
                              "spotdrain_test_seconds_sum{node=\"a\"} 53.5\n"
                              "spotdrain_test_seconds_count{node=\"a\"} 4\n");
        assert_contains(text, "spotdrain_drain_duration_seconds_bucket{le=\"30\"} 0\n"
                              "spotdrain_drain_duration_seconds_bucket{le=\"45\"} 1\n");
        assert_contains(text, "spotdrain_drain_duration_seconds_bucket{le=\"600\"} 1\n"
                              "spotdrain_drain_duration_seconds_bucket{le=\"+Inf\"} 1\n"
                              "spotdrain_drain_duration_seconds_sum 41.25\n"
                              "spotdrain_drain_duration_seconds_count 1\n");

        /* Malformed definitions. */
        struct metric_family_def bad = { .name = "spotdrain_bad",
                                         .type = METRIC_HISTOGRAM,
                                         .help = "x",
                                         .labels = { "le", NULL },
                                         .buckets = bounds,
                                         .n_buckets = 3 };
        assert_int_equal(metrics_register(M, &bad), -EINVAL);
        static const double unsorted[] = { 2, 1 };
        bad.labels[0] = NULL;
        bad.buckets = unsorted;
        bad.n_buckets = 2;
        assert_int_equal(metrics_register(M, &bad), -EINVAL);
        bad = (struct metric_family_def){ .name = "9bad", .type = METRIC_COUNTER, .help = "x" };
        assert_int_equal(metrics_register(M, &bad), -EINVAL);

        /* Registries are apart: another one has neither these families nor these series, only the
         * predeclared families and build_info. */
        _cleanup_(metrics_freep) struct metrics *other = NULL;
        assert_int_equal(metrics_new(&other), 0);
        assert_int_equal(metrics_histogram_observe(other, "spotdrain_test_seconds", 1, "a", NULL), -ENOENT);
        assert_int_equal(metrics_get(other, METRIC_DRAIN_DURATION_SECONDS, &v, NULL), -ENOENT);
        assert_int_equal(metrics_get(other, METRIC_BUILD_INFO, &v, SPOTDRAIN_VERSION, NULL), 0);
        assert_true(v == 1);
}

/* No registry: nothing is reported, nothing fails, and it renders as nothing. */
static void test_null_registry(void **state)
{
        static const struct metric_family_def def = { .name = "spotdrain_test_total",
                                                      .type = METRIC_COUNTER,
                                                      .help = "x" };
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        _cleanup_free_ char *text = NULL;
        double v = -1;

        assert_int_equal(metrics_register(NULL, &def), 0);
        assert_int_equal(metrics_counter_inc(NULL, METRIC_DRAINS, "completed", NULL), 0);
        assert_int_equal(metrics_counter_inc(NULL, METRIC_DRAINS, "a", "b", "c", "d", "e", NULL), 0);
        assert_int_equal(metrics_gauge_setv(NULL, METRIC_LEADER, 1, NULL), 0);
        assert_int_equal(metrics_histogram_observe(NULL, METRIC_DRAIN_DURATION_SECONDS, 1, NULL), 0);
        assert_int_equal(metrics_remove(NULL, METRIC_DRAIN_BUDGET_SECONDS, "spot-a", NULL), 0);
        assert_int_equal(metrics_get(NULL, METRIC_BUILD_INFO, &v, SPOTDRAIN_VERSION, NULL), -ENOENT);
        assert_true(v == -1);
        assert_int_equal(metrics_render(NULL, &text), 0);
        assert_string_equal(text, "");

        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(metrics_alert_sink_add(b, NULL), 0);
        assert_int_equal(alert_emit(b, ALERT_DRAIN_COMPLETED, "spot-a", NULL, "drained"), 0);
        /* The process's registry saw none of it. */
        assert_int_equal(metrics_get(M, METRIC_DRAINS, &v, "completed", NULL), -ENOENT);
}

/* The alert sink counts what drains report. */
static void test_alert_sink(void **state)
{
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        double v;

        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(metrics_alert_sink_add(b, M), 0);
        assert_int_equal(metrics_alert_sink_add(NULL, M), -EINVAL);

        assert_int_equal(
            alert_emit(b, ALERT_DRAIN_INFEASIBLE, "spot-a",
                       (const char *[]){ "verdict", "infeasible", "finish_seconds", "240.5", NULL },
                       "too slow"),
            0);
        assert_int_equal(metrics_get(M, METRIC_DRAIN_PREDICTED_SECONDS, &v, "spot-a", NULL), 0);
        assert_true(v == 240.5);
        assert_int_equal(metrics_gauge_set(M, METRIC_DRAIN_BUDGET_SECONDS, 118, "spot-a", NULL), 0);

        assert_int_equal(
            alert_emit(b, ALERT_PODS_FORCED, "spot-a", (const char *[]){ "pods", "3", NULL }, "x"), 0);
        assert_int_equal(alert_emit(b, ALERT_PODS_FORCED, "spot-a", NULL, "no count"), 0);
        assert_int_equal(metrics_get(M, METRIC_PODS_FORCED, &v, NULL), 0);
        assert_true(v == 4);

        assert_int_equal(alert_emit(b, ALERT_DEADLINE_MISSED, "spot-a",
                                    (const char *[]){ "seconds", "121.0", "left", "2", NULL }, "missed"),
                         0);
        assert_int_equal(metrics_get(M, METRIC_DRAIN_PREDICTED_SECONDS, &v, "spot-a", NULL), -ENOENT);
        assert_int_equal(metrics_get(M, METRIC_DRAIN_BUDGET_SECONDS, &v, "spot-a", NULL), -ENOENT);
        assert_int_equal(alert_emit(b, ALERT_DRAIN_COMPLETED, "spot-b",
                                    (const char *[]){ "seconds", "41.2", NULL }, "drained"),
                         0);
        assert_int_equal(alert_emit(b, ALERT_REPLACEMENT_LAUNCHED, NULL, NULL, "m5.xlarge"), 0);
        assert_int_equal(alert_emit(b, ALERT_NOTICE_RECEIVED, "spot-c", NULL, "not counted here"), 0);

        assert_int_equal(metrics_get(M, METRIC_DRAINS, &v, "completed", NULL), 0);
        assert_true(v == 1);
        assert_int_equal(metrics_get(M, METRIC_DRAINS, &v, "deadline-missed", NULL), 0);
        assert_true(v == 1);
        assert_int_equal(metrics_get(M, METRIC_DEADLINES_MISSED, &v, NULL), 0);
        assert_true(v == 1);
        assert_int_equal(metrics_get(M, METRIC_REPLACEMENTS, &v, "launched", NULL), 0);
        assert_true(v == 1);
        /* Only the completed drain's duration: a missed deadline is not a drain duration. */
        _cleanup_free_ char *text = render();
        assert_contains(text, "spotdrain_drain_duration_seconds_sum 41.2\n"
                              "spotdrain_drain_duration_seconds_count 1\n");
        assert_null(strstr(text, "spotdrain_notices_received_total{"));
}

/* ---- the endpoint ---- */

static long fetch(struct loop *l, uint16_t port, const char *method, const char *path, char **ret_body,
                  char **ret_type)
{
        _cleanup_free_ char *url = strprintf("http://127.0.0.1:%u%s", port, path);
        struct http_request req = { .method = method, .url = url, .timeout_usec = 5000000 };
        struct http_response resp = {};
        long status;

        assert_non_null(url);
        assert_int_equal(http_send_sync(l, &req, &resp), 0);
        status = resp.status;
        if (ret_body)
                *ret_body = strdup(resp.body ? resp.body : "");
        if (ret_type)
                *ret_type = resp.content_type ? strdup(resp.content_type) : NULL;
        http_response_clear(&resp);
        return status;
}

struct flag {
        bool ok;
        const char *reason;
};

static bool flag_check(void *userdata, const char **ret_reason)
{
        struct flag *f = userdata;
        if (!f->ok)
                *ret_reason = f->reason;
        return f->ok;
}

static void test_endpoint(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        struct flag leader = { .ok = false, .reason = "no leader or standby known" }, queue = { .ok = true };
        _cleanup_free_ char *body = NULL, *type = NULL;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        assert_true(httpd_port(h) > 0);
        assert_int_equal(metrics_counter_inc(M, METRIC_DRAINS, "completed", NULL), 0);

        assert_int_equal(fetch(l, httpd_port(h), NULL, "/metrics", &body, &type), 200);
        assert_string_equal(type, "text/plain; version=0.0.4; charset=utf-8");
        assert_contains(body, "spotdrain_drains_total{result=\"completed\"} 1\n");
        free(body);
        free(type);
        type = NULL;

        /* No checks yet: ready. */
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/readyz", &body, NULL), 200);
        assert_string_equal(body, "ok\n");
        free(body);

        assert_int_equal(httpd_add_ready_check(h, "leader", flag_check, &leader), 0);
        assert_int_equal(httpd_add_ready_check(h, "queue", flag_check, &queue), 0);
        assert_int_equal(httpd_add_ready_check(h, "queue", flag_check, &queue), -EEXIST);
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/readyz", &body, NULL), 503);
        assert_string_equal(body, "leader: no leader or standby known\n");
        free(body);

        leader.ok = true;
        assert_int_equal(httpd_set_ready(h, "first poll", false, "IMDS not answered yet"), 0);
        assert_int_equal(httpd_set_ready(h, "queue", true, NULL), -EEXIST);
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/readyz", &body, NULL), 503);
        assert_string_equal(body, "first poll: IMDS not answered yet\n");
        free(body);

        assert_int_equal(httpd_set_ready(h, "first poll", true, NULL), 0);
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/readyz", &body, NULL), 200);
        free(body);

        /* Health checks are separate from readiness. */
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/healthz", &body, NULL), 200);
        free(body);
        queue.ok = false;
        queue.reason = "queue unreadable";
        assert_int_equal(httpd_add_health_check(h, "queue-health", flag_check, &queue), 0);
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/healthz", &body, NULL), 503);
        assert_string_equal(body, "queue-health: queue unreadable\n");
        free(body);

        assert_int_equal(fetch(l, httpd_port(h), "HEAD", "/metrics", NULL, NULL), 200);
        assert_int_equal(fetch(l, httpd_port(h), "POST", "/metrics", NULL, NULL), 405);
        assert_int_equal(fetch(l, httpd_port(h), NULL, "/nope", &body, NULL), 404);
}

/* ---- the endpoint seen through a plain socket: what probes, scrapers and hostile clients send ---- */

/* Every wait below is bounded by these socket timeouts: a wait that runs out fails its assertion. */
#define RAW_TIMEOUT_SEC 10

/* A connection to ADDR (numeric, IPv4 or IPv6) from SRC (NULL: any address). */
static int raw_connect_to(const char *addr, const char *src, uint16_t port)
{
        struct sockaddr_storage sa = {}, from = {};
        struct sockaddr_in *sin = (struct sockaddr_in *)&sa;
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&sa;
        struct timeval tv = { .tv_sec = RAW_TIMEOUT_SEC };
        bool v6 = strchr(addr, ':') != NULL;
        socklen_t len = v6 ? sizeof(*sin6) : sizeof(*sin);
        int one = 1, fd;

        if (v6) {
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons(port);
                assert_int_equal(inet_pton(AF_INET6, addr, &sin6->sin6_addr), 1);
        } else {
                sin->sin_family = AF_INET;
                sin->sin_port = htons(port);
                assert_int_equal(inet_pton(AF_INET, addr, &sin->sin_addr), 1);
        }
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)), 0);
        /* Each send leaves as a segment of its own, so that split requests arrive split. */
        assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
        if (src) {
                /* Linux answers the whole of 127.0.0.0/8 on loopback: a client from another address. */
                struct sockaddr_in *fin = (struct sockaddr_in *)&from;

                assert_false(v6);
                fin->sin_family = AF_INET;
                assert_int_equal(inet_pton(AF_INET, src, &fin->sin_addr), 1);
                assert_int_equal(bind(fd, (struct sockaddr *)fin, sizeof(*fin)), 0);
        }
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, len), 0);
        return fd;
}

/* To 127.0.0.1 from src (NULL: 127.0.0.1). */
static int raw_connect_from(uint16_t port, const char *src)
{
        return raw_connect_to("127.0.0.1", src, port);
}

static void raw_send(int fd, const char *s)
{
        size_t len = strlen(s);
        assert_int_equal(send(fd, s, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* Everything until the server closes. */
static char *raw_read_all(int fd)
{
        struct buf b = {};
        char chunk[4096];

        for (;;) {
                ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
                assert_true(n >= 0);
                if (n == 0)
                        break;
                assert_int_equal(buf_append(&b, chunk, (size_t)n), 0);
        }
        assert_int_equal(buf_append(&b, "", 0), 0);
        return b.data;
}

/* Sends each piece with a write of its own; returns the whole answer. */
static char *raw_exchange_to(const char *addr, uint16_t port, const char *const *pieces)
{
        int fd = raw_connect_to(addr, NULL, port);
        char *resp;

        for (; *pieces; pieces++)
                raw_send(fd, *pieces);
        resp = raw_read_all(fd);
        close(fd);
        return resp;
}

static char *raw_exchange(uint16_t port, const char *const *pieces)
{
        return raw_exchange_to("127.0.0.1", port, pieces);
}

static char *raw_request(uint16_t port, const char *request)
{
        return raw_exchange(port, (const char *const[]){ request, NULL });
}

static unsigned raw_status(const char *resp)
{
        unsigned status = 0;

        if (sscanf(resp, "HTTP/1.1 %u ", &status) != 1)
                fail_msg("not an HTTP/1.1 answer: %s", resp);
        return status;
}

static const char *raw_body(const char *resp)
{
        const char *p = strstr(resp, "\r\n\r\n");

        assert_non_null(p);
        return p + 4;
}

/* The status of a request sent in one write; the body is checked to match its Content-Length. */
static unsigned raw_status_of(uint16_t port, const char *request)
{
        _cleanup_free_ char *resp = raw_request(port, request);
        _cleanup_free_ char *length = strprintf("Content-Length: %zu\r\n", strlen(raw_body(resp)));

        assert_contains(resp, length);
        assert_contains(resp, "Connection: close\r\n");
        return raw_status(resp);
}

/* The server closes fd without an answer, as it does a connection over its limits: end of file or a
 * reset, never the socket's timeout. */
static void assert_closed_unanswered(int fd)
{
        char chunk[256];
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);

        if (n < 0)
                assert_int_equal(errno, ECONNRESET);
        else
                assert_int_equal(n, 0);
}

/* A request that is not served: closed unanswered, or answered with an error status. */
static void assert_refused(uint16_t port, const char *request)
{
        _cleanup_free_ char *resp = raw_request(port, request);

        if (!isempty(resp) && raw_status(resp) < 400)
                fail_msg("served: %s", resp);
}

static void test_listen_forms(void **state)
{
        struct httpd *h = (struct httpd *)1;

        assert_int_equal(httpd_start("off", M, &h), 0);
        assert_null(h);
        assert_int_equal(httpd_port(h), 0);
        assert_int_equal(httpd_add_ready_check(h, "x", flag_check, NULL), 0);
        assert_null(httpd_free(h));

        assert_int_equal(httpd_start("127.0.0.1", M, &h), -EINVAL);
        assert_int_equal(httpd_start("::1:0", M, &h), -EINVAL);
        assert_int_equal(httpd_start("localhost:0", M, &h), -EINVAL); /* numeric only */
        assert_int_equal(httpd_start("127.0.0.1:x", M, &h), -EINVAL);
        assert_int_equal(httpd_start("127.0.0.1:65536", M, &h), -EINVAL);
        assert_int_equal(httpd_start("127.0.0.1:-1", M, &h), -EINVAL);
        assert_int_equal(httpd_start("127.0.0.1:", M, &h), -EINVAL);
        assert_int_equal(httpd_start("127.0.0.256:0", M, &h), -EINVAL);
        assert_int_equal(httpd_start("[::1:0", M, &h), -EINVAL);
        assert_int_equal(httpd_start("[nope]:0", M, &h), -EINVAL);

        /* No host: any IPv4 address. */
        assert_int_equal(httpd_start(":0", M, &h), 0);
        assert_true(httpd_port(h) > 0);
        assert_int_equal(raw_status_of(httpd_port(h), "GET /healthz HTTP/1.1\r\n\r\n"), 200);
        httpd_free(h);

        assert_int_equal(httpd_start("[::1]:0", M, &h), 0);
        httpd_free(h);
        assert_int_equal(httpd_start("[127.0.0.256]:0", M, &h), -EINVAL);
        assert_int_equal(httpd_start("[]:0", M, &h), -EINVAL);
        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        struct httpd *second = NULL;
        _cleanup_free_ char *taken = strprintf("127.0.0.1:%u", httpd_port(h));
        assert_int_equal(httpd_start(taken, M, &second), -EADDRINUSE);
        httpd_free(h);
}

static void set_done(void *userdata)
{
        *(bool *)userdata = true;
}

/* A loop that stops turning makes /healthz fail; once it turns again, /healthz recovers. The watched loop
 * is not the one the client runs on, so while the client waits the watched loop stands still. */
static void test_loop_watch(void **state)
{
        _cleanup_(loop_freep) struct loop *watched = NULL, *client = NULL;
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        long status = 0;
        bool done = false;

        assert_int_equal(loop_new(&watched), 0);
        assert_int_equal(loop_new(&client), 0);
        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        assert_int_equal(httpd_watch_loop(h, watched, 50000), 0);
        assert_int_equal(httpd_watch_loop(h, watched, 50000), -EINVAL);

        uint64_t limit = now_monotonic_usec() + 10000000;
        while (status != 503 && now_monotonic_usec() < limit)
                status = fetch(client, httpd_port(h), NULL, "/healthz", NULL, NULL);
        assert_int_equal(status, 503);

        assert_int_equal(timer_start_in(watched, 100000, set_done, &done, NULL), 0);
        assert_int_equal(loop_run_until(watched, &done, 5000000), 0);
        /* The heartbeat ran within the last 100 ms; a slow machine may need a few more turns. */
        limit = now_monotonic_usec() + 10000000;
        while ((status = fetch(client, httpd_port(h), NULL, "/healthz", NULL, NULL)) != 200 &&
               now_monotonic_usec() < limit) {
                done = false;
                assert_int_equal(timer_start_in(watched, 10000, set_done, &done, NULL), 0);
                assert_int_equal(loop_run_until(watched, &done, 5000000), 0);
        }
        assert_int_equal(status, 200);
        h = httpd_free(h); /* before its loop */
}

static void test_endpoint_raw(void **state)
{
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        uint16_t port;
        char *resp;

        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        port = httpd_port(h);
        assert_int_equal(metrics_counter_inc(M, METRIC_DRAINS, "completed", NULL), 0);

        resp = raw_request(port, "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\n\r\n");
        assert_int_equal(raw_status(resp), 200);
        assert_contains(resp, "Content-Type: text/plain; charset=utf-8\r\n");
        assert_contains(resp, "Content-Length: 3\r\n");
        assert_contains(resp, "Connection: close\r\n");
        assert_string_equal(raw_body(resp), "ok\n");
        free(resp);

        /* HEAD: the same headers, no body. */
        resp = raw_request(port, "HEAD /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert_int_equal(raw_status(resp), 200);
        assert_contains(resp, "Content-Length: 3\r\n");
        assert_string_equal(raw_body(resp), "");
        free(resp);
        resp = raw_request(port, "HEAD /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert_int_equal(raw_status(resp), 200);
        assert_contains(resp, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
        assert_null(strstr(resp, "Content-Length: 0\r\n"));
        assert_string_equal(raw_body(resp), "");
        free(resp);

        resp = raw_request(port, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        assert_int_equal(raw_status(resp), 200);
        assert_contains(raw_body(resp), "spotdrain_drains_total{result=\"completed\"} 1\n");
        free(resp);

        /* Other methods: 405 naming the allowed ones, also with a body the server never reads. */
        resp = raw_request(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\na=1");
        assert_int_equal(raw_status(resp), 405);
        assert_contains(resp, "Allow: GET, HEAD\r\n");
        assert_string_equal(raw_body(resp), "method not allowed\n");
        free(resp);
        /* A client that waits for "100 Continue" before its body gets the refusal instead. */
        resp = raw_request(port, "PUT /metrics HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                                 "Content-Length: 1000000\r\n\r\n");
        assert_int_equal(raw_status(resp), 405);
        assert_null(strstr(resp, "100 Continue"));
        free(resp);
        assert_int_equal(raw_status_of(port, "DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 405);
        assert_int_equal(raw_status_of(port, "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"), 405);

        resp = raw_request(port, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_int_equal(raw_status(resp), 404);
        assert_string_equal(raw_body(resp), "not found\n");
        free(resp);
        assert_int_equal(raw_status_of(port, "GET /metricsx HTTP/1.1\r\n\r\n"), 404);
        assert_int_equal(raw_status_of(port, "GET /healthz/ HTTP/1.1\r\n\r\n"), 404);
        resp = raw_request(port, "HEAD /nope HTTP/1.1\r\n\r\n");
        assert_int_equal(raw_status(resp), 404);
        assert_contains(resp, "Content-Length: 10\r\n");
        assert_string_equal(raw_body(resp), "");
        free(resp);

        /* The query string is ignored; HTTP/1.0 and bare LF line ends are accepted. */
        assert_int_equal(raw_status_of(port, "GET /healthz?verbose=1&x HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
        assert_int_equal(raw_status_of(port, "GET /healthz HTTP/1.0\r\n\r\n"), 200);
        assert_int_equal(raw_status_of(port, "GET /healthz HTTP/1.1\nHost: x\n\n"), 200);

        /* Malformed request lines and headers: refused by libmicrohttpd. */
        assert_int_equal(raw_status_of(port, "GET /healthz\r\n\r\n"), 400);
        assert_int_equal(raw_status_of(port, "GET /healthz HTTP/1.1 \r\n\r\n"), 400);
        assert_int_equal(raw_status_of(port, "GET /healthz HTTP/1.x\r\n\r\n"), 400);
        assert_int_equal(raw_status_of(port, "GET /healthz HTTP/1.1\r\nno colon\r\n\r\n"), 400);
        assert_int_equal(raw_status_of(port, "GET /healthz HTTP/2.0\r\n\r\n"), 505);
        /* A bad request line is answered at once, without waiting for the end of the head. */
        assert_int_equal(raw_status_of(port, "NOT HTTP AT ALL\r\n"), 400);
        /* Whatever else a request that names no endpoint gets, it is never served. */
        assert_refused(port, "GARBAGE\r\n\r\n");
        assert_refused(port, "G(T /healthz HTTP/1.1\r\n\r\n");
        assert_refused(port, "GET healthz HTTP/1.1\r\n\r\n");
}

/* A request head over the per-connection memory (16 KiB): 431 (headers) or 414 (the request line alone).
 * A few KiB, more than any probe or scraper sends, still fit. */
static void test_endpoint_limits(void **state)
{
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        _cleanup_free_ char *pad = malloc(20001), *headers = NULL, *line = NULL, *fits = NULL;
        uint16_t port;

        assert_non_null(pad);
        memset(pad, 'a', 20000);
        pad[20000] = '\0';
        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        port = httpd_port(h);

        headers = strprintf("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", pad);
        assert_non_null(headers);
        assert_int_equal(raw_status_of(port, headers), 431);
        line = strprintf("GET /healthz?%s HTTP/1.1\r\nHost: x\r\n\r\n", pad);
        assert_non_null(line);
        assert_int_equal(raw_status_of(port, line), 414);

        pad[8000] = '\0';
        fits = strprintf("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: %s\r\n\r\n", pad);
        assert_non_null(fits);
        assert_int_equal(raw_status_of(port, fits), 200);
}

/* A request split across several writes, even in the middle of its final blank line. */
static void test_endpoint_split(void **state)
{
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        _cleanup_free_ char *resp = NULL;

        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        resp = raw_exchange(httpd_port(h), (const char *const[]){ "GE", "T /hea", "lthz?x=1 HTTP/1.1\r\nHo",
                                                                  "st: 127.0.0.1\r\n\r", "\n", NULL });
        assert_int_equal(raw_status(resp), 200);
        assert_string_equal(raw_body(resp), "ok\n");
}

/* The server's limits (httpd.c). */
#define PER_IP_LIMIT 8
#define CONN_LIMIT   32

/* Clients that connect and stall hold a slot each, never the server: a scrape beside them is answered. One
 * connection over the limit from an address is closed unanswered; one over the limit in all waits for a
 * slot, which 5 s of silence frees, and is answered. httpd_free() returns with a stalled client still
 * connected. */
static void test_endpoint_stalled_clients(void **state)
{
        static const char *const crowd_from[] = { "127.0.0.2", "127.0.0.3", "127.0.0.4" };
        static const char scrape[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
        struct httpd *h = NULL;
        int held[CONN_LIMIT], extra, late;
        size_t n = 0;
        uint16_t port;
        char *resp;

        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        port = httpd_port(h);

        held[n++] = raw_connect_from(port, NULL);
        held[n] = raw_connect_from(port, NULL);
        raw_send(held[n++], "GET /metr");
        assert_int_equal(raw_status_of(port, scrape), 200);

        /* The server accepts in connection order: the one over the limit comes after the others. */
        for (size_t i = 0; i < ARRAY_SIZE(crowd_from); i++)
                for (size_t j = 0; j < PER_IP_LIMIT; j++)
                        held[n++] = raw_connect_from(port, crowd_from[i]);
        extra = raw_connect_from(port, crowd_from[0]);
        raw_send(extra, scrape);
        assert_closed_unanswered(extra);
        close(extra);
        assert_int_equal(raw_status_of(port, scrape), 200);

        while (n < ARRAY_SIZE(held))
                held[n++] = raw_connect_from(port, "127.0.0.5");
        late = raw_connect_from(port, "127.0.0.6");
        raw_send(late, scrape);
        resp = raw_read_all(late);
        assert_int_equal(raw_status(resp), 200);
        free(resp);
        close(late);
        for (size_t i = 0; i < n; i++) {
                assert_closed_unanswered(held[i]);
                close(held[i]);
        }

        late = raw_connect_from(port, "127.0.0.6");
        raw_send(late, "GET /he");
        /* Answered only once "late" has been accepted. */
        assert_int_equal(raw_status_of(port, "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
        assert_null(httpd_free(h));
        assert_closed_unanswered(late);
        close(late);
}

/* An IPv4 address in brackets (the chart's "[$(HOST_IP)]:PORT") is that address alone: 127.0.0.2, another
 * address of the same interface, is not served. */
static void test_endpoint_bracketed_ipv4(void **state)
{
        static const char *const scrape[] = { "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL };
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        struct sockaddr_in other = { .sin_family = AF_INET };
        char *resp;
        int fd;

        assert_int_equal(httpd_start("[127.0.0.1]:0", M, &h), 0);
        assert_true(httpd_port(h) > 0);
        resp = raw_exchange_to("127.0.0.1", httpd_port(h), scrape);
        assert_int_equal(raw_status(resp), 200);
        free(resp);

        other.sin_port = htons(httpd_port(h));
        assert_int_equal(inet_pton(AF_INET, "127.0.0.2", &other.sin_addr), 1);
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        assert_int_equal(connect(fd, (struct sockaddr *)&other, sizeof(other)), -1);
        assert_int_equal(errno, ECONNREFUSED);
        close(fd);
}

/* "[::1]" serves IPv6; "[::]" serves IPv4 too, so its port is taken for "0.0.0.0" as well. */
static void test_endpoint_ipv6(void **state)
{
        static const char *const scrape[] = { "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", NULL };
        struct httpd *h = NULL, *second = NULL;
        _cleanup_free_ char *taken = NULL;
        char *resp;

        assert_int_equal(httpd_start("[::1]:0", M, &h), 0);
        assert_true(httpd_port(h) > 0);
        resp = raw_exchange_to("::1", httpd_port(h), scrape);
        assert_int_equal(raw_status(resp), 200);
        assert_string_equal(raw_body(resp), "ok\n");
        free(resp);
        h = httpd_free(h);

        assert_int_equal(httpd_start("[::]:0", M, &h), 0);
        resp = raw_exchange_to("::1", httpd_port(h), scrape);
        assert_int_equal(raw_status(resp), 200);
        free(resp);
        resp = raw_exchange_to("127.0.0.1", httpd_port(h), scrape);
        assert_int_equal(raw_status(resp), 200);
        free(resp);
        taken = strprintf("0.0.0.0:%u", httpd_port(h));
        assert_non_null(taken);
        assert_int_equal(httpd_start(taken, M, &second), -EADDRINUSE);
        httpd_free(h);
}

/* An exposition larger than the per-connection memory goes out whole, to GET and (as a length) to HEAD. */
static void test_endpoint_large_answer(void **state)
{
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        _cleanup_free_ char *get = NULL, *head = NULL, *length = NULL;

        for (unsigned i = 0; i < 3000; i++) {
                char node[32];

                (void)snprintf(node, sizeof(node), "spot-%04u", i);
                assert_int_equal(metrics_gauge_set(M, METRIC_DRAIN_BUDGET_SECONDS, i, node, NULL), 0);
        }
        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        get = raw_request(httpd_port(h), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_int_equal(raw_status(get), 200);
        assert_true(strlen(raw_body(get)) > 64 * 1024);
        assert_contains(raw_body(get), "spotdrain_drain_budget_seconds{node=\"spot-2999\"} 2999\n");
        length = strprintf("Content-Length: %zu\r\n", strlen(raw_body(get)));
        assert_contains(get, length);
        head = raw_request(httpd_port(h), "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_contains(head, length);
        assert_string_equal(raw_body(head), "");
}

struct serial_check {
        atomic_int running;
        atomic_int most; /* the most checks seen running at once */
};

/* Widens the window in which a second check, run at the same time, would be seen. */
static bool serial_check_fn(void *userdata, const char **ret_reason)
{
        struct serial_check *s = userdata;
        int now = atomic_fetch_add(&s->running, 1) + 1;

        if (now > atomic_load(&s->most))
                atomic_store(&s->most, now);
        for (int i = 0; i < 20; i++)
                sched_yield();
        atomic_fetch_sub(&s->running, 1);
        return true;
}

struct flipper {
        struct httpd *h;
        atomic_bool stop;
        unsigned flips, failed; /* cmocka asserts only on the test's thread */
};

static void *flip_ready(void *userdata)
{
        struct flipper *f = userdata;

        /* At least a few flips, then on until the scrapes are done. */
        for (unsigned i = 0; i < 100 || !atomic_load(&f->stop); i++) {
                bool ready = i % 2 == 0;

                if (httpd_set_ready(f->h, "flip", ready, ready ? NULL : "odd") < 0)
                        f->failed++;
                f->flips++;
                sched_yield(); /* the scrapes' turn too, on a machine of one core or under valgrind */
        }
        return NULL;
}

/* Checks run one at a time however many scrapes come at once, while another thread publishes a condition
 * with httpd_set_ready(). */
static void test_endpoint_concurrent(void **state)
{
        _cleanup_(httpd_freep) struct httpd *h = NULL;
        struct serial_check serial = {};
        struct flipper flipper = {};
        pthread_t thread;
        int fds[12];

        assert_int_equal(httpd_start("127.0.0.1:0", M, &h), 0);
        assert_int_equal(httpd_add_ready_check(h, "serial", serial_check_fn, &serial), 0);
        assert_int_equal(httpd_add_health_check(h, "serial", serial_check_fn, &serial), 0);
        flipper.h = h;
        assert_int_equal(pthread_create(&thread, NULL, flip_ready, &flipper), 0);

        for (unsigned round = 0; round < 5; round++) {
                /* Each from an address of its own, far from any limit. */
                for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
                        char from[32];

                        (void)snprintf(from, sizeof(from), "127.0.%u.%zu", round + 1, i + 1);
                        fds[i] = raw_connect_from(httpd_port(h), from);
                        raw_send(fds[i],
                                 i % 2 ? "GET /healthz HTTP/1.1\r\n\r\n" : "GET /readyz HTTP/1.1\r\n\r\n");
                }
                for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
                        _cleanup_free_ char *resp = raw_read_all(fds[i]);
                        unsigned status = raw_status(resp);

                        close(fds[i]);
                        if (i % 2)
                                assert_int_equal(status, 200);
                        else if (status == 200)
                                assert_string_equal(raw_body(resp), "ok\n");
                        else {
                                assert_int_equal(status, 503);
                                assert_string_equal(raw_body(resp), "flip: odd\n");
                        }
                }
        }
        atomic_store(&flipper.stop, true);
        assert_int_equal(pthread_join(thread, NULL), 0);
        assert_int_equal(flipper.failed, 0);
        assert_true(flipper.flips >= 100);
        assert_int_equal(atomic_load(&serial.most), 1);
}

static void test_error_budget(void **state)
{
        _cleanup_(error_budget_freep) struct error_budget *e = NULL;
        const uint64_t s = 1000000;
        const char *reason = NULL;

        assert_int_equal(error_budget_new(0, 0.5, 1, &e), -EINVAL);
        assert_int_equal(error_budget_new(60 * s, 1.5, 1, &e), -EINVAL);
        assert_int_equal(error_budget_new(60 * s, 0.5, 3, &e), 0);

        assert_true(error_budget_ok_at(e, 100 * s));
        /* Two failures: under the minimum, whatever the ratio. */
        error_budget_record_at(e, false, 100 * s);
        error_budget_record_at(e, false, 101 * s);
        assert_true(error_budget_ok_at(e, 101 * s));
        error_budget_record_at(e, false, 102 * s);
        assert_false(error_budget_ok_at(e, 102 * s));
        /* Successes bring the ratio down to one half. */
        error_budget_record_at(e, true, 103 * s);
        error_budget_record_at(e, true, 103 * s);
        assert_false(error_budget_ok_at(e, 103 * s));
        error_budget_record_at(e, true, 104 * s);
        assert_true(error_budget_ok_at(e, 104 * s));
        /* Failures later on, and the old outcomes age out of the window. */
        for (int i = 0; i < 3; i++)
                error_budget_record_at(e, false, 150 * s);
        assert_false(error_budget_ok_at(e, 150 * s));
        assert_true(error_budget_ok_at(e, 215 * s));
        assert_true(error_budget_check(e, &reason));

        error_budget_record(e, false);
        error_budget_record(e, false);
        error_budget_record(e, false);
        assert_false(error_budget_check(e, &reason));
        assert_string_equal(reason, "too many recent failures");
}

/* ---- sd_notify ---- */

struct notify_rx {
        int fd;
        char msg[256];
        bool got;
};

static int on_notify(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        struct notify_rx *rx = userdata;
        ssize_t n = recv(fd, rx->msg, sizeof(rx->msg) - 1, 0);
        if (n >= 0) {
                rx->msg[n] = '\0';
                rx->got = true;
        }
        return 0;
}

static void test_notify(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(ops_watchdog_freep) struct ops_watchdog *w = NULL;
        char dir[] = "/tmp/spotdrain-notify.XXXXXX", path[64], pid[32];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct notify_rx rx = {};
        sd_event_source *src = NULL;

        assert_int_equal(loop_new(&l), 0);
        /* Without systemd: no watchdog, and every helper is a no-op. */
        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        assert_int_equal(ops_watchdog_start(l, &w), 0);
        assert_null(w);
        assert_int_equal(ops_notify_status("draining %d nodes", 2), 0);

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/notify", dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        rx.fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(rx.fd >= 0);
        assert_int_equal(bind(rx.fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_true(sd_event_add_io(loop_event(l), &src, rx.fd, EPOLLIN, on_notify, &rx) >= 0);
        setenv("NOTIFY_SOCKET", path, 1);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        setenv("WATCHDOG_PID", pid, 1);
        setenv("WATCHDOG_USEC", "200000", 1);

        assert_int_equal(ops_notify_status("draining 1 node:\nspot-a"), 0);
        assert_int_equal(loop_run_until(l, &rx.got, 5000000), 0);
        assert_string_equal(rx.msg, "STATUS=draining 1 node: spot-a");

        rx.got = false;
        assert_int_equal(ops_watchdog_start(l, &w), 0);
        assert_non_null(w);
        assert_true(ops_watchdog_period(w) == 200000);
        assert_int_equal(loop_run_until(l, &rx.got, 5000000), 0);
        assert_string_equal(rx.msg, "WATCHDOG=1");
        rx.got = false;
        assert_int_equal(loop_run_until(l, &rx.got, 5000000), 0); /* and again */
        assert_string_equal(rx.msg, "WATCHDOG=1");
        w = ops_watchdog_free(w);

        rx.got = false;
        assert_int_equal(ops_notify_ready("polling"), 0);
        assert_int_equal(loop_run_until(l, &rx.got, 5000000), 0);
        assert_string_equal(rx.msg, "READY=1\nSTATUS=polling");

        unsetenv("NOTIFY_SOCKET");
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        sd_event_source_disable_unref(src);
        close(rx.fd);
        unlink(path);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_predeclared, reset),
                cmocka_unit_test_setup(test_counters_and_gauges, reset),
                cmocka_unit_test_setup(test_counter_add_since, reset),
                cmocka_unit_test_setup(test_errors, reset),
                cmocka_unit_test_setup(test_escaping, reset),
                cmocka_unit_test_setup(test_histogram, reset),
                cmocka_unit_test_setup(test_null_registry, reset),
                cmocka_unit_test_setup(test_alert_sink, reset),
                cmocka_unit_test_setup(test_endpoint, reset),
                cmocka_unit_test(test_listen_forms),
                cmocka_unit_test(test_loop_watch),
                cmocka_unit_test_setup(test_endpoint_raw, reset),
                cmocka_unit_test(test_endpoint_limits),
                cmocka_unit_test(test_endpoint_split),
                cmocka_unit_test(test_endpoint_stalled_clients),
                cmocka_unit_test(test_endpoint_bracketed_ipv4),
                cmocka_unit_test(test_endpoint_ipv6),
                cmocka_unit_test_setup_teardown(test_endpoint_large_answer, reset, reset),
                cmocka_unit_test(test_endpoint_concurrent),
                cmocka_unit_test(test_error_budget),
                cmocka_unit_test(test_notify),
        };
        return cmocka_run_group_tests(tests, reset, drop);
}
