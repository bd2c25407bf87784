/* Surge before evict: the Deployments of a drain's pods raised (or rolled) so that their replacements are
 * Ready before the pods go, and put back (include/spotdrain/surge.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drain/engine_internal.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/pdb.h"
#include "spotdrain/provision.h"
#include "spotdrain/surge.h"
#include "spotdrain/util.h"

#define USEC_PER_SEC     UINT64_C(1000000)
#define RESTARTED_AT     "kubectl.kubernetes.io/restartedAt"
#define FINISH_WAIT_USEC (10 * USEC_PER_SEC) /* a drain's end waits this long for its restores at most */
#define RETRY_BASE_USEC  (200 * 1000ULL)
#define RETRY_MAX_USEC   (5 * USEC_PER_SEC)
#define ROOM_FIRST_USEC  (1 * USEC_PER_SEC) /* the scheduler's first try at a surged pod */
#define ROOM_MAX_USEC    (5 * USEC_PER_SEC)

enum dep_state {
        DEP_NEW,       /* nothing asked yet */
        DEP_ASKING,    /* GET of the Deployment (and list of HPAs) under way */
        DEP_KNOWN,     /* learnt: can or cannot surge */
        DEP_RAISING,   /* the raise PATCH under way */
        DEP_SURGED,    /* raised (by this drain, or by one before it on this node: adopted) */
        DEP_RESTORING, /* GET then PATCH putting it back */
        DEP_RESTORED,
};

struct dep {
        struct drain_surge *sg;
        char *ns, *name;
        enum dep_state state;
        bool can;     /* RollingUpdate, maxSurge >= 1, not paused, no other node's record */
        bool hpa;     /* an HPA targets it: surge by restarting the rollout */
        int replicas; /* spec.replicas as last read */
        int orig, to; /* the record: replicas before and after the raise */
        bool rollout; /* the record's mode */
        char *rv;     /* resourceVersion as last read: the precondition of the next PATCH */
        bool fresh;   /* read since the last PATCH (a restore reads first) */
        uint64_t surged_usec;
        int wanted, left; /* this round: its pods that the plan surges, its pods still on the node */
        bool counted;     /* a round has counted them (an adopted record is not restored before) */
        char *selector;   /* spec.selector.matchLabels as a label selector */
        struct kube_call *call, *hpa_call, *room_call;
        struct timer *room_timer; /* the next look at whether its new pods found room */
        struct backoff room_backoff;
        bool room_reported;
        bool hpa_pending; /* its HPAs' list under way (its own, or a shared one) */
        bool get_shared;  /* waits for a shared read of it (struct drain_surge_reads) */
        struct backoff backoff;
        struct timer *retry;
};

struct drain_surge {
        struct kube_client *c;
        struct alert_bus *bus; /* may be NULL */
        char *node;
        enum drain_surge_mode mode;
        void (*changed)(void *userdata);
        void *userdata;
        struct dep **deps;
        size_t n_deps;
        unsigned surged, restored;
        bool finishing, gave_up;
        void (*finish_done)(void *userdata);
        void *finish_userdata;
        struct timer *finish_timer;
        struct timer *notify;
        struct drain_surge_reads *reads; /* a reference; NULL: every read its own */
};

/* A read under way for every drain that learns what it answers (include/spotdrain/surge.h). */
struct shared_read {
        struct drain_surge_reads *rd;
        char *path;
        bool hpa; /* a namespace's HPAs; else one Deployment */
        struct kube_call *call;
        struct dep **waiters;
        size_t n_waiters;
};

struct drain_surge_reads {
        struct kube_client *c;
        unsigned refs;
        struct shared_read **reads;
        size_t n_reads;
};

static void json_freep(cJSON **p)
{
        cJSON_Delete(*p);
}

static void read_leave(struct dep *d);

static void dep_free(struct dep *d)
{
        if (!d)
                return;
        read_leave(d);
        kube_call_cancel(d->call);
        kube_call_cancel(d->hpa_call);
        kube_call_cancel(d->room_call);
        timer_cancel(d->retry);
        timer_cancel(d->room_timer);
        free(d->selector);
        free(d->ns);
        free(d->name);
        free(d->rv);
        free(d);
}

struct drain_surge *drain_surge_free(struct drain_surge *sg)
{
        if (!sg)
                return NULL;
        for (size_t i = 0; i < sg->n_deps; i++)
                dep_free(sg->deps[i]);
        free(sg->deps);
        timer_cancel(sg->finish_timer);
        timer_cancel(sg->notify);
        drain_surge_reads_free(sg->reads);
        free(sg->node);
        free(sg);
        return NULL;
}

