/* The Kubernetes API operations, built on the request machine of client.c: get and paginated list,
 * discovery and eviction, pod deletion, node cordon/taint/metadata, events (with count bumps) and leases.
 * Multi-step operations re-issue requests on the same call object (kcall_reissue). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/client_internal.h"
#include "spotdrain/kube.h"
#include "spotdrain/metrics.h"

static char *print_json(const cJSON *j)
{
        return cJSON_PrintUnformatted(j);
}

/* ---- get / list ---- */

int kube_get(struct kube_client *c, const char *path, kube_done_fn done, void *userdata,
             struct kube_call **ret_call)
{
        return kube_request(c, "GET", path, NULL, NULL, KUBE_REQ_IDEMPOTENT, done, userdata, ret_call);
}

static void list_step(struct kube_call *call, struct kube_result *r);

static cJSON *list_acc_new(void)
{
        cJSON *acc = cJSON_CreateObject();
        if (!acc || !cJSON_AddObjectToObject(acc, "metadata") || !cJSON_AddArrayToObject(acc, "items")) {
                cJSON_Delete(acc);
                return NULL;
        }
        return acc;
}

static void list_step(struct kube_call *call, struct kube_result *r)
{
        bool continuing = strstr(call->path, "&continue=") != NULL;
        if (r->error == -ESTALE && r->http_status == 410 && continuing && call->restarts < 1) {
                /* The continue token expired: start the list again from the first page. */
                call->restarts++;
                cJSON_Delete(call->acc);
                call->acc = list_acc_new();
                kube_result_clear(r);
                if (!call->acc)
                        return kcall_fail(call, -ENOMEM, NULL);
                return kcall_reissue(call, "GET", call->s_base, NULL, NULL, list_step);
        }
        if (r->error < 0)
                return kcall_finish(call, r);
        cJSON *items = kube_list_items(r->object);
        cJSON *acc_items = kube_list_items(call->acc);
        while (items && items->child) {
                cJSON *item = cJSON_DetachItemViaPointer(items, items->child);
                if (call->keep_fields) {
                        cJSON *pruned = kube_object_prune(item, call->keep_fields);
                        cJSON_Delete(item);
                        if (!pruned) {
                                kube_result_clear(r);
                                return kcall_fail(call, -ENOMEM, NULL);
                        }
                        item = pruned;
                }
                cJSON_AddItemToArray(acc_items, item);
        }
        const char *cont = kube_object_str(r->object, "metadata.continue");
        if (!isempty(cont)) {
                _cleanup_free_ char *esc = kube_query_escape(cont);
                _cleanup_free_ char *next = esc ? strprintf("%s&continue=%s", call->s_base, esc) : NULL;
                kube_result_clear(r);
                if (!next)
                        return kcall_fail(call, -ENOMEM, NULL);
                return kcall_reissue(call, "GET", next, NULL, NULL, list_step);
        }
        const char *rv = kube_object_rv(r->object);
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(call->acc, "metadata");
        if (rv && !cJSON_AddStringToObject(meta, "resourceVersion", rv)) {
                kube_result_clear(r);
                return kcall_fail(call, -ENOMEM, NULL);
        }
        const char *kind = kube_object_str(r->object, "kind");
        if (kind)
                cJSON_AddStringToObject(call->acc, "kind", kind);
        cJSON_Delete(r->object);
        r->object = TAKE_PTR(call->acc);
        kcall_finish(call, r);
}

