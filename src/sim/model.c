/* The simulator's world: objects, controllers, scheduler, kubelet timing, clock and change log.
 *
 * Time: every timed action (a pod turning Ready, a pod exiting, a scenario event, a node reaching its
 * deadline) is found by scanning the state for the earliest due time; sim_advance() runs them in time order
 * and stamps what they change with their own due time, so results do not depend on how often it is called.
 * After every change the controllers settle: ReplicaSets/Jobs/StatefulSets/DaemonSets create the pods they
 * miss, the first-fit scheduler binds Pending pods, PDB status is recomputed.
 *
 * A node whose deadline passes is terminated: every pod still on it is killed and removed, and the Node
 * object is deleted at once (no NotReady phase in between). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define DISRUPTED_POD_TTL 120.0  /* the disruption controller drops a disruptedPods entry after 2 minutes */
#define INITIAL_AGE       3600.0 /* pods of the starting world were created this long before t=0 */

static const char *const kind_resources[_SIM_KIND_MAX] = {
        [SIM_NAMESPACE] = "namespaces",
        [SIM_NODE] = "nodes",
        [SIM_POD] = "pods",
        [SIM_PDB] = "poddisruptionbudgets",
        [SIM_REPLICASET] = "replicasets",
        [SIM_DEPLOYMENT] = "deployments",
        [SIM_STATEFULSET] = "statefulsets",
        [SIM_DAEMONSET] = "daemonsets",
        [SIM_EVENT] = "events",
        [SIM_LEASE] = "leases",
        [SIM_HPA] = "horizontalpodautoscalers",
        [SIM_CONFIGMAP] = "configmaps",
        [SIM_VOLUMEATTACHMENT] = "volumeattachments",
        [SIM_SERVICE] = "services",
        [SIM_TARGETGROUPBINDING] = "targetgroupbindings",
};

const char *sim_kind_resource(enum sim_kind k)
{
        if ((int)k < 0 || k >= _SIM_KIND_MAX)
                return NULL;
        return kind_resources[k];
}

int sim_kind_from_resource(const char *resource)
{
        for (int i = 0; i < _SIM_KIND_MAX; i++)
                if (streq(kind_resources[i], resource))
                        return i;
        return -EINVAL;
}

/* ---- clock ---- */
void sim_start(struct sim *s)
{
        s->started = true;
        s->start_mono = now_monotonic_usec();
        /* The engine clock's now: the wall clock unless a simulation in this process scaled it, in which
         * case it may run ahead of the wall clock (by what earlier scaled runs gained), and timestamps read
         * by the engine must be on its clock. */
        s->epoch_usec = clk_now();
}

double sim_now(const struct sim *s)
{
        if (s->manual_clock)
                return s->manual_now;
        if (!s->started)
                return 0;
        return (double)(now_monotonic_usec() - s->start_mono) / 1e6 * s->time_scale;
}

void sim_set_now(struct sim *s, double t)
{
        if (s->manual_clock && t > s->manual_now)
                s->manual_now = t;
}

/* Scenario seconds map one to one onto wall-clock seconds from the epoch: a client running on the engine
 * clock (core.h, scaled by the same time_scale from sim_start on) sees every timestamp and duration with its
 * scenario meaning (a 30 s grace period is 30 s on that clock). */
uint64_t sim_wall_usec(const struct sim *s, double t)
{
        return (uint64_t)((int64_t)s->epoch_usec + (int64_t)llround(t * 1e6));
}

double sim_time_scale(const struct sim *s)
{
        return s->time_scale;
}

/* ---- locking ---- */
void sim_lock(struct sim *s)
{
        pthread_mutex_lock(&s->mutex);
}

void sim_unlock(struct sim *s)
{
        pthread_mutex_unlock(&s->mutex);
}

static double next_due(const struct sim *s);

void sim_wait(struct sim *s, uint64_t after_rv, uint64_t timeout_usec)
{
        uint64_t end = now_monotonic_usec() + timeout_usec;
        while (s->rv <= after_rv) {
                /* Recomputed on every wake-up: a change may have brought the next due action closer. */
                uint64_t now = now_monotonic_usec(), deadline = end;
                double next = next_due(s);
                if (next >= 0 && !s->manual_clock && s->started) {
                        double dt = (next - sim_now(s)) / s->time_scale;
                        if (dt <= 0)
                                return;
                        uint64_t due = now + (uint64_t)(dt * 1e6) + 1;
                        if (due < deadline)
                                deadline = due;
                }
                if (now >= deadline)
                        return;
                struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000ULL),
                                       .tv_nsec = (long)(deadline % 1000000ULL) * 1000L };
                pthread_cond_timedwait(&s->cond, &s->mutex, &ts);
        }
}

void sim_wait_change(struct sim *s, uint64_t after_rv, uint64_t timeout_usec)
{
        uint64_t end = now_monotonic_usec() + timeout_usec;
        struct timespec ts = { .tv_sec = (time_t)(end / 1000000ULL),
                               .tv_nsec = (long)(end % 1000000ULL) * 1000L };
        while (s->rv <= after_rv && now_monotonic_usec() < end)
                pthread_cond_timedwait(&s->cond, &s->mutex, &ts);
}

/* ---- lookups ---- */
/* ---- pod indexes ---- */
static size_t pod_key_hash(const char *ns, const char *name)
{
        uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a over "ns\0name" */
        for (const char *c = ns ?: ""; *c; c++)
                h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
        h *= 0x100000001b3ULL;
        for (const char *c = name; *c; c++)
                h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
        return (size_t)h;
}

static void pod_hash_link(struct sim *s, struct sim_pod *p)
{
        size_t b = pod_key_hash(sim_pod_ns(p), p->name) & (s->pod_hash_size - 1);
        p->hnext = s->pod_hash[b];
        s->pod_hash[b] = p;
}

static void pod_hash_unlink(struct sim *s, struct sim_pod *p)
{
        size_t b = pod_key_hash(sim_pod_ns(p), p->name) & (s->pod_hash_size - 1);
        for (struct sim_pod **q = &s->pod_hash[b]; *q; q = &(*q)->hnext)
                if (*q == p) {
                        *q = p->hnext;
                        p->hnext = NULL;
                        return;
                }
}

