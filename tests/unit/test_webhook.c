/* The webhook alert sink against a local libmicrohttpd receiver: the Slack and JSON payloads and the
 * template, custom headers and headers from a file, retry after a 500, no retry after a 400, attempts
 * running out, a timeout followed by a retry, the pending limit, the flush before exit
 * (webhook_sink_when_flushed), and no secret in the log. */
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "spotdrain/alert.h"
#include "spotdrain/alert_webhook.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/metrics.h"
#include "spotdrain/service.h"

#define SECRET_PATH  "/services/T000/B000/Xs3cr3tPathToken"
#define SECRET_TOKEN "Bearer hunter2-token-value"
#define MAX_REQ      8
#define HANG         (-1)

/* ---- the receiver ---- */

struct request {
        char *path, *body, *auth, *team, *content_type;
};

struct receiver {
        struct MHD_Daemon *daemon;
        uint16_t port;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int script[MAX_REQ]; /* status per request; HANG: no answer until released; beyond: 200 */
        size_t n_script;
        struct request req[MAX_REQ];
        size_t n_req;
        bool released;
};

static char *dup_or_null(const char *s)
{
        return s ? strdup(s) : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
        struct receiver *rx = cls;
        struct buf *body = *con_cls;
        struct MHD_Response *resp;
        enum MHD_Result ret;
        int status = 200;

        if (!body) {
                body = calloc(1, sizeof(*body));
                if (!body)
                        return MHD_NO;
                *con_cls = body;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                if (buf_append(body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }

        pthread_mutex_lock(&rx->lock);
        if (rx->n_req < MAX_REQ) {
                struct request *r = &rx->req[rx->n_req];
                r->path = strdup(url);
                r->body = strdup(body->data ? body->data : "");
                r->auth = dup_or_null(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"));
                r->team = dup_or_null(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Team"));
                r->content_type =
                    dup_or_null(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"));
                if (rx->n_req < rx->n_script)
                        status = rx->script[rx->n_req];
        }
        rx->n_req++;
        if (status == HANG) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 20;
                while (!rx->released && pthread_cond_timedwait(&rx->cond, &rx->lock, &until) == 0)
                        ;
                pthread_mutex_unlock(&rx->lock);
                return MHD_NO;
        }
        pthread_mutex_unlock(&rx->lock);

        resp = MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        ret = MHD_queue_response(c, (unsigned)status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode t)
{
        struct buf *body = *con_cls;
        if (body) {
                buf_free(body);
                free(body);
                *con_cls = NULL;
        }
}

static struct receiver *receiver_start(const int *script, size_t n_script)
{
        struct receiver *rx = calloc(1, sizeof(*rx));
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        const union MHD_DaemonInfo *info;

        assert_non_null(rx);
        pthread_mutex_init(&rx->lock, NULL);
        pthread_cond_init(&rx->cond, NULL);
        assert_true(n_script <= MAX_REQ);
        if (n_script > 0)
                memcpy(rx->script, script, n_script * sizeof(int));
        rx->n_script = n_script;
        /* A thread per connection: a hanging request must not hold up the next one. */
        rx->daemon = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
                                      NULL, NULL, on_request, rx, MHD_OPTION_SOCK_ADDR, &sa,
                                      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
        assert_non_null(rx->daemon);
        info = MHD_get_daemon_info(rx->daemon, MHD_DAEMON_INFO_BIND_PORT);
        assert_non_null(info);
        rx->port = info->port;
        return rx;
}

static void receiver_stop(struct receiver *rx)
{
        pthread_mutex_lock(&rx->lock);
        rx->released = true;
        pthread_cond_broadcast(&rx->cond);
        pthread_mutex_unlock(&rx->lock);
        MHD_stop_daemon(rx->daemon);
        for (size_t i = 0; i < MAX_REQ; i++) {
                free(rx->req[i].path);
                free(rx->req[i].body);
                free(rx->req[i].auth);
                free(rx->req[i].team);
                free(rx->req[i].content_type);
        }
        pthread_cond_destroy(&rx->cond);
        pthread_mutex_destroy(&rx->lock);
        free(rx);
}

static size_t receiver_count(struct receiver *rx)
{
        size_t n;
        pthread_mutex_lock(&rx->lock);
        n = rx->n_req;
        pthread_mutex_unlock(&rx->lock);
        return n;
}

static char *receiver_url(const struct receiver *rx)
{
        char *u = strprintf("http://127.0.0.1:%u" SECRET_PATH, rx->port);
        assert_non_null(u);
        return u;
}

/* ---- helpers ---- */

static const char *const alert_fields[] = { "instance", "i-0abc",   "deadline", "2026-11-30T06:02:00Z",
                                            "pdb",      "shop/api", NULL };

static struct alert sample_alert(void)
{
        return (struct alert){
                .kind = ALERT_DRAIN_INFEASIBLE,
                .node = "spot-a",
                .fields = alert_fields,
                .message = "PDB shop/api lets one pod go at a time: 12 pods need 240 s, 118 s left",
                .at_usec = 1796018400ULL * 1000000ULL, /* 2026-11-30T06:00:00Z */
        };
}

/* Slack: what a sender controls (node, message, fields) cannot make a link or a mention; the operator's
 * template text can. The json format sends the values as they are. */
static void test_render_slack_escapes(void **state)
{
        static const char *const fields[] = { "pdb", "shop/<api>", "instance", "i-0&1", NULL };
        struct alert a = sample_alert();
        _cleanup_free_ char *slack = NULL, *custom = NULL, *json = NULL;
        cJSON *o;

        a.node = "<!channel>";
        a.message = "pod <https://evil.example|click> & co > 0";
        a.fields = fields;
        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_SLACK, NULL, &slack), 0);
        o = cJSON_Parse(slack);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "text")->valuestring,
                            ":warning: spotdrain drain-infeasible on &lt;!channel&gt;: pod "
                            "&lt;https://evil.example|click&gt; &amp; co &gt; 0");
        cJSON_Delete(o);

        assert_int_equal(
            webhook_render(&a, WEBHOOK_FORMAT_SLACK,
                           "<https://runbook.example/{{kind}}|runbook> {{pdb}} {{instance}} &amp;", &custom),
            0);
        o = cJSON_Parse(custom);
        assert_non_null(o);
        assert_string_equal(
            cJSON_GetObjectItem(o, "text")->valuestring,
            "<https://runbook.example/drain-infeasible|runbook> shop/&lt;api&gt; i-0&amp;1 &amp;");
        cJSON_Delete(o);

        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_JSON, NULL, &json), 0);
        o = cJSON_Parse(json);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "node")->valuestring, "<!channel>");
        assert_string_equal(cJSON_GetObjectItem(o, "message")->valuestring, a.message);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "fields"), "pdb")->valuestring,
                            "shop/<api>");
        cJSON_Delete(o);
}