int kube_list(struct kube_client *c, const char *path, const struct kube_list_options *o, kube_done_fn done,
              void *userdata, struct kube_call **ret_call)
{
        static const struct kube_list_options none = { 0 };
        if (!o)
                o = &none;
        struct buf b = { 0 };
        _cleanup_free_ char *ls = o->label_selector ? kube_query_escape(o->label_selector) : NULL;
        _cleanup_free_ char *fs = o->field_selector ? kube_query_escape(o->field_selector) : NULL;
        _cleanup_free_ char *rv = o->resource_version ? kube_query_escape(o->resource_version) : NULL;
        if ((o->label_selector && !ls) || (o->field_selector && !fs) || (o->resource_version && !rv))
                return -ENOMEM;
        char sep = strchr(path, '?') ? '&' : '?';
        int r = buf_printf(&b, "%s%c", path, sep);
        if (r >= 0 && ls)
                r = buf_printf(&b, "labelSelector=%s&", ls);
        if (r >= 0 && fs)
                r = buf_printf(&b, "fieldSelector=%s&", fs);
        if (r >= 0 && rv)
                r = buf_printf(&b, "resourceVersion=%s&", rv);
        if (r >= 0)
                r = buf_printf(&b, "limit=%u", o->limit ? o->limit : 500);
        if (r < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        _cleanup_free_ char *full = b.data;
        struct kube_call *call;
        r = kcall_new(c, "GET", full, NULL, NULL,
                      KUBE_REQ_IDEMPOTENT | (o->priority ? KUBE_REQ_PRIORITY : 0) |
                          (o->sight ? KUBE_REQ_SIGHT : 0),
                      done, userdata, &call);
        if (r < 0)
                return r;
        call->s_base = strdup(full);
        call->keep_fields = o->keep_fields;
        call->acc = list_acc_new();
        if (!call->s_base || !call->acc) {
                kcall_free(call);
                return -ENOMEM;
        }
        call->step = list_step;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

/* ---- discovery and eviction ---- */

const char *kube_eviction_version(const struct kube_client *c)
{
        return c->eviction_version;
}

/* Remembers which Eviction version GET /api/v1 offers: policy/v1 when pods/eviction says group policy,
 * version v1; otherwise the older v1beta1. */
static int discovery_apply(struct kube_client *c, const cJSON *list)
{
        const char *v = "policy/v1beta1";
        const cJSON *res;
        cJSON_ArrayForEach (res, cJSON_GetObjectItemCaseSensitive(list, "resources")) {
                if (!streq(kube_object_str(res, "name"), "pods/eviction"))
                        continue;
                if (streq(kube_object_str(res, "group"), "policy") &&
                    streq(kube_object_str(res, "version"), "v1"))
                        v = "policy/v1";
        }
        return free_and_strdup(&c->eviction_version, v);
}

static void discover_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error >= 0) {
                int k = discovery_apply(call->client, r->object);
                if (k < 0) {
                        kube_result_clear(r);
                        return kcall_fail(call, k, NULL);
                }
        }
        kcall_finish(call, r);
}

