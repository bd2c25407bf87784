/* The controller's validating admission webhook for the agents' evictions (admission.h). The decision is
 * a pure function of the AdmissionRequest and a pod → node lookup; the server is libmicrohttpd over TLS,
 * run from the loop's sd-event (its epoll descriptor and its timeout), so that the lookup reads the pod
 * informer on the thread that fills it. */
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <systemd/sd-event.h>

#include "spotdrain/admission.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"
#include "trust.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

#define WEBHOOK_PATH "/validate-eviction"
/* The API servers' connections: a few per API server replica, kept alive. */
#define CONN_LIMIT       64u
#define PER_IP_LIMIT     16u
#define CONN_TIMEOUT_SEC 30u
#define MAX_PEM          (64u * 1024u)
#define RUN_ROUNDS       64u /* MHD_run calls in a row while data is pending, before yielding to the loop */

const char *admission_verdict_label(enum admission_verdict v)
{
        static const char *const labels[_ADMISSION_VERDICT_MAX] = {
                [ADMISSION_NOT_MATCHED] = "not-matched",
                [ADMISSION_ALLOWED] = "allowed",
                [ADMISSION_DENIED] = "denied",
        };
        return (unsigned)v < _ADMISSION_VERDICT_MAX ? labels[v] : NULL;
}

const char *admission_deny_label(enum admission_deny d)
{
        static const char *const labels[_ADMISSION_DENY_MAX] = {
                [ADMISSION_DENY_NONE] = "",
                [ADMISSION_DENY_NO_CLAIM] = "no-node-claim",
                [ADMISSION_DENY_OTHER_NODE] = "other-node",
                [ADMISSION_DENY_UNKNOWN_POD] = "unknown-pod",
                [ADMISSION_DENY_NOT_SYNCED] = "not-synced",
                [ADMISSION_DENY_MALFORMED] = "malformed",
        };
        return (unsigned)d < _ADMISSION_DENY_MAX ? labels[d] : NULL;
}

static const char *string_at(const cJSON *o, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The one node a bound token names, or NULL (none, several, not a string). */
static const char *token_node(const cJSON *user)
{
        const cJSON *extra = cJSON_GetObjectItemCaseSensitive(user, "extra");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(extra, ADMISSION_NODE_CLAIM);

        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 1)
                return NULL;
        v = cJSON_GetArrayItem(v, 0);
        return cJSON_IsString(v) && !isempty(v->valuestring) ? v->valuestring : NULL;
}

/* An eviction: CREATE of the core group's pods, subresource eviction (any version of the resource). */
static bool is_eviction(const cJSON *req)
{
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(req, "resource");
        const char *group = string_at(res, "group");

        return streq(string_at(req, "operation"), "CREATE") && (!group || !*group) &&
               streq(string_at(res, "resource"), "pods") && streq(string_at(req, "subResource"), "eviction");
}

__attribute__((format(printf, 4, 5))) static void decided(struct admission_decision *d,
                                                          enum admission_verdict v, enum admission_deny why,
                                                          const char *fmt, ...)
{
        va_list ap;

        d->verdict = v;
        d->deny = why;
        va_start(ap, fmt);
        (void)vsnprintf(d->message, sizeof(d->message), fmt, ap);
        va_end(ap);
}

void admission_decide(const cJSON *request, char *const *agent_users, admission_pod_node_fn pod_node,
                      void *userdata, struct admission_decision *ret)
{
        const cJSON *user = cJSON_GetObjectItemCaseSensitive(request, "userInfo");
        const char *username = string_at(user, "username"), *node, *ns, *name, *bound = NULL;
        int r;

        *ret = (struct admission_decision){};
        if (!username || !strv_contains(agent_users, username)) {
                decided(ret, ADMISSION_NOT_MATCHED, ADMISSION_DENY_NONE, "not an agent's request");
                return;
        }
        if (!is_eviction(request)) {
                decided(ret, ADMISSION_NOT_MATCHED, ADMISSION_DENY_NONE, "not an eviction");
                return;
        }
        ns = string_at(request, "namespace");
        name = string_at(request, "name");
        node = token_node(user);
        if (!node) {
                decided(ret, ADMISSION_DENIED, ADMISSION_DENY_NO_CLAIM,
                        "the agent's token does not name one node (%s in its user info, which bound service "
                        "account tokens carry from Kubernetes 1.30)",
                        ADMISSION_NODE_CLAIM);
                return;
        }
        snprintf(ret->node, sizeof(ret->node), "%s", node);
        if (isempty(ns) || isempty(name)) {
                decided(ret, ADMISSION_DENIED, ADMISSION_DENY_MALFORMED,
                        "the eviction by the agent on node %s names no pod", node);
                return;
        }
        r = pod_node(userdata, ns, name, &bound);
        if (r < 0) {
                decided(ret, ADMISSION_DENIED, ADMISSION_DENY_NOT_SYNCED,
                        "the eviction webhook has not listed the cluster's pods yet: the eviction of pod "
                        "%s/%s by "
                        "the agent on node %s is refused until it has (retry)",
                        ns, name, node);
                return;
        }
        if (r == 0) {
                decided(ret, ADMISSION_DENIED, ADMISSION_DENY_UNKNOWN_POD,
                        "the eviction webhook knows no pod %s/%s: the agent on node %s may evict only pods "
                        "bound to "
                        "its node",
                        ns, name, node);
                return;
        }
        snprintf(ret->pod_node, sizeof(ret->pod_node), "%s", bound ? bound : "");
        if (!streq(bound, node)) {
                decided(ret, ADMISSION_DENIED, ADMISSION_DENY_OTHER_NODE,
                        "the agent on node %s may not evict pod %s/%s, which is %s%s", node, ns, name,
                        isempty(bound) ? "bound to no node" : "bound to node ", isempty(bound) ? "" : bound);
                return;
        }
        decided(ret, ADMISSION_ALLOWED, ADMISSION_DENY_NONE, "pod %s/%s is bound to node %s", ns, name,
                node);
}