/* An alert about a pod names it, and passes its post-mortem list on as it is. */
static void test_render_pod_postmortem(void **state)
{
        struct alert a = sample_alert();
        const struct alert_pod pod = { "jobs", "batch-1", "uid-1" };
        _cleanup_free_ char *json = NULL, *plain = NULL;
        cJSON *pm =
            cJSON_Parse("[{\"namespace\":\"jobs\",\"name\":\"batch-1\",\"containers\":"
                        "[{\"name\":\"app\",\"status\":\"running\",\"last_lines\":[\"a\",\"b\"]}]}]");
        cJSON *o;

        assert_non_null(pm);
        a.kind = ALERT_POD_DELETED;
        a.pod = &pod;
        a.postmortem = pm;
        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_JSON, NULL, &json), 0);
        o = cJSON_Parse(json);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "kind")->valuestring, "pod-deleted");
        assert_string_equal(cJSON_GetObjectItem(o, "reason")->valuestring, "DeletedAtLastSafeMoment");
        assert_string_equal(cJSON_GetObjectItem(o, "pod")->valuestring, "batch-1");
        assert_string_equal(cJSON_GetObjectItem(o, "namespace")->valuestring, "jobs");
        assert_true(cJSON_Compare(cJSON_GetObjectItem(o, "postmortem"), pm, true));
        cJSON_Delete(o);

        /* Without one, no key. */
        a.postmortem = NULL;
        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_JSON, NULL, &plain), 0);
        o = cJSON_Parse(plain);
        assert_non_null(o);
        assert_null(cJSON_GetObjectItem(o, "postmortem"));
        cJSON_Delete(o);
        cJSON_Delete(pm);
}

static struct webhook_options fast_options(const char *url)
{
        return (struct webhook_options){
                .url = url,
                .timeout_usec = 2000000,
                .max_attempts = 3,
                .backoff_base_usec = 10000,
                .backoff_max_usec = 50000,
        };
}

