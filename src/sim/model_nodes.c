/* The simulator's nodes: their life (terminate, reboot, notice), the scenario events that act on them and
 * the instances that join as nodes. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/disruption.h"
#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- nodes ---- */
void sim_node_free(struct sim_node *n)
{
        if (!n)
                return;
        pthread_cond_destroy(&n->pods_cond);
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

int sim_node_new(struct sim *s, const struct sim_sc_node *sc, struct sim_node **ret)
{
        struct sim_node *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&n->pods_cond, &ca);
        pthread_condattr_destroy(&ca);
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
            sim_add_label(n->labels, "beta.kubernetes.io/arch", "amd64") < 0 ||
            sim_add_label(n->labels, "beta.kubernetes.io/os", "linux") < 0 ||
            sim_add_label(n->labels, "eks.amazonaws.com/capacityType", spot ? "SPOT" : "ON_DEMAND") < 0 ||
            sim_add_label(n->labels, "karpenter.sh/capacity-type", sc->capacity_type) < 0 ||
            sim_add_label(n->labels, "kubernetes.io/arch", "amd64") < 0 ||
            sim_add_label(n->labels, "kubernetes.io/hostname", sc->name) < 0 ||
            sim_add_label(n->labels, "kubernetes.io/os", "linux") < 0 ||
            sim_add_label(n->labels, "node.kubernetes.io/instance-type", sc->instance_type) < 0 ||
            sim_add_label(n->labels, "topology.kubernetes.io/region", region) < 0 ||
            sim_add_label(n->labels, "topology.kubernetes.io/zone", sc->zone) < 0 ||
            sim_add_label(n->annotations, "node.alpha.kubernetes.io/ttl", "0") < 0) {
                sim_node_free(n);
                return -ENOMEM;
        }
        *ret = n;
        return 0;
}

bool sim_taints_block(const struct sim_node *n, const struct sim_pod *p)
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
                sim_pod_remove(s, p);
        }
}

void sim_node_terminate(struct sim *s, size_t ni)
{
        struct sim_node *n = s->nodes[ni];
        node_kill_pods(s, n);
        n->removed = true;
        (void)sim_emit(s, SIM_NODE, "DELETED", n);
}

/* A reboot at its deadline: what runs there dies as at a termination (their controllers replace them), and
 * the node's kubelet stops posting status until it is back. The node, its cordon and its labels stay. */
void sim_node_reboot(struct sim *s, struct sim_node *n)
{
        node_kill_pods(s, n);
        n->down = true;
        n->rebooted_at = s->t;
        n->back_at = s->t + n->reboot_seconds;
        (void)sim_emit(s, SIM_NODE, "MODIFIED", n);
}

/* Back from its reboot: Ready again; its DaemonSets' pods follow in the settle. */
void sim_node_back(struct sim *s, struct sim_node *n)
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
double sim_node_due(const struct sim_node *n)
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
                sim_pod_tally(s, p);
}

static int launch_hooked(struct sim *s, const struct sim_sc_event *e);

void sim_apply_event(struct sim *s, const struct sim_sc_event *e)
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
        size_t *due = reallocarray(s->due_nodes, s->n_due_nodes + 1, sizeof(*due));
        if (!due) {
                log_warning("sim: out of memory: the notice of %s is not modelled", n->name);
                return;
        }
        s->due_nodes = due;
        size_t at = s->n_due_nodes;
        while (at > 0 && due[at - 1] > e->node)
                at--;
        memmove(due + at + 1, due + at, (s->n_due_nodes - at) * sizeof(*due));
        due[at] = e->node;
        s->n_due_nodes++;
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

/* The launched instance registers as a Ready, schedulable node (its DaemonSet pods follow in the settle). */
int sim_launch_join(struct sim *s, const struct sim_launch *l)
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
        int r = sim_node_new(s, sc, &n);
        if (r < 0) {
                sim_sc_node_clear(sc);
                free(sc);
                return r;
        }
        n->owned_sc = sc;
        n->not_ready = l->hooked && !(l->node_ready_at >= 0 && l->node_ready_at <= s->t);
        n->ready_since = s->t;
        s->nodes[s->n_nodes++] = n;
        if ((r = sim_node_index_add(s, n)) < 0) {
                s->n_nodes--;
                sim_node_free(n);
                return r;
        }
        s->nodes_changed = true;
        return sim_emit(s, SIM_NODE, "ADDED", n);
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

struct sim_node *sim_node_by_instance(struct sim *s, const char *instance_id)
{
        for (size_t i = 0; i < s->n_nodes; i++)
                if (!s->nodes[i]->removed && streq(s->nodes[i]->instance_id, instance_id))
                        return s->nodes[i];
        return NULL;
}