int drain_surge_new(struct kube_client *c, const char *node, enum drain_surge_mode mode,
                    struct alert_bus *bus, void (*changed)(void *userdata), void *userdata,
                    struct drain_surge **ret)
{
        struct drain_surge *sg = calloc(1, sizeof(*sg));
        if (!sg || !(sg->node = strdup(node))) {
                free(sg);
                return -ENOMEM;
        }
        sg->c = c;
        sg->bus = bus;
        sg->mode = mode;
        sg->changed = changed;
        sg->userdata = userdata;
        *ret = sg;
        return 0;
}

/* The plan depends on what was learnt: tell the drain from the loop, never from inside its own call. */
static void notify_fire(void *userdata)
{
        struct drain_surge *sg = userdata;
        sg->notify = NULL;
        if (sg->changed)
                sg->changed(sg->userdata);
}

static void notify(struct drain_surge *sg)
{
        if (!sg->notify)
                (void)timer_start_in(kube_client_loop(sg->c), 0, notify_fire, sg, &sg->notify);
}

static void finish_check(struct drain_surge *sg);
static void room_later(struct dep *d);

/* ---- which Deployment a pod is of ---- */

/* A ReplicaSet's pod is a Deployment's when the ReplicaSet is named DEPLOYMENT-HASH after the pod's
 * pod-template-hash, as the deployment controller names them. The caller frees the name. */
static char *deployment_of(const struct kube_pod *p)
{
        if (!streq_ptr(p->owner_kind, "ReplicaSet") || !p->owner_name)
                return NULL;
        const char *hash = kube_kv_get(p->labels, p->n_labels, "pod-template-hash");
        size_t n = strlen(p->owner_name), h = hash ? strlen(hash) : 0;
        if (h == 0 || n <= h + 1 || p->owner_name[n - h - 1] != '-' || !streq(p->owner_name + n - h, hash))
                return NULL;
        return strndup(p->owner_name, n - h - 1);
}

static struct dep *dep_find(struct drain_surge *sg, const char *ns, const char *name)
{
        for (size_t i = 0; i < sg->n_deps; i++)
                if (streq(sg->deps[i]->ns, ns) && streq(sg->deps[i]->name, name))
                        return sg->deps[i];
        return NULL;
}

char *drain_surge_deployment_of(const struct kube_pod *p)
{
        return p ? deployment_of(p) : NULL;
}

static struct dep *dep_add(struct drain_surge *sg, const char *ns, const char *name)
{
        struct dep **a = realloc(sg->deps, (sg->n_deps + 1) * sizeof(*a));
        if (!a)
                return NULL;
        sg->deps = a;
        struct dep *d = calloc(1, sizeof(*d));
        if (!d || !(d->ns = strdup(ns)) || !(d->name = strdup(name))) {
                if (d)
                        free(d->ns);
                free(d);
                return NULL;
        }
        d->sg = sg;
        d->backoff = BACKOFF_INIT(RETRY_BASE_USEC, RETRY_MAX_USEC);
        d->room_backoff = BACKOFF_INIT(ROOM_FIRST_USEC, ROOM_MAX_USEC);
        sg->deps[sg->n_deps++] = d;
        return d;
}

static struct dep *dep_of(struct drain_surge *sg, const struct kube_pod *p, bool add)
{
        _cleanup_free_ char *name = deployment_of(p);
        if (!name || !p->namespace)
                return NULL;
        struct dep *d = dep_find(sg, p->namespace, name);
        return d || !add ? d : dep_add(sg, p->namespace, name);
}

/* ---- learning a Deployment ---- */

static void dep_ask(struct dep *d);
static void dep_act(struct dep *d);

static void retry_fire(void *userdata)
{
        struct dep *d = userdata;
        d->retry = NULL;
        if (d->state == DEP_ASKING || d->state == DEP_NEW)
                dep_ask(d);
        else
                dep_act(d);
}

/* A failed call is tried again after a backoff (from the state it failed in). */
static void dep_retry(struct dep *d, int error, const char *what)
{
        uint64_t delay = backoff_next(&d->backoff);
        log_debug_errno(error, "cannot %s deployment %s/%s, trying again in %.1f s", what, d->ns, d->name,
                        (double)delay / (double)USEC_PER_SEC);
        timer_cancel(d->retry);
        d->retry = NULL;
        (void)timer_start_in(kube_client_loop(d->sg->c), delay, retry_fire, d, &d->retry);
}

