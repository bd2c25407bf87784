/* The post-mortem of a pod that leaves no trace: a pod deleted around its PDB at its last safe moment, a
 * Job's or a bare pod stopped, whose logs vanish with the node. Its final container statuses and the last
 * lines of each container's log are read through the API (the pod, then GET .../pods/NAME/log?container=C
 * &tailLines=N for each container) while the API still serves them, and go with the pod's alert (its Event,
 * the webhook, the log) and into a file of alerts.postmortem_dir. The alert goes out once both the capture
 * and the API's acceptance of the eviction or delete are in. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "drain/drain_internal.h"
#include "spotdrain/alert.h"
#include "spotdrain/kube.h"

/* What one container's log answer may hold: tailLines bounds the lines, this their total. */
#define LOG_LIMIT_BYTES 65536

struct pm_container {
        struct drain_postmortem *pm;
        char *name;
        char *status; /* "running since T", "terminated: exit 137 (OOMKilled)", ... */
        struct buf log;
        bool truncated;
        struct kube_call *call;
        int error;
        long http_status;
};

struct drain_postmortem {
        struct kube_client *c;
        struct alert_bus *bus;
        enum alert_kind kind;
        unsigned tail_lines;
        char *dir, *node, *namespace, *name, *uid, *summary, *stage;
        char *phase;
        struct kube_call *pod_call;
        int pod_error;
        struct pm_container *ctrs;
        size_t n_ctrs;
        unsigned pending;
        bool captured, accepted, emitted;
};

struct drain_postmortem *drain_postmortem_free(struct drain_postmortem *pm)
{
        if (!pm)
                return NULL;
        kube_call_cancel(pm->pod_call);
        for (size_t i = 0; i < pm->n_ctrs; i++) {
                kube_call_cancel(pm->ctrs[i].call);
                free(pm->ctrs[i].name);
                free(pm->ctrs[i].status);
                buf_free(&pm->ctrs[i].log);
        }
        free(pm->ctrs);
        free(pm->dir);
        free(pm->node);
        free(pm->namespace);
        free(pm->name);
        free(pm->uid);
        free(pm->summary);
        free(pm->stage);
        free(pm->phase);
        free(pm);
        return NULL;
}

/* Adds "last_lines" (the log cut into lines) or "log_error" to a container's entry. */
static bool add_log(cJSON *e, const struct pm_container *k)
{
        if (k->error < 0) {
                _cleanup_free_ char *why =
                    k->http_status ? strprintf("HTTP %ld: %s", k->http_status, strerror(-k->error))
                                   : strdup(strerror(-k->error));
                return why && cJSON_AddStringToObject(e, "log_error", why);
        }
        cJSON *lines = cJSON_AddArrayToObject(e, "last_lines");
        if (!lines)
                return false;
        const char *p = k->log.data, *end = p ? p + k->log.len : NULL;
        while (p && p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
                _cleanup_free_ char *line = strndup(p, n);
                cJSON *v = line ? cJSON_CreateString(line) : NULL;
                if (!v || !cJSON_AddItemToArray(lines, v)) {
                        cJSON_Delete(v);
                        return false;
                }
                p += n + (nl ? 1 : 0);
        }
        return !k->truncated || cJSON_AddTrueToObject(e, "log_truncated");
}

/* The pod's post-mortem object (docs/operations.md, "Post-mortems"). */
static cJSON *build(const struct drain_postmortem *pm)
{
        char at[64];
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        if (format_rfc3339(clk_now(), at, sizeof(at)) < 0)
                at[0] = 0;
        bool ok =
            cJSON_AddStringToObject(o, "namespace", pm->namespace) &&
            cJSON_AddStringToObject(o, "name", pm->name) &&
            (pm->uid ? cJSON_AddStringToObject(o, "uid", pm->uid) : cJSON_AddNullToObject(o, "uid")) &&
            (pm->node ? cJSON_AddStringToObject(o, "node", pm->node) : cJSON_AddNullToObject(o, "node")) &&
            cJSON_AddStringToObject(o, "summary", pm->summary) &&
            cJSON_AddStringToObject(o, "captured_at", at) &&
            cJSON_AddStringToObject(o, "capture", pm->stage ? pm->stage : "at-stop") &&
            (pm->phase ? cJSON_AddStringToObject(o, "phase", pm->phase) : cJSON_AddNullToObject(o, "phase"));
        if (ok && pm->pod_error < 0)
                ok = cJSON_AddStringToObject(o, "pod_error", strerror(-pm->pod_error));
        cJSON *cs = ok ? cJSON_AddArrayToObject(o, "containers") : NULL;
        for (size_t i = 0; cs && ok && i < pm->n_ctrs; i++) {
                const struct pm_container *k = &pm->ctrs[i];
                cJSON *e = cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(cs, e)) {
                        cJSON_Delete(e);
                        ok = false;
                        break;
                }
                ok = cJSON_AddStringToObject(e, "name", k->name) &&
                     cJSON_AddStringToObject(e, "status", k->status ? k->status : "no status") &&
                     (pm->tail_lines == 0 || add_log(e, k));
        }
        if (!ok || !cs) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* The post-mortem in words, for the alert's message (the Event's note, the log, the webhook's text). */