/* Room for one more pod in the array and the hash (at most one pod per bucket on average). */
static int pod_index_reserve(struct sim *s)
{
        if (s->n_pods + 1 > s->cap_pods) {
                size_t cap = s->cap_pods ? s->cap_pods * 2 : 256;
                struct sim_pod **a = realloc(s->pods, cap * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                s->pods = a;
                s->cap_pods = cap;
        }
        if (s->n_pods + 1 > s->pod_hash_size) {
                size_t size = s->pod_hash_size ? s->pod_hash_size * 2 : 256;
                struct sim_pod **h = calloc(size, sizeof(*h));
                if (!h)
                        return -ENOMEM;
                free(s->pod_hash);
                s->pod_hash = h;
                s->pod_hash_size = size;
                for (size_t i = 0; i < s->n_pods; i++)
                        pod_hash_link(s, s->pods[i]);
        }
        return 0;
}

/* Inserts in creation order; a pod joins a list mostly as its newest member, so the walk is short. */
static void plist_insert(struct sim_plist *l, struct sim_pod *p, enum sim_pod_link k)
{
        struct sim_pod_links *e = &p->links[k];
        if (e->linked)
                return;
        struct sim_pod *after = l->tail;
        while (after && after->seq > p->seq)
                after = after->links[k].prev;
        e->prev = after;
        e->next = after ? after->links[k].next : l->head;
        if (e->next)
                e->next->links[k].prev = p;
        else
                l->tail = p;
        if (after)
                after->links[k].next = p;
        else
                l->head = p;
        e->linked = true;
}

static void plist_remove(struct sim_plist *l, struct sim_pod *p, enum sim_pod_link k)
{
        struct sim_pod_links *e = &p->links[k];
        if (!e->linked)
                return;
        if (e->prev)
                e->prev->links[k].next = e->next;
        else
                l->head = e->next;
        if (e->next)
                e->next->links[k].prev = e->prev;
        else
                l->tail = e->prev;
        *e = (struct sim_pod_links){ 0 };
}

/* After any change of a pod's state: its place on the timed and pending lists, and what the next settle has
 * to look at again (its workload, and through it the PDBs that may select it). */
static void pod_changed(struct sim *s, struct sim_pod *p)
{
        if (p->deleting || (p->node >= 0 && !p->ready))
                plist_insert(&s->timed, p, SIM_LINK_TIMED);
        else
                plist_remove(&s->timed, p, SIM_LINK_TIMED);
        if (p->node < 0 && !p->deleting)
                plist_insert(&s->pending, p, SIM_LINK_PENDING);
        else
                plist_remove(&s->pending, p, SIM_LINK_PENDING);
        p->wl->dirty = true;
        s->dirty = true;
}

struct sim_pod *sim_find_pod(struct sim *s, const char *ns, const char *name)
{
        if (!s->pod_hash)
                return NULL;
        for (struct sim_pod *p = s->pod_hash[pod_key_hash(ns, name) & (s->pod_hash_size - 1)]; p;
             p = p->hnext)
                if (streq(p->name, name) && streq(sim_pod_ns(p), ns))
                        return p;
        return NULL;
}

struct sim_node *sim_find_node(struct sim *s, const char *name)
{
        for (size_t i = 0; i < s->n_nodes; i++)
                if (!s->nodes[i]->removed && streq(s->nodes[i]->name, name))
                        return s->nodes[i];
        return NULL;
}

bool sim_pdb_matches(const struct sim_pdb *d, const struct sim_pod *p)
{
        if (!streq(d->ns, sim_pod_ns(p)))
                return false;
        const cJSON *ml;
        cJSON_ArrayForEach (ml, d->match_labels) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(p->labels, ml->string);
                if (!cJSON_IsString(v) || !cJSON_IsString(ml) || !streq(v->valuestring, ml->valuestring))
                        return false;
        }
        return true;
}

bool sim_pdb_is_disrupted(const struct sim_pdb *d, const char *pod)
{
        for (size_t i = 0; i < d->n_disrupted; i++)
                if (streq(d->disrupted[i].pod, pod))
                        return true;
        return false;
}

/* ---- pods ---- */
static void pod_free(struct sim_pod *p)
{
        if (!p)
                return;
        free(p->name);
        free(p->uid);
        free(p->ip);
        cJSON_Delete(p->labels);
        free(p);
}

static int add_label(cJSON *labels, const char *k, const char *v)
{
        return cJSON_AddStringToObject(labels, k, v) ? 0 : -ENOMEM;
}

static bool pod_name_taken(struct sim *s, const char *ns, const char *name)
{
        return sim_find_pod(s, ns, name) != NULL;
}

static int pod_labels(struct sim_pod *p)
{
        const struct sim_workload *w = p->wl;
        _cleanup_free_ char *rev = NULL, *idx = NULL;
        p->labels = cJSON_CreateObject();
        if (!p->labels || add_label(p->labels, "app", w->sc->name) < 0)
                return -ENOMEM;
        switch (w->sc->kind) {
        case SIM_WL_DEPLOYMENT:
                return add_label(p->labels, "pod-template-hash", w->hash);
        case SIM_WL_STATEFULSET:
                rev = strprintf("%s-%s", w->sc->name, w->hash);
                idx = strprintf("%d", p->ordinal);
                if (!rev || !idx || add_label(p->labels, "controller-revision-hash", rev) < 0 ||
                    add_label(p->labels, "statefulset.kubernetes.io/pod-name", p->name) < 0 ||
                    add_label(p->labels, "apps.kubernetes.io/pod-index", idx) < 0)
                        return -ENOMEM;
                return 0;
        case SIM_WL_DAEMONSET:
                if (add_label(p->labels, "controller-revision-hash", w->hash) < 0 ||
                    add_label(p->labels, "pod-template-generation", "1") < 0)
                        return -ENOMEM;
                return 0;
        case SIM_WL_JOB:
                if (add_label(p->labels, "batch.kubernetes.io/controller-uid", w->uid) < 0 ||
                    add_label(p->labels, "batch.kubernetes.io/job-name", w->sc->name) < 0 ||
                    add_label(p->labels, "controller-uid", w->uid) < 0 ||
                    add_label(p->labels, "job-name", w->sc->name) < 0)
                        return -ENOMEM;
                return 0;
        case SIM_WL_POD:
                return 0;
        }
        return 0;
}

static int pod_name(struct sim *s, struct sim_workload *w, int ordinal, char **ret)
{
        const struct sim_sc_workload *sc = w->sc;
        for (unsigned attempt = 0; attempt < 100; attempt++) {
                char sfx[6];
                sim_rand_suffix(s, sfx);
                char *name;
                switch (sc->kind) {
                case SIM_WL_DEPLOYMENT:
                        name = strprintf("%s-%s", w->rs_name, sfx);
                        break;
                case SIM_WL_STATEFULSET:
                        name = strprintf("%s-%d", sc->name, ordinal);
                        break;
                case SIM_WL_POD:
                        name = sc->replicas == 1 ? strdup(sc->name) : strprintf("%s-%d", sc->name, ordinal);
                        break;
                default:
                        name = strprintf("%s-%s", sc->name, sfx);
                        break;
                }
                if (!name)
                        return -ENOMEM;
                if (!pod_name_taken(s, sc->ns, name)) {
                        *ret = name;
                        return 0;
                }
                free(name);
                if (sc->kind == SIM_WL_STATEFULSET || sc->kind == SIM_WL_POD)
                        return -EEXIST;
        }
        return -EEXIST;
}

static int pod_new(struct sim *s, struct sim_workload *w, int ordinal, struct sim_pod **ret)
{
        if (pod_index_reserve(s) < 0)
                return -ENOMEM;
        struct sim_pod *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->wl = w;
        p->rev = w->n_old_rs;
        p->ordinal = ordinal;
        p->node = -1;
        p->phase = SIM_PENDING;
        p->created = s->t;
        p->scheduled_at = p->ready_at = p->deletion_ts = p->exit_at = p->sigterm_at = -1;
        s->pod_ip_counter++;
        int r = pod_name(s, w, ordinal, &p->name);
        if (r < 0 || !(p->uid = sim_new_uid(s)) ||
            !(p->ip = strprintf("10.1.%u.%u", (unsigned)(s->pod_ip_counter / 250) % 256,
                                (unsigned)(s->pod_ip_counter % 250) + 2)) ||
            pod_labels(p) < 0) {
                pod_free(p);
                return r < 0 ? r : -ENOMEM;
        }
        p->seq = ++s->pod_seq;
        s->pods[s->n_pods++] = p;
        pod_hash_link(s, p);
        plist_insert(&w->pods, p, SIM_LINK_WL);
        pod_changed(s, p);
        *ret = p;
        return 0;
}

int sim_pod_new(struct sim *s, struct sim_workload *w, int ordinal, struct sim_pod **ret)
{
        return pod_new(s, w, ordinal, ret);
}