static int int_at(const cJSON *o, const char *path, int dflt)
{
        const char *dot;
        while (o && (dot = strchr(path, '.'))) {
                char key[64];
                snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
                o = cJSON_GetObjectItemCaseSensitive(o, key);
                path = dot + 1;
        }
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, path);
        return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

/* maxSurge of a RollingUpdate Deployment, resolved against replicas as the deployment controller does
 * (percentages round up); 0 for any other strategy or a value it would refuse. */
static int max_surge(const cJSON *dep, int replicas)
{
        const cJSON *strategy =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(dep, "spec"), "strategy");
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(strategy, "type"));
        if (type && !streq(type, "RollingUpdate"))
                return 0;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(strategy, "rollingUpdate"), "maxSurge");
        struct intorstr s = { .set = true, .percent = true, .value = 25 };
        if (cJSON_IsNumber(v))
                s = (struct intorstr){ .set = true, .value = (int)v->valuedouble };
        else if (cJSON_IsString(v) && intorstr_parse(v->valuestring, &s) < 0)
                return 0;
        return intorstr_scaled(&s, replicas, true);
}

/* spec.selector.matchLabels as "k=v,k2=v2" (the pods the room check lists); NULL without one. */
static void dep_selector(struct dep *d, const cJSON *spec)
{
        const cJSON *l;
        char *sel = NULL;
        cJSON_ArrayForEach (l, cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetObjectItemCaseSensitive(spec, "selector"), "matchLabels")) {
                if (!cJSON_IsString(l))
                        continue;
                char *n = strprintf("%s%s%s=%s", sel ? sel : "", sel ? "," : "", l->string, l->valuestring);
                free(sel);
                if (!(sel = n))
                        break;
        }
        free(d->selector);
        d->selector = sel;
}

/* Reads the Deployment: whether it can surge, and a record of ours to adopt. True when it carries ours. */
static bool dep_learn(struct dep *d, const cJSON *obj)
{
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
        const char *rv = kube_object_rv(obj);
        free(d->rv);
        d->rv = rv ? strdup(rv) : NULL;
        d->fresh = true;
        d->replicas = int_at(obj, "spec.replicas", 1);
        d->can = max_surge(obj, d->replicas) >= 1 &&
                 !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(spec, "paused"));
        dep_selector(d, spec);

        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "annotations");
        const char *record =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ann, SPOTDRAIN_ANNOTATION_SURGE));
        if (!record)
                return false;
        _cleanup_(json_freep) cJSON *rec = cJSON_Parse(record);
        const char *node = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "node"));
        const char *mode = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "mode"));
        const char *started = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "started"));
        int orig = int_at(rec, "replicas", -1), to = int_at(rec, "to", -1);
        if (!streq_ptr(node, d->sg->node)) {
                /* Another node's drain has it raised: not ours to raise again, nor to restore. */
                d->can = false;
                log_debug("deployment %s/%s is surged for node %s: not surged again", d->ns, d->name,
                          node ? node : "?");
                return false;
        }
        uint64_t at = 0;
        if (orig < 0 || to < 0 || (started && parse_rfc3339(started, &at) < 0)) {
                log_warning("deployment %s/%s carries a malformed %s record, ignoring: %s", d->ns, d->name,
                            SPOTDRAIN_ANNOTATION_SURGE, record);
                d->can = false;
                return false;
        }
        d->orig = orig;
        d->to = to;
        d->rollout = streq_ptr(mode, "rollout");
        d->surged_usec = at ? at : clk_now();
        if (d->state != DEP_SURGED && d->state != DEP_RESTORING) {
                log_info("deployment %s/%s was surged for %s before (replicas %d -> %d): adopted", d->ns,
                         d->name, d->sg->node, orig, to);
                d->state = DEP_SURGED;
                room_later(d);
        }
        return true;
}

static void dep_known(struct dep *d)
{
        if (d->call || d->get_shared || d->hpa_pending)
                return;
        if (d->state == DEP_ASKING)
                d->state = DEP_KNOWN;
        backoff_reset(&d->backoff);
        notify(d->sg);
        dep_act(d);
}

static void restore_done(struct kube_client *c, struct kube_result *r, void *userdata);

