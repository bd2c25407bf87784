/* keys: the names spotdrain writes into Kubernetes and AWS objects, defined once for every module.
 *
 *  SPOTDRAIN_TAINT_INTERRUPTION  NoSchedule taint of a node being drained, its value the notice kind
 *                                ("spot-interruption", ...); the default of drain.taint_key
 *  SPOTDRAIN_TAINT_REBALANCE     PreferNoSchedule soft taint of a node told to rebalance
 *  SPOTDRAIN_ANNOTATION_DRAIN    a drain in progress, recorded on its node:
 *                                {"kind":KIND,"deadline":RFC3339,"started":RFC3339} (engine.h)
 *  SPOTDRAIN_ANNOTATION_SURGE    a Deployment surged for a drain, recorded on it before its replicas change:
 *                                {"node":NODE,"replicas":ORIGINAL,"to":RAISED,"mode":"scale"|"rollout",
 *                                "started":RFC3339} (surge.h); removed when they are put back
 *  SPOTDRAIN_ANNOTATION_LIFECYCLE  a lifecycle action the agent completed from IMDS mode, recorded on its
 *                                node: GROUP/HOOK/INSTANCE (never sent twice, an agent restart included)
 *  SPOTDRAIN_LABEL_EXCLUDE_LB    the label that takes a node out of external load balancers (the service
 *                                controller and the AWS Load Balancer Controller deregister it), set at a
 *                                drain's start before any eviction (drain.exclude_from_load_balancers) ...
 *  SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE  ... to this value, which says spotdrain set it: only such a label is
 *                                removed where a drain is undone
 *  SPOTDRAIN_ANNOTATION_DO_NOT_DISRUPT  Karpenter's pod annotation ("true"): not evicted early; it keeps
 *                                running until its last safe moment, then is stopped with a grace that fits
 *  SPOTDRAIN_ANNOTATION_KEEP     the same asked of spotdrain alone (any value)
 *  SPOTDRAIN_TAINT_OUT_OF_SERVICE  the taint of a node that is empty or gone (drain.out_of_service_taint),
 *                                value SPOTDRAIN_OUT_OF_SERVICE_VALUE, effect NoExecute: the pods left on it
 *                                are deleted and their volumes detached at once (non-graceful node shutdown)
 *  SPOTDRAIN_TAG_REPLACES        EC2 tag of a replacement instance: the instance it replaces
 *  SPOTDRAIN_TAG_REPLACED_PREFIX Auto Scaling group tag SPOTDRAIN_TAG_REPLACED_PREFIX INSTANCE: the
 *                                group's capacity was raised for that instance already
 *
 * The simulator (src/sim) spells them out itself on purpose: it checks what the product writes. */
#pragma once

#define SPOTDRAIN_TAINT_INTERRUPTION        "spotdrain.io/interruption"
#define SPOTDRAIN_TAINT_REBALANCE           "spotdrain.io/rebalance"
#define SPOTDRAIN_ANNOTATION_DRAIN          "spotdrain.io/drain"
#define SPOTDRAIN_ANNOTATION_SURGE          "spotdrain.io/surge"
#define SPOTDRAIN_ANNOTATION_LIFECYCLE      "spotdrain.io/lifecycle-completed"
#define SPOTDRAIN_LABEL_EXCLUDE_LB          "node.kubernetes.io/exclude-from-external-load-balancers"
#define SPOTDRAIN_LABEL_EXCLUDE_LB_VALUE    "spotdrain"
#define SPOTDRAIN_ANNOTATION_DO_NOT_DISRUPT "karpenter.sh/do-not-disrupt"
#define SPOTDRAIN_ANNOTATION_KEEP           "spotdrain.io/keep-until-last-moment"
#define SPOTDRAIN_TAINT_OUT_OF_SERVICE      "node.kubernetes.io/out-of-service"
#define SPOTDRAIN_OUT_OF_SERVICE_VALUE      "nodeshutdown"
#define SPOTDRAIN_TAG_REPLACES              "spotdrain.io/replaces"
#define SPOTDRAIN_TAG_REPLACED_PREFIX       "spotdrain.io/replaced-"
