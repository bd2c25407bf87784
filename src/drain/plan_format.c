/* Renders a drain plan: plain-text tables for `spotdrain plan`, JSON for --json. Times are from now. */
#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "spotdrain/drain.h"
#include "spotdrain/engine.h"

#define USEC_PER_SEC ((int64_t)1000000)

/* Seconds from now: "12", "12.5", "-3", "never". */
struct secs {
        char s[32];
};
static struct secs rel_secs(const struct drain_plan *p, uint64_t t)
{
        struct secs r;
        if (t == DRAIN_NEVER) {
                snprintf(r.s, sizeof(r.s), "never");
                return r;
        }
        int64_t d = (int64_t)t - (int64_t)p->now_usec;
        if (d % USEC_PER_SEC == 0)
                snprintf(r.s, sizeof(r.s), "%" PRId64, d / USEC_PER_SEC);
        else
                snprintf(r.s, sizeof(r.s), "%.1f", (double)d / (double)USEC_PER_SEC);
        return r;
}

static struct secs dur_secs(uint64_t d)
{
        struct secs r;
        if (d % USEC_PER_SEC == 0)
                snprintf(r.s, sizeof(r.s), "%" PRIu64, d / USEC_PER_SEC);
        else
                snprintf(r.s, sizeof(r.s), "%.1f", (double)d / (double)USEC_PER_SEC);
        return r;
}

static const char *const warning_names[] = { "do-not-disrupt", "bare-pod", "emptydir", "several-pdbs",
                                             "no-time" };

static int warnings_text(struct buf *b, unsigned w)
{
        bool first = true;
        for (size_t i = 0; i < ARRAY_SIZE(warning_names); i++) {
                if (!(w & (1u << i)))
                        continue;
                int r = buf_printf(b, "%s%s", first ? "" : ",", warning_names[i]);
                if (r < 0)
                        return r;
                first = false;
        }
        return 0;
}

static int width_of(const char *a, const char *b)
{
        return (int)(strlen(a) + (b ? strlen(b) + 1 : 0));
}

static int fit_text(struct buf *b, const struct drain_plan_pdb *pdb)
{
        if (pdb->feasible)
                return buf_printf(b, "-");
        if (pdb->fit_max_unavailable < 0)
                return buf_printf(b, "none");
        int r = buf_printf(b, "maxUnavailable %d", pdb->fit_max_unavailable);
        if (r >= 0 && pdb->fit_max_unavailable_pct >= 0)
                r = buf_printf(b, " (%d%%)", pdb->fit_max_unavailable_pct);
        if (r >= 0 && pdb->fit_min_available >= 0)
                r = buf_printf(b, " / minAvailable %d", pdb->fit_min_available);
        if (r >= 0 && pdb->fit_min_available >= 0 && pdb->fit_min_available_pct >= 0)
                r = buf_printf(b, " (%d%%)", pdb->fit_min_available_pct);
        return r;
}

static int format_nodes(struct buf *b, const struct drain_plan *p)
{
        int w = 4;
        for (size_t i = 0; i < p->n_nodes; i++)
                if (width_of(p->nodes[i].name, NULL) > w)
                        w = width_of(p->nodes[i].name, NULL);
        int r = buf_printf(b, "%-*s  %8s  %6s  %6s  %4s  %6s  %6s  %s\n", w, "NODE", "DEADLINE", "LEFT",
                           "FINISH", "PODS", "FORCED", "KILLED", "VERDICT");
        for (size_t i = 0; r >= 0 && i < p->n_nodes; i++) {
                const struct drain_plan_node *n = &p->nodes[i];
                r = buf_printf(b, "%-*s  %8s  %6s  %6s  %4zu  %6zu  %6zu  %s\n  %s\n", w, n->name,
                               rel_secs(p, n->deadline_usec).s,
                               rel_secs(p, n->deadline_usec - n->margin_usec).s,
                               rel_secs(p, n->finish_usec).s, n->n_to_go, n->n_forced, n->n_killed,
                               drain_verdict_to_string(n->verdict), n->reason ? n->reason : "");
                if (r >= 0 && n->n_lb_held > 0)
                        r = buf_printf(
                            b,
                            "  load balancers: %zu pod%s behind a Service keep running until %s "
                            "(drain.lb_deregistration_seconds reserved after the exclude label)\n",
                            n->n_lb_held, n->n_lb_held == 1 ? "" : "s", rel_secs(p, n->lb_hold_usec).s);
        }
        return r;
}