/* Its index in sim.pods (sorted by seq). */
static size_t pod_index(const struct sim *s, const struct sim_pod *p)
{
        size_t lo = 0, hi = s->n_pods;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (s->pods[mid]->seq < p->seq)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static void pod_remove(struct sim *s, struct sim_pod *p)
{
        /* As kube-apiserver applies the kubelet's (or the pod GC's) final delete of grace 0 to a terminating
         * pod: a shortened graceful delete, so the object that goes carries 0 as its grace and the first
         * delete's time as its deletionTimestamp, or the present when that is past (it never moves one
         * into the past: apiserver's rest.BeforeDelete), as it always is once a stop took any time. */
        if (p->deleting && p->grace > 0) {
                p->deletion_ts = fmax(p->deletion_ts - (double)p->grace, s->t);
                p->grace = 0;
        }
        (void)sim_emit(s, SIM_POD, "DELETED", p);
        sim_va_detach(s, p);
        size_t i = pod_index(s, p);
        if (i < s->n_pods && s->pods[i] == p) {
                memmove(&s->pods[i], &s->pods[i + 1], (s->n_pods - i - 1) * sizeof(*s->pods));
                s->n_pods--;
        }
        pod_hash_unlink(s, p);
        if (p->node >= 0) {
                struct sim_node *n = s->nodes[p->node];
                plist_remove(&n->pods, p, SIM_LINK_NODE);
                n->used_cpu -= p->wl->sc->cpu_millis;
                n->used_mem -= p->wl->sc->memory_bytes;
                n->used_pods--;
        }
        plist_remove(&s->timed, p, SIM_LINK_TIMED);
        plist_remove(&s->pending, p, SIM_LINK_PENDING);
        plist_remove(&p->wl->pods, p, SIM_LINK_WL);
        p->wl->dirty = true;
        s->dirty = true;
        pod_free(p);
}

/* Counts an evictable pod toward a node that has had a notice. */
static void pod_tally(struct sim *s, struct sim_pod *p)
{
        if (p->node < 0 || p->tallied || !sim_pod_evictable(p))
                return;
        struct sim_node *n = s->nodes[p->node];
        if (!n->noticed)
                return;
        p->tallied = true;
        n->pods_evictable++;
}

static void pod_bind(struct sim *s, struct sim_pod *p, size_t node, bool emit)
{
        p->node = (long)node;
        p->phase = SIM_RUNNING;
        p->scheduled_at = s->t;
        p->ready_at = s->t + p->wl->sc->startup;
        p->ready = p->wl->sc->startup <= 0;
        struct sim_node *n = s->nodes[node];
        plist_insert(&n->pods, p, SIM_LINK_NODE);
        n->used_cpu += p->wl->sc->cpu_millis;
        n->used_mem += p->wl->sc->memory_bytes;
        n->used_pods++;
        if (sim_va_attach(s, p) < 0)
                log_debug("sim: out of memory attaching the volume of %s", p->name);
        pod_changed(s, p);
        pod_tally(s, p);
        if (emit)
                (void)sim_emit(s, SIM_POD, "MODIFIED", p);
}

/* A pod's containers stopped: at the end of their own shutdown (graceful) or killed at the end of grace. */
static void pod_exit(struct sim *s, struct sim_pod *p)
{
        bool graceful = p->wl->sc->shutdown <= (double)p->grace;
        if (p->node >= 0 && p->phase == SIM_RUNNING && sim_pod_evictable(p)) {
                struct sim_node *n = s->nodes[p->node];
                if (graceful) {
                        if (p->tallied)
                                n->pods_graceful++;
                } else
                        n->pods_killed++;
        }
        /* As a kubelet: the stopped containers' statuses are reported, and the pod object stays (with its
         * deletionTimestamp) until the kubelet's grace-0 delete confirms it, pod_removal_seconds later. Its
         * last state (the one a watch's DELETED carries) has them either way: how it ended is told. */
        if (p->node >= 0 && p->phase == SIM_RUNNING) {
                p->exited = true;
                p->exit_code = graceful ? 0 : 137;
        }
        if (s->sc->pod_removal > 0 && p->node >= 0 && p->phase == SIM_RUNNING) {
                p->remove_at = s->t + s->sc->pod_removal;
                pod_changed(s, p);
                (void)sim_emit(s, SIM_POD, "MODIFIED", p);
                return;
        }
        pod_remove(s, p);
}

int sim_pod_delete(struct sim *s, struct sim_pod *p, int64_t grace)
{
        if (grace < 0)
                grace = p->wl->sc->grace;
        /* As kube-apiserver: nothing to stop for a pod that never ran or already finished. */
        if (p->node < 0 || p->phase == SIM_SUCCEEDED || p->phase == SIM_FAILED)
                grace = 0;
        double ts = s->t + (double)grace;
        if (p->exited) {
                /* Its containers stopped: a delete with grace 0 (the kubelet's) removes it now. */
                if (grace == 0 && p->remove_at > s->t) {
                        p->remove_at = s->t;
                        s->dirty = true;
                }
                return 0;
        }
        if (p->deleting) {
                /* kube-apiserver shortens a graceful delete from when it was asked (the old deadline less
                 * the old grace, plus the new, but not into the past) and never lengthens it; the kubelet
                 * kills what still runs the new grace from now. */
                if (grace >= p->grace)
                        return 0;
                p->deletion_ts = p->deletion_ts - (double)p->grace + (double)grace;
                if (p->deletion_ts < s->t) {
                        /* Not into the past: now, and a graceful delete stays graceful (grace 1). */
                        p->deletion_ts = s->t;
                        grace = grace ? 1 : 0;
                }
                p->grace = grace;
                if (p->exit_at > ts)
                        p->exit_at = ts;
                pod_changed(s, p);
                return sim_emit(s, SIM_POD, "MODIFIED", p);
        }
        p->deleting = true;
        p->grace = grace;
        p->deletion_ts = ts;
        if (p->node >= 0 && grace > 0) {
                p->sigtermed = true;
                p->sigterm_at = s->t;
        }
        p->exit_at = s->t + fmin(p->wl->sc->shutdown, (double)grace);
        pod_changed(s, p);
        return sim_emit(s, SIM_POD, "MODIFIED", p);
}

/* ---- nodes ---- */
static void node_free(struct sim_node *n)
{
        if (!n)
                return;
        free(n->name);
        free(n->uid);
        free(n->ip);
        cJSON_Delete(n->labels);
        cJSON_Delete(n->annotations);
        cJSON_Delete(n->taints);
        if (n->owned_sc) {
                sim_sc_node_clear(n->owned_sc);
                free(n->owned_sc);
        }
        free(n);
}

static int node_new(struct sim *s, const struct sim_sc_node *sc, struct sim_node **ret)
{
        struct sim_node *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        n->sc = sc;
        n->instance_id = sc->instance_id;
        n->zone = sc->zone;
        n->instance_type = sc->instance_type;
        n->capacity_type = sc->capacity_type;
        n->rebalance_at = n->notice_at = n->deadline_at = n->cordoned_at = n->drained_at = -1;
        n->rebooted_at = n->back_at = n->uncordoned_at = n->lb_excluded_at = -1;
        size_t idx = s->n_nodes;
        _cleanup_free_ char *region = strdup(sc->zone);
        if (region && *region && region[strlen(region) - 1] >= 'a' && region[strlen(region) - 1] <= 'z')
                region[strlen(region) - 1] = 0;
        bool spot = streq(sc->capacity_type, "spot");
        if (!region || !(n->name = strdup(sc->name)) || !(n->uid = sim_new_uid(s)) ||
            !(n->ip = strprintf("10.0.%zu.%zu", (idx / 250) % 256, idx % 250 + 10)) ||
            !(n->labels = cJSON_CreateObject()) || !(n->annotations = cJSON_CreateObject()) ||
            add_label(n->labels, "beta.kubernetes.io/arch", "amd64") < 0 ||
            add_label(n->labels, "beta.kubernetes.io/os", "linux") < 0 ||
            add_label(n->labels, "eks.amazonaws.com/capacityType", spot ? "SPOT" : "ON_DEMAND") < 0 ||
            add_label(n->labels, "karpenter.sh/capacity-type", sc->capacity_type) < 0 ||
            add_label(n->labels, "kubernetes.io/arch", "amd64") < 0 ||
            add_label(n->labels, "kubernetes.io/hostname", sc->name) < 0 ||
            add_label(n->labels, "kubernetes.io/os", "linux") < 0 ||
            add_label(n->labels, "node.kubernetes.io/instance-type", sc->instance_type) < 0 ||
            add_label(n->labels, "topology.kubernetes.io/region", region) < 0 ||
            add_label(n->labels, "topology.kubernetes.io/zone", sc->zone) < 0 ||
            add_label(n->annotations, "node.alpha.kubernetes.io/ttl", "0") < 0) {
                node_free(n);
                return -ENOMEM;
        }
        *ret = n;
        return 0;
}

static bool taints_block(const struct sim_node *n, const struct sim_pod *p)
{
        if (p->wl->sc->kind == SIM_WL_DAEMONSET) /* tolerates everything */
                return false;
        const cJSON *t;
        cJSON_ArrayForEach (t, n->taints) {
                const char *effect = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(t, "effect"));
                if (streq(effect, "NoSchedule") || streq(effect, "NoExecute"))
                        return true;
        }
        return false;
}