/* A pod evicted as planned is its Event's news, not a page: the webhook takes pod-evicted only with a
 * post-mortem (a Job's or a bare pod), and pod-deleted always. */
static void test_pod_evicted_not_paged(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        struct webhook_options o = fast_options("http://127.0.0.1:9/hook");
        const struct alert_pod pod = { "shop", "web-1", NULL };
        static const char *const plain[] = { "pod", "web-1", NULL };
        static const char *const with_pm[] = { "pod", "web-1", "postmortem", "true", NULL };
        struct alert a = sample_alert();

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        a.pod = &pod;
        a.kind = ALERT_POD_EVICTED;
        a.fields = plain;
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_pending(w), 0);
        a.fields = with_pm;
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_pending(w), 1);
        a.kind = ALERT_POD_DELETED;
        a.fields = plain;
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_pending(w), 2);
}

/* ---- tests ---- */

static void test_render(void **state)
{
        struct alert a = sample_alert();
        _cleanup_free_ char *slack = NULL, *json = NULL, *custom = NULL, *nonode = NULL;
        cJSON *o;

        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_SLACK, NULL, &slack), 0);
        assert_string_equal(slack,
                            "{\"text\":\":warning: spotdrain drain-infeasible on spot-a: PDB shop/api lets "
                            "one pod go at a time: 12 pods need 240 s, 118 s left\"}");

        a.node = NULL;
        a.kind = ALERT_NOTICE_RECEIVED;
        a.message = "a \"quoted\"\nmessage";
        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_SLACK, NULL, &nonode), 0);
        assert_string_equal(
            nonode,
            "{\"text\":\":information_source: spotdrain notice-received: a \\\"quoted\\\"\\nmessage\"}");

        a = sample_alert();
        assert_int_equal(
            webhook_render(&a, WEBHOOK_FORMAT_SLACK,
                           "{{reason}}|{{severity}}|{{node}}|{{instance}}|{{deadline}}|{{time}}|"
                           "{{nope}}|{{a {{kind}}|{{ unterminated",
                           &custom),
            0);
        o = cJSON_Parse(custom);
        assert_non_null(o);
        assert_string_equal(
            cJSON_GetObjectItem(o, "text")->valuestring,
            "DrainInfeasible|warning|spot-a|i-0abc|2026-11-30T06:02:00Z|2026-11-30T06:00:00Z|"
            "|{{a drain-infeasible|{{ unterminated");
        cJSON_Delete(o);

        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_JSON, "{{kind}} {{node}}", &json), 0);
        o = cJSON_Parse(json);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "kind")->valuestring, "drain-infeasible");
        assert_string_equal(cJSON_GetObjectItem(o, "reason")->valuestring, "DrainInfeasible");
        assert_string_equal(cJSON_GetObjectItem(o, "severity")->valuestring, "warning");
        assert_string_equal(cJSON_GetObjectItem(o, "node")->valuestring, "spot-a");
        assert_string_equal(cJSON_GetObjectItem(o, "message")->valuestring, a.message);
        assert_string_equal(cJSON_GetObjectItem(o, "time")->valuestring, "2026-11-30T06:00:00Z");
        assert_string_equal(cJSON_GetObjectItem(o, "deadline")->valuestring, "2026-11-30T06:02:00Z");
        assert_string_equal(cJSON_GetObjectItem(o, "text")->valuestring, "drain-infeasible spot-a");
        assert_string_equal(cJSON_GetObjectItem(o, "source")->valuestring, "spotdrain");
        cJSON *fields = cJSON_GetObjectItem(o, "fields");
        assert_string_equal(cJSON_GetObjectItem(fields, "instance")->valuestring, "i-0abc");
        assert_string_equal(cJSON_GetObjectItem(fields, "pdb")->valuestring, "shop/api");
        cJSON_Delete(o);

        a.node = NULL;
        a.fields = NULL;
        free(json);
        assert_int_equal(webhook_render(&a, WEBHOOK_FORMAT_JSON, NULL, &json), 0);
        o = cJSON_Parse(json);
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "node")));
        assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "deadline")));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "fields")), 0);
        cJSON_Delete(o);

        assert_int_equal(webhook_format_from_string("json"), WEBHOOK_FORMAT_JSON);
        assert_int_equal(webhook_format_from_string("slack"), WEBHOOK_FORMAT_SLACK);
        assert_int_equal(webhook_format_from_string("teams"), -EINVAL);
}