static int format_pdbs(struct buf *b, const struct drain_plan *p)
{
        if (p->n_pdbs == 0)
                return 0;
        int w = 3;
        for (size_t i = 0; i < p->n_pdbs; i++)
                if (width_of(p->pdbs[i].namespace, p->pdbs[i].name) > w)
                        w = width_of(p->pdbs[i].namespace, p->pdbs[i].name);
        int r = buf_printf(b, "\n%-*s  %4s  %7s  %5s  %6s  %6s  %8s  %8s  %s\n", w, "PDB", "PODS", "ALLOWED",
                           "WAVES", "RETURN", "FINISH", "UNFORCED", "FEASIBLE", "WOULD FIT");
        for (size_t i = 0; r >= 0 && i < p->n_pdbs; i++) {
                const struct drain_plan_pdb *d = &p->pdbs[i];
                _cleanup_free_ char *name = strprintf("%s/%s", d->namespace, d->name);
                if (!name)
                        return -ENOMEM;
                r = buf_printf(b, "%-*s  %4d  %7d  %5d  %6s  %6s  %8s  %8s  ", w, name, d->n, d->k, d->waves,
                               dur_secs(d->slot_return_usec).s, rel_secs(p, d->finish_usec).s,
                               rel_secs(p, d->unforced_finish_usec).s, d->feasible ? "yes" : "no");
                if (r >= 0)
                        r = fit_text(b, d);
                if (r >= 0)
                        r = buf_printf(b, "\n");
        }
        return r;
}

static int format_pods(struct buf *b, const struct drain_plan *p)
{
        if (p->n_pods == 0)
                return 0;
        int w = 3, wn = 4, wp = 3;
        for (size_t i = 0; i < p->n_pods; i++) {
                const struct drain_plan_pod *d = &p->pods[i];
                if (width_of(d->namespace, d->name) > w)
                        w = width_of(d->namespace, d->name);
                if (width_of(p->nodes[d->node].name, NULL) > wn)
                        wn = width_of(p->nodes[d->node].name, NULL);
                if (d->pdb >= 0 && width_of(p->pdbs[d->pdb].namespace, p->pdbs[d->pdb].name) > wp)
                        wp = width_of(p->pdbs[d->pdb].namespace, p->pdbs[d->pdb].name);
        }
        /* EVICT AT and GONE AT: when its stop starts and ends; START BY: its last safe moment, the latest
         * its stop may start (plan --help's words). */
        int r = buf_printf(b, "\n%-*s  %-*s  %4s  %-*s  %-8s  %8s  %7s  %7s  %s\n", w, "POD", wn, "NODE",
                           "TIER", wp, "PDB", "ACTION", "EVICT AT", "GONE AT", "START BY", "NOTES");
        for (size_t i = 0; r >= 0 && i < p->n_pods; i++) {
                const struct drain_plan_pod *d = &p->pods[i];
                _cleanup_free_ char *name = strprintf("%s/%s", d->namespace, d->name);
                _cleanup_free_ char *pdb =
                    d->pdb >= 0 ? strprintf("%s/%s", p->pdbs[d->pdb].namespace, p->pdbs[d->pdb].name)
                                : strdup("-");
                if (!name || !pdb)
                        return -ENOMEM;
                r = buf_printf(b, "%-*s  %-*s  %4d  %-*s  %-8s  %8s  %7s  %8s  ", w, name, wn,
                               p->nodes[d->node].name, d->tier, wp, pdb, drain_action_to_string(d->action),
                               d->action == DRAIN_ACTION_LEAVE ? "-" : rel_secs(p, d->evict_usec).s,
                               d->action == DRAIN_ACTION_LEAVE ? "-" : rel_secs(p, d->gone_usec).s,
                               d->action == DRAIN_ACTION_LEAVE ? "-" : rel_secs(p, d->last_safe_usec).s);
                if (r >= 0 && d->killed)
                        r = buf_printf(b, "killed%s", d->warnings || d->lb_wait_until_usec ? "," : "");
                if (r >= 0 && d->lb_wait_until_usec)
                        r = buf_printf(b, "lb-wait %s%s", rel_secs(p, d->lb_wait_until_usec).s,
                                       d->warnings ? "," : "");
                if (r >= 0)
                        r = warnings_text(b, d->warnings);
                if (r >= 0)
                        r = buf_printf(b, "\n");
        }
        return r;
}

