/* cJSON → the small structs the drain engine works with: pods, nodes, PDBs (with label selectors), leases;
 * and the helpers that build API paths and read or prune objects whatever their kind. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/kube.h"

static const cJSON *jget(const cJSON *o, const char *key)
{
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

static const char *jstr(const cJSON *o, const char *key)
{
        const cJSON *v = jget(o, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Copies an optional string field; -ENOMEM only when it was there and could not be copied. */
static int jdup(const cJSON *o, const char *key, char **ret)
{
        const char *s = jstr(o, key);
        if (!s) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static bool jint(const cJSON *o, const char *key, int64_t *ret)
{
        const cJSON *v = jget(o, key);
        if (!cJSON_IsNumber(v))
                return false;
        *ret = (int64_t)v->valuedouble;
        return true;
}

static uint64_t jtime(const cJSON *o, const char *key)
{
        uint64_t t;
        const char *s = jstr(o, key);
        return s && parse_rfc3339(s, &t) >= 0 ? t : 0;
}

const char *kube_kv_get(const struct kube_kv *kv, size_t n, const char *key)
{
        for (size_t i = 0; i < n; i++)
                if (streq(kv[i].key, key))
                        return kv[i].value;
        return NULL;
}

void kube_kv_free_array(struct kube_kv *kv, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(kv[i].key);
                free(kv[i].value);
        }
        free(kv);
}

/* A JSON object of strings → key/value array (non-string values are skipped). */
static int kv_parse(const cJSON *o, struct kube_kv **ret, size_t *ret_n)
{
        *ret = NULL;
        *ret_n = 0;
        int n = cJSON_IsObject(o) ? cJSON_GetArraySize(o) : 0;
        if (n <= 0)
                return 0;
        struct kube_kv *kv = calloc((size_t)n, sizeof(*kv));
        if (!kv)
                return -ENOMEM;
        size_t k = 0;
        const cJSON *e;
        cJSON_ArrayForEach (e, o) {
                if (!cJSON_IsString(e) || !e->string)
                        continue;
                kv[k].key = strdup(e->string);
                kv[k].value = strdup(e->valuestring);
                k++;
                if (!kv[k - 1].key || !kv[k - 1].value) {
                        kube_kv_free_array(kv, k);
                        return -ENOMEM;
                }
        }
        *ret = kv;
        *ret_n = k;
        return 0;
}

/* ---- pods ---- */

void kube_pod_clear(struct kube_pod *p)
{
        if (!p)
                return;
        free(p->namespace);
        free(p->name);
        free(p->uid);
        free(p->node_name);
        free(p->phase);
        free(p->owner_kind);
        free(p->owner_name);
        free(p->priority_class);
        kube_kv_free_array(p->labels, p->n_labels);
        kube_kv_free_array(p->annotations, p->n_annotations);
        *p = (struct kube_pod){ 0 };
}

int64_t kube_pod_stop_grace(const struct kube_pod *p)
{
        return p->deletion_grace_seconds > 0 ? p->deletion_grace_seconds : p->grace_seconds;
}

bool kube_pod_force_deleted(const struct kube_pod *p, uint64_t gone_usec)
{
        return p->deletion_grace_seconds == 0 && !p->stopped_usec && gone_usec < p->deleted_usec + 1000000;
}

