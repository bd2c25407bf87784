/* spotdrain simulate: what else plays AWS for the engine: the controller on the SQS delivery, the load
 * balancers, provisioning, and the direct notice source. */
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

/* ---- alerts: the simulator's result and the timeline ---- */

/* The pair of estimates an ending drain's alert carries (drain_outlook_add_fields), kept for the result. */
static void keep_estimates(struct sim_drain *d, const struct alert *a)
{
        static const char *const keys[] = { "forced_at_once", "forced_whole_grace", "killed_at_once",
                                            "killed_whole_grace" };
        long v[4];
        size_t found = 0;

        if (!d)
                return;
        for (size_t k = 0; k < 4; k++)
                for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                        if (streq(f[0], keys[k])) {
                                char *end;
                                errno = 0;
                                v[k] = strtol(f[1], &end, 10);
                                found += errno == 0 && end != f[1] && *end == '\0' && v[k] >= 0;
                                break;
                        }
        if (found < 4)
                return;
        d->estimated = true;
        d->forced_est[0] = v[0];
        d->forced_est[1] = v[1];
        d->killed_est[0] = v[2];
        d->killed_est[1] = v[3];
}

/* Each node's drain's two estimates beside what happened (docs/contracts.md, "The two estimates"): null
 * when its drain was never judged against a deadline. */
bool simulate_add_estimates(const struct simulate *sm, cJSON *result)
{
        cJSON *node;
        cJSON_ArrayForEach (node, cJSON_GetObjectItem(result, "nodes")) {
                const struct sim_drain *d =
                    simulate_find_drain(sm, cJSON_GetStringValue(cJSON_GetObjectItem(node, "name")) ?: "");
                if (!d || !d->estimated) {
                        if (!cJSON_AddNullToObject(node, "estimates_at_start"))
                                return false;
                        continue;
                }
                cJSON *e = cJSON_AddObjectToObject(node, "estimates_at_start");
                for (size_t i = 0; e && i < 2; i++) {
                        cJSON *one =
                            cJSON_AddObjectToObject(e, i == 0 ? "stops_at_once" : "stops_at_whole_grace");
                        if (!one || !cJSON_AddNumberToObject(one, "forced", (double)d->forced_est[i]) ||
                            !cJSON_AddNumberToObject(one, "killed", (double)d->killed_est[i]))
                                return false;
                }
                if (!e)
                        return false;
        }
        return true;
}

void simulate_alert_to_result(const struct alert *a, void *userdata)
{
        struct simulate *sm = userdata;
        struct sim_drain *d = a->node ? simulate_find_drain(sm, a->node) : NULL;

        sim_lock(sm->sim);
        sim_record_alert(sm->sim, alert_kind_to_string(a->kind), a->node, a->message, a->postmortem);
        sim_unlock(sm->sim);
        if (sm->controller && a->node)
                simulate_follow_controller_drain(sm, a);
        if (a->kind == ALERT_DRAIN_COMPLETED || a->kind == ALERT_DEADLINE_MISSED)
                keep_estimates(a->node ? simulate_find_drain(sm, a->node) : NULL, a);
        /* A pod evicted as planned is in the drain's progress line; a post-mortem's lines stay in the
         * result. */
        if (a->kind == ALERT_POD_EVICTED && !a->postmortem)
                return;
        /* What the drain did before the alert (cordon, plan) goes first on the timeline. */
        if (d && d->x)
                simulate_show_progress(sm, d);
        const char *m = a->message ? a->message : "";
        simulate_timeline(sm, simulate_scenario_seconds(sm, a->at_usec), a->node, "[%s] %.*s%s",
                          alert_kind_to_string(a->kind), (int)strcspn(m, "\n"), m,
                          m[strcspn(m, "\n")] ? " (post-mortem in the result)" : "");
}

/* ---- the SQS delivery: the controller ---- */

/* The controller runs its drains itself: a drain is known from its notice (or its first alert) and ends with
 * drain-completed or deadline-missed. */