int drain_plan_format(const struct drain_plan *p, char **ret)
{
        if (!p || !ret)
                return -EINVAL;
        _cleanup_(buf_free) struct buf b = { 0 };
        int r = format_nodes(&b, p);
        if (r >= 0)
                r = format_pdbs(&b, p);
        if (r >= 0)
                r = format_pods(&b, p);
        if (r >= 0 && !b.data)
                r = buf_append(&b, "", 0);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b.data);
        return 0;
}

/* ---- JSON ---- */

static bool add_time(cJSON *o, const char *key, const struct drain_plan *p, uint64_t t)
{
        if (t == DRAIN_NEVER)
                return cJSON_AddNullToObject(o, key) != NULL;
        double d = ((double)(int64_t)(t - p->now_usec)) / (double)USEC_PER_SEC;
        return cJSON_AddNumberToObject(o, key, d) != NULL;
}

static bool add_dur(cJSON *o, const char *key, uint64_t d)
{
        return cJSON_AddNumberToObject(o, key, (double)d / (double)USEC_PER_SEC) != NULL;
}

static bool add_pdb_ref(cJSON *o, const char *key, const struct drain_plan *p, int idx)
{
        if (idx < 0)
                return cJSON_AddNullToObject(o, key) != NULL;
        _cleanup_free_ char *s = strprintf("%s/%s", p->pdbs[idx].namespace, p->pdbs[idx].name);
        return s && cJSON_AddStringToObject(o, key, s) != NULL;
}