int kube_pod_parse(const cJSON *obj, struct kube_pod *ret)
{
        if (!cJSON_IsObject(obj))
                return -EINVAL;
        const cJSON *meta = jget(obj, "metadata"), *spec = jget(obj, "spec"), *status = jget(obj, "status");
        if (!jstr(meta, "name"))
                return -EINVAL;
        _cleanup_(kube_pod_clear) struct kube_pod p = { .grace_seconds = 30, .deletion_grace_seconds = -1 };
        if (jdup(meta, "namespace", &p.namespace) < 0 || jdup(meta, "name", &p.name) < 0 ||
            jdup(meta, "uid", &p.uid) < 0 || jdup(spec, "nodeName", &p.node_name) < 0 ||
            jdup(status, "phase", &p.phase) < 0 || jdup(spec, "priorityClassName", &p.priority_class) < 0 ||
            kv_parse(jget(meta, "labels"), &p.labels, &p.n_labels) < 0 ||
            kv_parse(jget(meta, "annotations"), &p.annotations, &p.n_annotations) < 0)
                return -ENOMEM;
        p.creation_usec = jtime(meta, "creationTimestamp");
        p.deletion_usec = jtime(meta, "deletionTimestamp");
        int64_t v;
        if (jint(spec, "priority", &v)) {
                p.has_priority = true;
                p.priority = (int32_t)v;
        }
        if (jint(spec, "terminationGracePeriodSeconds", &v) && v >= 0)
                p.grace_seconds = v;
        if (jint(meta, "deletionGracePeriodSeconds", &v) && v >= 0)
                p.deletion_grace_seconds = v;
        uint64_t grace_usec =
            (uint64_t)(p.deletion_grace_seconds >= 0 ? p.deletion_grace_seconds : p.grace_seconds) * 1000000;
        if (p.deletion_usec > grace_usec)
                p.deleted_usec = p.deletion_usec - grace_usec;

        /* The controller owner is what replaces the pod; without one, the first owner says what it is. */
        const cJSON *owner, *chosen = NULL;
        cJSON_ArrayForEach (owner, jget(meta, "ownerReferences")) {
                if (cJSON_IsTrue(jget(owner, "controller"))) {
                        chosen = owner;
                        break;
                }
                if (!chosen)
                        chosen = owner;
        }
        if (chosen) {
                if (jdup(chosen, "kind", &p.owner_kind) < 0 || jdup(chosen, "name", &p.owner_name) < 0)
                        return -ENOMEM;
                p.owner_controller = cJSON_IsTrue(jget(chosen, "controller"));
        }

        const cJSON *vol;
        cJSON_ArrayForEach (vol, jget(spec, "volumes")) {
                if (jget(vol, "emptyDir"))
                        p.has_emptydir = true;
        }
        p.mirror = kube_kv_get(p.annotations, p.n_annotations, "kubernetes.io/config.mirror") != NULL;

        /* Every container reported its end: when the last one ended. */
        const cJSON *cs;
        uint64_t stopped = 0;
        cJSON_ArrayForEach (cs, jget(status, "containerStatuses")) {
                uint64_t t = jtime(jget(jget(cs, "state"), "terminated"), "finishedAt");
                if (!t) {
                        stopped = 0;
                        break;
                }
                stopped = t > stopped ? t : stopped;
        }
        p.stopped_usec = stopped;

        const cJSON *cond;
        cJSON_ArrayForEach (cond, jget(status, "conditions")) {
                if (!streq(jstr(cond, "type"), "Ready"))
                        continue;
                p.ready = streq(jstr(cond, "status"), "True");
                p.ready_transition_usec = jtime(cond, "lastTransitionTime");
        }
        *ret = p;
        p = (struct kube_pod){ 0 };
        return 0;
}

const char *kube_pod_annotation(const struct kube_pod *p, const char *key)
{
        return kube_kv_get(p->annotations, p->n_annotations, key);
}

bool kube_pod_killed_with_node(const cJSON *obj)
{
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(obj, "status");
        const cJSON *c, *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
        const cJSON *statuses = cJSON_GetObjectItemCaseSensitive(status, "containerStatuses");
        bool gc = false;
        cJSON_ArrayForEach (c, conds)
                gc = gc || (streq_ptr(kube_object_str(c, "type"), "DisruptionTarget") &&
                            streq_ptr(kube_object_str(c, "status"), "True") &&
                            streq_ptr(kube_object_str(c, "reason"), "DeletionByPodGC"));
        if (!gc)
                return false;
        if (cJSON_GetArraySize(statuses) == 0)
                return true;
        cJSON_ArrayForEach (c, statuses)
                if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "state"),
                                                      "terminated"))
                        return true;
        return false; /* it had stopped before its node went */
}

int kube_pod_sigkilled(const cJSON *obj)
{
        const cJSON *cs, *statuses = cJSON_GetObjectItemCaseSensitive(
                             cJSON_GetObjectItemCaseSensitive(obj, "status"), "containerStatuses");
        int r = -1;
        cJSON_ArrayForEach (cs, statuses) {
                const cJSON *code = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(cs, "state"),
                                                     "terminated"),
                    "exitCode");
                if (cJSON_IsNumber(code) && code->valueint == 137)
                        return 1;
                if (cJSON_IsNumber(code))
                        r = 0;
        }
        return r;
}

/* ---- nodes ---- */