void sim_node_cordon_changed(struct sim *s, struct sim_node *n)
{
        if (n->unschedulable && n->interrupted && n->cordoned_at < 0)
                n->cordoned_at = s->t;
}

/* What still runs on the node dies without its graceful stop (an evictable pod still running counts as
 * killed). */
static void node_kill_pods(struct sim *s, struct sim_node *n)
{
        while (n->pods.head) {
                struct sim_pod *p = n->pods.head;
                if (sim_pod_evictable(p) && p->phase == SIM_RUNNING && !p->exited)
                        n->pods_killed++;
                /* As the pod garbage collector removes the pods of a node that is no more: marked Failed
                 * with a DisruptionTarget condition (DeletionByPodGC) first, which its last state shows. */
                p->node_gone = true;
                pod_remove(s, p);
        }
}

static void node_terminate(struct sim *s, size_t ni)
{
        struct sim_node *n = s->nodes[ni];
        node_kill_pods(s, n);
        n->removed = true;
        (void)sim_emit(s, SIM_NODE, "DELETED", n);
}

/* A reboot at its deadline: what runs there dies as at a termination (their controllers replace them), and
 * the node's kubelet stops posting status until it is back. The node, its cordon and its labels stay. */
static void node_reboot(struct sim *s, struct sim_node *n)
{
        node_kill_pods(s, n);
        n->down = true;
        n->rebooted_at = s->t;
        n->back_at = s->t + n->reboot_seconds;
        (void)sim_emit(s, SIM_NODE, "MODIFIED", n);
}

/* Back from its reboot: Ready again; its DaemonSets' pods follow in the settle. */
static void node_back(struct sim *s, struct sim_node *n)
{
        n->down = false;
        s->nodes_changed = true;
        (void)sim_emit(s, SIM_NODE, "MODIFIED", n);
}

void sim_node_uncordoned(struct sim *s, struct sim_node *n)
{
        if (n->reboot && n->back_at >= 0 && !n->down && n->uncordoned_at < 0)
                n->uncordoned_at = s->t;
}

/* The time the node's notice still has something to happen at: its end, a reboot's return; < 0: none. */
static double node_due(const struct sim_node *n)
{
        if (!n->interrupted || n->removed)
                return -1;
        if (!n->reboot || n->rebooted_at < 0)
                return n->deadline_at;
        return n->down ? n->back_at : -1;
}

static void node_notice(struct sim *s, struct sim_node *n)
{
        if (n->noticed)
                return;
        n->noticed = true;
        for (struct sim_pod *p = n->pods.head; p; p = p->links[SIM_LINK_NODE].next)
                pod_tally(s, p);
}

static int launch_hooked(struct sim *s, const struct sim_sc_event *e);

static void apply_event(struct sim *s, const struct sim_sc_event *e)
{
        s->dirty = true;
        if (streq(e->type, "rollout") || streq(e->type, "scale")) {
                sim_ordinary_event(s, e);
                return;
        }
        if (streq(e->type, "asg-launch")) {
                if (launch_hooked(s, e) < 0)
                        log_warning("sim: the asg-launch of %s could not be modelled", e->launch_name);
                return;
        }
        struct sim_node *n = s->nodes[e->node];
        if (n->removed)
                return;
        if (streq(e->type, "rebalance-recommendation")) {
                if (n->rebalance_at < 0)
                        n->rebalance_at = s->t;
                node_notice(s, n);
                return;
        }
        /* spot-interruption, scheduled-change, asg-lifecycle-terminate: the instance goes away after the
         * budget. */
        if (n->interrupted)
                return;
        n->interrupted = true;
        n->notice_kind = e->type;
        n->maint_code = e->code;
        n->reboot = e->code && sim_maintenance_is_reboot(e->code);
        n->reboot_seconds = e->reboot_seconds;
        n->notice_at = s->t;
        /* AWS gives the deadline to the second (instance-action's time, a lifecycle action's end): the
         * instance goes at the deadline it stated, which is what a handler plans against. A manual clock
         * (the model driven step by step, without clients on the wall clock) keeps it exact. */
        n->deadline_at = s->t + s->sc->budget;
        uint64_t stated = sim_wall_usec(s, n->deadline_at) / 1000000 * 1000000;
        if (!s->manual_clock && stated > s->epoch_usec && (double)(stated - s->epoch_usec) / 1e6 > s->t)
                n->deadline_at = (double)(stated - s->epoch_usec) / 1e6;
        if (n->unschedulable)
                n->cordoned_at = s->t;
        node_notice(s, n);
}

/* ---- controllers, scheduler, PDB status ---- */
/* Pods of the workload that are not terminating. */
static int workload_active_pods(const struct sim_workload *w)
{
        int c = 0;
        for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next)
                if (!p->deleting)
                        c++;
        return c;
}

static bool node_has_pod_of(const struct sim_node *n, const struct sim_workload *w)
{
        for (const struct sim_pod *p = n->pods.head; p; p = p->links[SIM_LINK_NODE].next)
                if (p->wl == w)
                        return true;
        return false;
}

/* Only workloads whose pods changed since the last settle (and DaemonSets when nodes joined) can be missing
 * a pod: for the others a reconcile would find nothing to do. */
static void reconcile_controllers(struct sim *s)
{
        for (size_t wi = 0; wi < s->n_wls; wi++) {
                struct sim_workload *w = &s->wls[wi];
                struct sim_pod *p;
                if (!w->dirty && !(w->sc->kind == SIM_WL_DAEMONSET && s->nodes_changed))
                        continue;
                switch (w->sc->kind) {
                case SIM_WL_DEPLOYMENT:
                        sim_deployment_reconcile(s, w);
                        break;
                case SIM_WL_JOB:
                        /* The Job controller replaces a pod as soon as it is terminating. */
                        for (int n = workload_active_pods(w); n < w->sc->replicas; n++) {
                                if (pod_new(s, w, w->next_ordinal_or_index++, &p) < 0)
                                        break;
                                (void)sim_emit(s, SIM_POD, "ADDED", p);
                        }
                        break;
                case SIM_WL_STATEFULSET:
                        /* Same name, new UID, only once the old pod is gone. */
                        for (int i = 0; i < w->replicas; i++) {
                                char name[300];
                                snprintf(name, sizeof(name), "%s-%d", w->sc->name, i);
                                if (sim_find_pod(s, w->sc->ns, name))
                                        continue;
                                if (pod_new(s, w, i, &p) < 0)
                                        break;
                                (void)sim_emit(s, SIM_POD, "ADDED", p);
                        }
                        break;
                case SIM_WL_DAEMONSET:
                        for (size_t ni = 0; ni < s->n_nodes; ni++) {
                                if (s->nodes[ni]->removed)
                                        continue;
                                if (node_has_pod_of(s->nodes[ni], w) || pod_new(s, w, 0, &p) < 0)
                                        continue;
                                /* The DaemonSet controller pins its pod to the node (node affinity). */
                                pod_bind(s, p, ni, false);
                                (void)sim_emit(s, SIM_POD, "ADDED", p);
                        }
                        break;
                case SIM_WL_POD:
                        break;
                }
        }
}

static bool node_fits(const struct sim_node *n, const struct sim_pod *p)
{
        const struct sim_sc_node *c = n->sc;
        if (n->removed || n->unschedulable || n->not_ready || n->down || taints_block(n, p))
                return false;
        return n->used_cpu + p->wl->sc->cpu_millis <= c->cpu_millis &&
               n->used_mem + p->wl->sc->memory_bytes <= c->memory_bytes && n->used_pods + 1 <= c->pods;
}

static bool placed_on(const struct sim_pod *p, size_t ni)
{
        for (size_t k = 0; k < p->wl->sc->n_placement; k++)
                if (p->wl->sc->placement[k].node == ni)
                        return true;
        return false;
}

