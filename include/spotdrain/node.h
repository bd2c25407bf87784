/* node: what spotdrain does to a Node object, written once. The drain engine (src/drain), the agent's and
 * the controller's dispatcher actions and `simulate` all change a node through these calls, so that a taint,
 * a label or the drain record reads the same whoever set it, and its undo finds what was set.
 *
 * The single steps take a callback as kube.h's node calls do (done, userdata, ret_call; done NULL: the
 * answer is logged when it is an error, userdata then being what the call does, e.g. "cordon"). The undo
 * steps below them chain several calls and log their own failures. Every call returns 0 once sent, or a
 * negative errno when it could not be sent. */
#pragma once

#include <stdbool.h>

#include "spotdrain/kube.h"

/* Marks the node unschedulable (cordon) or schedulable again. */
int node_cordon(struct kube_client *c, const char *node, bool cordon, kube_done_fn done, void *userdata,
                struct kube_call **ret_call);
/* A drain's taint taint_key=kind (NoSchedule, or NoExecute with no_execute): adds (add) or removes it. */
int node_drain_taint(struct kube_client *c, const char *node, const char *taint_key, const char *kind,
                     bool no_execute, bool add, kube_done_fn done, void *userdata,
                     struct kube_call **ret_call);
/* The rebalance recommendation's soft taint SPOTDRAIN_TAINT_REBALANCE:PreferNoSchedule. */
int node_soft_taint(struct kube_client *c, const char *node, bool add, kube_done_fn done, void *userdata,
                    struct kube_call **ret_call);
/* The load balancers' exclusion label SPOTDRAIN_LABEL_EXCLUDE_LB (drain.exclude_from_load_balancers): set,
 * or removed only when spotdrain set it (its value). */
int node_lb_exclude(struct kube_client *c, const char *node, bool exclude, kube_done_fn done, void *userdata,
                    struct kube_call **ret_call);
/* The drain record SPOTDRAIN_ANNOTATION_DRAIN (drain_record_format()'s value), or NULL to remove it. */
int node_record(struct kube_client *c, const char *node, const char *value, kube_done_fn done,
                void *userdata, struct kube_call **ret_call);
/* node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (drain.out_of_service_taint). */
int node_out_of_service(struct kube_client *c, const char *node, kube_done_fn done, void *userdata,
                        struct kube_call **ret_call);

/* The dispatcher's actions, several calls each; their failures are logged. */
/* The soft taint added; or removed, with the load balancers' label an earlier drain of the node may have
 * left (a rebalance drains nothing, so the label found then is only such a drain's). */
int node_rebalance(struct kube_client *c, const char *node, bool add);
/* A drain undone (a canceled scheduled change, a reboot that is over): its taint taint_key (NULL:
 * SPOTDRAIN_TAINT_INTERRUPTION), its record, spotdrain's load balancers' label, then the cordon. */
int node_undrain(struct kube_client *c, const char *node, const char *taint_key);

/* ---- the drain starter ---- */

struct alert_bus;
struct drain_estimates;
struct drain_exec;
struct drain_exec_result;
struct drain_ledger;
struct metrics;
struct notice;
struct prov_frontend;
struct spotdrain_config;

/* What every drain of a front end shares (all borrowed; any may be NULL but kube). */
struct node_drainer {
        struct kube_client *kube;
        struct alert_bus *bus;
        const struct spotdrain_config *cfg; /* the drain.* options; NULL: the engine's defaults */
        struct metrics *metrics;
        struct prov_frontend *prov; /* replacement capacity; NULL: none asked for */
        /* One process draining every node (the controller, simulate's direct delivery): one PDB ledger for
         * all its drains, made at the first drain. NULL: each drain has a private one. */
        struct drain_ledger **shared_ledger;
        /* The estimates kept in the ConfigMap: a private ledger's drain plans with them (estimates), the
         * shared ledger with their store of stop times (shared_estimates). */
        struct drain_estimates *estimates, *shared_estimates;
        /* One process per node (the agents): its drains go behind the drains of other nodes. */
        bool follow_peers;
        const char *self_namespace, *self_name; /* the agent's own pod, never evicted */
        struct elbv2_client *elbv2;             /* drain.target_groups' ELBv2 client; NULL: none */
};

/* Starts the drain of node for notice n by deadline_usec (engine clock; the dispatcher's, which may differ
 * from the notice's): replacement capacity is asked for first (the provisioner's triggers decide, and it
 * launches once per instance), then drain_exec_start() with the configuration's drain options. A drain of
 * the node under way is the caller's to replace (an earlier deadline) or keep. */
int node_drain_start(const struct node_drainer *d, const char *node, const struct notice *n,
                     uint64_t deadline_usec,
                     void (*done)(struct drain_exec *x, const struct drain_exec_result *r, void *userdata),
                     void *userdata, struct drain_exec **ret);
