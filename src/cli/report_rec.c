/* The recorder behind --report: the drain's story as the Kubernetes API tells it (pods seen deleting and
 * gone, PDB status), with the alerts of the engine's bus. It watches on the engine's own client, so the
 * times are the engine's. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/drain.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"

struct rec_pod {
        struct kube_pod kp;
        char *key; /* namespace/name */
        double stop_at, gone_at;
        bool forced;
        bool with_node; /* killed with its node (kube_pod_killed_with_node()) */
};

/* A pod's last safe moment in the drain's latest plan before it went. */
struct rec_safe {
        char *key;
        double at;
        bool frozen; /* its stop started: later plans no longer plan it */
};

#define FOLLOW_USEC (200 * UINT64_C(1000))

struct report_rec {
        struct report *r;
        uint64_t origin;
        struct kube_informer *pods, *pdbs;
        struct rec_pod *p;
        size_t n;
        struct rec_safe *safe;
        size_t n_safe;
        struct drain_exec **follow; /* borrowed; their plans */
        size_t n_follow;
        struct loop *loop;
        struct timer *follow_timer;
        bool finished;
        bool settled; /* every pod seen stopping is gone */
        int error;    /* the first ENOMEM: the report misses something */
};

static double rec_now(const struct report_rec *rec)
{
        return ((double)clk_now() - (double)rec->origin) / 1e6;
}

static struct rec_pod *find_pod(struct report_rec *rec, const char *key)
{
        for (size_t i = 0; i < rec->n; i++)
                if (streq(rec->p[i].key, key))
                        return &rec->p[i];
        return NULL;
}

/* The record of obj's pod, made when first seen; NULL on ENOMEM or an unparsable pod. */
static struct rec_pod *pod_record(struct report_rec *rec, const cJSON *obj)
{
        struct kube_pod kp = {};
        if (kube_pod_parse(obj, &kp) < 0)
                return NULL;
        _cleanup_free_ char *key = strprintf("%s/%s", kp.namespace, kp.name);
        struct rec_pod *p = key ? find_pod(rec, key) : NULL;
        if (p || !key) {
                /* The latest labels and node; the times stay as first seen. */
                if (p && kp.node_name) {
                        kube_pod_clear(&p->kp);
                        p->kp = kp;
                } else
                        kube_pod_clear(&kp);
                return p;
        }
        void *a = realloc(rec->p, (rec->n + 1) * sizeof(*rec->p));
        if (!a) {
                kube_pod_clear(&kp);
                return NULL;
        }
        rec->p = a;
        p = &rec->p[rec->n++];
        *p = (struct rec_pod){ .kp = kp, .key = TAKE_PTR(key), .stop_at = NAN, .gone_at = NAN };
        return p;
}

static void pod_seen(struct report_rec *rec, const cJSON *obj)
{
        struct rec_pod *p = pod_record(rec, obj);
        if (!p) {
                rec->error = -ENOMEM;
                return;
        }
        if (p->kp.deletion_usec && isnan(p->stop_at))
                p->stop_at = rec_now(rec);
}

static void pods_added(void *userdata, const cJSON *obj)
{
        pod_seen(userdata, obj);
}

static void pods_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        pod_seen(userdata, obj);
}

static bool settled(const struct report_rec *rec)
{
        for (size_t i = 0; i < rec->n; i++)
                if (!isnan(rec->p[i].stop_at) && isnan(rec->p[i].gone_at))
                        return false;
        return true;
}

int report_rec_settle(struct report_rec *rec, struct loop *l, uint64_t bound_usec)
{
        rec->settled = settled(rec);
        if (rec->settled)
                return 0;
        int r = loop_run_until(l, &rec->settled, bound_usec);
        return r == -ECANCELED ? r : rec->settled ? 0 : -ETIMEDOUT;
}

static void pods_deleted(void *userdata, const cJSON *obj)
{
        struct report_rec *rec = userdata;
        pod_seen(rec, obj);
        struct rec_pod *p = pod_record(rec, obj);
        if (p && isnan(p->gone_at))
                p->gone_at = rec_now(rec);
        if (p && kube_pod_killed_with_node(obj))
                p->with_node = true;
        rec->settled = settled(rec);
}

static void pdb_seen(struct report_rec *rec, const cJSON *obj)
{
        struct kube_pdb d = {};
        if (kube_pdb_parse(obj, &d) < 0)
                return;
        _cleanup_free_ char *name = strprintf("%s/%s", d.namespace, d.name);
        if (!name ||
            report_add_pdb_sample(rec->r, name, rec_now(rec), d.current_healthy, d.desired_healthy) < 0)
                rec->error = -ENOMEM;
        kube_pdb_clear(&d);
}