static void get_answer(struct dep *d, struct kube_result *r)
{
        if (r->error == -ENOENT) {
                d->can = false; /* gone, or not a Deployment after all */
                d->state = d->state == DEP_RESTORING ? DEP_RESTORED : DEP_KNOWN;
                notify(d->sg);
                finish_check(d->sg);
                return;
        }
        if (r->error < 0) {
                dep_retry(d, r->error, "read");
                return;
        }
        bool ours = dep_learn(d, r->object);
        if (d->state == DEP_RESTORING) {
                if (ours) {
                        dep_act(d);
                        return;
                }
                /* The record went meanwhile (another restore, or a user): nothing left to put back. */
                log_debug("deployment %s/%s carries no record of %s any more", d->ns, d->name, d->sg->node);
                d->state = DEP_RESTORED;
                backoff_reset(&d->backoff);
                notify(d->sg);
                finish_check(d->sg);
                return;
        }
        dep_known(d);
}

static void get_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct dep *d = userdata;
        d->call = NULL;
        get_answer(d, r);
}

static void hpa_answer(struct dep *d, struct kube_result *r)
{
        const cJSON *h;
        d->hpa_pending = false;
        /* Without HPAs to read (not served, not allowed) the replica count is taken to be the Deployment's.
         */
        if (r->error < 0)
                log_debug_errno(r->error, "cannot list the HPAs of %s, taking %s's replicas as its own",
                                d->ns, d->name);
        cJSON_ArrayForEach (h, kube_list_items(r->error >= 0 ? r->object : NULL)) {
                const cJSON *ref = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(h, "spec"), "scaleTargetRef");
                if (streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "kind")),
                              "Deployment") &&
                    streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ref, "name")), d->name))
                        d->hpa = true;
        }
        dep_known(d);
}

static void hpa_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct dep *d = userdata;
        d->hpa_call = NULL;
        hpa_answer(d, r);
}

/* ---- reads shared by the drains of a process ---- */

int drain_surge_reads_new(struct kube_client *c, struct drain_surge_reads **ret)
{
        struct drain_surge_reads *rd = calloc(1, sizeof(*rd));
        if (!rd)
                return -ENOMEM;
        rd->c = c;
        rd->refs = 1;
        *ret = rd;
        return 0;
}

static void shared_read_free(struct shared_read *s)
{
        kube_call_cancel(s->call);
        free(s->waiters);
        free(s->path);
        free(s);
}

/* Takes the read out of the reads under way (its answer came, or nobody waits for it any more). */
static void read_unlist(struct shared_read *s)
{
        struct drain_surge_reads *rd = s->rd;
        for (size_t i = 0; i < rd->n_reads; i++)
                if (rd->reads[i] == s) {
                        rd->reads[i] = rd->reads[--rd->n_reads];
                        return;
                }
}

/* A reference goes; the last one frees it. By then no surge uses it, so nobody waits: nothing is under way.
 */
struct drain_surge_reads *drain_surge_reads_free(struct drain_surge_reads *rd)
{
        if (!rd || --rd->refs > 0)
                return NULL;
        for (size_t i = 0; i < rd->n_reads; i++)
                shared_read_free(rd->reads[i]);
        free(rd->reads);
        free(rd);
        return NULL;
}

void drain_surge_share(struct drain_surge *sg, struct drain_surge_reads *rd)
{
        if (!sg || !rd || sg->reads)
                return;
        rd->refs++;
        sg->reads = rd;
}

void drain_surge_reads_count(const struct drain_surge_reads *rd, size_t *ret_reads, size_t *ret_waiting)
{
        size_t w = 0;
        for (size_t i = 0; rd && i < rd->n_reads; i++)
                w += rd->reads[i]->n_waiters;
        *ret_reads = rd ? rd->n_reads : 0;
        *ret_waiting = w;
}

/* Every waiter learns from the one answer. None of them frees another from inside (what they start or
 * end goes through the loop), and the read is out of the list first: a waiter that asks again makes a new
 * one. */
static void shared_read_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct shared_read *s = userdata;
        s->call = NULL;
        read_unlist(s);
        for (size_t i = 0; i < s->n_waiters; i++) {
                struct dep *d = s->waiters[i];
                if (s->hpa)
                        hpa_answer(d, r);
                else {
                        d->get_shared = false;
                        get_answer(d, r);
                }
        }
        shared_read_free(s);
}