static int render(const cJSON *o, struct buf *b)
{
        int r = buf_printf(b, "%s", kube_object_str(o, "summary"));
        const char *phase = kube_object_str(o, "phase");
        if (r >= 0 && phase)
                r = buf_printf(b, "; phase %s", phase);
        const cJSON *e;
        cJSON_ArrayForEach (e, cJSON_GetObjectItemCaseSensitive(o, "containers")) {
                if (r < 0)
                        break;
                r = buf_printf(b, "\ncontainer %s: %s", kube_object_str(e, "name"),
                               kube_object_str(e, "status"));
                const char *err = kube_object_str(e, "log_error");
                if (r >= 0 && err)
                        r = buf_printf(b, "; log not served (%s)", err);
                const cJSON *line;
                cJSON_ArrayForEach (line, cJSON_GetObjectItemCaseSensitive(e, "last_lines"))
                        if (r >= 0)
                                r = buf_printf(b, "\n  | %s", line->valuestring);
        }
        return r;
}

/* One file per pod and capture: DIR/NAMESPACE_NAME_UID.json for the first, the post-mortem object, and
 * DIR/NAMESPACE_NAME_UID.STAGE.json for a later one. */
static int write_file(const struct drain_postmortem *pm, const cJSON *o, char **ret_path)
{
        _cleanup_free_ char *path =
            strprintf("%s/%s_%s_%s%s%s.json", pm->dir, pm->namespace, pm->name, pm->uid ? pm->uid : "no-uid",
                      pm->stage ? "." : "", pm->stage ? pm->stage : "");
        _cleanup_free_ char *text = cJSON_Print(o);
        if (!path || !text)
                return -ENOMEM;
        int r = write_file_atomic(path, text, strlen(text), 0644);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}

static void maybe_emit(struct drain_postmortem *pm)
{
        _cleanup_(buf_free) struct buf text = { 0 };
        _cleanup_free_ char *file = NULL;
        const struct alert_pod pod = { pm->namespace, pm->name, pm->uid };

        if (!pm->captured || !pm->accepted || pm->emitted)
                return;
        pm->emitted = true;
        cJSON *list = cJSON_CreateArray();
        cJSON *o = list ? build(pm) : NULL;
        if (o && !cJSON_AddItemToArray(list, o)) {
                cJSON_Delete(o);
                o = NULL;
        }
        if (!o || render(o, &text) < 0 || !text.data) {
                cJSON_Delete(list);
                log_debug("out of memory rendering the post-mortem of %s/%s", pm->namespace, pm->name);
                alert_emit_pod(pm->bus, pm->kind, pm->node, &pod, NULL, NULL, "%s", pm->summary);
                return;
        }
        if (pm->dir) {
                int r = write_file(pm, o, &file);
                if (r < 0)
                        log_warning_errno(r, "cannot write the post-mortem of %s/%s to %s, ignoring",
                                          pm->namespace, pm->name, pm->dir);
        }
        const char *fields[] = { "pod",
                                 pm->name,
                                 "namespace",
                                 pm->namespace,
                                 "postmortem",
                                 "true",
                                 file ? "postmortem_file" : NULL,
                                 file,
                                 NULL };
        alert_emit_pod(pm->bus, pm->kind, pm->node, &pod, list, fields, "%s", text.data);
        cJSON_Delete(list);
}

