/* The drains of other processes that a drain follows (drain_peers_new()): an agent drains its
 * own node only, in a process of its own, so the nodes draining beside it share no ledger with it. They do
 * share the API server: each drain records its deadline on its node (record.c), and cordons it. The
 * peers of a drain are the cordoned nodes whose record puts them ahead of it (an earlier deadline, or the
 * same and a name first); their pods, watched, join the ledger as remote members, so that the joint plan
 * and the PDB slots go to them first, as a controller's one ledger would give them, and so that their
 * pods' graceful stops teach this drain what its own pods' siblings take. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "drain/drain_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"

/* How long the drain waits for the cordoned nodes and their pods before it goes on without them. */
#define USEC_PER_SEC UINT64_C(1000000)
#define SETTLE_USEC  (3 * USEC_PER_SEC)
/* Pods of a peer seen turning deleting, kept for the start of their stop (a deletionTimestamp has whole
 * seconds only). */
#define MAX_SEEN 64

struct seen_deleting {
        char *uid;
        uint64_t at;
};

struct peer {
        struct drain_peers *ps;
        char *node;
        uint64_t deadline;
        struct kube_informer *pods;
        bool joined, keep;
        struct seen_deleting seen[MAX_SEEN];
        size_t seen_next;
};

struct drain_peers {
        struct drain_ledger *l;
        struct kube_client *c;
        struct drain_peers_options o;
        char *node;
        struct kube_informer *nodes;
        struct peer **peers;
        size_t n_peers;
        struct timer *settle;
        bool settled;
};

static void peer_free(struct peer *p)
{
        if (!p)
                return;
        if (p->joined)
                drain_ledger_leave(p->ps->l, p);
        kube_informer_stop(p->pods);
        for (size_t i = 0; i < MAX_SEEN; i++)
                free(p->seen[i].uid);
        free(p->node);
        free(p);
}

static void settle(struct drain_peers *ps)
{
        if (ps->settled)
                return;
        ps->settled = true;
        ps->settle = timer_cancel(ps->settle);
        /* Drains wait for the ledger to be synced before their first plan. */
        drain_ledger_wake_all(ps->l);
}

/* Whether the cordoned nodes are known as they were after this drain's own record was written: a peer
 * that recorded its drain before it is then among them (the watch is in the API server's order), as a
 * drain that joined a controller's ledger earlier is among its members. */
static bool own_record_seen(const struct drain_peers *ps)
{
        uint64_t deadline;
        const cJSON *own = kube_informer_get(ps->nodes, NULL, ps->node);
        return own && drain_record_read(own, NULL, &deadline, NULL) >= 0 && deadline == ps->o.deadline_usec;
}

static void check_settled(struct drain_peers *ps)
{
        if (ps->settled || !kube_informer_synced(ps->nodes) || !own_record_seen(ps))
                return;
        for (size_t i = 0; i < ps->n_peers; i++)
                if (!kube_informer_synced(ps->peers[i]->pods))
                        return;
        settle(ps);
}

/* ---- a peer: its pods, in the ledger's plans and ranks ---- */

static void peer_wake(void *userdata)
{
        /* Its own process acts on its slots. */
}

static int peer_add_inputs(void *userdata, struct drain_inputs *di, struct drain_ledger_slice *slice)
{
        struct peer *p = userdata;
        size_t node, n = 0;

        if (!kube_informer_synced(p->pods))
                return 0;
        int r = drain_inputs_add_node(di, p->node, p->deadline, p->ps->o.margin_usec, &node);
        if (r < 0)
                return r;
        for (size_t i = 0; i < kube_informer_size(p->pods); i++) {
                r = drain_inputs_add_pod(di, node, kube_informer_at(p->pods, i), NULL);
                if (r == -ENOMEM)
                        return r;
                n += r >= 0;
        }
        if (slice) {
                slice->node = node;
                slice->n_pods = n;
        }
        return 0;
}