static int read_join(struct dep *d, const char *path, bool hpa)
{
        struct drain_surge_reads *rd = d->sg->reads;
        struct shared_read *s = NULL;
        int r;
        for (size_t i = 0; i < rd->n_reads && !s; i++)
                if (rd->reads[i]->hpa == hpa && streq(rd->reads[i]->path, path))
                        s = rd->reads[i];
        if (!s) {
                struct shared_read **v = reallocarray(rd->reads, rd->n_reads + 1, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                rd->reads = v;
                if (!(s = calloc(1, sizeof(*s))) || !(s->path = strdup(path))) {
                        free(s);
                        return -ENOMEM;
                }
                s->rd = rd;
                s->hpa = hpa;
                struct kube_list_options lo = { 0 };
                r = hpa ? kube_list(rd->c, path, &lo, shared_read_done, s, &s->call)
                        : kube_get(rd->c, path, shared_read_done, s, &s->call);
                if (r < 0) {
                        shared_read_free(s);
                        return r;
                }
                rd->reads[rd->n_reads++] = s;
        }
        struct dep **w = reallocarray(s->waiters, s->n_waiters + 1, sizeof(*w));
        if (!w) {
                if (s->n_waiters == 0) {
                        read_unlist(s);
                        shared_read_free(s);
                }
                return -ENOMEM;
        }
        s->waiters = w;
        s->waiters[s->n_waiters++] = d;
        if (!hpa)
                d->get_shared = true;
        return 0;
}

/* A Deployment that goes stops waiting; a read nobody waits for any more is cancelled. */
static void read_leave(struct dep *d)
{
        struct drain_surge_reads *rd = d->sg->reads;
        if (!rd || (!d->get_shared && !d->hpa_pending))
                return;
        for (size_t i = 0; i < rd->n_reads;) {
                struct shared_read *s = rd->reads[i];
                for (size_t j = 0; j < s->n_waiters;)
                        if (s->waiters[j] == d)
                                s->waiters[j] = s->waiters[--s->n_waiters];
                        else
                                j++;
                if (s->n_waiters == 0) {
                        rd->reads[i] = rd->reads[--rd->n_reads];
                        shared_read_free(s);
                } else
                        i++;
        }
        d->get_shared = false;
}

static void dep_ask(struct dep *d)
{
        _cleanup_free_ char *path = kube_path("apps", "v1", d->ns, "deployments", d->name, NULL);
        _cleanup_free_ char *hpas =
            kube_path("autoscaling", "v2", d->ns, "horizontalpodautoscalers", NULL, NULL);
        if (d->state == DEP_NEW)
                d->state = DEP_ASKING;
        d->fresh = false;
        /* What it is when first learnt can come from another drain's read; a restore reads for itself. */
        bool share = d->sg->reads && d->state == DEP_ASKING;
        if (!path || !hpas ||
            (share ? read_join(d, path, false) : kube_get(d->sg->c, path, get_done, d, &d->call)) < 0) {
                dep_retry(d, -ENOMEM, "read");
                return;
        }
        if (d->state == DEP_ASKING && !d->hpa_pending) {
                struct kube_list_options lo = { 0 };
                d->hpa_pending = (share ? read_join(d, hpas, true)
                                        : kube_list(d->sg->c, hpas, &lo, hpa_done, d, &d->hpa_call)) >= 0;
        }
}

/* ---- raising and restoring ---- */

static int record_json(const struct dep *d, uint64_t now, char **ret)
{
        char started[64];
        if (format_rfc3339(now, started, sizeof(started)) < 0)
                return -EINVAL;
        _cleanup_(json_freep) cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "node", d->sg->node) ||
            !cJSON_AddNumberToObject(o, "replicas", d->orig) || !cJSON_AddNumberToObject(o, "to", d->to) ||
            !cJSON_AddStringToObject(o, "mode", d->rollout ? "rollout" : "scale") ||
            !cJSON_AddStringToObject(o, "started", started))
                return -ENOMEM;
        *ret = cJSON_PrintUnformatted(o);
        return *ret ? 0 : -ENOMEM;
}

/* {"metadata": {"resourceVersion": RV, "annotations": {KEY: record}}, "spec": ...}: record NULL removes it.
 */
static int patch_body(const struct dep *d, const char *record, int replicas, const char *restarted_at,
                      char **ret)
{
        _cleanup_(json_freep) cJSON *o = cJSON_CreateObject();
        cJSON *md = o ? cJSON_AddObjectToObject(o, "metadata") : NULL;
        cJSON *ann = md ? cJSON_AddObjectToObject(md, "annotations") : NULL;
        cJSON *spec = o ? cJSON_AddObjectToObject(o, "spec") : NULL;
        if (!ann || !spec || (d->rv && !cJSON_AddStringToObject(md, "resourceVersion", d->rv)) ||
            !(record ? cJSON_AddStringToObject(ann, SPOTDRAIN_ANNOTATION_SURGE, record)
                     : cJSON_AddNullToObject(ann, SPOTDRAIN_ANNOTATION_SURGE)))
                return -ENOMEM;
        if (replicas >= 0 && !cJSON_AddNumberToObject(spec, "replicas", replicas))
                return -ENOMEM;
        if (restarted_at) {
                cJSON *tmd = cJSON_AddObjectToObject(cJSON_AddObjectToObject(spec, "template"), "metadata");
                cJSON *tann = tmd ? cJSON_AddObjectToObject(tmd, "annotations") : NULL;
                if (!tann || !cJSON_AddStringToObject(tann, RESTARTED_AT, restarted_at))
                        return -ENOMEM;
        }
        *ret = cJSON_PrintUnformatted(o);
        return *ret ? 0 : -ENOMEM;
}

