/* The simulator's Kubernetes API server (libmicrohttpd, one thread per connection so that watches can
 * block on the model's condition variable). Every request takes the model lock for its whole duration, so
 * the model sees one request at a time, exactly as its contract (model.h) asks. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define TICK_MAX_USEC (50 * 1000)

/* ---- routing ---- */

/* Splits the path into at most max segments (in place). Returns the count, or -1 for too many. */
static int split_path(char *path, char **segs, int max)
{
        int n = 0;
        char *save = NULL;
        for (char *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
                if (n == max)
                        return -1;
                segs[n++] = t;
        }
        return n;
}

static enum MHD_Result serve_api(struct sim_server *srv, struct MHD_Connection *c, const char *method,
                                 char **segs, int n, const struct sim_http_request *rq)
{
        const char *group, *version;
        struct api_path ap = {};
        char **rest;
        int rn;

        if (streq(segs[0], "api")) {
                if (n == 1)
                        return sim_reply_json(c, MHD_HTTP_OK, sim_discovery_versions(srv));
                group = "";
                version = segs[1];
                rest = segs + 2;
                rn = n - 2;
        } else {
                if (n == 1)
                        return sim_reply_json(c, MHD_HTTP_OK, sim_discovery_group_list());
                if (n == 2) {
                        cJSON *g;
                        if (!sim_group_known(segs[1]))
                                return sim_reply_not_found(c);
                        g = sim_discovery_group(segs[1]);
                        cJSON_AddStringToObject(g, "kind", "APIGroup");
                        cJSON_AddStringToObject(g, "apiVersion", "v1");
                        return sim_reply_json(c, MHD_HTTP_OK, g);
                }
                group = segs[1];
                version = segs[2];
                rest = segs + 3;
                rn = n - 3;
        }
        if (rn == 0) {
                cJSON *l = sim_discovery_resource_list(group, version);
                return l ? sim_reply_json(c, MHD_HTTP_OK, l) : sim_reply_not_found(c);
        }
        if (streq(rest[0], "namespaces") && rn >= 3) {
                ap.ns = rest[1];
                rest += 2;
                rn -= 2;
        }
        if (rn > 3)
                return sim_reply_not_found(c);
        ap.res = sim_resource_find(group, version, rest[0]);
        if (!ap.res || (ap.ns && !ap.res->namespaced))
                return sim_reply_not_found(c);
        ap.name = rn > 1 ? rest[1] : NULL;
        ap.sub = rn > 2 ? rest[2] : NULL;
        if (ap.sub &&
            !(streq(ap.sub, "status") || (streq(ap.sub, "eviction") && ap.res->sim_kind == SIM_POD) ||
              (streq(ap.sub, "log") && ap.res->sim_kind == SIM_POD) ||
              (streq(ap.sub, "scale") && ap.res->sim_kind == SIM_DEPLOYMENT)))
                return sim_reply_not_found(c);

        if (streq(method, "GET")) {
                if (streq(ap.sub, "eviction"))
                        return sim_reply_status(
                            c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
                if (streq(ap.sub, "log"))
                        return sim_serve_pod_log(srv, c, &ap);
                if (streq(ap.sub, "scale"))
                        return sim_serve_scale_get(srv, c, &ap);
                if (sim_arg_true(c, "watch"))
                        return sim_serve_watch(srv, c, &ap);
                return ap.name ? sim_serve_get(srv, c, &ap) : sim_serve_list(srv, c, &ap);
        }
        if (streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH") ||
            streq(method, "DELETE"))
                return sim_serve_write(srv, c, method, &ap, rq);
        return sim_reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                "the server does not allow this method on the requested resource");
}

static enum MHD_Result serve_sim(struct sim_server *srv, struct MHD_Connection *c, const char *what)
{
        struct sim *s = srv->sim;
        cJSON *o;

