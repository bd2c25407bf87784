/* What the model tells the surfaces about the scenario, and the simulation result (CONTRACTS §4). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/model_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- scenario facts ---- */
const char *sim_scenario_name(const struct sim *s)
{
        return s->sc->name;
}

const char *sim_mode(const struct sim *s)
{
        return s->mode;
}

double sim_budget_seconds(const struct sim *s)
{
        return s->sc->budget;
}

int sim_hook_heartbeat_timeout(const struct sim *s)
{
        return s->sc->hook_heartbeat_timeout;
}

int sim_asg_group_name(const struct sim *s, char **ret)
{
        *ret = strprintf("spotdrain-%s", s->sc->name ? s->sc->name : "scenario");
        return *ret ? 0 : -ENOMEM;
}

bool sim_instance_metadata_tags(const struct sim *s)
{
        return !s->sc->no_instance_metadata_tags;
}

size_t sim_node_count(const struct sim *s)
{
        return s->n_nodes;
}

const char *sim_node_name(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->name : NULL;
}

const char *sim_node_instance_id(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->instance_id : NULL;
}

const char *sim_node_zone(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->zone : NULL;
}

const char *sim_node_instance_type(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->instance_type : NULL;
}

const char *sim_node_capacity_type(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->capacity_type : NULL;
}

const char *sim_node_ip(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->ip : NULL;
}

int sim_node_notice(const struct sim *s, size_t i, const char **ret_kind, double *ret_notice_at,
                    double *ret_deadline_at)
{
        if (i >= s->n_nodes || !s->nodes[i]->interrupted)
                return -ENOENT;
        if (ret_kind)
                *ret_kind = s->nodes[i]->notice_kind;
        if (ret_notice_at)
                *ret_notice_at = s->nodes[i]->notice_at;
        if (ret_deadline_at)
                *ret_deadline_at = s->nodes[i]->deadline_at;
        return 0;
}

double sim_node_rebalance_at(const struct sim *s, size_t i)
{
        return i < s->n_nodes ? s->nodes[i]->rebalance_at : -1;
}

int sim_node_maintenance(const struct sim *s, size_t i, const char **ret_code, bool *ret_completed)
{
        if (i >= s->n_nodes || !s->nodes[i]->interrupted || !s->nodes[i]->maint_code)
                return -ENOENT;
        *ret_code = s->nodes[i]->maint_code;
        *ret_completed = s->nodes[i]->reboot && s->nodes[i]->back_at >= 0 && !s->nodes[i]->down;
        return 0;
}

bool sim_node_gone(const struct sim *s, size_t i)
{
        return i < s->n_nodes && s->nodes[i]->removed;
}

double sim_api_error_rate(const struct sim *s)
{
        return s->sc->api_error_rate;
}

int64_t sim_api_latency_ms(const struct sim *s)
{
        return s->sc->api_latency_ms;
}
/* ---- accounting and result ---- */
void sim_count_request(struct sim *s)
{
        s->api_requests++;
}

void sim_record_alert(struct sim *s, const char *kind, const char *node, const char *message,
                      const cJSON *postmortem)
{
        struct sim_alert *a = realloc(s->alerts, (s->n_alerts + 1) * sizeof(*a));
        if (!a)
                return;
        s->alerts = a;
        struct sim_alert *e = &s->alerts[s->n_alerts];
        *e = (struct sim_alert){ .kind = strdup(kind ?: ""),
                                 .node = node ? strdup(node) : NULL,
                                 .message = strdup(message ?: ""),
                                 .at = sim_now(s),
                                 .postmortem = postmortem ? cJSON_Duplicate(postmortem, true) : NULL };
        if (!e->kind || !e->message || (node && !e->node) || (postmortem && !e->postmortem)) {
                free(e->kind);
                free(e->node);
                free(e->message);
                cJSON_Delete(e->postmortem);
                return;
        }
        s->n_alerts++;
}

void sim_record_write(struct sim *s, const char *surface, const char *what)
{
        struct sim_write *a = realloc(s->writes, (s->n_writes + 1) * sizeof(*a));
        if (!a)
                return;
        s->writes = a;
        struct sim_write *e = &s->writes[s->n_writes];
        *e = (struct sim_write){ .surface = strdup(surface), .what = strdup(what), .at = sim_now(s) };
        if (!e->surface || !e->what) {
                free(e->surface);
                free(e->what);
                return;
        }
        s->n_writes++;
}

