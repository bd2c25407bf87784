/* Shared within the drain engine: between the ledger (ledger.c), the drains of other nodes it follows
 * (peers.c), the executor and the planner's input (inputs.c). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "drain/engine_internal.h"
#include "spotdrain/alert.h"
#include "spotdrain/engine.h"

/* The order of drains between nodes: the earlier deadline, then the node name first in byte order. */
static inline bool drain_nodes_before(uint64_t deadline_a, const char *a, uint64_t deadline_b, const char *b)
{
        if (deadline_a != deadline_b)
                return deadline_a < deadline_b;
        return strcmp(a, b) < 0;
}

struct drain_peers_options {
        const char *node;
        uint64_t deadline_usec, margin_usec, default_startup_usec;
        double expected_shutdown_fraction;
};

/* Bisection of key among n keys in byte order (key_at(userdata, i) the i-th): where it is (*found) or
 * would go. */
size_t drain_bisect(size_t n, const char *key, const char *(*key_at)(const void *userdata, size_t i),
                    const void *userdata, bool *found);

/* A pod as parsed for the plans, shared (reference counted) by every plan made while it is unchanged. */
struct drain_pod_memo;
struct drain_pod_memo *drain_pod_memo_unref(struct drain_pod_memo *m);
/* *memo as obj is: kept when it parsed the same resourceVersion, else parsed anew (the old one released). */
int drain_pod_memo_update(struct drain_pod_memo **memo, const cJSON *obj);
/* Whether the memo parsed resourceVersion rv (a NULL rv never matches). */
bool drain_pod_memo_is(const struct drain_pod_memo *m, const char *rv);
/* The pod as parsed (borrowed from the memo). */
const struct kube_pod *drain_pod_memo_pod(const struct drain_pod_memo *m);
/* drain_inputs_add_pod() of a parsed pod (the inputs take a reference). */
int drain_inputs_add_pod_memo(struct drain_inputs *di, size_t node, struct drain_pod_memo *m,
                              size_t *ret_index);

/* The fields of a pod a drain keeps (kube_watch_options.keep_fields), NULL-terminated (inputs.c). */
extern const char *const drain_pod_fields[];

/* The client and loop of the ledger, and its members woken (all of them). */
struct kube_client *drain_ledger_client(const struct drain_ledger *l);
void drain_ledger_wake_all(struct drain_ledger *l);

/* Orders the drain of o->node (a member of l) behind the drains of other processes: the agents of other
 * nodes, one process each, which cannot share a ledger but see the same API server. A peer is a cordoned
 * node whose drain record (record.c) has a deadline still to come and before o->deadline_usec, or the
 * same and a name first in byte order: the order the ledger gives its own members. The peers watch the
 * cordoned nodes (one watch, fieldSelector spec.unschedulable=true) and the pods of each peer (one watch
 * each, while it is one); every peer joins l as a remote member: planned with the others (its pods take
 * the PDB slots ahead of this node's, so the verdict sees them), its pods' wants ranking like a member's,
 * and its pods' graceful stops observed. A peer's pod past its last safe moment waits no longer (its own
 * drain forces it). Peers behind the node need not be known: they defer to it. They are settled
 * (drain_peers_settled()) once the cordoned nodes are known with the node's own record among them (so
 * every drain recorded before it is too) and every peer's pods are listed, or 3 s after this call; then
 * every member of l is woken. margin_usec, default_startup_usec and expected_shutdown_fraction are taken
 * to be the peers' too (one configuration for the DaemonSet). The drain that follows them owns them
 * (the executor, with a ledger of its own): the peers use the ledger, the ledger knows nothing of them,
 * and they are freed before it. */
struct drain_peers;
int drain_peers_new(struct drain_ledger *l, const struct drain_peers_options *o, struct drain_peers **ret);
/* Every peer leaves the ledger. NULL-safe; returns NULL. */
struct drain_peers *drain_peers_free(struct drain_peers *ps);
/* Whether the drains ahead are known: the cordoned nodes are, as they were once this drain's own record
 * was written, with the pods of every peer among them (or the wait for them is over). Once true, stays
 * true. NULL-safe: true. */
bool drain_peers_settled(const struct drain_peers *ps);

/* The post-mortem of one pod the drain stops (postmortem.c): its final container statuses and the last
 * tail_lines of each container's log, read through the API as soon as it starts, go with the pod's alert
 * (kind) once drain_postmortem_accepted() says the API took the eviction or delete, and into a file of dir
 * (NULL: none). */
struct drain_postmortem_spec {
        enum alert_kind kind;
        unsigned tail_lines;
        const char *dir, *node, *namespace, *name, *uid;
        const char *summary; /* the alert's first line */
        /* Which capture of the pod this is, its object's "capture": NULL "at-stop" (as its delete or
         * eviction goes out, file NAMESPACE_NAME_UID.json), or a later one ("before-node-end",
         * "after-stop"), whose file is NAMESPACE_NAME_UID.STAGE.json beside the first. */
        const char *stage;
        /* The pod's object as just seen (a watch's): its statuses are read from it rather than asked
         * again, as a kubelet deletes a pod right after it reported the stop; its logs are still asked. */
        const cJSON *seen;
};
struct drain_postmortem;
int drain_postmortem_start(struct kube_client *c, struct alert_bus *bus,
                           const struct drain_postmortem_spec *s, struct drain_postmortem **ret);
/* The post-mortem of a pod already gone, from its last state obj (a watch's DELETED): its containers'
 * statuses, and no log (the node that kept them is gone). Captured at once; it goes out when accepted. */
int drain_postmortem_of_object(struct alert_bus *bus, const struct drain_postmortem_spec *s,
                               const cJSON *obj, struct drain_postmortem **ret);
void drain_postmortem_accepted(struct drain_postmortem *pm);
/* Whether its alert went out. NULL-safe: false. */
bool drain_postmortem_emitted(const struct drain_postmortem *pm);
/* Out of time (the node is going): what is still unanswered is given up (marked "no answer in time") and
 * the alert goes out now with what came, if it was accepted. */
void drain_postmortem_flush(struct drain_postmortem *pm);
/* Cancels what is under way; no alert after this. NULL-safe; returns NULL. */
struct drain_postmortem *drain_postmortem_free(struct drain_postmortem *pm);