int kube_discover_eviction(struct kube_client *c, kube_done_fn done, void *userdata,
                           struct kube_call **ret_call)
{
        struct kube_call *call;
        int r = kcall_new(c, "GET", "/api/v1", NULL, NULL, KUBE_REQ_IDEMPOTENT | KUBE_REQ_PRIORITY, done,
                          userdata, &call);
        if (r < 0)
                return r;
        call->step = discover_step;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

static cJSON *delete_options(int64_t grace, const char *uid, bool with_kind)
{
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        bool ok = true;
        if (with_kind)
                ok = cJSON_AddStringToObject(o, "apiVersion", "v1") &&
                     cJSON_AddStringToObject(o, "kind", "DeleteOptions");
        if (ok && grace >= 0)
                ok = cJSON_AddNumberToObject(o, "gracePeriodSeconds", (double)grace) != NULL;
        if (ok && uid) {
                cJSON *pre = cJSON_AddObjectToObject(o, "preconditions");
                ok = pre && cJSON_AddStringToObject(pre, "uid", uid);
        }
        if (!ok) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

enum kube_evict_outcome kube_evict_outcome(const struct kube_result *r)
{
        switch (r->http_status) {
        case 200:
        case 201:
                return KUBE_EVICT_EVICTED;
        case 429:
                return KUBE_EVICT_BLOCKED;
        case 404:
                return KUBE_EVICT_GONE;
        case 409:
                return KUBE_EVICT_CONFLICT;
        case 500:
                /* A plain server error is not the several-PDBs answer; only the latter is final. */
                if (r->message && strstr(r->message, "PodDisruptionBudget"))
                        return KUBE_EVICT_MULTIPLE;
                return KUBE_EVICT_ERROR;
        default:
                return KUBE_EVICT_ERROR;
        }
}

static void evict_step(struct kube_call *call, struct kube_result *r)
{
        if (r->http_status == 429) {
                /* "The disruption budget NAME needs N healthy pods and has M currently": the cause is more
                 * useful than the generic Status message, and names the PDB. */
                for (size_t i = 0; i < r->n_causes; i++) {
                        const char *m = r->causes[i].message;
                        if (!streq(r->causes[i].reason, "DisruptionBudget") || !m)
                                continue;
                        const char *prefix = "The disruption budget ";
                        if (startswith(m, prefix)) {
                                const char *s = m + strlen(prefix);
                                free(r->pdb_name);
                                r->pdb_name = strndup(s, strcspn(s, " "));
                        }
                        char *nm = strdup(m);
                        if (nm) {
                                free(r->message);
                                r->message = nm;
                        }
                        break;
                }
        }
        kcall_finish(call, r);
}

/* Aims the call at the eviction subresource with the Eviction body of the discovered version. */
static int evict_prepare(struct kube_call *call)
{
        const char *version = call->client->eviction_version ? call->client->eviction_version : "policy/v1";
        cJSON *ev = cJSON_CreateObject();
        cJSON *meta = ev ? cJSON_AddObjectToObject(ev, "metadata") : NULL;
        bool ok = meta && cJSON_AddStringToObject(ev, "apiVersion", version) &&
                  cJSON_AddStringToObject(ev, "kind", "Eviction") &&
                  cJSON_AddStringToObject(meta, "name", call->s_name) &&
                  cJSON_AddStringToObject(meta, "namespace", call->s_ns);
        if (ok && (call->grace >= 0 || call->s_uid)) {
                cJSON *opts = delete_options(call->grace, call->s_uid, false);
                ok = opts && cJSON_AddItemToObject(ev, "deleteOptions", opts);
                if (!ok)
                        cJSON_Delete(opts);
        }
        _cleanup_free_ char *body = ok ? print_json(ev) : NULL;
        cJSON_Delete(ev);
        _cleanup_free_ char *path = kube_path(NULL, "v1", call->s_ns, "pods", call->s_name, "eviction");
        if (!body || !path)
                return -ENOMEM;
        int r = kcall_set_request(call, "POST", path, "application/json", body);
        if (r < 0)
                return r;
        /* An eviction answer (429, 500) goes back to the caller: the drain engine decides. */
        call->flags &= ~KUBE_REQ_IDEMPOTENT;
        call->step = evict_step;
        return 0;
}

static void evict_discovered_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error < 0)
                return kcall_finish(call, r);
        int k = discovery_apply(call->client, r->object);
        kube_result_clear(r);
        if (k >= 0)
                k = evict_prepare(call);
        if (k < 0)
                return kcall_fail(call, k, NULL);
        kcall_enqueue(call);
}

int kube_evict(struct kube_client *c, const char *namespace, const char *name, const char *uid,
               int64_t grace_seconds, kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!namespace || !name)
                return -EINVAL;
        struct kube_call *call;
        /* Starts as the discovery GET; evict_prepare re-aims the call when the version is already known. */
        int r = kcall_new(c, "GET", "/api/v1", NULL, NULL, KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT, done,
                          userdata, &call);
        if (r < 0)
                return r;
        call->s_ns = strdup(namespace);
        call->s_name = strdup(name);
        call->s_uid = uid ? strdup(uid) : NULL;
        call->grace = grace_seconds;
        if (!call->s_ns || !call->s_name || (uid && !call->s_uid)) {
                kcall_free(call);
                return -ENOMEM;
        }
        call->step = evict_discovered_step;
        if (c->eviction_version) {
                r = evict_prepare(call);
                if (r < 0) {
                        kcall_free(call);
                        return r;
                }
        }
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_pod_delete(struct kube_client *c, const char *namespace, const char *name, const char *uid,
                    int64_t grace_seconds, kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!namespace || !name)
                return -EINVAL;
        _cleanup_free_ char *path = kube_path(NULL, "v1", namespace, "pods", name, NULL);
        cJSON *o = delete_options(grace_seconds, uid, true);
        _cleanup_free_ char *body = o ? print_json(o) : NULL;
        cJSON_Delete(o);
        if (!path || !body)
                return -ENOMEM;
        return kube_request(c, "DELETE", path, "application/json", body, KUBE_REQ_PRIORITY, done, userdata,
                            ret_call);
}

/* ---- nodes ---- */