static void test_options(void **state)
{
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct webhook_sink *w = NULL;
        struct webhook_options o = {};
        const char *bad_header[] = { "no colon here", NULL };
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), -EINVAL); /* no URL */
        o.url = "ftp://example.com/hook";
        assert_int_equal(webhook_sink_new(l, &o, &w), -EINVAL);
        o.url = "https://hooks.example.com/x";
        o.headers = bad_header;
        assert_int_equal(webhook_sink_new(l, &o, &w), -EINVAL);
        o.headers = NULL;
        o.url_file = "/nonexistent/spotdrain-webhook-url";
        assert_int_equal(webhook_sink_new(l, &o, &w), -ENOENT);
        assert_null(w);

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(webhook_options_from_config(c, &o, NULL), -ENOENT);
        assert_int_equal(config_set_value(c, "alerts.webhook_url", "file:/run/secrets/hook", NULL), 0);
        assert_int_equal(webhook_options_from_config(c, &o, NULL), 0);
        assert_string_equal(o.url_file, "/run/secrets/hook");
        assert_null(o.url);
        assert_int_equal(config_set_value(c, "alerts.webhook_url", "https://hooks.example.com/x", NULL), 0);
        assert_int_equal(webhook_options_from_config(c, &o, NULL), 0);
        assert_string_equal(o.url, "https://hooks.example.com/x");
        assert_int_equal(o.format, WEBHOOK_FORMAT_SLACK);
        assert_null(o.template_text);
        assert_true(o.timeout_usec == 10000000 && o.max_attempts == 5);

        /* Every webhook key comes through the configuration table: environment and --set alike. */
        setenv("SPOTDRAIN_ALERTS_WEBHOOK_FORMAT", "json", 1);
        setenv("SPOTDRAIN_ALERTS_WEBHOOK_TEMPLATE", "{{kind}}", 1);
        setenv("SPOTDRAIN_ALERTS_WEBHOOK_HEADERS_FILE", "/run/secrets/headers", 1);
        setenv("SPOTDRAIN_ALERTS_WEBHOOK_TIMEOUT_SECONDS", "2.5", 1);
        assert_int_equal(config_load_env(c, NULL), 0);
        assert_int_equal(config_set(c, "alerts.webhook_max_attempts=7", NULL), 0);
        assert_int_equal(webhook_options_from_config(c, &o, NULL), 0);
        assert_int_equal(o.format, WEBHOOK_FORMAT_JSON);
        assert_string_equal(o.template_text, "{{kind}}");
        assert_string_equal(o.headers_file, "/run/secrets/headers");
        assert_true(o.timeout_usec == 2500000);
        assert_int_equal(o.max_attempts, 7);

        char *error = NULL;
        assert_int_equal(config_set(c, "alerts.webhook_max_attempts=2.5", &error), -EINVAL);
        assert_non_null(strstr(error, "alerts.webhook_max_attempts"));
        free(error);
        error = NULL;
        setenv("SPOTDRAIN_ALERTS_WEBHOOK_FORMAT", "teams", 1);
        assert_int_equal(config_load_env(c, &error), -EINVAL);
        assert_non_null(strstr(error, "SPOTDRAIN_ALERTS_WEBHOOK_FORMAT"));
        free(error);
        unsetenv("SPOTDRAIN_ALERTS_WEBHOOK_FORMAT");
        unsetenv("SPOTDRAIN_ALERTS_WEBHOOK_TEMPLATE");
        unsetenv("SPOTDRAIN_ALERTS_WEBHOOK_HEADERS_FILE");
        unsetenv("SPOTDRAIN_ALERTS_WEBHOOK_TIMEOUT_SECONDS");
}