/* First fit in node order over Ready, schedulable nodes with room for the pod's requests. Terminating pods
 * still hold their room, as in Kubernetes. initial: the starting world, where a workload's placement gives
 * the exact count on the nodes it names, so its other pods go to other nodes first. */
static int schedule_pending(struct sim *s, bool initial)
{
        /* The pending list is in creation order, as the scan over every pod was. */
        for (struct sim_pod *p = s->pending.head, *next; p; p = next) {
                next = p->links[SIM_LINK_PENDING].next;
                for (int pass = initial ? 0 : 1; pass < 2 && p->node < 0; pass++)
                        for (size_t ni = 0; ni < s->n_nodes; ni++) {
                                if ((pass == 0 && placed_on(p, ni)) || !node_fits(s->nodes[ni], p))
                                        continue;
                                pod_bind(s, p, ni, true); /* leaves the pending list */
                                break;
                        }
        }
        return 0;
}

/* Labels that differ between the pods of one workload (a StatefulSet's pod name and index); every other
 * label of a pod is its workload's. */
static bool label_is_per_pod(const char *key)
{
        return streq(key, "statefulset.kubernetes.io/pod-name") ||
               streq(key, "apps.kubernetes.io/pod-index");
}

/* Whether the PDB can select any pod of the workload: false only when its selector rules out the labels all
 * of the workload's pods share. */
static bool pdb_may_select(const struct sim_pdb *d, const struct sim_workload *w)
{
        if (!streq(d->ns, w->sc->ns))
                return false;
        const cJSON *ml;
        cJSON_ArrayForEach (ml, d->match_labels) {
                if (label_is_per_pod(ml->string))
                        continue;
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(w->tmpl_labels, ml->string);
                if (!cJSON_IsString(v) || !cJSON_IsString(ml) || !streq(v->valuestring, ml->valuestring))
                        return false;
        }
        return true;
}

static void pdb_recompute(struct sim *s, struct sim_pdb *d, bool emit)
{
        bool changed = !d->computed;
        /* Entries leave disruptedPods once the pod is terminating or gone, or after 2 minutes. */
        for (size_t i = 0; i < d->n_disrupted;) {
                struct sim_pod *p = sim_find_pod(s, d->ns, d->disrupted[i].pod);
                if (!p || p->deleting || d->disrupted[i].at + DISRUPTED_POD_TTL <= s->t) {
                        free(d->disrupted[i].pod);
                        d->disrupted[i] = d->disrupted[--d->n_disrupted];
                        changed = true;
                } else
                        i++;
        }
        int matching = 0, healthy = 0, scale = 0;
        bool scale_ok = true;
        for (size_t wi = 0; wi < s->n_wls; wi++) {
                const struct sim_workload *w = &s->wls[wi];
                bool owns = false;
                if (!pdb_may_select(d, w))
                        continue;
                for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                        if (!sim_pdb_matches(d, p))
                                continue;
                        owns = true;
                        matching++;
                        if (p->ready && !p->deleting && !sim_pdb_is_disrupted(d, p->name))
                                healthy++;
                }
                if (!owns)
                        continue;
                if (w->sc->kind == SIM_WL_DEPLOYMENT || w->sc->kind == SIM_WL_STATEFULSET)
                        scale += w->replicas;
                else if (w->sc->kind != SIM_WL_POD) /* a bare pod is unmanaged: not in the scale */
                        scale_ok = false;           /* no scale subresource: the controller fails safe */
        }
        struct sim_budget_status st;
        sim_budget_compute(
            &d->spec,
            &(struct sim_budget_pods){
                .matching = matching, .scale = scale, .scale_known = scale_ok, .healthy = healthy },
            &st);
        int expected = st.expected, desired = st.desired, allowed = st.allowed;
        if ((allowed > 0) != (d->allowed > 0) || !d->computed)
                d->cond_since = s->t;
        changed = changed || healthy != d->current || desired != d->desired || expected != d->expected ||
                  allowed != d->allowed;
        d->current = healthy;
        d->desired = desired;
        d->expected = expected;
        d->allowed = allowed;
        d->computed = true;
        if (changed && emit)
                (void)sim_emit(s, SIM_PDB, "MODIFIED", d);
}

static void workload_status(struct sim *s, struct sim_workload *w, bool emit)
{
        int n = 0, ready = 0, updated = 0, updated_ready = 0;
        for (const struct sim_pod *p = w->pods.head; p; p = p->links[SIM_LINK_WL].next) {
                if (p->deleting)
                        continue;
                bool current = p->rev == w->n_old_rs;
                n++;
                updated += current;
                if (p->ready) {
                        ready++;
                        updated_ready += current;
                }
        }
        if (n == w->st_replicas && ready == w->st_ready && updated == w->st_updated &&
            updated_ready == w->st_updated_ready)
                return;
        w->st_replicas = n;
        w->st_ready = ready;
        w->st_updated = updated;
        w->st_updated_ready = updated_ready;
        if (!emit)
                return;
        switch (w->sc->kind) {
        case SIM_WL_DEPLOYMENT:
                (void)sim_emit(s, SIM_REPLICASET, "MODIFIED", w);
                (void)sim_emit(s, SIM_DEPLOYMENT, "MODIFIED", w);
                break;
        case SIM_WL_STATEFULSET:
                (void)sim_emit(s, SIM_STATEFULSET, "MODIFIED", w);
                break;
        case SIM_WL_DAEMONSET:
                (void)sim_emit(s, SIM_DAEMONSET, "MODIFIED", w);
                break;
        default:
                break;
        }
}

static void check_drained(struct sim *s)
{
        for (size_t ni = 0; ni < s->n_nodes; ni++) {
                struct sim_node *n = s->nodes[ni];
                if (!n->noticed || n->removed || n->drained_at >= 0)
                        continue;
                bool left = false;
                for (const struct sim_pod *p = n->pods.head; p && !left; p = p->links[SIM_LINK_NODE].next)
                        left = sim_pod_evictable(p);
                if (!left)
                        n->drained_at = s->t;
        }
}

/* A PDB's status can only have moved when a workload it may select changed, or while it has disruptedPods
 * entries (they expire with time). */
static bool pdb_stale(const struct sim *s, const struct sim_pdb *d)
{
        if (!d->computed || d->n_disrupted > 0)
                return true;
        for (size_t i = 0; i < s->n_wls; i++)
                if (s->wls[i].dirty && pdb_may_select(d, &s->wls[i]))
                        return true;
        return false;
}

/* Brings controllers, scheduler, PDB and workload status up to date. Settling a settled world changes
 * nothing, so only what changed since the last settle is looked at. */
void sim_settle(struct sim *s)
{
        if (!s->dirty)
                return;
        sim_rollouts_step(s);
        reconcile_controllers(s);
        (void)schedule_pending(s, false);
        for (size_t i = 0; i < s->n_pdbs; i++)
                if (pdb_stale(s, s->pdbs[i]))
                        pdb_recompute(s, s->pdbs[i], true);
        for (size_t i = 0; i < s->n_wls; i++)
                if (s->wls[i].dirty) {
                        workload_status(s, &s->wls[i], true);
                        s->wls[i].dirty = false;
                }
        check_drained(s);
        s->nodes_changed = false;
        s->dirty = false;
}

/* ---- timed actions ---- */
static void due_min(double *m, double t)
{
        if (t >= 0 && (*m < 0 || t < *m))
                *m = t;
}

