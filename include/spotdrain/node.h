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
