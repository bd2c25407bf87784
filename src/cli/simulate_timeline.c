/* spotdrain simulate: the timeline, and the progress of the drains on it. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "cli/report.h"
#include "cli/simulate.h"
#include "spotdrain/agent.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/httpd.h"
#include "spotdrain/imds.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/metrics.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/sim.h"
#include "spotdrain/yaml.h"

double simulate_scenario_seconds(const struct simulate *sm, uint64_t engine_usec)
{
        return ((double)engine_usec - (double)sm->wall0) / (double)USEC_PER_SEC;
}

/* One line of the timeline, printed as it happens (not with --json). */

void simulate_timeline(const struct simulate *sm, double at, const char *node, const char *fmt, ...)
{
        va_list ap;

        if (sm->common.json)
                return;
        printf("t=%7.1fs  %-14s ", at, node ? node : "");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
}

/* ---- progress of the drains on the timeline ---- */

void simulate_show_progress(struct simulate *sm, struct sim_drain *d)
{
        const struct drain_exec_result *r = drain_exec_result(d->x);
        const struct drain_plan *plan = drain_exec_plan(d->x);
        double now = simulate_scenario_seconds(sm, clk_now());

        if (!d->cordon_shown && r->cordoned_usec) {
                d->cordon_shown = true;
                simulate_timeline(sm, simulate_scenario_seconds(sm, r->cordoned_usec), d->node,
                                  "cordoned and tainted");
        }
        /* The plan line comes with the first judgement (which may wait for the pods' startup times), so that
         * it shows the estimates judged. */
        if (!d->plan_shown && plan && plan->n_nodes > 0 && (r->judged_usec || r->finished_usec)) {
                const struct drain_plan_node *pn = drain_exec_plan_node(d->x);
                const struct drain_outlook *o = &r->outlook_first;
                double at = simulate_scenario_seconds(sm, r->judged_usec ? r->judged_usec : clk_now());
                d->plan_shown = true;
                if (o->known) {
                        /* Durations from this line's time, as in the alerts; the pair as every surface
                         * prints it. */
                        _cleanup_free_ char *text = drain_outlook_format(o);
                        simulate_timeline(sm, at, d->node,
                                          "plan: %zu pods to go, %.1f s to the deadline; %s", pn->n_to_go,
                                          simulate_scenario_seconds(sm, pn->deadline_usec) - at,
                                          text ? text : "no estimate");
                } else if (pn->finish_usec != DRAIN_NEVER)
                        simulate_timeline(
                            sm, simulate_scenario_seconds(sm, r->planned_usec ? r->planned_usec : clk_now()),
                            d->node, "plan: %zu pods to go, predicted finish t=%.1fs (deadline t=%.1fs)%s%s",
                            pn->n_to_go, simulate_scenario_seconds(sm, pn->finish_usec),
                            simulate_scenario_seconds(sm, pn->deadline_usec), pn->reason ? ": " : "",
                            pn->reason ? pn->reason : "");
                else
                        simulate_timeline(
                            sm, simulate_scenario_seconds(sm, r->planned_usec ? r->planned_usec : clk_now()),
                            d->node, "plan: %zu pods to go, no finish predicted%s%s", pn->n_to_go,
                            pn->reason ? ": " : "", pn->reason ? pn->reason : "");
        }
        if (!plan || d->done)
                return;
        unsigned left = drain_exec_pods_left(d->x, DRAIN_EXEC_ALL_PDBS);
        if (left == d->left_shown && r->evicted == d->evicted_shown && r->forced == d->forced_shown)
                return;
        d->left_shown = left;
        d->evicted_shown = r->evicted;
        d->forced_shown = r->forced;

        _cleanup_(buf_free) struct buf b = { 0 };
        if (buf_printf(&b, "%u evicted, %u forced, %u pods left", r->evicted, r->forced, left) < 0)
                return;
        bool open = false;
        for (size_t i = 0; i < plan->n_pdbs; i++) {
                unsigned n = drain_exec_pods_left(d->x, (int)i);
                if (n == 0)
                        continue;
                if (buf_printf(&b, "%s%s %u", open ? ", " : " (", plan->pdbs[i].name, n) < 0)
                        return;
                open = true;
        }
        unsigned no_pdb = drain_exec_pods_left(d->x, -1);
        if (no_pdb > 0 && buf_printf(&b, "%swithout PDB %u", open ? ", " : " (", no_pdb) < 0)
                return;
        if ((open || no_pdb > 0) && buf_printf(&b, ")") < 0)
                return;
        simulate_timeline(sm, now, d->node, "%s", b.data);
}

int simulate_model_progress(struct simulate *sm, struct model_progress **ret, size_t *ret_n)
{
        _cleanup_(cjson_freep) cJSON *result = NULL, *pods = NULL;
        struct model_progress *mp;
        size_t n = 0;
        const cJSON *o;

        mp = calloc(sm->n_drains + 1, sizeof(*mp));
        if (!mp)
                return -ENOMEM;
        for (size_t i = 0; i < sm->n_drains; i++)
                if (!sm->drains[i]->x && !sm->drains[i]->done)
                        mp[n++] = (struct model_progress){ .d = sm->drains[i], .cordoned_at = -1 };
        if (n > 0 && (!(result = sim_result(sm->sim)) || sim_list(sm->sim, SIM_POD, NULL, &pods) < 0)) {
                free(mp);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                struct sim_drain *d = mp[i].d;
                cJSON_ArrayForEach (o, cJSON_GetObjectItem(result, "nodes")) {
                        const cJSON *c = cJSON_GetObjectItem(o, "cordoned_at");
                        if (!d->cordon_shown && cJSON_IsNumber(c) &&
                            streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItem(o, "name")), d->node)) {
                                d->cordon_shown = true;
                                mp[i].cordoned_at = c->valuedouble;
                        }
                }
                cJSON_ArrayForEach (o, pods) {
                        const cJSON *owner = cJSON_GetArrayItem(
                            cJSON_GetObjectItem(cJSON_GetObjectItem(o, "metadata"), "ownerReferences"), 0);
                        if (streq_ptr(kube_object_str(o, "spec.nodeName"), d->node) &&
                            !streq_ptr(cJSON_GetStringValue(cJSON_GetObjectItem(owner, "kind")),
                                       "DaemonSet"))
                                mp[i].left++;
                }
                mp[i].changed = mp[i].left != d->left_shown;
                d->left_shown = mp[i].left;
        }
        *ret = mp;
        *ret_n = n;
        return 0;
}

void simulate_show_model_progress(struct simulate *sm, const struct model_progress *mp, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                if (mp[i].cordoned_at >= 0)
                        simulate_timeline(sm, mp[i].cordoned_at, mp[i].d->node, "cordoned");
                if (mp[i].changed)
                        simulate_timeline(sm, simulate_scenario_seconds(sm, clk_now()), mp[i].d->node,
                                          "%u pods left on the node", mp[i].left);
        }
}