static double next_due(const struct sim *s)
{
        double m = -1;
        if (s->next_event < s->sc->n_events)
                due_min(&m, s->sc->events[s->next_event].at);
        due_min(&m, sim_va_next(s));
        for (const struct sim_pod *p = s->timed.head; p; p = p->links[SIM_LINK_TIMED].next) {
                if (p->exited)
                        due_min(&m, p->remove_at);
                else if (p->deleting)
                        due_min(&m, p->exit_at);
                else if (p->node >= 0 && !p->ready)
                        due_min(&m, p->ready_at);
        }
        for (size_t i = 0; i < s->n_nodes; i++)
                due_min(&m, node_due(s->nodes[i]));
        for (size_t i = 0; i < s->n_pdbs; i++)
                for (size_t j = 0; j < s->pdbs[i]->n_disrupted; j++)
                        due_min(&m, s->pdbs[i]->disrupted[j].at + DISRUPTED_POD_TTL);
        for (size_t i = 0; i < s->n_launches; i++)
                if (!s->launches[i].joined)
                        due_min(&m, s->launches[i].ready_at);
                else if (s->launches[i].hooked && !s->launches[i].node_ready)
                        due_min(&m, s->launches[i].node_ready_at);
        for (size_t i = 0; i < s->n_launches; i++)
                if (s->launches[i].hooked && !s->launches[i].result[0])
                        due_min(&m, s->launches[i].last_beat + s->sc->hook_heartbeat_timeout);
        return m;
}