void simulate_follow_controller_drain(struct simulate *sm, const struct alert *a)
{
        struct sim_drain *d;

        if (a->kind == ALERT_REPLACEMENT_LAUNCHED || a->kind == ALERT_REPLACEMENT_FAILED ||
            a->kind == ALERT_LAUNCH_ABANDONED)
                return;
        /* A notice starts a drain, unless it is a recommendation or a launch. */
        if (a->kind == ALERT_NOTICE_RECEIVED) {
                const char *kind = NULL;
                for (const char *const *f = a->fields; f && f[0] && f[1]; f += 2)
                        if (streq(f[0], "kind"))
                                kind = f[1];
                if (!kind || streq(kind, notice_kind_to_string(NOTICE_REBALANCE_RECOMMENDATION)) ||
                    streq(kind, notice_kind_to_string(NOTICE_ASG_TEST_NOTIFICATION)) ||
                    streq(kind, notice_kind_to_string(NOTICE_ASG_LIFECYCLE_LAUNCH)))
                        return;
        }
        if (!(d = simulate_drain_get(sm, a->node)))
                return;
        if (a->kind == ALERT_DRAIN_COMPLETED || a->kind == ALERT_DEADLINE_MISSED)
                d->done = true;
}

static const struct aws_credentials *sqs_credentials(void *userdata)
{
        struct simulate *sm = userdata;
        return &sm->sqs_credentials;
}

int simulate_start_controller(struct simulate *sm)
{
        static char key_id[] = SIM_SQS_ACCESS_KEY_ID, secret[] = SIM_SQS_SECRET_ACCESS_KEY,
                    source[] = "simulator";
        const char *zone = sm->n_nodes > 0 ? sim_node_zone(sm->sim, 0) : NULL;
        char region[NOTICE_REGION_SIZE] = "us-east-1";
        int r;

        /* The region is the first node's zone without its letter. */
        if (zone && strlen(zone) > 1 && strlen(zone) < sizeof(region))
                snprintf(region, sizeof(region), "%.*s", (int)strlen(zone) - 1, zone);
        sm->sqs_credentials = (struct aws_credentials){ .access_key_id = key_id,
                                                        .secret_access_key = secret,
                                                        .source = source };
        r = sim_sqs_start(sm->sim, "127.0.0.1", &sm->sqs);
        if (r < 0)
                return log_error_errno(r, "cannot start the simulator's SQS surface");
        /* Launch hooks (asg-launch) are completed against the simulated Auto Scaling, which takes the
         * queue's key too. */
        sim_lock(sm->sim);
        bool launches = sim_has_launch_hook(sm->sim);
        sim_unlock(sm->sim);
        if (launches && !sm->ec2 && (r = sim_ec2_start(sm->sim, "127.0.0.1", &sm->ec2)) < 0)
                return log_error_errno(r, "cannot start the simulator's Auto Scaling surface");
        struct controller_options co = { .queue_url = sim_sqs_queue_url(sm->sqs),
                                         .region = region,
                                         .sqs_endpoint = sim_sqs_url(sm->sqs),
                                         .asg_endpoint = launches ? sim_ec2_url(sm->ec2) : NULL,
                                         .elbv2_endpoint = sm->elbv2 ? sim_ec2_url(sm->ec2) : NULL,
                                         .credentials = sqs_credentials,
                                         .credentials_userdata = sm,
                                         .cfg = sm->cfg,
                                         .metrics = sm->metrics,
                                         .no_leader_election = true };
        r = controller_new(sm->loop, sm->client, sm->bus, &co, &sm->controller);
        if (r >= 0)
                r = controller_start(sm->controller);
        if (r < 0)
                return log_error_errno(r, "cannot start the controller");
        return 0;
}

/* ---- load balancers: the simulator's ELBv2 ---- */

static const struct aws_credentials *ec2_credentials(void *userdata);

/* The target groups of the scenario's workloads are on the EC2 surface's listener; the drains ask it with
 * the simulator's key. */