void kube_node_clear(struct kube_node *n)
{
        if (!n)
                return;
        free(n->name);
        free(n->uid);
        free(n->provider_id);
        free(n->instance_id);
        for (size_t i = 0; i < n->n_taints; i++) {
                free(n->taints[i].key);
                free(n->taints[i].value);
                free(n->taints[i].effect);
        }
        free(n->taints);
        kube_kv_free_array(n->labels, n->n_labels);
        kube_kv_free_array(n->annotations, n->n_annotations);
        *n = (struct kube_node){ 0 };
}

/* "aws:///us-east-1a/i-0abc..." → "i-0abc...". */
static int instance_from_provider_id(const char *pid, char **ret)
{
        *ret = NULL;
        if (!startswith(pid, "aws://"))
                return 0;
        const char *slash = strrchr(pid, '/');
        if (!slash || !startswith(slash + 1, "i-"))
                return 0;
        *ret = strdup(slash + 1);
        return *ret ? 0 : -ENOMEM;
}

const char *const kube_node_fields[] = {
        "metadata.labels", "metadata.annotations", "spec", "status.conditions[type=Ready]", NULL,
};

int kube_node_parse(const cJSON *obj, struct kube_node *ret)
{
        if (!cJSON_IsObject(obj))
                return -EINVAL;
        const cJSON *meta = jget(obj, "metadata"), *spec = jget(obj, "spec"), *status = jget(obj, "status");
        if (!jstr(meta, "name"))
                return -EINVAL;
        _cleanup_(kube_node_clear) struct kube_node n = { 0 };
        if (jdup(meta, "name", &n.name) < 0 || jdup(meta, "uid", &n.uid) < 0 ||
            jdup(spec, "providerID", &n.provider_id) < 0 ||
            instance_from_provider_id(n.provider_id, &n.instance_id) < 0 ||
            kv_parse(jget(meta, "labels"), &n.labels, &n.n_labels) < 0 ||
            kv_parse(jget(meta, "annotations"), &n.annotations, &n.n_annotations) < 0)
                return -ENOMEM;
        n.unschedulable = cJSON_IsTrue(jget(spec, "unschedulable"));
        int nt = cJSON_GetArraySize(jget(spec, "taints"));
        if (nt > 0) {
                n.taints = calloc((size_t)nt, sizeof(*n.taints));
                if (!n.taints)
                        return -ENOMEM;
                const cJSON *t;
                cJSON_ArrayForEach (t, jget(spec, "taints")) {
                        struct kube_taint *kt = &n.taints[n.n_taints++];
                        if (jdup(t, "key", &kt->key) < 0 || jdup(t, "value", &kt->value) < 0 ||
                            jdup(t, "effect", &kt->effect) < 0)
                                return -ENOMEM;
                }
        }
        const cJSON *cond;
        cJSON_ArrayForEach (cond, jget(status, "conditions")) {
                if (streq(jstr(cond, "type"), "Ready"))
                        n.ready = streq(jstr(cond, "status"), "True");
        }
        *ret = n;
        n = (struct kube_node){ 0 };
        return 0;
}

/* ---- label selectors ---- */

void kube_selector_clear(struct kube_selector *s)
{
        if (!s)
                return;
        kube_kv_free_array(s->match_labels, s->n_match_labels);
        for (size_t i = 0; i < s->n_exprs; i++) {
                free(s->exprs[i].key);
                for (size_t j = 0; j < s->exprs[i].n_values; j++)
                        free(s->exprs[i].values[j]);
                free(s->exprs[i].values);
        }
        free(s->exprs);
        *s = (struct kube_selector){ 0 };
}