static int peer_namespaces(void *userdata, const char ***ns, size_t *n)
{
        struct peer *p = userdata;
        for (size_t i = 0; i < kube_informer_size(p->pods); i++) {
                const char *pns = kube_object_str(kube_informer_at(p->pods, i), "metadata.namespace");
                if (!pns || (*n > 0 && streq((*ns)[*n - 1], pns)))
                        continue;
                const char **a = realloc(*ns, (*n + 1) * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                *ns = a;
                (*ns)[(*n)++] = pns;
        }
        return 0;
}

/* States what the peer's drain asks of the PDBs now, as its executor would (issue_pods()): every pod to
 * evict that takes a slot, the critical ones only once the normal ones are on their way. */
static int peer_state(struct peer *p, const struct drain_plan *plan, const struct drain_input *in,
                      const struct drain_ledger_slice *slice)
{
        bool tier0_pending = false;
        for (size_t i = slice->first_pod; i < slice->first_pod + slice->n_pods; i++)
                if (plan->pods[i].tier == 0 && drain_plan_pod_to_evict(&plan->pods[i]) &&
                    !in->pods[i].deleting)
                        tier0_pending = true;
        for (size_t i = slice->first_pod; i < slice->first_pod + slice->n_pods; i++) {
                const struct drain_plan_pod *pp = &plan->pods[i];
                const struct drain_pod_in *pin = &in->pods[i];
                if (!drain_plan_pod_to_evict(pp) || pin->deleting || !drain_pod_takes_slot(pin) ||
                    (pp->tier > 0 && tier0_pending))
                        continue;
                const struct drain_pdb_in *pdb = &in->pdbs[pin->pdbs[0]];
                _cleanup_free_ char *pdb_key = strprintf("%s/%s", pdb->namespace, pdb->name);
                _cleanup_free_ char *pod_key = strprintf("%s/%s", pin->namespace, pin->name);
                if (!pdb_key || !pod_key)
                        return -ENOMEM;
                int r = drain_ledger_want(p->ps->l, p, pdb_key, pod_key, pp->last_safe_usec);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void peer_planned(void *userdata, struct drain_joint *j, const struct drain_ledger_slice *slice)
{
        struct peer *p = userdata;
        if (!slice)
                return;
        drain_ledger_begin(p->ps->l, p);
        if (peer_state(p, j->plan, drain_inputs_get(j->inputs), slice) < 0)
                log_debug("out of memory stating the pods of %s", p->node);
        drain_ledger_end(p->ps->l, p);
}

static void pods_changed(void *userdata)
{
        struct peer *p = userdata;
        check_settled(p->ps);
        drain_ledger_touch(p->ps->l);
}

static void pods_added(void *userdata, const cJSON *obj)
{
        pods_changed(userdata);
}

static void pods_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        struct peer *p = userdata;
        const char *uid = kube_object_str(obj, "metadata.uid");
        if (uid && kube_object_str(obj, "metadata.deletionTimestamp") &&
            !kube_object_str(old_obj, "metadata.deletionTimestamp")) {
                struct seen_deleting *s = &p->seen[p->seen_next];
                free(s->uid);
                *s = (struct seen_deleting){ .uid = strdup(uid), .at = clk_now() };
                p->seen_next = (p->seen_next + 1) % MAX_SEEN;
        }
        pods_changed(p);
}

/* When the pod's stop began: when it was seen turning deleting, else (deleting when first listed) the
 * middle of the second its deletionTimestamp names, less its grace (the timestamp has whole seconds). */
static uint64_t stop_began(const struct peer *p, const struct kube_pod *kp)
{
        for (size_t i = 0; kp->uid && i < MAX_SEEN; i++)
                if (streq_ptr(p->seen[i].uid, kp->uid))
                        return p->seen[i].at;
        return kp->deleted_usec ? kp->deleted_usec + USEC_PER_SEC / 2 : 0;
}

/* A pod of the peer that was deleting is gone: its stop is one more observation, and until its
 * replacement should be Ready the plans keep it (the slot it gives back is foreseen), as the peer's own
 * drain does. */
static void pods_deleted(void *userdata, const cJSON *obj)
{
        struct peer *p = userdata;
        struct drain_ledger *l = p->ps->l;
        const struct drain_peers_options *o = &p->ps->o;
        _cleanup_(kube_pod_clear) struct kube_pod kp = { 0 };
        _cleanup_free_ char *key = NULL;
        struct drain_pod_memo *ghost = NULL;

        if (kube_pod_parse(obj, &kp) >= 0 && kp.deletion_usec && (key = drain_owner_key(&kp))) {
                if (drain_shutdowns_observe_stop(drain_ledger_shutdowns(l), &kp, key, stop_began(p, &kp), 0,
                                                 p->deadline, o->expected_shutdown_fraction) < 0 ||
                    drain_pod_memo_update(&ghost, obj) < 0 ||
                    drain_ledger_keep_ghost(l, p->node, p->deadline, o->margin_usec, ghost, clk_now(),
                                            drain_ledger_ghost_until(l, &kp, key, o->default_startup_usec)) <
                        0)
                        log_debug("out of memory following the pods of %s", p->node);
        }
        pods_changed(p);
}

static int peer_new(struct drain_peers *ps, const char *node, uint64_t deadline, struct peer **ret)
{
        static const struct kube_informer_ops pod_ops = {
                .added = pods_added,
                .modified = pods_modified,
                .deleted = pods_deleted,
                .synced = pods_changed,
        };
        static const struct drain_ledger_member_ops member_ops = {
                .remote = true,
                .wake = peer_wake,
                .add_inputs = peer_add_inputs,
                .namespaces = peer_namespaces,
                .planned = peer_planned,
        };
        struct peer *p = calloc(1, sizeof(*p));
        _cleanup_free_ char *field = strprintf("spec.nodeName=%s", node);
        int r;

        if (!p || !field || !(p->node = strdup(node))) {
                peer_free(p);
                return -ENOMEM;
        }
        p->ps = ps;
        p->deadline = deadline;
        struct kube_watch_options w = { .path = "/api/v1/pods",
                                        .field_selector = field,
                                        .keep_fields = drain_pod_fields };
        r = kube_informer_start(ps->c, &w, &pod_ops, p, &p->pods);
        if (r >= 0)
                r = drain_ledger_join(ps->l, &member_ops, p, node, deadline);
        if (r < 0) {
                peer_free(p);
                return r;
        }
        p->joined = true;
        *ret = p;
        return 0;
}

/* ---- the cordoned nodes ---- */

static struct peer *peer_find(const struct drain_peers *ps, const char *node)
{
        for (size_t i = 0; i < ps->n_peers; i++)
                if (streq(ps->peers[i]->node, node))
                        return ps->peers[i];
        return NULL;
}

static void peer_drop(struct drain_peers *ps, size_t i)
{
        log_debug("drain of %s: no longer behind the drain of %s", ps->node, ps->peers[i]->node);
        peer_free(ps->peers[i]);
        ps->peers[i] = ps->peers[--ps->n_peers];
}

/* The peer for a cordoned node whose record puts it ahead, made when new (or when its deadline moved). */
static int follow(struct drain_peers *ps, const cJSON *obj, uint64_t now)
{
        const char *name = kube_object_str(obj, "metadata.name");
        uint64_t deadline;

        if (!name || streq(name, ps->node) || drain_record_read(obj, NULL, &deadline, NULL) < 0 ||
            deadline <= now || !drain_nodes_before(deadline, name, ps->o.deadline_usec, ps->node))
                return 0;
        struct peer *p = peer_find(ps, name);
        if (p && p->deadline == deadline) {
                p->keep = true;
                return 0;
        }
        struct peer **a = realloc(ps->peers, (ps->n_peers + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        ps->peers = a;
        struct peer *n;
        int r = peer_new(ps, name, deadline, &n);
        if (r < 0)
                return r;
        n->keep = true;
        if (p)
                p->keep = false; /* the old deadline's goes below */
        ps->peers[ps->n_peers++] = n;
        log_debug("drain of %s: behind the drain of %s", ps->node, name);
        return 0;
}

/* Brings the peers in line with the cordoned nodes and their records. */
static void nodes_changed(struct drain_peers *ps)
{
        uint64_t now = clk_now();
        for (size_t i = 0; i < ps->n_peers; i++)
                ps->peers[i]->keep = false;
        for (size_t i = 0; i < kube_informer_size(ps->nodes); i++)
                if (follow(ps, kube_informer_at(ps->nodes, i), now) < 0)
                        log_debug("out of memory following the drains beside %s", ps->node);
        for (size_t i = ps->n_peers; i > 0; i--)
                if (!ps->peers[i - 1]->keep)
                        peer_drop(ps, i - 1);
        check_settled(ps);
}

static void nodes_added(void *userdata, const cJSON *obj)
{
        nodes_changed(userdata);
}

static void nodes_modified(void *userdata, const cJSON *old_obj, const cJSON *obj)
{
        nodes_changed(userdata);
}

static void nodes_deleted(void *userdata, const cJSON *obj)
{
        nodes_changed(userdata);
}

static void nodes_synced(void *userdata)
{
        nodes_changed(userdata);
}

static void settle_fire(void *userdata)
{
        struct drain_peers *ps = userdata;
        ps->settle = NULL; /* released by the loop as it fired */
        if (!ps->settled)
                log_debug("drain of %s: going on without knowing every drain ahead of it", ps->node);
        settle(ps);
}

int drain_peers_new(struct drain_ledger *l, const struct drain_peers_options *o, struct drain_peers **ret)
{
        static const struct kube_informer_ops node_ops = {
                .added = nodes_added,
                .modified = nodes_modified,
                .deleted = nodes_deleted,
                .synced = nodes_synced,
        };
        /* The drain record and the name are all a peer is known by. */
        static const char *const node_fields[] = { "metadata.annotations", NULL };
        struct drain_peers *ps = calloc(1, sizeof(*ps));
        int r;

        if (!ps || !o->node || !(ps->node = strdup(o->node))) {
                free(ps);
                return -ENOMEM;
        }
        ps->l = l;
        ps->c = drain_ledger_client(l);
        ps->o = *o;
        ps->o.node = ps->node;
        /* A drain cordons its node first: the cordoned nodes are few, the nodes may be thousands. */
        struct kube_watch_options w = {
                .path = "/api/v1/nodes",
                .field_selector = "spec.unschedulable=true",
                .keep_fields = node_fields,
                /* quiet but when a node is cordoned: on every agent, in every cluster */
                .patient = true
        };
        r = kube_informer_start(ps->c, &w, &node_ops, ps, &ps->nodes);
        if (r >= 0)
                r = timer_start_in(kube_client_loop(ps->c), SETTLE_USEC, settle_fire, ps, &ps->settle);
        if (r < 0) {
                drain_peers_free(ps);
                return r;
        }
        *ret = ps;
        return 0;
}

struct drain_peers *drain_peers_free(struct drain_peers *ps)
{
        if (!ps)
                return NULL;
        timer_cancel(ps->settle);
        kube_informer_stop(ps->nodes);
        for (size_t i = 0; i < ps->n_peers; i++)
                peer_free(ps->peers[i]);
        free(ps->peers);
        free(ps->node);
        free(ps);
        return NULL;
}

bool drain_peers_settled(const struct drain_peers *ps)
{
        return !ps || ps->settled;
}