static int dep_patch(struct dep *d, const char *body, kube_done_fn done)
{
        _cleanup_free_ char *path = kube_path("apps", "v1", d->ns, "deployments", d->name, NULL);
        if (!path)
                return -ENOMEM;
        return kube_request(d->sg->c, "PATCH", path, "application/merge-patch+json", body, KUBE_REQ_PRIORITY,
                            done, d, &d->call);
}

/* ---- room for the surged pods ---- */

static void room_look(struct dep *d);

static void room_fire(void *userdata)
{
        struct dep *d = userdata;
        d->room_timer = NULL;
        room_look(d);
}

/* Looks again after a while: the scheduler tries a pending pod again as nodes come and go. */
static void room_later(struct dep *d)
{
        if (d->state == DEP_SURGED && !d->room_reported && !d->room_timer)
                (void)timer_start_in(kube_client_loop(d->sg->c), backoff_next(&d->room_backoff), room_fire,
                                     d, &d->room_timer);
}

/* Whether the scheduler found no node for the pod (PodScheduled False, Unschedulable). */
static bool unschedulable(const cJSON *pod)
{
        const cJSON *c;
        if (kube_object_str(pod, "spec.nodeName") || kube_object_str(pod, "metadata.deletionTimestamp"))
                return false;
        cJSON_ArrayForEach (c, cJSON_GetObjectItemCaseSensitive(
                                   cJSON_GetObjectItemCaseSensitive(pod, "status"), "conditions"))
                if (streq_ptr(kube_object_str(c, "type"), "PodScheduled") &&
                    streq_ptr(kube_object_str(c, "status"), "False") &&
                    streq_ptr(kube_object_str(c, "reason"), "Unschedulable"))
                        return true;
        return false;
}

static void room_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct dep *d = userdata;
        const cJSON *o;
        struct prov_request need = { 0 };
        unsigned n = 0, total = 0;
        d->room_call = NULL;
        cJSON_ArrayForEach (o, kube_list_items(r->error >= 0 ? r->object : NULL)) {
                struct provisioner_pod pp;
                total++;
                if (!unschedulable(o) || provisioner_pod_from_json(o, &pp) < 0)
                        continue;
                n++;
                need.cpu_millis += pp.req.cpu_millis;
                need.memory_bytes += pp.req.memory_bytes;
        }
        if (n == 0) {
                /* Every pod it wants is there and placed: nothing more to look for. */
                if (r->error < 0 || total < (unsigned)d->to)
                        room_later(d);
                return;
        }
        char cpu[32], memory[32], pods[16], name[512];
        format_cpu_millis(need.cpu_millis, cpu, sizeof(cpu));
        format_bytes(need.memory_bytes, memory, sizeof(memory));
        snprintf(pods, sizeof(pods), "%u", n);
        snprintf(name, sizeof(name), "%s/%s", d->ns, d->name);
        const char *fields[] = { "deployment", name, "pods", pods, "cpu", cpu, "memory", memory, NULL };
        d->room_reported = true;
        /* Its old pods wait on the node for the new ones: the drain now hangs on replacement capacity. */
        alert_emit(d->sg->bus, ALERT_SURGE_NO_ROOM, d->sg->node, fields,
                   "surge of %s needs room for %u pod%s (cpu %s, memory %s) on another node: none has it; "
                   "its pods on %s wait for replacement capacity",
                   name, n, n == 1 ? "" : "s", cpu, memory, d->sg->node);
}

/* Lists the Deployment's pods and reports the surged ones no node has room for (once). */
static void room_look(struct dep *d)
{
        _cleanup_free_ char *path = kube_path(NULL, "v1", d->ns, "pods", NULL, NULL);
        struct kube_list_options lo = { .label_selector = d->selector };
        if (!d->sg->bus || !d->selector || d->state != DEP_SURGED || d->room_reported || d->room_call)
                return;
        if (!path || kube_list(d->sg->c, path, &lo, room_done, d, &d->room_call) < 0)
                room_later(d);
}