int kube_selector_parse(const cJSON *sel, struct kube_selector *ret)
{
        _cleanup_(kube_selector_clear) struct kube_selector s = { 0 };
        if (cJSON_IsNull(sel) || !sel) {
                *ret = s;
                return 0;
        }
        if (!cJSON_IsObject(sel))
                return -EINVAL;
        s.present = true;
        if (kv_parse(jget(sel, "matchLabels"), &s.match_labels, &s.n_match_labels) < 0)
                return -ENOMEM;
        const cJSON *exprs = jget(sel, "matchExpressions");
        int n = cJSON_GetArraySize(exprs);
        if (n > 0) {
                s.exprs = calloc((size_t)n, sizeof(*s.exprs));
                if (!s.exprs)
                        return -ENOMEM;
                const cJSON *e;
                cJSON_ArrayForEach (e, exprs) {
                        const char *op = jstr(e, "operator");
                        struct kube_requirement *q = &s.exprs[s.n_exprs++];
                        if (jdup(e, "key", &q->key) < 0)
                                return -ENOMEM;
                        if (!q->key)
                                return -EINVAL;
                        if (streq(op, "In"))
                                q->op = KUBE_SEL_IN;
                        else if (streq(op, "NotIn"))
                                q->op = KUBE_SEL_NOT_IN;
                        else if (streq(op, "Exists"))
                                q->op = KUBE_SEL_EXISTS;
                        else if (streq(op, "DoesNotExist"))
                                q->op = KUBE_SEL_DOES_NOT_EXIST;
                        else
                                return -EINVAL;
                        const cJSON *vals = jget(e, "values");
                        int nv = cJSON_GetArraySize(vals);
                        if (nv > 0) {
                                q->values = calloc((size_t)nv, sizeof(char *));
                                if (!q->values)
                                        return -ENOMEM;
                                const cJSON *v;
                                cJSON_ArrayForEach (v, vals) {
                                        if (!cJSON_IsString(v))
                                                continue;
                                        q->values[q->n_values] = strdup(v->valuestring);
                                        if (!q->values[q->n_values++])
                                                return -ENOMEM;
                                }
                        }
                }
        }
        *ret = s;
        s = (struct kube_selector){ 0 };
        return 0;
}

static bool requirement_matches(const struct kube_requirement *q, const struct kube_kv *labels, size_t n)
{
        const char *v = kube_kv_get(labels, n, q->key);
        bool in = false;
        for (size_t i = 0; v && i < q->n_values; i++)
                if (streq(q->values[i], v))
                        in = true;
        switch (q->op) {
        case KUBE_SEL_IN:
                return in;
        case KUBE_SEL_NOT_IN:
                return !in; /* as in Kubernetes: a missing label is "not in" */
        case KUBE_SEL_EXISTS:
                return v != NULL;
        case KUBE_SEL_DOES_NOT_EXIST:
                return v == NULL;
        }
        return false;
}

/* ---- label selectors in their text form (kubectl --selector) ---- */

static const char *sel_space(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

static bool sel_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
               c == '_' || c == '.' || c == '/';
}

/* A key or value; "" when none is there. */
static const char *sel_token(const char *p, char **ret)
{
        const char *b = p = sel_space(p);
        while (sel_char(*p))
                p++;
        *ret = strndup(b, (size_t)(p - b));
        return p;
}

static int sel_add_value(struct kube_requirement *q, char *v)
{
        char **a = realloc(q->values, (q->n_values + 1) * sizeof(*a));
        if (!a) {
                free(v);
                return -ENOMEM;
        }
        q->values = a;
        q->values[q->n_values++] = v;
        return 0;
}

/* "(a,b,c)" after in / notin. */
static const char *sel_set(const char *p, struct kube_requirement *q, int *r)
{
        p = sel_space(p);
        if (*p++ != '(') {
                *r = -EINVAL;
                return p;
        }
        for (;;) {
                char *v;
                p = sel_token(p, &v);
                if (!v || (*r = sel_add_value(q, v)) < 0) {
                        *r = *r < 0 ? *r : -ENOMEM;
                        return p;
                }
                p = sel_space(p);
                if (*p == ')')
                        return p + 1;
                if (*p++ != ',') {
                        *r = -EINVAL;
                        return p;
                }
        }
}

/* One requirement: !key, key, key=v, key==v, key!=v, key in (...), key notin (...). */
static const char *sel_requirement(const char *p, struct kube_requirement *q, int *r)
{
        p = sel_space(p);
        bool negated = *p == '!';
        if (negated)
                p++;
        p = sel_token(p, &q->key);
        if (!q->key) {
                *r = -ENOMEM;
                return p;
        }
        if (!*q->key) {
                *r = -EINVAL;
                return p;
        }
        p = sel_space(p);
        if (negated || *p == ',' || !*p) {
                q->op = negated ? KUBE_SEL_DOES_NOT_EXIST : KUBE_SEL_EXISTS;
                return p;
        }
        char *v = NULL;
        if (p[0] == '!' && p[1] == '=') {
                q->op = KUBE_SEL_NOT_IN;
                p = sel_token(p + 2, &v);
        } else if (p[0] == '=') {
                q->op = KUBE_SEL_IN;
                p = sel_token(p + (p[1] == '=' ? 2 : 1), &v);
        } else if (!strncmp(p, "in", 2) && !sel_char(p[2])) {
                q->op = KUBE_SEL_IN;
                return sel_set(p + 2, q, r);
        } else if (!strncmp(p, "notin", 5) && !sel_char(p[5])) {
                q->op = KUBE_SEL_NOT_IN;
                return sel_set(p + 5, q, r);
        } else {
                *r = -EINVAL;
                return p;
        }
        if (!v)
                *r = -ENOMEM;
        else
                *r = sel_add_value(q, v);
        return p;
}