int simulate_start_elbv2(struct simulate *sm)
{
        static char key_id[] = SIM_EC2_ACCESS_KEY_ID, secret[] = SIM_EC2_SECRET_ACCESS_KEY,
                    source[] = "simulator";
        int r;

        if (!sm->ec2 && (r = sim_ec2_start(sm->sim, "127.0.0.1", &sm->ec2)) < 0)
                return log_error_errno(r, "cannot start the simulator's ELBv2 surface");
        sm->ec2_credentials = (struct aws_credentials){ .access_key_id = key_id,
                                                        .secret_access_key = secret,
                                                        .source = source };
        const char *zone = sm->n_nodes > 0 ? sim_node_zone(sm->sim, 0) : "us-east-1a";
        _cleanup_free_ char *region = strndup(zone, strlen(zone) > 1 ? strlen(zone) - 1 : 0);
        if (!region)
                return log_error_errno(-ENOMEM, "cannot start the ELBv2 client");
        r = elbv2_client_new(sm->loop, sim_ec2_url(sm->ec2), region, ec2_credentials, sm, &sm->elbv2);
        if (r < 0)
                return log_error_errno(r, "cannot start the ELBv2 client");
        return 0;
}

/* ---- provisioning: the simulator's EC2 ---- */

static const struct aws_credentials *ec2_credentials(void *userdata)
{
        struct simulate *sm = userdata;
        return &sm->ec2_credentials;
}

/* Adds value to the list key (whose values are *listp) unless it is there already. */
static int config_list_add(struct simulate *sm, const char *key, char *const *listp, const char *value)
{
        char *const *list = listp;
        _cleanup_(buf_free) struct buf b = { 0 };
        _cleanup_free_ char *error = NULL;

        for (size_t i = 0; list && list[i]; i++) {
                if (streq(list[i], value))
                        return 0;
                if (buf_printf(&b, "%s,", list[i]) < 0)
                        return -ENOMEM;
        }
        if (buf_printf(&b, "%s", value) < 0)
                return -ENOMEM;
        return config_set_value(sm->cfg, key, b.data, &error);
}

/* The scenario's provisioning: section turns provisioning on, against the simulator's EC2: its subnets
 * (one per zone of the scenario's nodes), a launch template name, the families of the instance types on
 * offer, unless the configuration says otherwise. Requirements (provision.max_memory, ...) stay the
 * configuration's. */
int simulate_start_provisioning(struct simulate *sm)
{
        static char key_id[] = SIM_EC2_ACCESS_KEY_ID, secret[] = SIM_EC2_SECRET_ACCESS_KEY,
                    source[] = "simulator";
        bool subnets = sm->cfg->provision.subnets && sm->cfg->provision.subnets[0],
             families = sm->cfg->provision.families && sm->cfg->provision.families[0];
        _cleanup_free_ char *error = NULL;
        int r;

        r = sim_ec2_start(sm->sim, "127.0.0.1", &sm->ec2);
        if (r < 0)
                return log_error_errno(r, "cannot start the simulator's EC2 surface");
        r = config_set_value(sm->cfg, "provision.enabled", "true", &error);
        if (r >= 0)
                r = config_set_value(sm->cfg, "provision.endpoint", sim_ec2_url(sm->ec2), &error);
        if (r >= 0 && isempty(sm->cfg->provision.launch_template))
                r = config_set_value(sm->cfg, "provision.launch_template", "spotdrain-simulate", &error);
        for (size_t i = 0; r >= 0 && !subnets && i < sm->n_nodes; i++) {
                _cleanup_free_ char *spec = strprintf("%s%s=%s", SIM_EC2_SUBNET_PREFIX,
                                                      sim_node_zone(sm->sim, i), sim_node_zone(sm->sim, i));
                r = spec ? config_list_add(sm, "provision.subnets", sm->cfg->provision.subnets, spec)
                         : -ENOMEM;
        }
        YNODE_FOREACH (t, ynode_get(ynode_get(sm->tree, "provisioning"), "instance_types")) {
                const char *name = ynode_str(ynode_get(t, "name")), *dot = name ? strchr(name, '.') : NULL;
                _cleanup_free_ char *family = dot ? strndup(name, (size_t)(dot - name)) : NULL;
                if (r >= 0 && !families && dot)
                        r = family ? config_list_add(sm, "provision.families", sm->cfg->provision.families,
                                                     family)
                                   : -ENOMEM;
        }
        if (r >= 0 && isempty(sm->cfg->aws.region) && sm->n_nodes > 0) {
                const char *zone = sim_node_zone(sm->sim, 0);
                _cleanup_free_ char *region = strndup(zone, strlen(zone) > 1 ? strlen(zone) - 1 : 0);
                r = region ? config_set_value(sm->cfg, "aws.region", region, &error) : -ENOMEM;
        }
        if (r < 0)
                return log_error_reason(r, error, "cannot configure provisioning");
        sm->ec2_credentials = (struct aws_credentials){ .access_key_id = key_id,
                                                        .secret_access_key = secret,
                                                        .source = source };
        /* The controller builds its provisioner from the same configuration, with its own credentials. */
        if (streq(sm->delivery, "sqs"))
                return 0;
        struct prov_frontend_options po = { .credentials = ec2_credentials, .credentials_userdata = sm };
        r = service_start_provision(sm->svc, &po);
        sm->prov = service_provision(sm->svc);
        return r;
}