int kube_node_cordon(struct kube_client *c, const char *node, bool cordon, kube_done_fn done, void *userdata,
                     struct kube_call **ret_call)
{
        if (!node)
                return -EINVAL;
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", node, NULL);
        if (!path)
                return -ENOMEM;
        return kube_request(c, "PATCH", path, "application/strategic-merge-patch+json",
                            cordon ? "{\"spec\":{\"unschedulable\":true}}"
                                   : "{\"spec\":{\"unschedulable\":null}}",
                            /* Setting spec.unschedulable twice changes nothing: safe to retry. */
                            KUBE_REQ_URGENT | KUBE_REQ_IDEMPOTENT, done, userdata, ret_call);
}

static void taint_got_step(struct kube_call *call, struct kube_result *r);

static bool taint_same(const cJSON *t, const struct kube_taint *want)
{
        return streq(kube_object_str(t, "key"), want->key) &&
               (!want->effect || streq(kube_object_str(t, "effect"), want->effect));
}

/* The answer to a read-modify-write's patch: on 409 someone changed the node between our read and our
 * patch, so it is read again (reread: the step that computes the patch). */
static void node_patched(struct kube_call *call, struct kube_result *r, step_fn reread)
{
        if (r->http_status == 409 && call->conflicts < call->client->opts.conflict_retries) {
                call->conflicts++;
                kube_result_clear(r);
                return kcall_reissue(call, "GET", call->s_base, NULL, NULL, reread);
        }
        kcall_finish(call, r);
}

static void taint_patched_step(struct kube_call *call, struct kube_result *r)
{
        node_patched(call, r, taint_got_step);
}

/* Starts a read-modify-write of node: GET it, then step computes the patch from key, value and effect
 * (kept in call->taint) and add. */
static int node_rmw(struct kube_client *c, const char *node, const char *key, const char *value,
                    const char *effect, bool add, unsigned flags, step_fn step, kube_done_fn done,
                    void *userdata, struct kube_call **ret_call)
{
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", node, NULL);
        if (!path)
                return -ENOMEM;
        struct kube_call *call;
        int r = kcall_new(c, "GET", path, NULL, NULL, flags | KUBE_REQ_IDEMPOTENT, done, userdata, &call);
        if (r < 0)
                return r;
        call->s_base = TAKE_PTR(path);
        call->taint.key = strdup(key);
        call->taint.value = value ? strdup(value) : NULL;
        call->taint.effect = effect ? strdup(effect) : NULL;
        call->add = add;
        if (!call->taint.key || (value && !call->taint.value) || (effect && !call->taint.effect)) {
                kcall_free(call);
                return -ENOMEM;
        }
        call->step = step;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

int kube_taints_put(cJSON *spec, const cJSON *old, const struct kube_taint *t, bool add, bool *ret_changed)
{
        cJSON *taints = cJSON_CreateArray();
        bool ok = taints != NULL, changed = false, present = false;
        const cJSON *e;
        cJSON_ArrayForEach (e, old) {
                if (ok && taint_same(e, t)) {
                        present = true;
                        if (!add || !streq_ptr(kube_object_str(e, "value"), t->value)) {
                                changed = true;
                                continue;
                        }
                }
                cJSON *dup = cJSON_Duplicate(e, true);
                ok = ok && dup && cJSON_AddItemToArray(taints, dup);
        }
        if (ok && add && (changed || !present)) {
                cJSON *nt = cJSON_CreateObject();
                ok = nt && cJSON_AddItemToArray(taints, nt) && cJSON_AddStringToObject(nt, "key", t->key) &&
                     (!t->value || cJSON_AddStringToObject(nt, "value", t->value)) &&
                     cJSON_AddStringToObject(nt, "effect", t->effect);
                changed = true;
        }
        if (!ok || !cJSON_AddItemToObject(spec, "taints", taints)) {
                cJSON_Delete(taints);
                return -ENOMEM;
        }
        if (ret_changed)
                *ret_changed = changed;
        return 0;
}

static void taint_got_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error < 0)
                return kcall_finish(call, r);
        const cJSON *old =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->object, "spec"), "taints");
        const char *rv = kube_object_rv(r->object);
        bool changed = false;
        cJSON *patch = cJSON_CreateObject();
        cJSON *meta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
        cJSON *spec = patch ? cJSON_AddObjectToObject(patch, "spec") : NULL;
        bool ok = spec && kube_taints_put(spec, old, &call->taint, call->add, &changed) >= 0 && meta &&
                  (!rv || cJSON_AddStringToObject(meta, "resourceVersion", rv));
        _cleanup_free_ char *body = ok && changed ? print_json(patch) : NULL;
        cJSON_Delete(patch);
        if (!ok || (changed && !body)) {
                kube_result_clear(r);
                return kcall_fail(call, -ENOMEM, NULL);
        }
        if (!changed)
                return kcall_finish(call, r); /* already as wanted: the node as read */
        kube_result_clear(r);
        /* The patch carries the resourceVersion it was computed from, so a retry after a 5xx is safe: a
         * change in between answers 409. */
        kcall_reissue(call, "PATCH", call->s_base, "application/strategic-merge-patch+json", body,
                      taint_patched_step);
}

