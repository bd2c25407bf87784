/* PodDisruptionBudget arithmetic exactly as the Kubernetes disruption controller computes it. Pure. */
#pragma once

#include <stdbool.h>

/* An IntOrString value as a PDB carries it. */
struct intorstr {
        bool set;
        bool percent; /* value is a percentage ("25%") */
        int value;
};

/* Parses "3", "25%", or an integer. -EINVAL on anything else (negative, "abc", "10.5%"). */
int intorstr_parse(const char *s, struct intorstr *ret);
/* Kubernetes GetScaledValueFromIntOrPercent: percent of total, rounded up when round_up, else down. */
int intorstr_scaled(const struct intorstr *v, int total, bool round_up);

struct pdb_spec {
        struct intorstr min_available;
        struct intorstr max_unavailable;
};

/* matching_pods: pods the selector matches; expected_scale: the sum of the owning controllers' replicas
 * (used for maxUnavailable and percent minAvailable). Sets expected and desired healthy counts as the
 * disruption controller. */
void pdb_expected(const struct pdb_spec *spec, int matching_pods, int expected_scale, int *ret_expected,
                  int *ret_desired_healthy);
/* max(0, current_healthy - desired_healthy), 0 when expected <= 0. */
int pdb_disruptions_allowed(int current_healthy, int desired_healthy, int expected);
