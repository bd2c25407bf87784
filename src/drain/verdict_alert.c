/* The alerts of the graded verdict: drain-infeasible with what the limiting PDB allows and the values that
 * would fit, drain-at-risk with the stop time that would still fit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "drain/engine_internal.h"
#include "spotdrain/alert.h"
#include "spotdrain/engine.h"

static void secs_field(char *buf, size_t len, uint64_t at, uint64_t now)
{
        if (at == DRAIN_NEVER)
                snprintf(buf, len, "never");
        else
                snprintf(buf, len, "%.1f", at > now ? (double)(at - now) / 1e6 : 0.0);
}

static void alert_infeasible(struct alert_bus *bus, const char *node_name,
                             const struct drain_grade_result *g, size_t node_index)
{
        const struct drain_plan *plan = g->plan;
        const char *reason = g->reason;
        struct drain_outlook_fields of;
        _cleanup_free_ char *outlook = drain_outlook_format(&g->outlook);
        const struct drain_plan_node *node = &plan->nodes[node_index];
        uint64_t now = plan->now_usec;
        char finish[32], unforced[32] = "", allowed[16], here[16], fit_max[16], fit_min[16];
        _cleanup_free_ char *pdb_name = NULL;
        const char *fields[32];
        size_t n = 0;

        /* Only what is known: an absent field is clearer than an empty one. */
        secs_field(finish, sizeof(finish), node->finish_usec, now);
        fields[n++] = "grade";
        fields[n++] = drain_grade_to_string(DRAIN_GRADE_INFEASIBLE);
        fields[n++] = "verdict";
        fields[n++] = drain_verdict_to_string(node->verdict);
        fields[n++] = "finish_seconds";
        fields[n++] = finish;
        if (node->limiting_pdb >= 0) {
                const struct drain_plan_pdb *pdb = &plan->pdbs[node->limiting_pdb];
                pdb_name = strprintf("%s/%s", pdb->namespace, pdb->name);
                secs_field(unforced, sizeof(unforced), pdb->unforced_finish_usec, now);
                snprintf(allowed, sizeof(allowed), "%d", pdb->k);
                snprintf(here, sizeof(here), "%d", pdb->n);
                if (pdb_name) {
                        fields[n++] = "pdb";
                        fields[n++] = pdb_name;
                }
                fields[n++] = "pods_on_node";
                fields[n++] = here;
                fields[n++] = "allowed";
                fields[n++] = allowed;
                /* When the PDB alone would let the last pod go (the drain without forcing). */
                fields[n++] = "predicted_seconds";
                fields[n++] = unforced;
                if (pdb->fit_max_unavailable >= 0) {
                        snprintf(fit_max, sizeof(fit_max), "%d", pdb->fit_max_unavailable);
                        fields[n++] = "fit_max_unavailable";
                        fields[n++] = fit_max;
                }
                if (pdb->fit_min_available >= 0) {
                        snprintf(fit_min, sizeof(fit_min), "%d", pdb->fit_min_available);
                        fields[n++] = "fit_min_available";
                        fields[n++] = fit_min;
                }
        }
        n = drain_outlook_add_fields(&g->outlook, &of, fields, n);
        fields[n] = NULL;
        /* Forcing making it fit, the drain may yet end in time (exit 0, "drained"): the alert says so. */
        alert_emit(
            bus, ALERT_DRAIN_INFEASIBLE, node_name, fields, "drain of %s cannot finish in time%s: %s; %s",
            node_name, node->verdict == DRAIN_INFEASIBLE_FORCED ? " without forcing" : "",
            reason ? reason : drain_verdict_to_string(node->verdict), outlook ? outlook : "no estimate");
}

void drain_grade_alert(struct alert_bus *bus, const char *node, const struct drain_grade_result *g,
                       size_t node_index)
{
        char within[32], grace[32];
        if (g->grade == DRAIN_GRADE_INFEASIBLE && g->plan) {
                alert_infeasible(bus, node, g, node_index);
                return;
        }
        if (g->grade != DRAIN_GRADE_AT_RISK)
                return;
        snprintf(within, sizeof(within), "%.1f", (double)g->stop_within_usec / 1e6);
        snprintf(grace, sizeof(grace), "%.1f", (double)g->grace_usec / 1e6);
        struct drain_outlook_fields of;
        _cleanup_free_ char *outlook = drain_outlook_format(&g->outlook);
        const char *fields[16] = {
                "grade", drain_grade_to_string(g->grade), "stop_within_seconds", within, "grace_seconds",
                grace
        };
        fields[drain_outlook_add_fields(&g->outlook, &of, fields, 6)] = NULL;
        alert_emit(bus, ALERT_DRAIN_AT_RISK, node, fields, "drain of %s is at risk: %s; %s", node,
                   g->reason ? g->reason : "it fits only if pods stop quickly",
                   outlook ? outlook : "no estimate");
}

void drain_api_budget_alert(struct alert_bus *bus, const char *node, const struct drain_api_budget *b)
{
        char needed[24], allowed[24], qps[24];
        snprintf(needed, sizeof(needed), "%" PRIu64, b->needed);
        snprintf(allowed, sizeof(allowed), "%" PRIu64, b->allowed);
        snprintf(qps, sizeof(qps), "%g", b->qps);
        const char *fields[] = { "grade",
                                 drain_grade_to_string(DRAIN_GRADE_INFEASIBLE),
                                 "api_requests_needed",
                                 needed,
                                 "api_requests_allowed",
                                 allowed,
                                 "kube_qps",
                                 qps,
                                 NULL };
        alert_emit(
            bus, ALERT_DRAIN_INFEASIBLE, node, fields,
            "drain of %s cannot finish in time: it needs at least %" PRIu64
            " API requests before its deadline (with the drains due before it); kube.qps %g allows %" PRIu64,
            node, b->needed, b->qps, b->allowed);
}