int kube_node_taint(struct kube_client *c, const char *node, const struct kube_taint *t, bool add,
                    kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!node || !t || !t->key || (add && !t->effect))
                return -EINVAL;
        return node_rmw(c, node, t->key, t->value, t->effect, add, KUBE_REQ_PRIORITY, taint_got_step, done,
                        userdata, ret_call);
}

static void label_got_step(struct kube_call *call, struct kube_result *r);

static void label_patched_step(struct kube_call *call, struct kube_result *r)
{
        node_patched(call, r, label_got_step);
}

/* The label is set only where the key is absent, and removed only while it has our value: a label someone
 * else put there is theirs to keep. */
static void label_got_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error < 0)
                return kcall_finish(call, r);
        const cJSON *labels = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(r->object, "metadata"), "labels");
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(labels, call->taint.key);
        bool ours = cJSON_IsString(have) && streq(have->valuestring, call->taint.value);
        if (call->add ? have != NULL : !ours)
                return kcall_finish(call, r); /* nothing of ours to change: the node as read */
        const char *rv = kube_object_rv(r->object);
        cJSON *patch = cJSON_CreateObject();
        cJSON *meta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
        cJSON *m = meta ? cJSON_AddObjectToObject(meta, "labels") : NULL;
        bool ok = m && (!rv || cJSON_AddStringToObject(meta, "resourceVersion", rv)) &&
                  (call->add ? cJSON_AddStringToObject(m, call->taint.key, call->taint.value) != NULL
                             : cJSON_AddNullToObject(m, call->taint.key) != NULL);
        _cleanup_free_ char *body = ok ? print_json(patch) : NULL;
        cJSON_Delete(patch);
        kube_result_clear(r);
        if (!body)
                return kcall_fail(call, -ENOMEM, NULL);
        /* With the resourceVersion it was read at: a change in between answers 409, and a retry is safe. */
        kcall_reissue(call, "PATCH", call->s_base, "application/merge-patch+json", body, label_patched_step);
}

int kube_node_label_owned(struct kube_client *c, const char *node, const char *key, const char *value,
                          bool add, kube_done_fn done, void *userdata, struct kube_call **ret_call)
{
        if (!node || !key || !value)
                return -EINVAL;
        /* Urgent as the cordon: the first eviction waits for it. */
        return node_rmw(c, node, key, value, NULL, add, KUBE_REQ_URGENT, label_got_step, done, userdata,
                        ret_call);
}

int kube_node_set_meta(struct kube_client *c, const char *node, bool annotations, const char *const *keys,
                       const char *const *values, size_t n, kube_done_fn done, void *userdata,
                       struct kube_call **ret_call)
{
        if (!node || (n > 0 && (!keys || !values)))
                return -EINVAL;
        cJSON *patch = cJSON_CreateObject();
        cJSON *meta = patch ? cJSON_AddObjectToObject(patch, "metadata") : NULL;
        cJSON *m = meta ? cJSON_AddObjectToObject(meta, annotations ? "annotations" : "labels") : NULL;
        bool ok = m != NULL;
        for (size_t i = 0; ok && i < n; i++)
                ok = values[i] ? cJSON_AddStringToObject(m, keys[i], values[i]) != NULL
                               : cJSON_AddNullToObject(m, keys[i]) != NULL;
        _cleanup_free_ char *body = ok ? print_json(patch) : NULL;
        cJSON_Delete(patch);
        _cleanup_free_ char *path = kube_path(NULL, "v1", NULL, "nodes", node, NULL);
        if (!body || !path)
                return -ENOMEM;
        return kube_request(c, "PATCH", path, "application/merge-patch+json", body, KUBE_REQ_PRIORITY, done,
                            userdata, ret_call);
}