int kube_selector_parse_text(const char *text, struct kube_selector *ret)
{
        _cleanup_(kube_selector_clear) struct kube_selector s = { .present = true };
        const char *p = text ? sel_space(text) : "";
        int r = 0;

        while (*p) {
                struct kube_requirement *a = realloc(s.exprs, (s.n_exprs + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                s.exprs = a;
                s.exprs[s.n_exprs] = (struct kube_requirement){ 0 };
                p = sel_requirement(p, &s.exprs[s.n_exprs++], &r);
                if (r < 0)
                        return r;
                p = sel_space(p);
                if (*p && *p++ != ',')
                        return -EINVAL;
                if (p[-1] == ',' && !*sel_space(p))
                        return -EINVAL; /* a trailing comma */
        }
        *ret = s;
        s = (struct kube_selector){ 0 };
        return 0;
}

bool kube_selector_matches(const struct kube_selector *s, const struct kube_kv *labels, size_t n_labels)
{
        if (!s->present)
                return false;
        for (size_t i = 0; i < s->n_match_labels; i++)
                if (!streq(kube_kv_get(labels, n_labels, s->match_labels[i].key), s->match_labels[i].value))
                        return false;
        for (size_t i = 0; i < s->n_exprs; i++)
                if (!requirement_matches(&s->exprs[i], labels, n_labels))
                        return false;
        return true;
}

/* ---- PDBs ---- */

void kube_pdb_clear(struct kube_pdb *p)
{
        if (!p)
                return;
        free(p->namespace);
        free(p->name);
        kube_selector_clear(&p->selector);
        free(p->unhealthy_pod_eviction_policy);
        *p = (struct kube_pdb){ 0 };
}

static int intorstr_json(const cJSON *v, struct intorstr *ret)
{
        *ret = (struct intorstr){ 0 };
        if (!v || cJSON_IsNull(v))
                return 0;
        if (cJSON_IsNumber(v)) {
                if (v->valuedouble < 0)
                        return -EINVAL;
                *ret = (struct intorstr){ .set = true, .value = v->valueint };
                return 0;
        }
        if (cJSON_IsString(v))
                return intorstr_parse(v->valuestring, ret);
        return -EINVAL;
}

int kube_pdb_parse(const cJSON *obj, struct kube_pdb *ret)
{
        if (!cJSON_IsObject(obj))
                return -EINVAL;
        const cJSON *meta = jget(obj, "metadata"), *spec = jget(obj, "spec"), *status = jget(obj, "status");
        if (!jstr(meta, "name"))
                return -EINVAL;
        _cleanup_(kube_pdb_clear) struct kube_pdb p = { 0 };
        if (jdup(meta, "namespace", &p.namespace) < 0 || jdup(meta, "name", &p.name) < 0 ||
            jdup(spec, "unhealthyPodEvictionPolicy", &p.unhealthy_pod_eviction_policy) < 0)
                return -ENOMEM;
        int r = kube_selector_parse(jget(spec, "selector"), &p.selector);
        if (r < 0)
                return r;
        r = intorstr_json(jget(spec, "minAvailable"), &p.min_available);
        if (r < 0)
                return r;
        r = intorstr_json(jget(spec, "maxUnavailable"), &p.max_unavailable);
        if (r < 0)
                return r;
        int64_t v;
        if (jint(meta, "generation", &v))
                p.generation = v;
        if (jint(status, "observedGeneration", &v))
                p.observed_generation = v;
        if (jint(status, "currentHealthy", &v))
                p.current_healthy = (int)v;
        if (jint(status, "desiredHealthy", &v))
                p.desired_healthy = (int)v;
        if (jint(status, "expectedPods", &v))
                p.expected_pods = (int)v;
        if (jint(status, "disruptionsAllowed", &v))
                p.disruptions_allowed = (int)v;
        *ret = p;
        p = (struct kube_pdb){ 0 };
        return 0;
}

bool kube_pdb_matches_pod(const struct kube_pdb *pdb, const struct kube_pod *pod)
{
        return streq_ptr(pdb->namespace, pod->namespace) &&
               kube_selector_matches(&pdb->selector, pod->labels, pod->n_labels);
}

/* ---- leases ---- */

void kube_lease_clear(struct kube_lease *l)
{
        if (!l)
                return;
        free(l->namespace);
        free(l->name);
        free(l->resource_version);
        free(l->holder_identity);
        *l = (struct kube_lease){ 0 };
}

int kube_lease_parse(const cJSON *obj, struct kube_lease *ret)
{
        if (!cJSON_IsObject(obj))
                return -EINVAL;
        const cJSON *meta = jget(obj, "metadata"), *spec = jget(obj, "spec");
        if (!jstr(meta, "name"))
                return -EINVAL;
        _cleanup_(kube_lease_clear) struct kube_lease l = { 0 };
        if (jdup(meta, "namespace", &l.namespace) < 0 || jdup(meta, "name", &l.name) < 0 ||
            jdup(meta, "resourceVersion", &l.resource_version) < 0 ||
            jdup(spec, "holderIdentity", &l.holder_identity) < 0)
                return -ENOMEM;
        int64_t v;
        if (jint(spec, "leaseDurationSeconds", &v))
                l.lease_duration_seconds = (int)v;
        if (jint(spec, "leaseTransitions", &v))
                l.lease_transitions = (int)v;
        l.acquire_time_usec = jtime(spec, "acquireTime");
        l.renew_time_usec = jtime(spec, "renewTime");
        *ret = l;
        l = (struct kube_lease){ 0 };
        return 0;
}

/* ---- paths and JSON helpers ---- */

char *kube_query_escape(const char *s)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t n = strlen(s);
        char *out = malloc(n * 3 + 1), *o = out;
        if (!out)
                return NULL;
        for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    strchr("-._~", *p))
                        *o++ = (char)*p;
                else {
                        *o++ = '%';
                        *o++ = hex[*p >> 4];
                        *o++ = hex[*p & 15];
                }
        }
        *o = 0;
        return out;
}