/* Adds a fresh object to an array; NULL on ENOMEM. */
static cJSON *array_add_object(cJSON *array)
{
        cJSON *o = cJSON_CreateObject();
        if (o && !cJSON_AddItemToArray(array, o)) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static bool json_node(cJSON *nodes, const struct drain_plan *p, const struct drain_plan_node *n)
{
        cJSON *o = array_add_object(nodes);
        return o && cJSON_AddStringToObject(o, "name", n->name) &&
               add_time(o, "deadline", p, n->deadline_usec) && add_dur(o, "margin", n->margin_usec) &&
               add_time(o, "finish", p, n->finish_usec) &&
               cJSON_AddStringToObject(o, "verdict", drain_verdict_to_string(n->verdict)) &&
               add_pdb_ref(o, "limiting_pdb", p, n->limiting_pdb) &&
               cJSON_AddNumberToObject(o, "pods_to_go", (double)n->n_to_go) &&
               cJSON_AddNumberToObject(o, "pods_forced", (double)n->n_forced) &&
               cJSON_AddNumberToObject(o, "pods_killed", (double)n->n_killed) &&
               cJSON_AddNumberToObject(o, "pods_left", (double)n->n_left) &&
               cJSON_AddNumberToObject(o, "pods_behind_service_held", (double)n->n_lb_held) &&
               (n->n_lb_held ? add_time(o, "lb_held_until", p, n->lb_hold_usec)
                             : cJSON_AddNullToObject(o, "lb_held_until") != NULL) &&
               cJSON_AddStringToObject(o, "reason", n->reason ? n->reason : "");
}

static bool add_int_or_null(cJSON *o, const char *key, int v)
{
        if (v < 0)
                return cJSON_AddNullToObject(o, key) != NULL;
        return cJSON_AddNumberToObject(o, key, v) != NULL;
}

static bool json_fit(cJSON *o, const struct drain_plan_pdb *d)
{
        if (d->feasible || d->fit_max_unavailable < 0)
                return cJSON_AddNullToObject(o, "fit") != NULL;
        cJSON *f = cJSON_AddObjectToObject(o, "fit");
        return f && cJSON_AddNumberToObject(f, "disruptions", d->fit_k) &&
               add_int_or_null(f, "max_unavailable", d->fit_max_unavailable) &&
               add_int_or_null(f, "max_unavailable_percent", d->fit_max_unavailable_pct) &&
               add_int_or_null(f, "min_available", d->fit_min_available) &&
               add_int_or_null(f, "min_available_percent", d->fit_min_available_pct);
}

static bool json_pdb(cJSON *pdbs, const struct drain_plan *p, const struct drain_plan_pdb *d)
{
        cJSON *o = array_add_object(pdbs);
        return o && cJSON_AddStringToObject(o, "namespace", d->namespace) &&
               cJSON_AddStringToObject(o, "name", d->name) && cJSON_AddNumberToObject(o, "pods", d->n) &&
               cJSON_AddNumberToObject(o, "pods_needing_budget", d->n_ready) &&
               cJSON_AddNumberToObject(o, "allowed", d->k) &&
               cJSON_AddNumberToObject(o, "waves", d->waves) &&
               cJSON_AddNumberToObject(o, "expected_pods", d->expected_pods) &&
               add_dur(o, "startup", d->startup_usec) && add_dur(o, "slot_return", d->slot_return_usec) &&
               add_time(o, "finish", p, d->finish_usec) &&
               add_time(o, "unforced_finish", p, d->unforced_finish_usec) &&
               cJSON_AddBoolToObject(o, "feasible", d->feasible) &&
               cJSON_AddBoolToObject(o, "overlap", d->overlap) && json_fit(o, d);
}

static bool json_warnings(cJSON *o, unsigned w)
{
        cJSON *a = cJSON_AddArrayToObject(o, "warnings");
        if (!a)
                return false;
        for (size_t i = 0; i < ARRAY_SIZE(warning_names); i++) {
                if (!(w & (1u << i)))
                        continue;
                cJSON *s = cJSON_CreateString(warning_names[i]);
                if (!s || !cJSON_AddItemToArray(a, s)) {
                        cJSON_Delete(s);
                        return false;
                }
        }
        return true;
}

static bool json_pod(cJSON *pods, const struct drain_plan *p, const struct drain_plan_pod *d)
{
        cJSON *o = array_add_object(pods);
        bool left = d->action == DRAIN_ACTION_LEAVE;
        return o && cJSON_AddStringToObject(o, "namespace", d->namespace) &&
               cJSON_AddStringToObject(o, "name", d->name) &&
               (d->uid ? cJSON_AddStringToObject(o, "uid", d->uid) : cJSON_AddNullToObject(o, "uid")) &&
               cJSON_AddStringToObject(o, "node", p->nodes[d->node].name) &&
               cJSON_AddNumberToObject(o, "tier", d->tier) && add_pdb_ref(o, "pdb", p, d->pdb) &&
               cJSON_AddNumberToObject(o, "pdbs", (double)d->n_pdbs) &&
               cJSON_AddStringToObject(o, "action", drain_action_to_string(d->action)) &&
               add_time(o, "evict", p, left ? DRAIN_NEVER : d->evict_usec) &&
               add_time(o, "gone", p, left ? DRAIN_NEVER : d->gone_usec) &&
               add_time(o, "last_safe", p, d->last_safe_usec) && add_dur(o, "shutdown", d->shutdown_usec) &&
               add_dur(o, "startup", d->startup_usec) && cJSON_AddBoolToObject(o, "forced", d->forced) &&
               cJSON_AddBoolToObject(o, "killed", d->killed) &&
               add_time(o, "lb_wait_until", p,
                        d->lb_wait_until_usec ? d->lb_wait_until_usec : DRAIN_NEVER) &&
               json_warnings(o, d->warnings);
}

int drain_plan_to_json(const struct drain_plan *p, cJSON **ret)
{
        if (!p || !ret)
                return -EINVAL;
        cJSON *root = cJSON_CreateObject();
        if (!root)
                return -ENOMEM;
        cJSON *nodes = NULL, *pdbs = NULL, *pods = NULL;
        bool ok =
            cJSON_AddStringToObject(root, "policy", p->policy == DRAIN_POLICY_FORCE ? "force" : "respect") &&
            (nodes = cJSON_AddArrayToObject(root, "nodes")) &&
            (pdbs = cJSON_AddArrayToObject(root, "pdbs")) && (pods = cJSON_AddArrayToObject(root, "pods"));
        for (size_t i = 0; ok && i < p->n_nodes; i++)
                ok = json_node(nodes, p, &p->nodes[i]);
        for (size_t i = 0; ok && i < p->n_pdbs; i++)
                ok = json_pdb(pdbs, p, &p->pdbs[i]);
        for (size_t i = 0; ok && i < p->n_pods; i++)
                ok = json_pod(pods, p, &p->pods[i]);
        if (!ok) {
                cJSON_Delete(root);
                return -ENOMEM;
        }
        *ret = root;
        return 0;
}

const char *drain_exec_outcome_to_string(enum drain_exec_outcome o)
{
        switch (o) {
        case DRAIN_EXEC_DRAINED:
                return "drained";
        case DRAIN_EXEC_DEADLINE_MISSED:
                return "deadline-missed";
        case DRAIN_EXEC_ERROR:
                return "error";
        }
        return NULL;
}
