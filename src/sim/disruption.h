/* The disruption controller's arithmetic (kube-controller-manager, pkg/controller/disruption) as the
 * simulator keeps it: written apart from src/kube/pdb.c, which the engine plans with, so that a unit test
 * running both over the same cases (tests/unit/test_pdb_agreement.c) catches a mistake in either. Pure. */
#pragma once

#include <stdbool.h>

#include "spotdrain/pdb.h"

/* An IntOrString of a PDB: "3", 3 or "25%". -EINVAL otherwise (negative, "abc", "1.5%", over 9 digits). */
int sim_budget_parse(const char *s, struct intorstr *ret);

/* What the controller knows of the pods a PDB selects. */
struct sim_budget_pods {
        int matching;     /* pods the selector matches (managed or not) */
        int scale;        /* the sum of spec.replicas of their distinct controllers */
        bool scale_known; /* every controller found has a scale (a Job's or DaemonSet's has none) */
        int healthy;      /* Ready, no deletionTimestamp, not in disruptedPods */
};

struct sim_budget_status {
        int expected, desired, current, allowed;
};

/* expectedPods, desiredHealthy, currentHealthy and disruptionsAllowed as the controller sets them: with
 * maxUnavailable (int or %) and with a percentage minAvailable, expected is the controllers' scale and the
 * percentage rounds up; with an integer minAvailable, expected is the matching pods. Pods without a
 * controller are not in the scale; a controller without one makes the controller fail safe (0 allowed). */
void sim_budget_compute(const struct pdb_spec *spec, const struct sim_budget_pods *pods,
                        struct sim_budget_status *ret);

/* The eviction REST's check for a pod that is not Ready (unhealthyPodEvictionPolicy): AlwaysAllow evicts
 * it; IfHealthyBudget (the default) only while the budget is met (currentHealthy >= desiredHealthy > 0). */
bool sim_budget_allows_unhealthy(const struct sim_budget_status *st, bool always_allow);