/* The example config shipped with the units loads with the real loader (unknown keys are errors there). */
static void test_example_config(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        _cleanup_free_ char *error = NULL;
        struct webhook_options o;

        assert_int_equal(config_new(&c), 0);
        if (config_load_file(c, "systemd/spotdrain.yaml", &error) < 0)
                fail_msg("systemd/spotdrain.yaml: %s", error);
        assert_string_equal(c->ops.metrics_listen, "0.0.0.0:9464");
        assert_non_null(c->aws.queue_url);
        assert_int_equal(webhook_options_from_config(c, &o, NULL), -ENOENT);
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

/* Through the bus, URL and Authorization from files, a custom header: one POST with the Slack body. */
static void test_delivery(void **state)
{
        struct receiver *rx = receiver_start(NULL, 0);
        _cleanup_(metrics_freep) struct metrics *m = NULL; /* outlives the sink */
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        _cleanup_free_ char *url = receiver_url(rx), *url_text = NULL;
        char dir[] = "/tmp/spotdrain-webhook.XXXXXX", url_path[64], hdr_path[64];
        const char *headers[] = { "X-Team: sre", NULL };
        struct webhook_stats st;
        struct webhook_options o = fast_options(NULL);
        double v = 0;

        assert_non_null(mkdtemp(dir));
        snprintf(url_path, sizeof(url_path), "%s/url", dir);
        snprintf(hdr_path, sizeof(hdr_path), "%s/headers", dir);
        url_text = strprintf("  %s\n", url);
        write_file(url_path, url_text);
        write_file(hdr_path, "# the token\n\nAuthorization: " SECRET_TOKEN "\n");
        o.url_file = url_path;
        o.headers_file = hdr_path;
        o.headers = headers;

        assert_int_equal(metrics_new(&m), 0);
        o.metrics = m;
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(webhook_sink_attach(w, b), 0);
        assert_int_equal(alert_emit(b, ALERT_DEADLINE_MISSED, "spot-a", alert_fields, "%d pods left", 3), 0);
        assert_int_equal(webhook_sink_pending(w), 1);
        assert_int_equal(webhook_sink_flush(w, 10000000), 0);

        webhook_sink_stats(w, &st);
        assert_int_equal(st.delivered, 1);
        assert_int_equal(st.retries, 0);
        assert_int_equal(receiver_count(rx), 1);
        assert_string_equal(rx->req[0].path, SECRET_PATH);
        assert_string_equal(rx->req[0].body,
                            "{\"text\":\":warning: spotdrain deadline-missed on spot-a: 3 pods left\"}");
        assert_string_equal(rx->req[0].auth, SECRET_TOKEN);
        assert_string_equal(rx->req[0].team, "sre");
        assert_string_equal(rx->req[0].content_type, "application/json");
        assert_int_equal(metrics_get(m, METRIC_WEBHOOK_DELIVERIES, &v, "delivered", NULL), 0);
        assert_true(v == 1);

        receiver_stop(rx);
        unlink(url_path);
        unlink(hdr_path);
        rmdir(dir);
}

static void run_one(const int *script, size_t n, struct webhook_options o, struct webhook_stats *ret_stats,
                    size_t *ret_requests, char **ret_bodies)
{
        struct receiver *rx = receiver_start(script, n);
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        _cleanup_free_ char *url = receiver_url(rx);
        struct alert a = sample_alert();

        o.url = url;
        o.format = WEBHOOK_FORMAT_JSON;
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_flush(w, 20000000), 0);
        assert_int_equal(webhook_sink_pending(w), 0);
        webhook_sink_stats(w, ret_stats);
        *ret_requests = receiver_count(rx);
        if (ret_bodies)
                for (size_t i = 0; i < *ret_requests && i < MAX_REQ; i++)
                        ret_bodies[i] = rx->req[i].body ? strdup(rx->req[i].body) : NULL;
        receiver_stop(rx);
}

static void test_retry_after_500(void **state)
{
        static const int script[] = { 500, 200 };
        struct webhook_stats st;
        char *bodies[MAX_REQ] = {};
        size_t n;

        run_one(script, ARRAY_SIZE(script), fast_options(NULL), &st, &n, bodies);
        assert_int_equal(n, 2);
        assert_int_equal(st.delivered, 1);
        assert_int_equal(st.retries, 1);
        assert_int_equal(st.failed, 0);
        /* The same payload both times, with every field of the alert. */
        assert_string_equal(bodies[0], bodies[1]);
        cJSON *o = cJSON_Parse(bodies[0]);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "kind")->valuestring, "drain-infeasible");
        assert_string_equal(cJSON_GetObjectItem(o, "node")->valuestring, "spot-a");
        assert_string_equal(cJSON_GetObjectItem(o, "deadline")->valuestring, "2026-11-30T06:02:00Z");
        cJSON_Delete(o);
        for (size_t i = 0; i < MAX_REQ; i++)
                free(bodies[i]);
}