/* ---- events ---- */

static char *event_key(const struct kube_event_spec *e)
{
        return strprintf("%s/%s/%s/%s/%s", strnull(e->involved_kind), strnull(e->involved_namespace),
                         strnull(e->involved_name), strnull(e->reason), strnull(e->message));
}

static struct event_memo *event_memo_find(struct kube_client *c, const char *key)
{
        for (size_t i = 0; i < c->n_events; i++)
                if (streq(c->events[i].key, key))
                        return &c->events[i];
        return NULL;
}

static void event_memo_store(struct kube_client *c, const char *key, const char *ns, const char *name,
                             int count)
{
        struct event_memo *m = event_memo_find(c, key);
        if (!m) {
                if (c->n_events < EVENT_CACHE_MAX)
                        m = &c->events[c->n_events++];
                else {
                        /* Oldest slot goes: repeats are bumped only while they are recent. */
                        m = &c->events[c->next_event];
                        c->next_event = (c->next_event + 1) % EVENT_CACHE_MAX;
                }
                free(m->key);
                free(m->namespace);
                free(m->name);
                m->key = strdup(key);
                m->namespace = strdup(ns);
                m->name = strdup(name);
        }
        m->count = count;
        if (!m->key || !m->namespace || !m->name) {
                /* Without a full entry the next repeat just creates a new Event. */
                free(m->key);
                m->key = NULL;
        }
}

static void event_now(char *buf, size_t len)
{
        if (format_rfc3339(clk_now(), buf, len) < 0)
                snprintf(buf, len, "1970-01-01T00:00:00Z");
}

static void event_created_step(struct kube_call *call, struct kube_result *r)
{
        if (r->error >= 0) {
                const char *ns = kube_object_str(r->object, "metadata.namespace");
                const char *name = kube_object_str(r->object, "metadata.name");
                const cJSON *count = cJSON_GetObjectItemCaseSensitive(r->object, "count");
                if (ns && name)
                        event_memo_store(call->client, call->s_extra, ns, name,
                                         cJSON_IsNumber(count) ? count->valueint : 1);
        }
        kcall_finish(call, r);
}

static void event_patched_step(struct kube_call *call, struct kube_result *r)
{
        if (r->http_status == 404) {
                /* The earlier Event expired (events have a TTL): create a fresh one. */
                kube_result_clear(r);
                _cleanup_free_ char *path = kube_path(NULL, "v1", call->s_ns, "events", NULL, NULL);
                if (!path)
                        return kcall_fail(call, -ENOMEM, NULL);
                return kcall_reissue(call, "POST", path, "application/json", call->s_base,
                                     event_created_step);
        }
        event_created_step(call, r);
}