/* ---- the direct notice source ---- */

static void notice_fill(const struct simulate *sm, size_t i, enum notice_kind kind, double at,
                        double deadline_at, struct notice *n)
{
        const char *zone = sim_node_zone(sm->sim, i);

        *n = (struct notice){ .kind = kind,
                              .notice_time = sim_wall_usec(sm->sim, at),
                              .deadline = deadline_at >= 0 ? sim_wall_usec(sm->sim, deadline_at) : 0 };
        snprintf(n->instance_id, sizeof(n->instance_id), "%s", sim_node_instance_id(sm->sim, i));
        snprintf(n->source, sizeof(n->source), "%s", sm->delivery);
        if (kind == NOTICE_SPOT_INTERRUPTION)
                snprintf(n->action, sizeof(n->action), "terminate");
        /* The region is the zone without its letter. */
        if (zone && strlen(zone) > 1)
                snprintf(n->region, sizeof(n->region), "%.*s", (int)strlen(zone) - 1, zone);
        snprintf(n->event_id, sizeof(n->event_id), "sim-%s-%s-%.3f", notice_kind_to_string(kind),
                 sim_node_name(sm->sim, i), at);
}

/* Reads the notices that appeared since the last look. Called with the model locked. */
int simulate_collect_notices(struct simulate *sm, struct pending_notice **ret, size_t *ret_n)
{
        struct pending_notice *p = NULL;
        size_t n = 0;

        for (size_t i = 0; i < sm->n_nodes; i++) {
                const char *kind;
                double at, deadline_at, rebalance_at = sim_node_rebalance_at(sm->sim, i);
                bool interruption =
                    !sm->seen[i].interruption && sim_node_notice(sm->sim, i, &kind, &at, &deadline_at) >= 0;
                bool rebalance = !sm->seen[i].rebalance && rebalance_at >= 0;

                if (!interruption && !rebalance)
                        continue;
                struct pending_notice *a = realloc(p, (n + 2) * sizeof(*a));
                if (!a) {
                        free(p);
                        return -ENOMEM;
                }
                p = a;
                /* In time order: a rebalance recommendation comes before the interruption it warns of. */
                if (rebalance) {
                        sm->seen[i].rebalance = true;
                        p[n].node = i;
                        notice_fill(sm, i, NOTICE_REBALANCE_RECOMMENDATION, rebalance_at, -1, &p[n++].n);
                }
                if (interruption) {
                        int k = notice_kind_from_string(kind);
                        sm->seen[i].interruption = true;
                        p[n].node = i;
                        notice_fill(sm, i, k >= 0 ? (enum notice_kind)k : NOTICE_SPOT_INTERRUPTION, at,
                                    deadline_at, &p[n++].n);
                }
        }
        *ret = p;
        *ret_n = n;
        return 0;
}