static void raise_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct dep *d = userdata;
        d->call = NULL;
        if (r->error == -EACCES || r->error == -EPERM || r->error == -EINVAL) {
                log_warning("cannot surge deployment %s/%s (%s): its pods on %s wait for their PDB", d->ns,
                            d->name, r->message ? r->message : strerror(-r->error), d->sg->node);
                d->can = false;
                d->state = DEP_KNOWN;
                notify(d->sg);
                return;
        }
        if (r->error < 0) {
                /* A conflict (someone wrote it since it was read) or a failure: read it again, then decide
                 * again; a record of ours found then is adopted. */
                d->state = DEP_ASKING;
                if (r->http_status == 409)
                        dep_ask(d);
                else
                        dep_retry(d, r->error, "raise");
                return;
        }
        d->state = DEP_SURGED;
        d->surged_usec = clk_now();
        d->sg->surged++;
        backoff_reset(&d->backoff);
        log_info("deployment %s/%s surged for the drain of %s: %s", d->ns, d->name, d->sg->node,
                 d->rollout ? "rollout restarted" : "replicas raised");
        room_later(d);
        notify(d->sg);
        if (d->sg->finishing)
                dep_act(d);
}

static void restore_done(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct dep *d = userdata;
        d->call = NULL;
        if (r->error < 0 && r->error != -ENOENT) {
                /* Read it again before the next try: the precondition needs its current version. */
                dep_retry(d, r->error, "restore");
                return;
        }
        d->state = DEP_RESTORED;
        d->sg->restored++;
        backoff_reset(&d->backoff);
        log_info("deployment %s/%s restored after the drain of %s", d->ns, d->name, d->sg->node);
        notify(d->sg);
        finish_check(d->sg);
}

static void dep_raise(struct dep *d)
{
        _cleanup_free_ char *record = NULL, *body = NULL;
        char now_s[64];
        uint64_t now = clk_now();
        d->rollout = d->hpa;
        d->orig = d->replicas;
        d->to = d->rollout ? d->replicas : d->replicas + d->wanted;
        d->fresh = false;
        if (format_rfc3339(now, now_s, sizeof(now_s)) < 0 || record_json(d, now, &record) < 0 ||
            patch_body(d, record, d->rollout ? -1 : d->to, d->rollout ? now_s : NULL, &body) < 0 ||
            dep_patch(d, body, raise_done) < 0) {
                dep_retry(d, -ENOMEM, "raise");
                return;
        }
        d->state = DEP_RAISING;
}

/* The restore is a read (for the current replicas and version) then a PATCH. */
static void dep_restore(struct dep *d)
{
        _cleanup_free_ char *body = NULL;
        if (d->state != DEP_RESTORING || !d->fresh) {
                d->state = DEP_RESTORING;
                dep_ask(d);
                return;
        }
        d->fresh = false;
        /* Replicas someone else changed meanwhile are theirs: only the record goes. */
        int replicas = !d->rollout && d->replicas == d->to ? d->orig : -1;
        if (patch_body(d, NULL, replicas, NULL, &body) < 0 || dep_patch(d, body, restore_done) < 0)
                dep_retry(d, -ENOMEM, "restore");
}

static void dep_act(struct dep *d)
{
        if (d->call || d->get_shared || d->retry)
                return;
        switch (d->state) {
        case DEP_KNOWN:
                if (d->can && d->wanted > 0 && !d->sg->finishing && d->sg->mode != DRAIN_SURGE_OFF)
                        dep_raise(d);
                break;
        case DEP_SURGED:
                if ((d->counted && d->left == 0) || d->sg->finishing)
                        dep_restore(d);
                break;
        case DEP_RESTORING:
                dep_restore(d);
                break;
        case DEP_NEW:
        case DEP_ASKING:
                dep_ask(d);
                break;
        case DEP_RAISING:
        case DEP_RESTORED:
                break;
        }
}

/* ---- the drain's side ---- */

void drain_surge_learn(struct drain_surge *sg, const struct kube_pod *p)
{
        struct dep *d = sg && sg->mode != DRAIN_SURGE_OFF ? dep_of(sg, p, true) : NULL;
        if (d && d->state == DEP_NEW)
                dep_ask(d);
}