int kube_event_create(struct kube_client *c, const struct kube_event_spec *e, kube_done_fn done,
                      void *userdata, struct kube_call **ret_call)
{
        if (!e || !e->involved_kind || !e->involved_name || !e->reason)
                return -EINVAL;
        if (c->events_in_flight >= KUBE_EVENTS_IN_FLIGHT) {
                (void)metrics_counter_inc(c->opts.metrics, METRIC_EVENTS_DROPPED, "queue_full", NULL);
                return -EBUSY;
        }
        /* The API server slows this client down: Events are the first to go, not the evictions. */
        const char *shed = kube_event_shed_reason(c, NULL, clk_now());
        if (shed) {
                (void)metrics_counter_inc(c->opts.metrics, METRIC_EVENTS_DROPPED, shed, NULL);
                return -EAGAIN;
        }
        const char *ns = e->namespace            ? e->namespace
                         : e->involved_namespace ? e->involved_namespace
                                                 : "default";
        char now[64];
        event_now(now, sizeof(now));
        _cleanup_free_ char *key = event_key(e);
        _cleanup_free_ char *name = strprintf("%s.%" PRIx64 "%04" PRIx64, e->involved_name,
                                              now_realtime_usec(), c->event_seq++ & 0xffff);
        if (!key || !name)
                return -ENOMEM;

        cJSON *ev = cJSON_CreateObject();
        cJSON *meta = ev ? cJSON_AddObjectToObject(ev, "metadata") : NULL;
        cJSON *inv = ev ? cJSON_AddObjectToObject(ev, "involvedObject") : NULL;
        cJSON *src = ev ? cJSON_AddObjectToObject(ev, "source") : NULL;
        bool ok =
            meta && inv && src && cJSON_AddStringToObject(ev, "apiVersion", "v1") &&
            cJSON_AddStringToObject(ev, "kind", "Event") && cJSON_AddStringToObject(meta, "name", name) &&
            cJSON_AddStringToObject(meta, "namespace", ns) &&
            cJSON_AddStringToObject(inv, "kind", e->involved_kind) &&
            cJSON_AddStringToObject(inv, "name", e->involved_name) &&
            (!e->involved_namespace || cJSON_AddStringToObject(inv, "namespace", e->involved_namespace)) &&
            (!e->involved_uid || cJSON_AddStringToObject(inv, "uid", e->involved_uid)) &&
            (!e->involved_api_version ||
             cJSON_AddStringToObject(inv, "apiVersion", e->involved_api_version)) &&
            cJSON_AddStringToObject(ev, "reason", e->reason) &&
            cJSON_AddStringToObject(ev, "message", strnull(e->message)) &&
            cJSON_AddStringToObject(ev, "type", e->warning ? "Warning" : "Normal") &&
            cJSON_AddStringToObject(src, "component", "spotdrain") &&
            cJSON_AddStringToObject(ev, "reportingComponent", "spotdrain") &&
            cJSON_AddStringToObject(ev, "firstTimestamp", now) &&
            cJSON_AddStringToObject(ev, "lastTimestamp", now) && cJSON_AddNumberToObject(ev, "count", 1);
        cJSON *ann = ok && e->n_annotations > 0 ? cJSON_AddObjectToObject(meta, "annotations") : NULL;
        if (e->n_annotations > 0 && !ann)
                ok = false;
        for (size_t i = 0; ok && i < e->n_annotations; i++)
                ok = cJSON_AddStringToObject(ann, e->annotations[i].key, strnull(e->annotations[i].value));
        _cleanup_free_ char *body = ok ? print_json(ev) : NULL;
        cJSON_Delete(ev);
        if (!body)
                return -ENOMEM;

        struct event_memo *m = event_memo_find(c, key);
        _cleanup_free_ char *path = m ? kube_path(NULL, "v1", m->namespace, "events", m->name, NULL)
                                      : kube_path(NULL, "v1", ns, "events", NULL, NULL);
        _cleanup_free_ char *patch =
            m ? strprintf("{\"count\":%d,\"lastTimestamp\":\"%s\"}", m->count + 1, now) : NULL;
        if (!path || (m && !patch))
                return -ENOMEM;
        struct kube_call *call;
        int r =
            m ? kcall_new(c, "PATCH", path, "application/merge-patch+json", patch, 0, done, userdata, &call)
              : kcall_new(c, "POST", path, "application/json", body, 0, done, userdata, &call);
        if (r < 0)
                return r;
        call->event = true;
        c->events_in_flight++;
        call->s_extra = TAKE_PTR(key);
        call->s_base = TAKE_PTR(body);
        call->s_ns = strdup(ns);
        if (!call->s_ns) {
                kcall_free(call);
                return -ENOMEM;
        }
        call->step = m ? event_patched_step : event_created_step;
        kcall_enqueue(call);
        if (ret_call)
                *ret_call = call;
        return 0;
}

/* ---- leases ---- */

static int format_micro_time(uint64_t usec, char *buf, size_t len)
{
        time_t t = (time_t)(usec / 1000000ULL);
        struct tm tm;
        if (!gmtime_r(&t, &tm))
                return -EINVAL;
        int n = snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(usec % 1000000ULL));
        return n > 0 && (size_t)n < len ? 0 : -ENOBUFS;
}