static void call_ended(struct drain_postmortem *pm)
{
        if (--pm->pending > 0)
                return;
        pm->captured = true;
        maybe_emit(pm);
}

static int log_data(const char *data, size_t len, void *userdata)
{
        struct pm_container *k = userdata;
        if (k->log.len + len > LOG_LIMIT_BYTES) {
                k->truncated = true;
                len = LOG_LIMIT_BYTES - k->log.len;
        }
        return len > 0 ? buf_append(&k->log, data, len) : 0;
}

static void log_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct pm_container *k = userdata;
        k->call = NULL;
        k->error = r->error;
        k->http_status = r->http_status;
        if (r->error < 0)
                log_debug("post-mortem of %s/%s: log of %s not served: %s", k->pm->namespace, k->pm->name,
                          k->name, r->message ? r->message : "no answer");
        call_ended(k->pm);
}

/* A containerStatus in words. */
static char *container_status(const cJSON *cs)
{
        const cJSON *state = cJSON_GetObjectItemCaseSensitive(cs, "state");
        const cJSON *restarts = cJSON_GetObjectItemCaseSensitive(cs, "restartCount");
        int n = cJSON_IsNumber(restarts) ? restarts->valueint : 0;
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(state, "terminated");
        if (t) {
                const cJSON *code = cJSON_GetObjectItemCaseSensitive(t, "exitCode");
                const char *reason = kube_object_str(t, "reason");
                return strprintf("terminated: exit %d%s%s%s, %d restart%s",
                                 cJSON_IsNumber(code) ? code->valueint : -1, reason ? " (" : "",
                                 reason ? reason : "", reason ? ")" : "", n, n == 1 ? "" : "s");
        }
        const cJSON *w = cJSON_GetObjectItemCaseSensitive(state, "waiting");
        if (w) {
                const char *reason = kube_object_str(w, "reason");
                return strprintf("waiting%s%s, %d restart%s", reason ? ": " : "", reason ? reason : "", n,
                                 n == 1 ? "" : "s");
        }
        const char *since = kube_object_str(state, "running.startedAt");
        const cJSON *ready = cJSON_GetObjectItemCaseSensitive(cs, "ready");
        return strprintf("running%s%s, %s, %d restart%s", since ? " since " : "", since ? since : "",
                         cJSON_IsTrue(ready) ? "ready" : "not ready", n, n == 1 ? "" : "s");
}

static int add_container(struct drain_postmortem *pm, const char *name, const cJSON *statuses)
{
        struct pm_container *a = realloc(pm->ctrs, (pm->n_ctrs + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        pm->ctrs = a;
        struct pm_container *k = &pm->ctrs[pm->n_ctrs];
        *k = (struct pm_container){ .pm = pm, .name = strdup(name) };
        if (!k->name)
                return -ENOMEM;
        pm->n_ctrs++;
        const cJSON *cs;
        cJSON_ArrayForEach (cs, statuses)
                if (streq_ptr(kube_object_str(cs, "name"), name)) {
                        k->status = container_status(cs);
                        break;
                }
        return 0;
}

static void start_logs(struct drain_postmortem *pm)
{
        for (size_t i = 0; i < pm->n_ctrs; i++) {
                struct pm_container *k = &pm->ctrs[i];
                _cleanup_free_ char *base = kube_path(NULL, "v1", pm->namespace, "pods", pm->name, "log");
                _cleanup_free_ char *container = kube_query_escape(k->name);
                _cleanup_free_ char *path = base && container
                                                ? strprintf("%s?container=%s&tailLines=%u&limitBytes=%d",
                                                            base, container, pm->tail_lines, LOG_LIMIT_BYTES)
                                                : NULL;
                int r =
                    path ? kube_request_stream(pm->c, path, 0, log_data, log_done, k, &k->call) : -ENOMEM;
                if (r < 0)
                        k->error = r;
                else
                        pm->pending++;
        }
}

/* The phase and each container's status of the pod object obj. */
static void read_pod(struct drain_postmortem *pm, const cJSON *obj)
{
        const cJSON *containers =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(obj, "spec"), "containers");
        const cJSON *statuses = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(obj, "status"), "containerStatuses");
        const char *phase = kube_object_str(obj, "status.phase");
        pm->phase = phase ? strdup(phase) : NULL;
        /* The drain's informer keeps no spec.containers (drain_pod_fields): the statuses name them. */
        if (!cJSON_IsArray(containers))
                containers = statuses;
        const cJSON *ct;
        cJSON_ArrayForEach (ct, containers) {
                const char *name = kube_object_str(ct, "name");
                if (name && add_container(pm, name, statuses) < 0) {
                        log_debug("out of memory taking the post-mortem of %s/%s", pm->namespace, pm->name);
                        break;
                }
        }
}