static void pdbs_added(void *userdata, const cJSON *obj)
{
        pdb_seen(userdata, obj);
}

static void pdbs_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        pdb_seen(userdata, obj);
}

/* "names" of pods-forced: "ns/a,ns/b" (executor.c). */
static void mark_forced(struct report_rec *rec, const char *names)
{
        for (const char *s = names; s && *s;) {
                size_t len = strcspn(s, ",");
                for (size_t i = 0; i < rec->n; i++)
                        if (strlen(rec->p[i].key) == len && strncmp(rec->p[i].key, s, len) == 0)
                                rec->p[i].forced = true;
                s += len + (s[len] == ',');
        }
}

static void alert_seen(const struct alert *a, void *userdata)
{
        struct report_rec *rec = userdata;
        if (rec->finished)
                return;
        if (report_add_alert(rec->r, alert_kind_to_string(a->kind), a->node,
                             ((double)a->at_usec - (double)rec->origin) / 1e6, a->message) < 0)
                rec->error = -ENOMEM;
        for (const char *const *f = a->fields; a->kind == ALERT_PODS_FORCED && f && f[0] && f[1]; f += 2)
                if (streq(f[0], "names"))
                        mark_forced(rec, f[1]);
}

static struct rec_safe *find_safe(struct report_rec *rec, const char *key)
{
        for (size_t i = 0; i < rec->n_safe; i++)
                if (streq(rec->safe[i].key, key))
                        return &rec->safe[i];
        return NULL;
}

/* The last safe moment of each pod of x's node still planned, until its stop is seen. */
static int note_plan(struct report_rec *rec, const struct drain_exec *x)
{
        const struct drain_plan *plan = drain_exec_plan(x);
        const struct drain_plan_node *pn = drain_exec_plan_node(x);
        if (!plan || !pn)
                return 0;
        size_t node = (size_t)(pn - plan->nodes);
        for (size_t i = 0; i < plan->n_pods; i++) {
                const struct drain_plan_pod *pp = &plan->pods[i];
                if (pp->node != node || pp->last_safe_usec == 0 || pp->last_safe_usec == DRAIN_NEVER)
                        continue;
                _cleanup_free_ char *key = strprintf("%s/%s", pp->namespace, pp->name);
                if (!key)
                        return -ENOMEM;
                const struct rec_pod *p = find_pod(rec, key);
                struct rec_safe *s = find_safe(rec, key);
                if (!s) {
                        void *a = realloc(rec->safe, (rec->n_safe + 1) * sizeof(*rec->safe));
                        if (!a)
                                return -ENOMEM;
                        rec->safe = a;
                        s = &rec->safe[rec->n_safe++];
                        *s = (struct rec_safe){ .key = TAKE_PTR(key) };
                }
                if (!s->frozen)
                        s->at = ((double)pp->last_safe_usec - (double)rec->origin) / 1e6;
                s->frozen = p && !isnan(p->stop_at);
        }
        return 0;
}

static int note_plans(struct report_rec *rec)
{
        for (size_t i = 0; i < rec->n_follow; i++)
                if (note_plan(rec, rec->follow[i]) < 0)
                        return -ENOMEM;
        return 0;
}

static void follow_tick(void *userdata)
{
        struct report_rec *rec = userdata;
        rec->follow_timer = NULL; /* released as it fired */
        if (rec->finished)
                return;
        if (note_plans(rec) < 0)
                rec->error = -ENOMEM;
        if (timer_start_in(rec->loop, FOLLOW_USEC, follow_tick, rec, &rec->follow_timer) < 0)
                rec->error = -ENOMEM;
}

int report_rec_follow(struct report_rec *rec, struct loop *l, struct drain_exec *x)
{
        void *a = realloc(rec->follow, (rec->n_follow + 1) * sizeof(*rec->follow));
        if (!a)
                return -ENOMEM;
        rec->follow = a;
        rec->follow[rec->n_follow++] = x;
        rec->loop = l;
        if (rec->follow_timer)
                return 0;
        int r = timer_start_in(l, FOLLOW_USEC, follow_tick, rec, &rec->follow_timer);
        if (r < 0)
                rec->n_follow--; /* not followed: the caller may free it */
        return r;
}

void report_rec_unfollow(struct report_rec *rec, const struct drain_exec *x)
{
        for (size_t i = 0; rec && i < rec->n_follow; i++)
                if (rec->follow[i] == x) {
                        memmove(&rec->follow[i], &rec->follow[i + 1],
                                (rec->n_follow - i - 1) * sizeof(*rec->follow));
                        rec->n_follow--;
                        break;
                }
}