int admission_review(const char *body, size_t len, char *const *agent_users, admission_pod_node_fn pod_node,
                     void *userdata, char **ret_json, struct admission_decision *ret_decision,
                     const char **ret_error)
{
        _cleanup_(cJSON_Deletep) cJSON *in = cJSON_ParseWithLength(body, len);
        _cleanup_(cJSON_Deletep) cJSON *out = NULL;
        struct admission_decision d;
        const cJSON *req;
        cJSON *resp, *status;
        const char *uid;
        char *text;

        if (!in) {
                *ret_error = "the body is not JSON";
                return -EINVAL;
        }
        if (!streq(string_at(in, "apiVersion"), ADMISSION_API_VERSION) ||
            !streq(string_at(in, "kind"), "AdmissionReview")) {
                *ret_error = "not an " ADMISSION_API_VERSION " AdmissionReview (the webhook configuration "
                             "must name admissionReviewVersions: [v1])";
                return -EINVAL;
        }
        req = cJSON_GetObjectItemCaseSensitive(in, "request");
        uid = string_at(req, "uid");
        if (!cJSON_IsObject(req) || isempty(uid)) {
                *ret_error = "the AdmissionReview has no request or no request uid";
                return -EINVAL;
        }
        admission_decide(req, agent_users, pod_node, userdata, &d);

        /* The answer the API server takes: the same apiVersion and kind, response.uid the request's. */
        out = cJSON_CreateObject();
        if (!out || !cJSON_AddStringToObject(out, "apiVersion", ADMISSION_API_VERSION) ||
            !cJSON_AddStringToObject(out, "kind", "AdmissionReview") ||
            !(resp = cJSON_AddObjectToObject(out, "response")) ||
            !cJSON_AddStringToObject(resp, "uid", uid) ||
            !cJSON_AddBoolToObject(resp, "allowed", d.verdict != ADMISSION_DENIED))
                return -ENOMEM;
        if (d.verdict == ADMISSION_DENIED && (!(status = cJSON_AddObjectToObject(resp, "status")) ||
                                              !cJSON_AddStringToObject(status, "status", "Failure") ||
                                              !cJSON_AddStringToObject(status, "message", d.message) ||
                                              !cJSON_AddStringToObject(status, "reason", "Forbidden") ||
                                              !cJSON_AddNumberToObject(status, "code", 403)))
                return -ENOMEM;
        text = cJSON_PrintUnformatted(out);
        if (!text)
                return -ENOMEM;
        *ret_json = text;
        if (ret_decision)
                *ret_decision = d;
        return 0;
}

/* ---- the server ---- */

const struct metric_family_def admission_metric_family = {
        METRIC_ADMISSION_REVIEWS,
        METRIC_COUNTER,
        "AdmissionReviews answered by the eviction webhook, by verdict (allowed, denied, not-matched) and "
        "the reason of a denial (no-node-claim, other-node, unknown-pod, not-synced, malformed).",
        { "verdict", "reason" },
        NULL,
        0,
};

struct admission_server {
        struct loop *loop;
        struct MHD_Daemon *daemon;
        sd_event_source *io, *timer;
        uint16_t port;
        char **agent_users;
        struct kube_informer *pods;
        admission_pod_node_fn pod_node;
        void *pod_node_userdata;
        struct metrics *metrics;
        struct alert_bus *bus;
        struct trust_limiter limiter;
        char *key, *cert;
};