int drain_surge_input(struct drain_surge *sg, struct drain_inputs *di, size_t i)
{
        const struct kube_pod *p = sg ? drain_inputs_pod(di, i) : NULL;
        struct dep *d = p && sg->mode != DRAIN_SURGE_OFF ? dep_of(sg, p, true) : NULL;
        if (!d)
                return 0;
        if (d->state == DEP_NEW)
                dep_ask(d);
        bool surged = d->state == DEP_SURGED || d->state == DEP_RESTORING;
        return drain_inputs_set_surge(di, i, (d->state >= DEP_KNOWN && d->can) || surged,
                                      surged ? d->surged_usec : 0);
}

void drain_surge_round(struct drain_surge *sg, const struct drain_inputs *di, const struct drain_plan *plan,
                       size_t first, size_t n)
{
        if (!sg || !plan)
                return;
        for (size_t i = 0; i < sg->n_deps; i++) {
                sg->deps[i]->wanted = sg->deps[i]->left = 0;
                sg->deps[i]->counted = true;
        }
        for (size_t i = first; i < first + n && i < plan->n_pods; i++) {
                const struct kube_pod *kp = drain_inputs_pod(di, i);
                struct dep *d = kp ? dep_of(sg, kp, false) : NULL;
                if (!d || kp->deletion_usec)
                        continue;
                d->left++;
                d->wanted += plan->pods[i].surge;
        }
        for (size_t i = 0; i < sg->n_deps; i++)
                dep_act(sg->deps[i]);
}

static bool restores_pending(const struct drain_surge *sg)
{
        for (size_t i = 0; i < sg->n_deps; i++) {
                enum dep_state s = sg->deps[i]->state;
                if (s == DEP_RAISING || s == DEP_SURGED || s == DEP_RESTORING)
                        return true;
        }
        return false;
}

static void finish_fire(void *userdata)
{
        struct drain_surge *sg = userdata;
        void (*done)(void *) = sg->finish_done;
        sg->finish_timer = NULL;
        sg->finish_done = NULL;
        sg->gave_up = true;
        if (restores_pending(sg))
                log_warning("restores of the deployments surged for %s did not finish in time: their %s "
                            "record stays for the next drain of the node",
                            sg->node, SPOTDRAIN_ANNOTATION_SURGE);
        if (done)
                done(sg->finish_userdata);
}

static void finish_check(struct drain_surge *sg)
{
        if (!sg->finish_done || restores_pending(sg))
                return;
        timer_cancel(sg->finish_timer);
        sg->finish_timer = NULL;
        (void)timer_start_in(kube_client_loop(sg->c), 0, finish_fire, sg, &sg->finish_timer);
}

int drain_surge_finish(struct drain_surge *sg, void (*done)(void *userdata), void *userdata)
{
        if (!sg || sg->gave_up)
                return 0;
        if (sg->finishing)
                return restores_pending(sg) ? 1 : 0;
        sg->finishing = true;
        for (size_t i = 0; i < sg->n_deps; i++)
                dep_act(sg->deps[i]);
        if (!restores_pending(sg))
                return 0;
        sg->finish_done = done;
        sg->finish_userdata = userdata;
        if (timer_start_in(kube_client_loop(sg->c), FINISH_WAIT_USEC, finish_fire, sg, &sg->finish_timer) <
            0) {
                sg->finish_done = NULL;
                return 0;
        }
        return 1;
}

int drain_surge_restore_record(struct drain_surge *sg, const char *ns, const char *name)
{
        struct dep *d = dep_find(sg, ns, name);
        if (d)
                return -EALREADY;
        if (!(d = dep_add(sg, ns, name)))
                return -ENOMEM;
        /* Read first: the record is adopted from what the Deployment carries now, not from the caller. */
        d->state = DEP_RESTORING;
        d->fresh = false;
        dep_restore(d);
        return 0;
}

bool drain_surge_restoring(const struct drain_surge *sg)
{
        return sg && restores_pending(sg);
}

bool drain_surge_learning(const struct drain_surge *sg)
{
        for (size_t i = 0; sg && i < sg->n_deps; i++)
                if (sg->deps[i]->state == DEP_NEW || sg->deps[i]->state == DEP_ASKING)
                        return true;
        return false;
}

enum drain_surge_mode drain_surge_get_mode(const struct drain_surge *sg)
{
        return sg ? sg->mode : DRAIN_SURGE_OFF;
}

void drain_surge_counts(const struct drain_surge *sg, unsigned *ret_surged, unsigned *ret_restored)
{
        *ret_surged = sg ? sg->surged : 0;
        *ret_restored = sg ? sg->restored : 0;
}