char *kube_path(const char *group, const char *version, const char *namespace, const char *resource,
                const char *name, const char *subresource)
{
        struct buf b = { 0 };
        int r = isempty(group) ? buf_printf(&b, "/api/%s", version)
                               : buf_printf(&b, "/apis/%s/%s", group, version);
        if (r >= 0 && namespace)
                r = buf_printf(&b, "/namespaces/%s", namespace);
        if (r >= 0)
                r = buf_printf(&b, "/%s", resource);
        if (r >= 0 && name)
                r = buf_printf(&b, "/%s", name);
        if (r >= 0 && name && subresource)
                r = buf_printf(&b, "/%s", subresource);
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return b.data;
}

const char *kube_object_str(const cJSON *obj, const char *dotted_path)
{
        const char *p = dotted_path;
        const cJSON *cur = obj;
        while (cur && *p) {
                size_t l = strcspn(p, ".");
                char key[128];
                if (l >= sizeof(key))
                        return NULL;
                memcpy(key, p, l);
                key[l] = 0;
                cur = cJSON_GetObjectItemCaseSensitive(cur, key);
                p += l;
                if (*p == '.')
                        p++;
        }
        return cJSON_IsString(cur) ? cur->valuestring : NULL;
}

/* Copies the elements of array src whose string field fkey equals fval into dst[key] (made if missing). */
static int prune_elements(cJSON *dst, const char *key, const cJSON *src, const char *fkey, const char *fval)
{
        if (!cJSON_IsArray(src))
                return 0;
        cJSON *a = cJSON_GetObjectItemCaseSensitive(dst, key);
        if (!a && !(a = cJSON_AddArrayToObject(dst, key)))
                return -ENOMEM;
        if (!cJSON_IsArray(a))
                return 0;
        const cJSON *e;
        cJSON_ArrayForEach (e, src) {
                const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, fkey));
                if (!v || !streq(v, fval))
                        continue;
                cJSON *copy = cJSON_Duplicate(e, true);
                if (!copy || !cJSON_AddItemToArray(a, copy)) {
                        cJSON_Delete(copy);
                        return -ENOMEM;
                }
        }
        return 0;
}

/* Copies array src into dst[key] (made if missing) with only the fields of its elements named in the
 * comma-separated list fields; an element that is no object is left out. */