/* A request's body as it arrives. */
struct upload {
        struct buf body;
        bool too_large;
};

static int informer_pod_node(void *userdata, const char *namespace, const char *name, const char **ret_node)
{
        struct admission_server *s = userdata;
        const cJSON *pod, *spec;

        if (!kube_informer_synced(s->pods))
                return -EAGAIN;
        pod = kube_informer_get(s->pods, namespace, name);
        if (!pod)
                return 0;
        spec = cJSON_GetObjectItemCaseSensitive(pod, "spec");
        *ret_node = string_at(spec, "nodeName");
        return 1;
}

/* The webhook's answers: the API server keeps its connection for the next review. */
static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type, char *body)
{
        return (enum MHD_Result)httpd_reply(c, status, type, body, strlen(body), NULL);
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *text)
{
        char *copy = strprintf("%s\n", text);
        return copy ? reply(c, status, "text/plain; charset=utf-8", copy) : MHD_NO;
}

static void record(struct admission_server *s, const struct admission_decision *d)
{
        (void)metrics_counter_inc(s->metrics, METRIC_ADMISSION_REVIEWS, admission_verdict_label(d->verdict),
                                  admission_deny_label(d->deny), NULL);
        if (d->verdict != ADMISSION_DENIED) {
                log_debug("eviction webhook: %s: %s", admission_verdict_label(d->verdict), d->message);
                return;
        }
        log_full(LOG_WARNING, 0,
                 (const char *[]){ "reason", admission_deny_label(d->deny), "token_node", d->node, NULL },
                 "eviction webhook denied: %s", d->message);
        /* An agent evicting elsewhere is what a stolen token does: alert, once per node and reason an hour.
         */
        if (s->bus && trust_limiter_allow(&s->limiter, d->node, (int)d->deny, clk_now()))
                (void)alert_emit(
                    s->bus, ALERT_EVICTION_DENIED, isempty(d->node) ? NULL : d->node,
                    (const char *[]){ "reason", admission_deny_label(d->deny), "pod_node", d->pod_node,
                                      NULL },
                    "%s (further denials for this node and reason are counted, not alerted, for an "
                    "hour)",
                    d->message);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
        struct admission_server *s = cls;
        struct upload *u = *req_cls;
        struct admission_decision d;
        const char *error = NULL;
        char *json = NULL;
        int r;

        if (!u) {
                /* The head is in: refuse what is not a review before any body is read. */
                if (!streq(url, WEBHOOK_PATH))
                        return reply_text(c, MHD_HTTP_NOT_FOUND, "not found");
                if (!streq(method, MHD_HTTP_METHOD_POST))
                        return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST an AdmissionReview");
                u = calloc(1, sizeof(*u));
                if (!u)
                        return MHD_NO;
                *req_cls = u;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                if (u->body.len + *upload_data_size > ADMISSION_MAX_BODY)
                        u->too_large = true;
                else if (buf_append(&u->body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (u->too_large)
                return reply_text(c, MHD_HTTP_CONTENT_TOO_LARGE, "the AdmissionReview is too large");
        r = admission_review(u->body.data ? u->body.data : "", u->body.len, s->agent_users, s->pod_node,
                             s->pod_node_userdata, &json, &d, &error);
        if (r == -EINVAL) {
                log_warning("eviction webhook: refused a request: %s", error);
                return reply_text(c, MHD_HTTP_BAD_REQUEST, error);
        }
        if (r < 0)
                return MHD_NO;
        record(s, &d);
        return reply(c, MHD_HTTP_OK, "application/json", json);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct upload *u = *req_cls;

        if (!u)
                return;
        buf_free(&u->body);
        free(u);
        *req_cls = NULL;
}

/* Runs libmicrohttpd's work and sets the timer to its next timeout: at once while it holds data it has
 * not processed yet (its sockets are edge-triggered, so no new event would come for them), else when a
 * connection would be idle too long. */
static void run(struct admission_server *s)
{
        MHD_UNSIGNED_LONG_LONG ms = 0;
        unsigned rounds = 0;

        do
                (void)MHD_run(s->daemon);
        while (MHD_get_timeout(s->daemon, &ms) == MHD_YES && ms == 0 && ++rounds < RUN_ROUNDS);
        if (MHD_get_timeout(s->daemon, &ms) == MHD_YES) {
                (void)sd_event_source_set_time_relative(s->timer, ms * 1000ULL + 1);
                (void)sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
        } else
                (void)sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
}

static int on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata)
{
        run(userdata);
        return 0;
}

static int on_timer(sd_event_source *es, uint64_t usec, void *userdata)
{
        run(userdata);
        return 0;
}

static int read_pem(const char *path, char **ret)
{
        size_t len;
        int r;

        if (isempty(path))
                return -EINVAL;
        r = read_file_full(path, MAX_PEM, ret, &len);
        if (r < 0)
                log_error_errno(r, "eviction webhook: cannot read %s", path);
        return r;
}

int admission_server_start(struct loop *l, const struct admission_options *o, struct admission_server **ret)
{
        _cleanup_(admission_server_freep) struct admission_server *s = NULL;
        static const char *const pod_fields[] = { "spec.nodeName", NULL };
        unsigned flags = MHD_USE_EPOLL | MHD_USE_TLS | MHD_USE_ERROR_LOG;
        struct sockaddr_storage sa = {};
        const union MHD_DaemonInfo *info;
        socklen_t len;
        int r;

        if (strv_isempty(o->agent_users) || isempty(o->listen))
                return -EINVAL;
        r = httpd_parse_listen(o->listen, &sa, &len);
        if (r < 0)
                return r;
        if (sa.ss_family == AF_INET6)
                flags |= IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)&sa)->sin6_addr)
                             ? MHD_USE_DUAL_STACK
                             : MHD_USE_IPv6;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->loop = l;
        s->metrics = o->metrics;
        s->bus = o->bus;
        for (size_t n = 0; o->agent_users[n]; n++) {
                char **v = realloc(s->agent_users, (n + 2) * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                s->agent_users = v;
                v[n + 1] = NULL;
                if (!(v[n] = strdup(o->agent_users[n])))
                        return -ENOMEM;
        }
        if ((r = read_pem(o->cert_file, &s->cert)) < 0 || (r = read_pem(o->key_file, &s->key)) < 0)
                return r;
        (void)metrics_register(s->metrics, &admission_metric_family);

        if (o->pod_node) {
                s->pod_node = o->pod_node;
                s->pod_node_userdata = o->pod_node_userdata;
        } else {
                /* Every pod's node and nothing else (kube_object_prune keeps the name and namespace). */
                struct kube_watch_options w = { .path = "/api/v1/pods", .keep_fields = pod_fields };
                if (!o->kube)
                        return -EINVAL;
                r = kube_informer_start(o->kube, &w, &(struct kube_informer_ops){}, s, &s->pods);
                if (r < 0)
                        return r;
                s->pod_node = informer_pod_node;
                s->pod_node_userdata = s;
        }

        errno = 0;
        s->daemon = MHD_start_daemon(
            flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
            MHD_OPTION_HTTPS_MEM_KEY, s->key, MHD_OPTION_HTTPS_MEM_CERT, s->cert,
            MHD_OPTION_CONNECTION_LIMIT, CONN_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT, PER_IP_LIMIT,
            MHD_OPTION_CONNECTION_TIMEOUT, CONN_TIMEOUT_SEC, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
            MHD_OPTION_EXTERNAL_LOGGER, httpd_mhd_log, (void *)"eviction webhook", MHD_OPTION_END);
        if (!s->daemon) {
                r = errno;
                log_error(
                    "eviction webhook: cannot serve TLS on %s (a bad key or certificate, or the address "
                    "is taken)",
                    o->listen);
                return r == ENOMEM ? -ENOMEM : -EADDRINUSE;
        }
        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info)
                return -EIO;
        r = sd_event_add_io(loop_event(l), &s->io, info->epoll_fd, EPOLLIN, on_io, s);
        if (r < 0)
                return r;
        /* Accuracy 1 us: sd-event's default (250 ms) would hold every round of pending data that long. */
        r = sd_event_add_time_relative(loop_event(l), &s->timer, CLOCK_MONOTONIC, UINT64_MAX / 2, 1,
                                       on_timer, s);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(s->io, "admission-webhook");
        (void)sd_event_source_set_description(s->timer, "admission-webhook-timeout");
        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
        s->port = info ? info->port : 0;
        run(s);
        log_info("eviction webhook serving TLS on %s (port %u) for %s%s", o->listen, (unsigned)s->port,
                 s->agent_users[0], s->agent_users[1] ? " and other agents" : "");
        *ret = TAKE_PTR(s);
        return 0;
}

struct admission_server *admission_server_free(struct admission_server *s)
{
        if (!s)
                return NULL;
        s->io = sd_event_source_disable_unref(s->io);
        s->timer = sd_event_source_disable_unref(s->timer);
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        s->pods = kube_informer_stop(s->pods);
        strv_free(s->agent_users);
        free_secret(s->key);
        free(s->cert);
        free(s);
        return NULL;
}

uint16_t admission_server_port(const struct admission_server *s)
{
        return s ? s->port : 0;
}

bool admission_server_synced(const struct admission_server *s)
{
        return s && (!s->pods || kube_informer_synced(s->pods));
}