static char *lease_body(const struct kube_lease *l, bool with_rv)
{
        char acquire[64], renew[64];
        cJSON *o = cJSON_CreateObject();
        cJSON *meta = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
        cJSON *spec = o ? cJSON_AddObjectToObject(o, "spec") : NULL;
        bool ok =
            meta && spec && cJSON_AddStringToObject(o, "apiVersion", "coordination.k8s.io/v1") &&
            cJSON_AddStringToObject(o, "kind", "Lease") && cJSON_AddStringToObject(meta, "name", l->name) &&
            cJSON_AddStringToObject(meta, "namespace", l->namespace) &&
            (!with_rv || !l->resource_version ||
             cJSON_AddStringToObject(meta, "resourceVersion", l->resource_version)) &&
            (!l->holder_identity || cJSON_AddStringToObject(spec, "holderIdentity", l->holder_identity)) &&
            (l->lease_duration_seconds <= 0 ||
             cJSON_AddNumberToObject(spec, "leaseDurationSeconds", l->lease_duration_seconds)) &&
            cJSON_AddNumberToObject(spec, "leaseTransitions", l->lease_transitions);
        if (ok && l->acquire_time_usec)
                ok = format_micro_time(l->acquire_time_usec, acquire, sizeof(acquire)) >= 0 &&
                     cJSON_AddStringToObject(spec, "acquireTime", acquire);
        if (ok && l->renew_time_usec)
                ok = format_micro_time(l->renew_time_usec, renew, sizeof(renew)) >= 0 &&
                     cJSON_AddStringToObject(spec, "renewTime", renew);
        char *body = ok ? print_json(o) : NULL;
        cJSON_Delete(o);
        return body;
}

int kube_lease_get(struct kube_client *c, const char *namespace, const char *name, kube_done_fn done,
                   void *userdata, struct kube_call **ret_call)
{
        if (!namespace || !name)
                return -EINVAL;
        _cleanup_free_ char *path = kube_path("coordination.k8s.io", "v1", namespace, "leases", name, NULL);
        if (!path)
                return -ENOMEM;
        return kube_request(c, "GET", path, NULL, NULL, KUBE_REQ_PRIORITY | KUBE_REQ_IDEMPOTENT, done,
                            userdata, ret_call);
}

int kube_lease_create(struct kube_client *c, const struct kube_lease *l, kube_done_fn done, void *userdata,
                      struct kube_call **ret_call)
{
        if (!l || !l->namespace || !l->name)
                return -EINVAL;
        _cleanup_free_ char *path =
            kube_path("coordination.k8s.io", "v1", l->namespace, "leases", NULL, NULL);
        _cleanup_free_ char *body = lease_body(l, false);
        if (!path || !body)
                return -ENOMEM;
        return kube_request(c, "POST", path, "application/json", body, KUBE_REQ_PRIORITY, done, userdata,
                            ret_call);
}

int kube_lease_update(struct kube_client *c, const struct kube_lease *l, kube_done_fn done, void *userdata,
                      struct kube_call **ret_call)
{
        if (!l || !l->namespace || !l->name)
                return -EINVAL;
        _cleanup_free_ char *path =
            kube_path("coordination.k8s.io", "v1", l->namespace, "leases", l->name, NULL);
        _cleanup_free_ char *body = lease_body(l, true);
        if (!path || !body)
                return -ENOMEM;
        return kube_request(c, "PUT", path, "application/json", body, KUBE_REQ_PRIORITY, done, userdata,
                            ret_call);
}

/* The blocking forms (one-shot front ends), on client.c's sync wait. */
int kube_get_sync(struct kube_client *c, const char *path, uint64_t timeout_usec, cJSON **ret,
                  char **ret_error)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_get(c, path, kube_sync_done, &s, &call);
        r = kube_sync_wait(c, r, call, &s, timeout_usec);
        if (r >= 0 && ret)
                *ret = TAKE_PTR(s.result.object);
        if (r < 0 && ret_error)
                *ret_error = s.result.message ? TAKE_PTR(s.result.message)
                                              : strprintf("GET %s: %s", path, strerror(-r));
        kube_result_clear(&s.result);
        return r;
}

int kube_list_sync(struct kube_client *c, const char *path, const struct kube_list_options *o,
                   uint64_t timeout_usec, cJSON **ret, char **ret_error)
{
        struct kube_sync s = { 0 };
        struct kube_call *call = NULL;
        int r = kube_list(c, path, o, kube_sync_done, &s, &call);
        r = kube_sync_wait(c, r, call, &s, timeout_usec);
        if (r >= 0 && ret)
                *ret = TAKE_PTR(s.result.object);
        if (r < 0 && ret_error)
                *ret_error = s.result.message ? TAKE_PTR(s.result.message)
                                              : strprintf("list %s: %s", path, strerror(-r));
        kube_result_clear(&s.result);
        return r;
}
