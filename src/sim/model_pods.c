/* The simulator's pods: their indexes, names and labels, binding, exit and deletion. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

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
void sim_pod_changed(struct sim *s, struct sim_pod *p)
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
        if (!s->node_hash_size || !name)
                return NULL;
        for (struct sim_node *n = s->node_hash[pod_key_hash(NULL, name) & (s->node_hash_size - 1)]; n;
             n = n->hnext)
                if (!n->removed && streq(n->name, name))
                        return n;
        return NULL;
}

static void node_hash_link(struct sim_node **h, size_t size, struct sim_node *n)
{
        size_t b = pod_key_hash(NULL, n->name) & (size - 1);
        n->hnext = h[b];
        h[b] = n;
}

int sim_node_index_add(struct sim *s, struct sim_node *n)
{
        if (s->n_nodes == 0 || s->nodes[s->n_nodes - 1] != n)
                return -EINVAL;
        n->index = (long)s->n_nodes - 1;
        if (2 * s->n_nodes > s->node_hash_size) {
                size_t size = s->node_hash_size ? s->node_hash_size : 64;
                while (size < 2 * s->n_nodes)
                        size *= 2;
                struct sim_node **h = calloc(size, sizeof(*h));
                if (!h)
                        return -ENOMEM;
                free(s->node_hash);
                s->node_hash = h;
                s->node_hash_size = size;
                /* Every node but n, which follows. */
                for (size_t i = 0; i + 1 < s->n_nodes; i++)
                        node_hash_link(h, size, s->nodes[i]);
        }
        node_hash_link(s->node_hash, s->node_hash_size, n);
        return 0;
}

long sim_node_index(struct sim *s, const char *name)
{
        struct sim_node *n = sim_find_node(s, name);
        return n ? n->index : -1;
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
void sim_pod_free(struct sim_pod *p)
{
        if (!p)
                return;
        free(p->name);
        free(p->uid);
        free(p->ip);
        cJSON_Delete(p->labels);
        free(p);
}

int sim_add_label(cJSON *labels, const char *k, const char *v)
{
        return cJSON_AddStringToObject(labels, k, v) ? 0 : -ENOMEM;
}

static bool pod_name_taken(struct sim *s, const char *ns, const char *name)
{
        return sim_find_pod(s, ns, name) != NULL;
}

int sim_pod_labels(struct sim_pod *p)
{
        const struct sim_workload *w = p->wl;
        _cleanup_free_ char *rev = NULL, *idx = NULL;
        p->labels = cJSON_CreateObject();
        if (!p->labels || sim_add_label(p->labels, "app", w->sc->name) < 0)
                return -ENOMEM;
        switch (w->sc->kind) {
        case SIM_WL_DEPLOYMENT:
                return sim_add_label(p->labels, "pod-template-hash", w->hash);
        case SIM_WL_STATEFULSET:
                rev = strprintf("%s-%s", w->sc->name, w->hash);
                idx = strprintf("%d", p->ordinal);
                if (!rev || !idx || sim_add_label(p->labels, "controller-revision-hash", rev) < 0 ||
                    sim_add_label(p->labels, "statefulset.kubernetes.io/pod-name", p->name) < 0 ||
                    sim_add_label(p->labels, "apps.kubernetes.io/pod-index", idx) < 0)
                        return -ENOMEM;
                return 0;
        case SIM_WL_DAEMONSET:
                if (sim_add_label(p->labels, "controller-revision-hash", w->hash) < 0 ||
                    sim_add_label(p->labels, "pod-template-generation", "1") < 0)
                        return -ENOMEM;
                return 0;
        case SIM_WL_JOB:
                if (sim_add_label(p->labels, "batch.kubernetes.io/controller-uid", w->uid) < 0 ||
                    sim_add_label(p->labels, "batch.kubernetes.io/job-name", w->sc->name) < 0 ||
                    sim_add_label(p->labels, "controller-uid", w->uid) < 0 ||
                    sim_add_label(p->labels, "job-name", w->sc->name) < 0)
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
            sim_pod_labels(p) < 0) {
                sim_pod_free(p);
                return r < 0 ? r : -ENOMEM;
        }
        p->seq = ++s->pod_seq;
        s->pods[s->n_pods++] = p;
        pod_hash_link(s, p);
        plist_insert(&w->pods, p, SIM_LINK_WL);
        sim_pod_changed(s, p);
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

void sim_pod_remove(struct sim *s, struct sim_pod *p)
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
        sim_pod_free(p);
}

/* Counts an evictable pod toward a node that has had a notice. */
void sim_pod_tally(struct sim *s, struct sim_pod *p)
{
        if (p->node < 0 || p->tallied || !sim_pod_evictable(p))
                return;
        struct sim_node *n = s->nodes[p->node];
        if (!n->noticed)
                return;
        p->tallied = true;
        n->pods_evictable++;
}

void sim_pod_bind(struct sim *s, struct sim_pod *p, size_t node, bool emit)
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
        sim_pod_changed(s, p);
        sim_pod_tally(s, p);
        if (emit)
                (void)sim_emit(s, SIM_POD, "MODIFIED", p);
}

/* A pod's containers stopped: at the end of their own shutdown (graceful) or killed at the end of grace. */
void sim_pod_exit(struct sim *s, struct sim_pod *p)
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
                sim_pod_changed(s, p);
                (void)sim_emit(s, SIM_POD, "MODIFIED", p);
                return;
        }
        sim_pod_remove(s, p);
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
                sim_pod_changed(s, p);
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
        sim_pod_changed(s, p);
        return sim_emit(s, SIM_POD, "MODIFIED", p);
}