static void pod_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct drain_postmortem *pm = userdata;
        pm->pod_call = NULL;
        pm->pod_error = r->error;
        if (r->error >= 0) {
                read_pod(pm, r->object);
                if (pm->tail_lines > 0)
                        start_logs(pm);
        } else
                log_debug("post-mortem of %s/%s: cannot read the pod: %s", pm->namespace, pm->name,
                          r->message ? r->message : "no answer");
        call_ended(pm);
}

static struct drain_postmortem *pm_new(struct kube_client *c, struct alert_bus *bus,
                                       const struct drain_postmortem_spec *s)
{
        struct drain_postmortem *pm = calloc(1, sizeof(*pm));
        if (!pm)
                return NULL;
        *pm = (struct drain_postmortem){ .c = c, .bus = bus, .kind = s->kind, .tail_lines = s->tail_lines };
        if ((s->dir && !(pm->dir = strdup(s->dir))) || (s->node && !(pm->node = strdup(s->node))) ||
            !(pm->namespace = strdup(s->namespace)) || !(pm->name = strdup(s->name)) ||
            (s->uid && !(pm->uid = strdup(s->uid))) || !(pm->summary = strdup(s->summary)) ||
            (s->stage && !(pm->stage = strdup(s->stage))))
                return drain_postmortem_free(pm);
        return pm;
}

int drain_postmortem_of_object(struct alert_bus *bus, const struct drain_postmortem_spec *s,
                               const cJSON *obj, struct drain_postmortem **ret)
{
        if (!s || !s->namespace || !s->name || !s->summary || !obj)
                return -EINVAL;
        struct drain_postmortem *pm = pm_new(NULL, bus, s);
        if (!pm)
                return -ENOMEM;
        read_pod(pm, obj);
        /* The logs were the node's: nothing serves them any more. */
        for (size_t i = 0; i < pm->n_ctrs; i++)
                pm->ctrs[i].error = -EHOSTDOWN;
        pm->captured = true;
        *ret = pm;
        return 0;
}

int drain_postmortem_start(struct kube_client *c, struct alert_bus *bus,
                           const struct drain_postmortem_spec *s, struct drain_postmortem **ret)
{
        if (!c || !s || !s->namespace || !s->name || !s->summary)
                return -EINVAL;
        struct drain_postmortem *pm = pm_new(c, bus, s);
        if (!pm)
                return -ENOMEM;
        if (s->seen) {
                pm->pending = 1;
                read_pod(pm, s->seen);
                if (pm->tail_lines > 0)
                        start_logs(pm);
                call_ended(pm);
                *ret = pm;
                return 0;
        }
        _cleanup_free_ char *path = kube_path(NULL, "v1", pm->namespace, "pods", pm->name, NULL);
        int r = path ? kube_get(c, path, pod_done, pm, &pm->pod_call) : -ENOMEM;
        if (r < 0) {
                drain_postmortem_free(pm);
                return r;
        }
        pm->pending = 1;
        *ret = pm;
        return 0;
}

void drain_postmortem_accepted(struct drain_postmortem *pm)
{
        if (!pm)
                return;
        pm->accepted = true;
        maybe_emit(pm);
}

bool drain_postmortem_emitted(const struct drain_postmortem *pm)
{
        return pm && pm->emitted;
}

void drain_postmortem_flush(struct drain_postmortem *pm)
{
        if (!pm || pm->captured)
                return;
        if (pm->pod_call) {
                pm->pod_call = kube_call_cancel(pm->pod_call);
                pm->pod_error = -ETIMEDOUT;
        }
        for (size_t i = 0; i < pm->n_ctrs; i++)
                if (pm->ctrs[i].call) {
                        pm->ctrs[i].call = kube_call_cancel(pm->ctrs[i].call);
                        pm->ctrs[i].error = -ETIMEDOUT;
                }
        pm->pending = 0;
        pm->captured = true;
        maybe_emit(pm);
}