        if (streq(what, "result"))
                return sim_reply_json(c, MHD_HTTP_OK, sim_result(s));
        if (streq(what, "clock")) {
                o = cJSON_CreateObject();
                if (!o)
                        return MHD_NO;
                cJSON_AddNumberToObject(o, "now", sim_now(s));
                cJSON_AddBoolToObject(o, "finished", sim_finished(s));
                return sim_reply_json(c, MHD_HTTP_OK, o);
        }
        if (streq(what, "writes"))
                return sim_reply_json(c, MHD_HTTP_OK, sim_writes(s));
        if (streq(what, "faults")) {
                /* What the scenario's faults did to the Kubernetes API so far: tests check a fault fired. */
                o = cJSON_CreateObject();
                if (!o)
                        return MHD_NO;
                cJSON_AddNumberToObject(o, "api_errors", (double)srv->n_errors);
                cJSON_AddNumberToObject(o, "api_throttled", (double)srv->n_throttled);
                cJSON_AddNumberToObject(o, "api_apf_rejected", (double)srv->n_apf_rejected);
                cJSON_AddNumberToObject(o, "watches_dropped", (double)srv->n_watch_dropped);
                cJSON_AddNumberToObject(o, "watches_gone", (double)srv->n_watch_gone);
                cJSON_AddNumberToObject(o, "lists_gone", (double)srv->n_list_gone);
                return sim_reply_json(c, MHD_HTTP_OK, o);
        }
        return sim_reply_not_found(c);
}

static enum MHD_Result serve_version(struct MHD_Connection *c)
{
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return MHD_NO;
        cJSON_AddStringToObject(o, "major", "1");
        cJSON_AddStringToObject(o, "minor", "30");
        cJSON_AddStringToObject(o, "gitVersion", "v1.30.0-spotdrain-sim");
        cJSON_AddStringToObject(o, "gitCommit", "0000000000000000000000000000000000000000");
        cJSON_AddStringToObject(o, "gitTreeState", "clean");
        cJSON_AddStringToObject(o, "buildDate", "2026-11-30T00:00:00Z");
        cJSON_AddStringToObject(o, "goVersion", "go1.22.0");
        cJSON_AddStringToObject(o, "compiler", "gc");
        cJSON_AddStringToObject(o, "platform", "linux/amd64");
        return sim_reply_json(c, MHD_HTTP_OK, o);
}