static void test_no_retry_after_400(void **state)
{
        static const int script[] = { 400, 200 };
        struct webhook_stats st;
        size_t n;

        run_one(script, ARRAY_SIZE(script), fast_options(NULL), &st, &n, NULL);
        assert_int_equal(n, 1);
        assert_int_equal(st.delivered, 0);
        assert_int_equal(st.failed, 1);
        assert_int_equal(st.retries, 0);
}

static void test_attempts_run_out(void **state)
{
        static const int script[] = { 503, 429, 502, 200 };
        struct webhook_stats st;
        size_t n;

        run_one(script, ARRAY_SIZE(script), fast_options(NULL), &st, &n, NULL);
        assert_int_equal(n, 3); /* max_attempts */
        assert_int_equal(st.delivered, 0);
        assert_int_equal(st.failed, 1);
        assert_int_equal(st.retries, 2);
}

static void test_timeout(void **state)
{
        static const int script[] = { HANG, 200 };
        struct webhook_options o = fast_options(NULL);
        struct webhook_stats st;
        size_t n;

        o.timeout_usec = 300000;
        run_one(script, ARRAY_SIZE(script), o, &st, &n, NULL);
        assert_int_equal(n, 2);
        assert_int_equal(st.delivered, 1);
        assert_int_equal(st.retries, 1);
}

/* alerts.webhook_proxy: the webhook alone goes through its own proxy (a CONNECT to it for the webhook's
 * host), with no proxy in the environment; the proxy's refusal fails the delivery. */
static void test_own_proxy(void **state)
{
        static const int script[] = { 403 };
        struct receiver *rx = receiver_start(script, 1);
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        _cleanup_free_ char *proxy = receiver_url(rx);
        struct webhook_options o = fast_options("https://hooks.spotdrain-test.invalid/services/x");
        struct webhook_stats st;
        struct alert a = sample_alert();

        assert_int_equal(unsetenv("https_proxy"), 0);
        assert_int_equal(unsetenv("HTTPS_PROXY"), 0);
        o.proxy = proxy;
        o.max_attempts = 1;
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_flush(w, 20000000), 0);
        webhook_sink_stats(w, &st);
        assert_int_equal(st.failed, 1);
        assert_int_equal(receiver_count(rx), 1);
        assert_non_null(strstr(rx->req[0].path, "hooks.spotdrain-test.invalid:443"));
        receiver_stop(rx);
}

static void test_pending_limit(void **state)
{
        struct receiver *rx = receiver_start(NULL, 0);
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        _cleanup_free_ char *url = receiver_url(rx);
        struct webhook_options o = fast_options(url);
        struct alert a = sample_alert();
        struct webhook_stats st;

        o.max_pending = 2;
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        for (int i = 0; i < 3; i++)
                webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_pending(w), 2);
        assert_int_equal(webhook_sink_flush(w, 10000000), 0);
        webhook_sink_stats(w, &st);
        assert_int_equal(st.delivered, 2);
        assert_int_equal(st.dropped, 1);
        assert_int_equal(receiver_count(rx), 2);
        receiver_stop(rx);
}

struct flushed {
        struct loop *loop;
        bool called;
        int error;
};

static void on_flushed(void *userdata, int error)
{
        struct flushed *f = userdata;
        f->called = true;
        f->error = error;
        if (f->loop)
                loop_exit(f->loop, 7);
}

/* webhook_sink_when_flushed(), as a front end ends its loop: an alert whose first attempt failed just before
 * the stop is retried and delivered before the loop ends; an idle sink reports on the next turn (never from
 * inside the call); a receiver that never answers costs the timeout; freeing the sink cancels the wait. */
