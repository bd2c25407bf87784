/* The simulator's world: objects, controllers, scheduler, kubelet timing, clock and change log. This file
 * runs time (what is due, in order) and guards the world with its lock; the rest of the model is in
 * model_clock.c, model_pods.c, model_nodes.c, model_settle.c, model_world.c and model_launch.c, with the
 * reconcilers (deployments.c, ordinary.c) between the pods they create and delete and the settle that steps
 * them.
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

void sim_wait_node_change(struct sim *s, long node, uint64_t after_rv, uint64_t timeout_usec)
{
        if (node < 0 || (size_t)node >= s->n_nodes)
                return sim_wait_change(s, after_rv, timeout_usec);
        struct sim_node *n = s->nodes[node];
        uint64_t end = now_monotonic_usec() + timeout_usec;
        struct timespec ts = { .tv_sec = (time_t)(end / 1000000ULL),
                               .tv_nsec = (long)(end % 1000000ULL) * 1000L };
        while (s->rv <= after_rv && now_monotonic_usec() < end)
                pthread_cond_timedwait(&n->pods_cond, &s->mutex, &ts);
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
        for (size_t i = 0; i < s->n_due_nodes; i++)
                due_min(&m, sim_node_due(s->nodes[s->due_nodes[i]]));
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

static void run_due(struct sim *s, double t)
{
        s->t = t;
        s->dirty = true; /* also when only a disruptedPods entry expires */
        while (s->next_event < s->sc->n_events && s->sc->events[s->next_event].at <= t)
                sim_apply_event(s, &s->sc->events[s->next_event++]);
        /* The timed list is in creation order, as the scan over every pod was. */
        for (struct sim_pod *p = s->timed.head, *next; p; p = next) {
                next = p->links[SIM_LINK_TIMED].next;
                if (p->exited) {
                        if (p->remove_at <= t)
                                sim_pod_remove(s, p);
                        continue;
                }
                if (p->deleting && p->exit_at <= t) {
                        sim_pod_exit(s, p);
                        continue;
                }
                if (!p->deleting && p->node >= 0 && !p->ready && p->ready_at <= t) {
                        p->ready = true;
                        sim_pod_changed(s, p);
                        (void)sim_emit(s, SIM_POD, "MODIFIED", p);
                }
        }
        for (size_t k = 0; k < s->n_due_nodes; k++) {
                size_t i = s->due_nodes[k];
                struct sim_node *n = s->nodes[i];
                double due = sim_node_due(n);
                if (due < 0 || due > t)
                        continue;
                if (!n->reboot)
                        sim_node_terminate(s, i);
                else if (n->rebooted_at < 0)
                        sim_node_reboot(s, n);
                else
                        sim_node_back(s, n);
        }
        sim_va_run(s, t);
        for (size_t i = 0; i < s->n_launches; i++) {
                struct sim_launch *l = &s->launches[i];
                if (l->joined || l->ready_at > t)
                        continue;
                l->joined = true;
                if (sim_launch_join(s, l) < 0)
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
                if ((n = sim_node_by_instance(s, l->instance_id)) && n->not_ready) {
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
        for (size_t i = 0; i < s->n_due_nodes; i++)
                if (sim_node_due(s->nodes[s->due_nodes[i]]) >= 0)
                        return false;
        return true;
}

/* A stream of its own, so that faults drawn per request do not change the names and UIDs of objects. */
uint64_t sim_random(struct sim *s)
{
        return sim_splitmix64(&s->fault_rng);
}
