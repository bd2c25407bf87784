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
#include <stdint.h>

#include "spotdrain/dispatch.h"
#include "spotdrain/kube.h"
#include "spotdrain/util.h"

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

/* A drain's marks on node (the Node whole, as its cordon's answer has it), in one PATCH made on its
 * resourceVersion: the drain taint (as node_drain_taint() adds it), the drain record (record, NULL: none)
 * and, with lb, the load balancers' label where the node has none (as node_lb_exclude() sets it). One
 * request where the three calls make five, and they do not conflict with each other. A change to the node
 * since answers 409: the caller reads it again and patches again, or makes them one at a time. -EINVAL:
 * node has no name or resourceVersion. */
struct node_marks {
        const char *taint_key; /* NULL: SPOTDRAIN_TAINT_INTERRUPTION */
        const char *kind;      /* the taint's value */
        bool no_execute;
        bool lb;
        const char *record;
};
int node_drain_marks(struct kube_client *c, const cJSON *node, const struct node_marks *m, kube_done_fn done,
                     void *userdata, struct kube_call **ret_call);

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

/* ---- the dispatcher's effects ---- */

/* The one implementation of the dispatcher's generic effects (dispatch.h, struct dispatch_ops) for a front
 * end that drains its nodes in this process: drains started with node_drain_start() (one drain per node: a
 * later call, which the dispatcher makes for an earlier deadline, replaces the drain under way; a finished
 * drain lingers until drain_exec_lingers_until(), then is freed), drain_stop, cordon, uncordon
 * (node_undrain() with the configuration's drain.taint_key), the soft taint (node_rebalance()) and the
 * replacement request (prov_frontend_request(); nothing without provisioning). What only the front end
 * knows comes through its hooks. */
struct loop;
struct node_effects;

/* The front end's part (any member may be NULL), called with userdata. */
struct node_effects_hooks {
        /* Drain x of node started for notice n (replacing node's earlier one, released first). */
        void (*drain_started)(void *userdata, const char *node, const struct notice *n,
                              struct drain_exec *x);
        /* Drain x of node ended (not one replaced or stopped): the front end tells the dispatcher
         * (dispatch_drain_finished(), which may stop drains: node is a copy). x must not be freed. */
        void (*drain_ended)(void *userdata, const char *node, struct drain_exec *x,
                            const struct drain_exec_result *r);
        /* Drain x of node is freed now (replaced, stopped, reaped after its end, or with the effects). */
        void (*drain_released)(void *userdata, const char *node, struct drain_exec *x);
        /* The dispatcher's ops that differ by front end (notice_seen, node_refresh, lifecycle_*,
         * ticket_done), as dispatch_ops documents them, called with userdata; NULL: absent from the
         * dispatcher's ops too. Its members drain to cordon are the effects' own: they must be NULL. */
        struct dispatch_ops ops;
        void *userdata;
};

/* drainer and hooks are copied (what they point to borrowed: it must outlive the effects). */
int node_effects_new(struct loop *l, const struct node_drainer *drainer,
                     const struct node_effects_hooks *hooks, struct node_effects **ret);
/* Frees every drain (drain_released told first). NULL-safe; returns NULL. */
struct node_effects *node_effects_free(struct node_effects *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct node_effects *, node_effects_free);
/* The drainer the next drains start with, for its owner to change (e.g. the estimates once learnt). */
struct node_drainer *node_effects_drainer(struct node_effects *e);
/* The dispatcher's ops whose userdata is e: the effects above and the hooks' members. */
void node_effects_dispatch_ops(const struct node_effects *e, struct dispatch_ops *ret);