int report_rec_start(struct report *r, struct kube_client *c, struct alert_bus *bus, const char *node,
                     uint64_t origin_usec, struct report_rec **ret)
{
        static const struct kube_informer_ops pod_ops = {
                .added = pods_added,
                .modified = pods_modified,
                .deleted = pods_deleted,
        };
        static const struct kube_informer_ops pdb_ops = {
                .added = pdbs_added,
                .modified = pdbs_modified,
        };
        _cleanup_(report_rec_freep) struct report_rec *rec = calloc(1, sizeof(*rec));
        _cleanup_free_ char *field = node ? strprintf("spec.nodeName=%s", node) : NULL;
        int e;

        if (!rec || (node && !field))
                return -ENOMEM;
        rec->r = r;
        rec->origin = origin_usec;
        struct kube_watch_options pw = { .path = "/api/v1/pods", .field_selector = field };
        struct kube_watch_options dw = { .path = "/apis/policy/v1/poddisruptionbudgets" };
        if ((e = kube_informer_start(c, &pw, &pod_ops, rec, &rec->pods)) < 0 ||
            (e = kube_informer_start(c, &dw, &pdb_ops, rec, &rec->pdbs)) < 0 ||
            (e = alert_bus_add_sink(bus, alert_seen, rec)) < 0)
                return e;
        *ret = TAKE_PTR(rec);
        return 0;
}

/* "ns/name" of the first PDB in the informer's store that selects the pod; NULL when none (or ENOMEM). */
static char *pod_pdb(const struct report_rec *rec, const struct kube_pod *kp)
{
        for (size_t i = 0; i < kube_informer_size(rec->pdbs); i++) {
                struct kube_pdb d = {};
                char *name = NULL;
                if (kube_pdb_parse(kube_informer_at(rec->pdbs, i), &d) < 0)
                        continue;
                if (streq(d.namespace, kp->namespace) &&
                    kube_selector_matches(&d.selector, kp->labels, kp->n_labels))
                        name = strprintf("%s/%s", d.namespace, d.name);
                kube_pdb_clear(&d);
                if (name)
                        return name;
        }
        return NULL;
}

int report_rec_finish(struct report_rec *rec)
{
        double now = rec_now(rec);

        if (rec->finished)
                return rec->error;
        /* The plan as it stands at the end, for the pods that never started stopping. */
        if (note_plans(rec) < 0)
                rec->error = -ENOMEM;
        rec->finished = true;
        rec->follow_timer = timer_cancel(rec->follow_timer);
        rec->n_follow = 0;
        rec->pods = kube_informer_stop(rec->pods);
        for (size_t i = 0; i < rec->n && rec->error >= 0; i++) {
                const struct rec_pod *p = &rec->p[i];
                double deadline, drained;
                if (!p->kp.node_name || report_node_facts(rec->r, p->kp.node_name, &deadline, &drained) < 0)
                        continue;
                bool gone_in_time = !isnan(p->gone_at) && (isnan(deadline) || p->gone_at < deadline);
                bool killed = p->with_node ||
                              (!gone_in_time && ((!isnan(deadline) && now >= deadline) || isnan(drained)));
                bool daemon = p->kp.mirror || (p->kp.owner_kind && streq(p->kp.owner_kind, "DaemonSet"));
                /* Pods the drain leaves (DaemonSets) are not its story unless it stopped them in time; a pod
                 * neither stopped, gone nor killed did nothing to show. */
                if ((daemon && (isnan(p->stop_at) || !gone_in_time)) ||
                    (isnan(p->stop_at) && isnan(p->gone_at) && !killed))
                        continue;
                _cleanup_free_ char *pdb = pod_pdb(rec, &p->kp);
                unsigned flags = (p->forced ? REPORT_POD_FORCED : 0) | (killed ? REPORT_POD_KILLED : 0);
                const struct rec_safe *s = find_safe(rec, p->key);
                if (report_add_pod(rec->r, p->kp.node_name, p->key, pdb, p->stop_at, p->gone_at,
                                   s ? s->at : NAN, flags) < 0)
                        rec->error = -ENOMEM;
        }
        rec->pdbs = kube_informer_stop(rec->pdbs);
        return rec->error;
}

struct report_rec *report_rec_free(struct report_rec *rec)
{
        if (!rec)
                return NULL;
        kube_informer_stop(rec->pods);
        kube_informer_stop(rec->pdbs);
        for (size_t i = 0; i < rec->n; i++) {
                kube_pod_clear(&rec->p[i].kp);
                free(rec->p[i].key);
        }
        free(rec->p);
        timer_cancel(rec->follow_timer);
        free(rec->follow);
        for (size_t i = 0; i < rec->n_safe; i++)
                free(rec->safe[i].key);
        free(rec->safe);
        free(rec);
        return NULL;
}