static int prune_subfields(cJSON *dst, const char *key, const cJSON *src, const char *fields)
{
        if (!cJSON_IsArray(src))
                return 0;
        cJSON *a = cJSON_GetObjectItemCaseSensitive(dst, key);
        if (a)
                cJSON_DeleteItemFromObjectCaseSensitive(dst, key);
        if (!(a = cJSON_AddArrayToObject(dst, key)))
                return -ENOMEM;
        const cJSON *e;
        cJSON_ArrayForEach (e, src) {
                if (!cJSON_IsObject(e))
                        continue;
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(a, o)) {
                        cJSON_Delete(o);
                        return -ENOMEM;
                }
                for (const char *f = fields; *f;) {
                        size_t n = strcspn(f, ",");
                        char name[64];
                        if (n > 0 && n < sizeof(name)) {
                                memcpy(name, f, n);
                                name[n] = 0;
                                const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, name);
                                cJSON *copy = v ? cJSON_Duplicate(v, true) : NULL;
                                if (v && (!copy || !cJSON_AddItemToObject(o, name, copy))) {
                                        cJSON_Delete(copy);
                                        return -ENOMEM;
                                }
                        }
                        f += n;
                        f += *f == ',';
                }
        }
        return 0;
}

/* Copies the field at dotted path from src into dst, creating the objects on the way. A last segment
 * "NAME[KEY=VALUE]" keeps only the elements of array NAME whose KEY is VALUE; "NAME[]{A,B}" keeps every
 * element of array NAME with only its fields A and B. */
static int prune_copy(cJSON *dst, const cJSON *src, const char *path)
{
        const char *dot = strchr(path, '.');
        size_t l = dot ? (size_t)(dot - path) : strlen(path);
        char key[128];
        if (l == 0 || l >= sizeof(key))
                return 0;
        memcpy(key, path, l);
        key[l] = 0;
        char *bracket = dot ? NULL : strchr(key, '[');
        if (bracket && bracket[1] == ']' && bracket[2] == '{') {
                char *end = strchr(bracket, '}');
                if (!end || end[1])
                        return 0;
                *bracket = *end = 0;
                return prune_subfields(dst, key, cJSON_GetObjectItemCaseSensitive(src, key), bracket + 3);
        }
        if (bracket) {
                char *eq = strchr(bracket, '='), *end = strchr(bracket, ']');
                if (!eq || !end || eq > end || end[1])
                        return 0;
                *bracket = *eq = *end = 0;
                return prune_elements(dst, key, cJSON_GetObjectItemCaseSensitive(src, key), bracket + 1,
                                      eq + 1);
        }
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(src, key);
        if (!s)
                return 0;
        cJSON *d = cJSON_GetObjectItemCaseSensitive(dst, key);
        if (!dot) {
                if (d)
                        cJSON_DeleteItemFromObjectCaseSensitive(dst, key);
                cJSON *copy = cJSON_Duplicate(s, true);
                return copy && cJSON_AddItemToObject(dst, key, copy) ? 0 : (cJSON_Delete(copy), -ENOMEM);
        }
        if (!cJSON_IsObject(s))
                return 0;
        if (!d && !(d = cJSON_AddObjectToObject(dst, key)))
                return -ENOMEM;
        return cJSON_IsObject(d) ? prune_copy(d, s, dot + 1) : 0;
}

cJSON *kube_object_prune(const cJSON *obj, const char *const *keep)
{
        static const char *const always[] = {
                "kind",
                "apiVersion",
                "metadata.name",
                "metadata.namespace",
                "metadata.uid",
                "metadata.resourceVersion",
                "metadata.generation",
                "metadata.deletionTimestamp",
        };
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        for (size_t i = 0; i < sizeof(always) / sizeof(*always); i++)
                if (prune_copy(o, obj, always[i]) < 0)
                        goto fail;
        for (const char *const *k = keep; k && *k; k++)
                if (prune_copy(o, obj, *k) < 0)
                        goto fail;
        return o;
fail:
        cJSON_Delete(o);
        return NULL;
}

const char *kube_object_rv(const cJSON *obj)
{
        return kube_object_str(obj, "metadata.resourceVersion");
}

cJSON *kube_list_items(const cJSON *list)
{
        cJSON *items = cJSON_GetObjectItemCaseSensitive(list, "items");
        return cJSON_IsArray(items) ? items : NULL;
}