cJSON *sim_writes(struct sim *s)
{
        cJSON *o = cJSON_CreateObject();
        cJSON *list = o ? cJSON_AddArrayToObject(o, "writes") : NULL;
        for (size_t i = 0; list && i < s->n_writes; i++) {
                cJSON *w = cJSON_CreateObject();
                if (!w || !cJSON_AddItemToArray(list, w)) {
                        cJSON_Delete(w);
                        break;
                }
                if (!cJSON_AddNumberToObject(w, "at", round(s->writes[i].at * 1000.0) / 1000.0) ||
                    !cJSON_AddStringToObject(w, "surface", s->writes[i].surface) ||
                    !cJSON_AddStringToObject(w, "what", s->writes[i].what))
                        break;
        }
        if (o && !list) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

static cJSON *time_or_null(double t)
{
        if (t < 0)
                return cJSON_CreateNull();
        return cJSON_CreateNumber(round(t * 1000.0) / 1000.0);
}

static bool add_item(cJSON *o, const char *k, cJSON *v)
{
        if (!v)
                return false;
        if (!cJSON_AddItemToObject(o, k, v)) {
                cJSON_Delete(v);
                return false;
        }
        return true;
}

/* The grade of the node's drain as its alerts told it (docs/contracts.md §4): the worst raised, "fits" when
 * the drain was judged without either, null when no drain of it was heard of. */
static cJSON *node_verdict(const struct sim *s, const char *node)
{
        bool drained = false, at_risk = false;
        for (size_t i = 0; i < s->n_alerts; i++) {
                const struct sim_alert *a = &s->alerts[i];
                if (!a->node || !streq(a->node, node))
                        continue;
                if (streq(a->kind, "drain-infeasible"))
                        return cJSON_CreateString("infeasible");
                at_risk = at_risk || streq(a->kind, "drain-at-risk");
                drained = drained || streq(a->kind, "drain-completed") ||
                          streq(a->kind, "deadline-missed") || streq(a->kind, "pods-forced");
        }
        if (at_risk)
                return cJSON_CreateString("at-risk");
        return drained ? cJSON_CreateString("fits") : cJSON_CreateNull();
}

cJSON *sim_result(struct sim *s)
{
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "scenario", s->sc->name) ||
            !cJSON_AddStringToObject(o, "mode", s->mode) ||
            !cJSON_AddNumberToObject(o, "time_scale", s->time_scale))
                return NULL;
        cJSON *nodes = cJSON_AddArrayToObject(o, "nodes");
        if (!nodes)
                return NULL;
        for (size_t i = 0; i < s->n_nodes; i++) {
                const struct sim_node *n = s->nodes[i];
                if (!n->interrupted)
                        continue;
                cJSON *e = cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(nodes, e)) {
                        cJSON_Delete(e);
                        return NULL;
                }
                if (!cJSON_AddStringToObject(e, "name", n->name) ||
                    !add_item(e, "notice_at", time_or_null(n->notice_at)) ||
                    !add_item(e, "deadline_at", time_or_null(n->deadline_at)) ||
                    !add_item(e, "cordoned_at", time_or_null(n->cordoned_at)) ||
                    !add_item(e, "drained_at", time_or_null(n->drained_at)) ||
                    !cJSON_AddNumberToObject(e, "pods_evictable", n->pods_evictable) ||
                    !cJSON_AddNumberToObject(e, "pods_graceful", n->pods_graceful) ||
                    !cJSON_AddNumberToObject(e, "pods_forced", n->pods_forced) ||
                    !cJSON_AddNumberToObject(e, "pods_killed", n->pods_killed) ||
                    !add_item(e, "verdict", node_verdict(s, n->name)))
                        return NULL;
                /* A reboot: when it went down, was back, and first made schedulable after. */
                if (n->reboot && (!cJSON_AddStringToObject(e, "maintenance_code", n->maint_code) ||
                                  !add_item(e, "rebooted_at", time_or_null(n->rebooted_at)) ||
                                  !add_item(e, "ready_again_at", time_or_null(n->down ? -1 : n->back_at)) ||
                                  !add_item(e, "uncordoned_at", time_or_null(n->uncordoned_at))))
                        return NULL;
        }
        /* Deployments whose replicas a client changed and did not put back (absent when none). */
        cJSON *changed = NULL;
        for (size_t i = 0; i < s->n_wls; i++) {
                const struct sim_workload *w = &s->wls[i];
                if (w->sc->kind != SIM_WL_DEPLOYMENT || w->replicas == w->sc->replicas)
                        continue;
                _cleanup_free_ char *name = strprintf("%s/%s", w->sc->ns, w->sc->name);
                cJSON *e = cJSON_CreateObject();
                if (!changed && !(changed = cJSON_AddArrayToObject(o, "replicas_changed")))
                        return NULL;
                if (!e || !cJSON_AddItemToArray(changed, e)) {
                        cJSON_Delete(e);
                        return NULL;
                }
                if (!name || !cJSON_AddStringToObject(e, "workload", name) ||
                    !cJSON_AddNumberToObject(e, "replicas", w->replicas) ||
                    !cJSON_AddNumberToObject(e, "scenario_replicas", w->sc->replicas))
                        return NULL;
        }
        if (!cJSON_AddNumberToObject(o, "pdb_breaches", s->pdb_breaches))
                return NULL;
        cJSON *alerts = cJSON_AddArrayToObject(o, "alerts");
        if (!alerts)
                return NULL;
        for (size_t i = 0; i < s->n_alerts; i++) {
                const struct sim_alert *a = &s->alerts[i];
                cJSON *e = cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(alerts, e)) {
                        cJSON_Delete(e);
                        return NULL;
                }
                if (!cJSON_AddStringToObject(e, "kind", a->kind) ||
                    !add_item(e, "node", a->node ? cJSON_CreateString(a->node) : cJSON_CreateNull()) ||
                    !add_item(e, "at", time_or_null(a->at)) ||
                    !cJSON_AddStringToObject(e, "message", a->message) ||
                    (a->postmortem && !add_item(e, "postmortem", cJSON_Duplicate(a->postmortem, true))))
                        return NULL;
        }
        cJSON *repl = cJSON_AddArrayToObject(o, "replacements");
        if (!repl)
                return NULL;
        for (size_t i = 0; i < s->n_launches; i++) {
                const struct sim_launch *l = &s->launches[i];
                if (l->hooked)
                        continue; /* the group's own launch, in "launches" */
                cJSON *e = cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(repl, e)) {
                        cJSON_Delete(e);
                        return NULL;
                }
                if (!add_item(e, "requested_at", time_or_null(l->requested_at)) ||
                    !add_item(e, "ready_at", time_or_null(l->joined ? l->ready_at : -1)) ||
                    !cJSON_AddStringToObject(e, "instance_type", l->itype->name) ||
                    !cJSON_AddStringToObject(e, "zone", l->zone))
                        return NULL;
        }
        /* asg-launch: when each joined, turned Ready, and how its launch lifecycle action was completed. */
        cJSON *launches = NULL;
        for (size_t i = 0; i < s->n_launches; i++) {
                const struct sim_launch *l = &s->launches[i];
                if (!l->hooked)
                        continue;
                cJSON *e = cJSON_CreateObject();
                if (!launches && !(launches = cJSON_AddArrayToObject(o, "launches"))) {
                        cJSON_Delete(e);
                        return NULL;
                }
                if (!e || !cJSON_AddItemToArray(launches, e)) {
                        cJSON_Delete(e);
                        return NULL;
                }
                if (!cJSON_AddStringToObject(e, "node", l->name) ||
                    !cJSON_AddStringToObject(e, "instance_id", l->instance_id) ||
                    !add_item(e, "launched_at", time_or_null(l->requested_at)) ||
                    !add_item(e, "joined_at", time_or_null(l->joined ? l->ready_at : -1)) ||
                    !add_item(e, "ready_at", time_or_null(l->node_ready ? l->node_ready_at : -1)) ||
                    !add_item(e, "completed_at", time_or_null(l->completed_at)) ||
                    !add_item(e, "result",
                              l->result[0] ? cJSON_CreateString(l->result) : cJSON_CreateNull()) ||
                    !add_item(e, "completed_by",
                              !l->result[0] ? cJSON_CreateNull()
                                            : cJSON_CreateString(l->timed_out ? "timeout" : "client")))
                        return NULL;
        }
        if (!cJSON_AddNumberToObject(o, "api_requests", (double)s->api_requests))
                return NULL;
        return TAKE_PTR(o);
}