/* The launched instance registers as a Ready, schedulable node (its DaemonSet pods follow in the settle). */
static int launch_join(struct sim *s, const struct sim_launch *l)
{
        size_t idx = s->n_nodes;
        struct sim_node **a = realloc(s->nodes, (idx + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->nodes = a;
        struct sim_sc_node *sc = calloc(1, sizeof(*sc));
        if (!sc)
                return -ENOMEM;
        /* An asg-launch is of the group's kind: the first scenario node's size. */
        const struct sim_sc_node *like = &s->sc->nodes[0];
        sc->cpu_millis = l->itype ? l->itype->cpu_millis : like->cpu_millis;
        sc->memory_bytes = l->itype ? l->itype->memory_bytes : like->memory_bytes;
        sc->pods = l->itype ? 110 : like->pods;
        if (!(sc->name =
                  l->name ? strdup(l->name)
                          : strprintf("ip-10-0-%zu-%zu.ec2.internal", (idx / 250) % 256, idx % 250 + 10)) ||
            !(sc->instance_id = strdup(l->instance_id)) || !(sc->zone = strdup(l->zone)) ||
            !(sc->capacity_type = strdup(l->capacity_type)) ||
            !(sc->instance_type = strdup(l->itype ? l->itype->name : like->instance_type)) ||
            !(sc->cpu = strdup(l->itype ? l->itype->cpu : like->cpu)) ||
            !(sc->memory = strdup(l->itype ? l->itype->memory : like->memory))) {
                sim_sc_node_clear(sc);
                free(sc);
                return -ENOMEM;
        }
        struct sim_node *n;
        int r = node_new(s, sc, &n);
        if (r < 0) {
                sim_sc_node_clear(sc);
                free(sc);
                return r;
        }
        n->owned_sc = sc;
        n->not_ready = l->hooked && !(l->node_ready_at >= 0 && l->node_ready_at <= s->t);
        n->ready_since = s->t;
        s->nodes[s->n_nodes++] = n;
        s->nodes_changed = true;
        return sim_emit(s, SIM_NODE, "ADDED", n);
}

int sim_launch_instance(struct sim *s, const char *instance_type, const char *zone,
                        const char *capacity_type, char **ret_instance_id)
{
        sim_begin(s);
        const struct sim_sc_itype *it = NULL;
        for (size_t i = 0; i < s->sc->n_itypes && !it; i++)
                if (streq(s->sc->itypes[i].name, instance_type))
                        it = &s->sc->itypes[i];
        if (!it || isempty(zone) || (!streq(capacity_type, "spot") && !streq(capacity_type, "on-demand")))
                return -EINVAL;
        struct sim_launch *a = realloc(s->launches, (s->n_launches + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->launches = a;
        struct sim_launch *l = &s->launches[s->n_launches];
        *l = (struct sim_launch){ .itype = it,
                                  .requested_at = s->t,
                                  .ready_at = s->t + s->sc->node_launch_seconds };
        _cleanup_free_ char *id = strprintf("i-0%016llx", (unsigned long long)sim_rng_next(s));
        if (!id || !(l->instance_id = strdup(id)) || !(l->zone = strdup(zone)) ||
            !(l->capacity_type = strdup(capacity_type))) {
                free(l->instance_id);
                free(l->zone);
                return -ENOMEM;
        }
        s->n_launches++;
        /* No object changed, but waiters must see the new due time. */
        sim_broadcast(s);
        if (ret_instance_id)
                *ret_instance_id = TAKE_PTR(id);
        return 0;
}

/* asg-launch: the group launches an instance under its launch hook; its lifecycle message goes to the SQS
 * surface (sim_launch_hook()), its node joins join_seconds later NotReady, Ready ready_seconds later. */
static int launch_hooked(struct sim *s, const struct sim_sc_event *e)
{
        const struct sim_sc_node *like = &s->sc->nodes[0];
        struct sim_launch *a = realloc(s->launches, (s->n_launches + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->launches = a;
        struct sim_launch *l = &s->launches[s->n_launches];
        *l = (struct sim_launch){ .requested_at = s->t,
                                  .ready_at = s->t + e->join_after,
                                  .hooked = true,
                                  .node_ready_at = e->ready_after < 0 ? -1 : s->t + e->ready_after,
                                  .completed_at = -1,
                                  .last_beat = s->t };
        if (!(l->instance_id = strdup(e->launch_instance)) || !(l->zone = strdup(like->zone)) ||
            !(l->capacity_type = strdup(like->capacity_type)) || !(l->name = strdup(e->launch_name))) {
                free(l->instance_id);
                free(l->zone);
                free(l->capacity_type);
                return -ENOMEM;
        }
        s->n_launches++;
        return 0;
}

static struct sim_node *node_by_instance(struct sim *s, const char *instance_id)
{
        for (size_t i = 0; i < s->n_nodes; i++)
                if (!s->nodes[i]->removed && streq(s->nodes[i]->instance_id, instance_id))
                        return s->nodes[i];
        return NULL;
}

static void run_due(struct sim *s, double t)
{
        s->t = t;
        s->dirty = true; /* also when only a disruptedPods entry expires */
        while (s->next_event < s->sc->n_events && s->sc->events[s->next_event].at <= t)
                apply_event(s, &s->sc->events[s->next_event++]);
        /* The timed list is in creation order, as the scan over every pod was. */
        for (struct sim_pod *p = s->timed.head, *next; p; p = next) {
                next = p->links[SIM_LINK_TIMED].next;
                if (p->exited) {
                        if (p->remove_at <= t)
                                pod_remove(s, p);
                        continue;
                }
                if (p->deleting && p->exit_at <= t) {
                        pod_exit(s, p);
                        continue;
                }
                if (!p->deleting && p->node >= 0 && !p->ready && p->ready_at <= t) {
                        p->ready = true;
                        pod_changed(s, p);
                        (void)sim_emit(s, SIM_POD, "MODIFIED", p);
                }
        }
        for (size_t i = 0; i < s->n_nodes; i++) {
                struct sim_node *n = s->nodes[i];
                double due = node_due(n);
                if (due < 0 || due > t)
                        continue;
                if (!n->reboot)
                        node_terminate(s, i);
                else if (n->rebooted_at < 0)
                        node_reboot(s, n);
                else
                        node_back(s, n);
        }
        sim_va_run(s, t);
        for (size_t i = 0; i < s->n_launches; i++) {
                struct sim_launch *l = &s->launches[i];
                if (l->joined || l->ready_at > t)
                        continue;
                l->joined = true;
                if (launch_join(s, l) < 0)
                        l->ready_at = -1; /* lost: never joins, and the result says so */
        }
        for (size_t i = 0; i < s->n_launches; i++) {
                struct sim_launch *l = &s->launches[i];
                /* Not completed within its HeartbeatTimeout: Auto Scaling applies the default result. */
                if (l->hooked && !l->result[0] && l->last_beat + s->sc->hook_heartbeat_timeout <= t) {
                        snprintf(l->result, sizeof(l->result), "ABANDON");
                        l->completed_at = t;
                        l->timed_out = true;
                }
        }
        for (size_t i = 0; i < s->n_launches; i++) {
                struct sim_launch *l = &s->launches[i];
                struct sim_node *n;
                if (!l->hooked || !l->joined || l->node_ready || l->node_ready_at < 0 ||
                    l->node_ready_at > t)
                        continue;
                l->node_ready = true;
                if ((n = node_by_instance(s, l->instance_id)) && n->not_ready) {
                        n->not_ready = false;
                        n->ready_since = t;
                        s->nodes_changed = true;
                        (void)sim_emit(s, SIM_NODE, "MODIFIED", n);
                }
        }
}

double sim_advance(struct sim *s)
{
        double now = sim_now(s);
        for (;;) {
                double t = next_due(s);
                if (t < 0 || t > now)
                        break;
                /* Something due before the last stamp (e.g. a zero-length shutdown) runs at that stamp. */
                run_due(s, fmax(t, s->t));
                sim_settle(s);
        }
        if (now > s->t)
                s->t = now;
        return next_due(s);
}

void sim_begin(struct sim *s)
{
        (void)sim_advance(s);
        sim_settle(s);
}

bool sim_finished(const struct sim *s)
{
        if (s->next_event < s->sc->n_events)
                return false;
        for (size_t i = 0; i < s->n_nodes; i++)
                if (node_due(s->nodes[i]) >= 0)
                        return false;
        return true;
}

/* ---- building the world ---- */
static struct sim_pdb *pdb_new(const char *name, const char *ns)
{
        struct sim_pdb *d = calloc(1, sizeof(*d));
        if (!d)
                return NULL;
        if (!(d->name = strdup(name)) || !(d->ns = strdup(ns)) ||
            !(d->match_labels = cJSON_CreateObject())) {
                sim_pdb_free(d);
                return NULL;
        }
        return d;
}

struct sim_pdb *sim_pdb_free(struct sim_pdb *d)
{
        if (!d)
                return NULL;
        free(d->name);
        free(d->ns);
        free(d->uid);
        cJSON_Delete(d->match_labels);
        for (size_t i = 0; i < d->n_disrupted; i++)
                free(d->disrupted[i].pod);
        free(d->disrupted);
        free(d);
        return NULL;
}

int sim_pdb_add(struct sim *s, struct sim_pdb *d)
{
        struct sim_pdb **a = realloc(s->pdbs, (s->n_pdbs + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->pdbs = a;
        if (!d->uid && !(d->uid = sim_new_uid(s)))
                return -ENOMEM;
        d->created = s->t;
        s->pdbs[s->n_pdbs++] = d;
        /* Watchers see it ADDED with its status already computed, as the disruption controller is quick. */
        pdb_recompute(s, d, false);
        return sim_emit(s, SIM_PDB, "ADDED", d);
}

static int ns_add(struct sim *s, const char *name)
{
        for (size_t i = 0; i < s->n_nss; i++)
                if (streq(s->nss[i].name, name))
                        return 0;
        struct sim_ns *a = realloc(s->nss, (s->n_nss + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->nss = a;
        struct sim_ns *n = &s->nss[s->n_nss];
        *n = (struct sim_ns){ 0 };
        if (!(n->name = strdup(name)) || !(n->uid = sim_new_uid(s))) {
                free(n->name);
                return -ENOMEM;
        }
        s->n_nss++;
        return 0;
}

/* The objects a workload is served as: a Deployment and its ReplicaSet, a StatefulSet, a DaemonSet; Jobs and
 * bare pods have none of their own. */
static size_t workload_objects(const struct sim_workload *w)
{
        switch (w->sc->kind) {
        case SIM_WL_DEPLOYMENT:
                return 2;
        case SIM_WL_STATEFULSET:
        case SIM_WL_DAEMONSET:
                return 1;
        default:
                return 0;
        }
}

static int world_build(struct sim *s)
{
        static const char *const system_ns[] = { "default", "kube-node-lease", "kube-public",
                                                 "kube-system" };
        const struct sim_scenario *sc = s->sc;
        int r;
        s->t = -2 * INITIAL_AGE;
        for (size_t i = 0; i < ARRAY_SIZE(system_ns); i++)
                if ((r = ns_add(s, system_ns[i])) < 0)
                        return r;
        for (size_t i = 0; i < sc->n_workloads; i++)
                if ((r = ns_add(s, sc->workloads[i].ns)) < 0)
                        return r;
        s->nodes = calloc(sc->n_nodes, sizeof(*s->nodes));
        if (!s->nodes)
                return -ENOMEM;
        for (size_t i = 0; i < sc->n_nodes; i++) {
                if ((r = node_new(s, &sc->nodes[i], &s->nodes[i])) < 0)
                        return r;
                s->n_nodes++;
        }
        s->wls = calloc(sc->n_workloads ?: 1, sizeof(*s->wls));
        if (!s->wls)
                return -ENOMEM;
        for (size_t i = 0; i < sc->n_workloads; i++) {
                struct sim_workload *w = &s->wls[i];
                char hash[11];
                w->sc = &sc->workloads[i];
                w->replicas = w->sc->replicas;
                w->generation = 1;
                sim_rand_chars(s, hash, 10);
                if (!(w->uid = sim_new_uid(s)) || !(w->rs_uid = sim_new_uid(s)) ||
                    !(w->hash = strdup(hash)) || !(w->rs_name = strprintf("%s-%s", w->sc->name, hash)) ||
                    !(w->annotations = cJSON_CreateObject()) ||
                    !(w->tmpl_annotations = cJSON_Duplicate(w->sc->annotations, true)) ||
                    (w->sc->has_hpa && !(w->hpa_uid = sim_new_uid(s))) ||
                    (w->sc->has_service && !(w->svc_uid = sim_new_uid(s))) ||
                    (w->sc->has_tg && !(w->tgb_uid = sim_new_uid(s))))
                        return -ENOMEM;
                s->n_wls++;
                /* The labels every pod of it carries (pod_labels of a stand-in pod). */
                struct sim_pod tmpl = { .wl = w, .name = (char *)"" };
                if (pod_labels(&tmpl) < 0) {
                        cJSON_Delete(tmpl.labels);
                        return -ENOMEM;
                }
                w->tmpl_labels = tmpl.labels;
                if (!w->sc->has_pdb)
                        continue;
                struct sim_pdb *d = pdb_new(w->sc->name, w->sc->ns);
                if (!d)
                        return -ENOMEM;
                d->spec = w->sc->pdb;
                d->always_allow = w->sc->pdb_always_allow;
                if (add_label(d->match_labels, "app", w->sc->name) < 0 || (r = sim_pdb_add(s, d)) < 0) {
                        sim_pdb_free(d);
                        return -ENOMEM;
                }
        }

        /* The starting pods: created an hour before t=0 (so creation → Ready reflects startup_seconds),
         * placed as the scenario says, the rest first-fit. */
        s->t = -INITIAL_AGE;
        for (size_t wi = 0; wi < s->n_wls; wi++) {
                struct sim_workload *w = &s->wls[wi];
                struct sim_pod *p;
                if (w->sc->kind == SIM_WL_DAEMONSET)
                        continue; /* created by the controller below */
                int made = 0;
                for (size_t k = 0; k < w->sc->n_placement; k++)
                        for (int c = 0; c < w->sc->placement[k].count; c++) {
                                if ((r = pod_new(s, w, w->next_ordinal_or_index++, &p)) < 0)
                                        return r;
                                pod_bind(s, p, w->sc->placement[k].node, false);
                                made++;
                        }
                for (; made < w->sc->replicas; made++)
                        if ((r = pod_new(s, w, w->next_ordinal_or_index++, &p)) < 0)
                                return r;
        }
        s->nodes_changed = true; /* the DaemonSets' pods */
        reconcile_controllers(s);
        if ((r = schedule_pending(s, true)) < 0)
                return r;
        for (size_t i = 0; i < s->n_pods; i++) {
                struct sim_pod *p = s->pods[i];
                if (p->node >= 0) {
                        p->ready = true;
                        pod_changed(s, p);
                }
        }
        s->t = 0;
        for (size_t i = 0; i < s->n_pdbs; i++) {
                pdb_recompute(s, s->pdbs[i], false);
                s->pdbs[i]->cond_since = s->pdbs[i]->created;
        }
        for (size_t i = 0; i < s->n_wls; i++)
                workload_status(s, &s->wls[i], false);

        /* Everything enters the change log as ADDED, in a stable order; of a large world only the newest
         * SIM_LOG_MAX are kept, so the others are not rendered at all. */
        size_t total = s->n_nss + s->n_nodes + s->n_pods + s->n_pdbs;
        for (size_t i = 0; i < s->n_wls; i++)
                total += workload_objects(&s->wls[i]);
        s->log_skip = total > SIM_LOG_MAX ? total - SIM_LOG_MAX : 0;
        s->building = false;
        for (size_t i = 0; i < s->n_nss; i++)
                if ((r = sim_emit(s, SIM_NAMESPACE, "ADDED", &s->nss[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n_nodes; i++)
                if ((r = sim_emit(s, SIM_NODE, "ADDED", s->nodes[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n_wls; i++) {
                struct sim_workload *w = &s->wls[i];
                switch (w->sc->kind) {
                case SIM_WL_DEPLOYMENT:
                        if ((r = sim_emit(s, SIM_DEPLOYMENT, "ADDED", w)) < 0 ||
                            (r = sim_emit(s, SIM_REPLICASET, "ADDED", w)) < 0)
                                return r;
                        break;
                case SIM_WL_STATEFULSET:
                        if ((r = sim_emit(s, SIM_STATEFULSET, "ADDED", w)) < 0)
                                return r;
                        break;
                case SIM_WL_DAEMONSET:
                        if ((r = sim_emit(s, SIM_DAEMONSET, "ADDED", w)) < 0)
                                return r;
                        break;
                default:
                        break;
                }
        }
        for (size_t i = 0; i < s->n_pods; i++)
                if ((r = sim_emit(s, SIM_POD, "ADDED", s->pods[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n_pdbs; i++)
                if ((r = sim_emit(s, SIM_PDB, "ADDED", s->pdbs[i])) < 0)
                        return r;
        return 0;
}

static void sim_freep(struct sim **s)
{
        sim_free(*s);
}

int sim_new(const struct ynode *scenario, const struct sim_options *opt, struct sim **ret, char **ret_error)
{
        _cleanup_(sim_freep) struct sim *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->mutex, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&s->cond, &ca);
        pthread_condattr_destroy(&ca);
        s->log = calloc(SIM_LOG_MAX, sizeof(*s->log));
        if (!s->log)
                return -ENOMEM;
        int r = sim_scenario_parse(scenario, NULL, &s->sc, ret_error);
        if (r < 0)
                return r;
        const char *mode = opt && opt->mode ? opt->mode : s->sc->mode;
        if (!streq(mode, "agent") && !streq(mode, "controller")) {
                if (ret_error)
                        *ret_error = strprintf("unknown mode \"%s\" (agent or controller)", mode);
                return -EINVAL;
        }
        if (!(s->mode = strdup(mode)))
                return -ENOMEM;
        s->time_scale = opt && opt->time_scale > 0 ? opt->time_scale : 1;
        s->seed = opt && opt->seed ? opt->seed : s->sc->seed;
        s->rng = s->seed;
        s->fault_rng = s->seed ^ 0x5deece66dULL;
        s->manual_clock = opt && opt->manual_clock;
        s->epoch_usec = clk_now();
        s->building = true;
        r = world_build(s);
        if (r < 0) {
                if (ret_error && !*ret_error)
                        *ret_error = strprintf("cannot build the world: %s", strerror(-r));
                return r;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

struct sim *sim_free(struct sim *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_pods; i++)
                pod_free(s->pods[i]);
        free(s->pods);
        free(s->pod_hash);
        for (size_t i = 0; i < s->n_nodes; i++)
                node_free(s->nodes[i]);
        free(s->nodes);
        for (size_t i = 0; i < s->n_wls; i++) {
                free(s->wls[i].uid);
                free(s->wls[i].rs_uid);
                free(s->wls[i].hash);
                free(s->wls[i].rs_name);
                cJSON_Delete(s->wls[i].tmpl_labels);
                sim_workload_clear_deploy(&s->wls[i]);
        }
        free(s->wls);
        for (size_t i = 0; i < s->n_pdbs; i++)
                sim_pdb_free(s->pdbs[i]);
        free(s->pdbs);
        for (size_t i = 0; i < s->n_nss; i++) {
                free(s->nss[i].name);
                free(s->nss[i].uid);
        }
        free(s->nss);
        for (size_t i = 0; i < s->n_objs; i++) {
                free(s->objs[i]->ns);
                free(s->objs[i]->name);
                cJSON_Delete(s->objs[i]->obj);
                free(s->objs[i]);
        }
        free(s->objs);
        sim_va_free_all(s);
        if (s->log)
                for (size_t i = 0; i < s->log_len; i++) {
                        struct sim_logentry *e = &s->log[(s->log_start + i) % SIM_LOG_MAX];
                        free(e->ns);
                        cJSON_Delete(e->obj);
                }
        free(s->log);
        for (size_t i = 0; i < s->n_alerts; i++) {
                free(s->alerts[i].kind);
                free(s->alerts[i].node);
                free(s->alerts[i].message);
                cJSON_Delete(s->alerts[i].postmortem);
        }
        free(s->alerts);
        for (size_t i = 0; i < s->n_writes; i++) {
                free(s->writes[i].surface);
                free(s->writes[i].what);
        }
        free(s->writes);
        for (size_t i = 0; i < s->n_launches; i++) {
                free(s->launches[i].instance_id);
                free(s->launches[i].zone);
                free(s->launches[i].capacity_type);
                free(s->launches[i].name);
        }
        free(s->launches);
        free(s->mode);
        sim_scenario_free(s->sc);
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->mutex);
        free(s);
        return NULL;
}

/* A stream of its own, so that faults drawn per request do not change the names and UIDs of objects. */
uint64_t sim_random(struct sim *s)
{
        return sim_splitmix64(&s->fault_rng);
}

size_t sim_launch_count(const struct sim *s)
{
        return s->n_launches;
}

size_t sim_launch_hooks_pending(const struct sim *s)
{
        size_t n = 0;
        for (size_t i = 0; i < s->n_launches; i++)
                n += s->launches[i].hooked && !s->launches[i].result[0];
        return n;
}

bool sim_has_launch_hook(const struct sim *s)
{
        for (size_t i = 0; i < s->sc->n_events; i++)
                if (streq(s->sc->events[i].type, "asg-launch"))
                        return true;
        return false;
}

int sim_launch_hook(const struct sim *s, size_t i, const char **ret_instance_id, double *ret_at)
{
        if (i >= s->n_launches || !s->launches[i].hooked)
                return -ENOENT;
        *ret_instance_id = s->launches[i].instance_id;
        *ret_at = s->launches[i].requested_at;
        return 0;
}

static struct sim_launch *hooked_launch(const struct sim *s, const char *instance_id)
{
        for (size_t i = 0; instance_id && i < s->n_launches; i++)
                if (s->launches[i].hooked && streq(s->launches[i].instance_id, instance_id))
                        return &s->launches[i];
        return NULL;
}

int sim_launch_hook_complete(struct sim *s, const char *instance_id, const char *result)
{
        sim_begin(s);
        struct sim_launch *l = hooked_launch(s, instance_id);
        if (!l || l->result[0])
                return -ENOENT;
        if (!result) { /* a heartbeat: alive another HeartbeatTimeout */
                l->last_beat = s->t;
                return 0;
        }
        snprintf(l->result, sizeof(l->result), "%s", result);
        l->completed_at = s->t;
        return 0;
}

const char *sim_launch_hook_state(const struct sim *s, const char *instance_id)
{
        const struct sim_launch *l = hooked_launch(s, instance_id);
        if (!l)
                return NULL;
        if (!l->result[0])
                return "Pending:Wait";
        return streq(l->result, "CONTINUE") ? "InService" : "Terminating";
}