static void test_when_flushed(void **state)
{
        static const int retry[] = { 503, 200 }, hang[] = { HANG };
        struct receiver *rx = receiver_start(retry, ARRAY_SIZE(retry));
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct webhook_sink *w = NULL;
        _cleanup_free_ char *url = receiver_url(rx);
        struct webhook_options o = fast_options(url);
        struct alert a = sample_alert();
        struct webhook_stats st;
        struct flushed f = {};

        assert_int_equal(loop_new(&l), 0);
        o.backoff_base_usec = o.backoff_max_usec = 300000;
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        assert_int_equal(webhook_sink_when_flushed(w, 1000, NULL, NULL), -EINVAL);
        assert_int_equal(webhook_sink_when_flushed(NULL, 1000, on_flushed, &f), -EINVAL);

        f.loop = l;
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_when_flushed(w, 20000000, on_flushed, &f), 0);
        assert_false(f.called);
        assert_int_equal(loop_run(l), 7);
        assert_true(f.called);
        assert_int_equal(f.error, 0);
        webhook_sink_stats(w, &st);
        assert_int_equal(st.delivered, 1);
        assert_int_equal(st.retries, 1);
        assert_int_equal(receiver_count(rx), 2);
        w = webhook_sink_free(w);
        receiver_stop(rx);
        l = loop_free(l);

        /* Nothing pending: called back on the next turn. */
        rx = receiver_start(hang, ARRAY_SIZE(hang));
        free(url);
        url = receiver_url(rx);
        o = fast_options(url);
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        f = (struct flushed){};
        assert_int_equal(webhook_sink_when_flushed(w, 20000000, on_flushed, &f), 0);
        assert_false(f.called);
        assert_int_equal(loop_run_until(l, &f.called, 5000000), 0);
        assert_int_equal(f.error, 0);

        /* A receiver that never answers: the timeout. */
        f = (struct flushed){};
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_when_flushed(w, 200000, on_flushed, &f), 0);
        assert_int_equal(loop_run_until(l, &f.called, 5000000), 0);
        assert_int_equal(f.error, -ETIMEDOUT);
        assert_int_equal(webhook_sink_pending(w), 1);

        /* Freed while waiting: no call. */
        f = (struct flushed){};
        assert_int_equal(webhook_sink_when_flushed(w, 100000, on_flushed, &f), 0);
        w = webhook_sink_free(w);
        bool never = false;
        assert_int_equal(loop_run_until(l, &never, 300000), -ETIMEDOUT);
        assert_false(f.called);
        receiver_stop(rx);
}

/* Debug logging on, every failure path taken: the log says what happened, never the URL nor the token. */
static void test_no_secret_in_log(void **state)
{
        static const int script[] = { 500, 401 };
        struct receiver *rx = receiver_start(script, ARRAY_SIZE(script));
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_free_ char *url = receiver_url(rx), *refused = NULL, *logged = NULL;
        const char *headers[] = { "Authorization: " SECRET_TOKEN, NULL };
        struct webhook_options o = fast_options(url);
        struct alert a = sample_alert();
        struct webhook_sink *w = NULL;
        struct webhook_stats st;
        size_t len = 0;
        FILE *f = open_memstream(&logged, &len);

        assert_non_null(f);
        log_setup(LOG_FORMAT_TEXT, LOG_DEBUG);
        log_set_output(f);
        o.headers = headers;
        assert_int_equal(loop_new(&l), 0);

        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_flush(w, 10000000), 0);
        webhook_sink_stats(w, &st);
        assert_int_equal(st.failed, 1);
        w = webhook_sink_free(w);

        /* A transport error: the receiver's port once it is gone. */
        refused = strdup(url);
        receiver_stop(rx);
        o.url = refused;
        o.max_attempts = 2;
        assert_int_equal(webhook_sink_new(l, &o, &w), 0);
        webhook_sink_deliver(&a, w);
        assert_int_equal(webhook_sink_flush(w, 10000000), 0);
        webhook_sink_stats(w, &st);
        assert_int_equal(st.failed, 1);
        w = webhook_sink_free(w);

        log_set_output(NULL);
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        fclose(f);
        assert_non_null(logged);
        assert_non_null(strstr(logged, "alert webhook: attempt 1 of 3 answered HTTP 500"));
        assert_non_null(strstr(logged, "alert webhook: attempt 2 of 2 failed"));
        assert_null(strstr(logged, "s3cr3t"));
        assert_null(strstr(logged, "hunter2"));
        free(logged);
        logged = NULL;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_render),
                cmocka_unit_test(test_render_slack_escapes),
                cmocka_unit_test(test_render_pod_postmortem),
                cmocka_unit_test(test_pod_evicted_not_paged),
                cmocka_unit_test(test_options),
                cmocka_unit_test(test_example_config),
                cmocka_unit_test(test_delivery),
                cmocka_unit_test(test_retry_after_500),
                cmocka_unit_test(test_no_retry_after_400),
                cmocka_unit_test(test_attempts_run_out),
                cmocka_unit_test(test_timeout),
                cmocka_unit_test(test_own_proxy),
                cmocka_unit_test(test_pending_limit),
                cmocka_unit_test(test_when_flushed),
                cmocka_unit_test(test_no_secret_in_log),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