static int dispatch(void *userdata, const struct sim_http_request *rq)
{
        struct sim_server *srv = userdata;
        struct sim *s = srv->sim;
        struct MHD_Connection *c = rq->connection;
        const char *url = rq->url, *method = rq->method;
        _cleanup_free_ char *path = strdup(url);
        char *segs[8];
        enum MHD_Result ret;
        uint64_t before;
        bool resource;
        int n;

        if (!path)
                return -ENOMEM;
        log_debug("sim api: %s %s", method, url);
        n = split_path(path, segs, (int)ARRAY_SIZE(segs));
        if (n == 1 && (streq(segs[0], "healthz") || streq(segs[0], "readyz") || streq(segs[0], "livez")))
                return sim_reply_text(c, MHD_HTTP_OK, "text/plain", strdup("ok")) == MHD_YES ? 0 : -EIO;

        /* Discovery documents stay reliable: kubectl gives up on the first failed one, a real client retries
         * a failed resource request. */
        resource = n >= 1 && ((streq(segs[0], "api") && n >= 3) || (streq(segs[0], "apis") && n >= 4));
        unsigned wait_ms = resource ? srv->latency_ms : 0;
        if (srv->label_latency_ms && n == 4 && streq(segs[0], "api") && streq(segs[2], "nodes") &&
            streq(method, "PATCH") && memmem(rq->body, rq->body_len, "labels", 6))
                wait_ms += srv->label_latency_ms;
        if (wait_ms > 0) {
                struct timespec ts = { .tv_sec = wait_ms / 1000,
                                       .tv_nsec = (long)(wait_ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }

        struct deferred_reply reply = { .c = c };
        sim_lock(s);
        sim_deferred = &reply;
        before = sim_resource_version(s);
        sim_advance(s);
        if (n >= 1 && (streq(segs[0], "api") || streq(segs[0], "apis") || streq(segs[0], "version")))
                sim_count_request(s);
        if (resource && !streq(method, "GET") && !streq(method, "HEAD")) {
                _cleanup_free_ char *what = strprintf("%s %s", method, url);
                if (what)
                        sim_record_write(s, "kubernetes", what);
        }
        if (resource)
                sim_fault_begin(srv, method, url, sim_arg_true(c, "watch"));
        if (resource && sim_fault_draw(srv, srv->error_rate, FAULT_ERROR) && ++srv->n_errors)
                ret = sim_reply_status(
                    c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError",
                    "an error on the server (\"simulated fault\") has prevented the request from "
                    "succeeding");
        else if (resource && !sim_apf_admit(srv, c))
                ret = sim_reply_apf_rejected(srv, c);
        else if (resource && !streq(segs[n - 1], "eviction") &&
                 sim_fault_draw(srv, srv->throttle_rate, FAULT_THROTTLE) && ++srv->n_throttled)
                ret = sim_reply_throttled(c);
        else if (n == 3 && streq(segs[0], "sim") && streq(segs[1], "v1") && streq(method, "GET"))
                ret = serve_sim(srv, c, segs[2]);
        else if (n == 1 && streq(segs[0], "version"))
                ret = serve_version(c);
        else if (n >= 1 && (streq(segs[0], "api") || streq(segs[0], "apis")))
                ret = serve_api(srv, c, method, segs, n, rq);
        else
                ret = sim_reply_not_found(c);
        /* Writes and due actions wake the watchers and the ticker. */
        if (sim_resource_version(s) != before)
                sim_broadcast(s);
        sim_deferred = NULL;
        sim_unlock(s);
        if (reply.set)
                ret = sim_reply_json(c, reply.status, reply.body);
        return ret == MHD_YES ? 0 : -EIO;
}

/* ---- the ticker: runs timed actions as they fall due ---- */

static void *ticker_main(void *p)
{
        struct sim_server *srv = p;
        struct sim *s = srv->sim;

        sim_lock(s);
        while (!atomic_load(&srv->stopping)) {
                uint64_t before = sim_resource_version(s), wait = TICK_MAX_USEC;
                double next = sim_advance(s), scale = sim_time_scale(s);

                if (sim_resource_version(s) != before)
                        sim_broadcast(s);
                if (next >= 0 && scale > 0) {
                        double dt = (next - sim_now(s)) / scale * 1e6;
                        if (dt < (double)wait)
                                wait = dt < 1000 ? 1000 : (uint64_t)dt;
                }
                sim_wait(s, sim_resource_version(s), wait);
        }
        sim_unlock(s);
        return NULL;
}

/* ---- life cycle ---- */

void sim_server_options_from_scenario(const struct ynode *scenario, struct sim_server_options *opt)
{
        const struct ynode *faults = ynode_get(scenario, "faults");
        double rate = 0;
        int64_t latency = 0, seed = 0;

        if (ynode_double(ynode_get(faults, "api_error_rate"), &rate) >= 0 && rate >= 0 && rate <= 1)
                opt->api_error_rate = rate;
        if (ynode_int(ynode_get(faults, "api_latency_ms"), &latency) >= 0 && latency >= 0 &&
            latency <= 600000)
                opt->api_latency_ms = (unsigned)latency;
        if (ynode_int(ynode_get(faults, "node_label_latency_ms"), &latency) >= 0 && latency >= 0 &&
            latency <= 600000)
                opt->node_label_latency_ms = (unsigned)latency;
        if (ynode_int(ynode_get(scenario, "seed"), &seed) >= 0)
                opt->seed = (uint64_t)seed;
        const struct ynode *apf = ynode_get(scenario, "api_priority_fairness");
        int64_t retry = 0;
        if (ynode_double(ynode_get(apf, "qps"), &rate) >= 0 && rate > 0)
                opt->apf_qps = rate;
        if (ynode_double(ynode_get(apf, "burst"), &rate) >= 0 && rate >= 1)
                opt->apf_burst = rate;
        if (ynode_int(ynode_get(apf, "retry_after_seconds"), &retry) >= 0 && retry >= 1 && retry <= 60)
                opt->apf_retry_after = (unsigned)retry;
        static const struct {
                const char *key;
                size_t offset;
        } rates[] = {
                { "watch_drop_rate", offsetof(struct sim_server_options, watch_drop_rate) },
                { "watch_gone_rate", offsetof(struct sim_server_options, watch_gone_rate) },
                { "api_throttle_rate", offsetof(struct sim_server_options, api_throttle_rate) },
                { "sqs_error_rate", offsetof(struct sim_server_options, sqs_error_rate) },
                { "sqs_duplicate_rate", offsetof(struct sim_server_options, sqs_duplicate_rate) },
                { "sqs_throttle_rate", offsetof(struct sim_server_options, sqs_throttle_rate) },
                { "imds_error_rate", offsetof(struct sim_server_options, imds_error_rate) },
                { "imds_timeout_rate", offsetof(struct sim_server_options, imds_timeout_rate) },
                { "sts_error_rate", offsetof(struct sim_server_options, sts_error_rate) },
        };
        for (size_t i = 0; i < ARRAY_SIZE(rates); i++)
                if (ynode_double(ynode_get(faults, rates[i].key), &rate) >= 0 && rate >= 0 && rate <= 1)
                        *(double *)(void *)((char *)opt + rates[i].offset) = rate;
}

int sim_server_start_with(struct sim *s, const struct sim_server_options *opt, struct sim_server **ret)
{
        struct sim_server *srv;
        int r;

        srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->sim = s;
        srv->error_rate = opt->api_error_rate;
        srv->latency_ms = opt->api_latency_ms;
        srv->label_latency_ms = opt->node_label_latency_ms;
        srv->watch_drop_rate = opt->watch_drop_rate;
        srv->watch_gone_rate = opt->watch_gone_rate;
        srv->throttle_rate = opt->api_throttle_rate;
        srv->apf_qps = opt->apf_qps;
        srv->apf_burst = opt->apf_burst >= 1 ? opt->apf_burst : opt->apf_qps >= 1 ? opt->apf_qps : 1;
        srv->apf_retry_after = opt->apf_retry_after ? opt->apf_retry_after : 1;
        srv->rng = sim_fault_mix(opt->seed ? opt->seed : 1);
        atomic_init(&srv->stopping, false);
        r = sim_http_start(opt->listen, dispatch, srv, &srv->http);
        if (r < 0) {
                free(srv);
                return r;
        }
        r = pthread_create(&srv->ticker, NULL, ticker_main, srv);
        if (r != 0) {
                sim_server_stop(srv);
                return -r;
        }
        srv->ticker_started = true;
        *ret = srv;
        return 0;
}

int sim_server_start(struct sim *s, const char *listen, struct sim_server **ret)
{
        const struct sim_server_options opt = { .listen = listen };
        return sim_server_start_with(s, &opt, ret);
}

struct sim_server *sim_server_stop(struct sim_server *srv)
{
        if (!srv)
                return NULL;
        /* Watches and the ticker see the flag at their next wake-up; the broadcast makes that now. */
        atomic_store(&srv->stopping, true);
        sim_lock(srv->sim);
        sim_broadcast(srv->sim);
        sim_unlock(srv->sim);
        if (srv->ticker_started)
                pthread_join(srv->ticker, NULL);
        sim_http_stop(srv->http);
        free(srv);
        return NULL;
}

const char *sim_server_url(const struct sim_server *srv)
{
        return sim_http_url(srv->http);
}

uint16_t sim_server_port(const struct sim_server *srv)
{
        return sim_http_port(srv->http);
}

char *sim_server_kubeconfig(const char *url, const char *token)
{
        return strprintf("apiVersion: v1\n"
                         "kind: Config\n"
                         "clusters:\n"
                         "- name: spotdrain-sim\n"
                         "  cluster:\n"
                         "    server: %s\n"
                         "contexts:\n"
                         "- name: spotdrain-sim\n"
                         "  context:\n"
                         "    cluster: spotdrain-sim\n"
                         "    user: spotdrain-sim\n"
                         "    namespace: default\n"
                         "current-context: spotdrain-sim\n"
                         "users:\n"
                         "- name: spotdrain-sim\n"
                         "  user:\n"
                         "    token: %s\n"
                         "preferences: {}\n",
                         url, token);
}
