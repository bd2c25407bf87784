/* spotdrain simulate's files for each other (cmd_simulate.c says how a run goes): cmd_simulate.c the verb,
 * setup and end; simulate_sources.c the controller, load balancers, provisioning and direct notices;
 * simulate_drains.c the drains and the dispatcher's effects; simulate_timeline.c the timeline. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "cli/report.h"
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

#define USEC_PER_SEC UINT64_C(1000000)
/* How often (engine clock, i.e. scenario time) the direct source looks at the model: well inside the 1 s in
 * which drain-infeasible must follow a notice. */
#define POLL_USEC (100 * UINT64_C(1000))
/* Real time allowed beyond the scenario's own length before the run is declared stuck. */
#define SLACK_REAL_USEC (30 * USEC_PER_SEC)

static inline void cjson_freep(cJSON **p)
{
        cJSON_Delete(*p);
}

struct sim_drain {
        struct simulate *sm;
        char *node;
        struct drain_exec *x; /* borrowed: the agent engine's or the node effects' (NULL once freed) */
        bool done;
        bool cordon_shown, plan_shown;
        unsigned left_shown; /* pods left at the last progress line; UINT_MAX before the first */
        unsigned evicted_shown, forced_shown;
        /* The two estimates of its first judgement, as its drain-completed or deadline-missed gave them:
         * forced and killed, each with every stop never seen at once [0] and at its whole grace [1]. */
        bool estimated;
        long forced_est[2], killed_est[2];
};

struct sim_node_seen {
        bool interruption;
        bool rebalance;
};

/* The IMDS delivery: an agent per scenario node, with a Kubernetes client (and rate limit) of its own as
 * the DaemonSet's pods have. */
struct sim_agent {
        struct simulate *sm;
        const char *node;
        struct imds_client *imds;
        struct kube_client *client;
        struct agent_engine *engine; /* the actions of spotdrain agent, on this agent's client */
        struct agent *agent;
};

struct simulate {
        struct cli_common common;
        const char *delivery_flag;
        const char *scenario_path;
        const char *metrics_listen; /* --metrics-listen: /metrics while the scenario runs */
        /* The engines' services: the client, the alert bus, with --metrics-listen the registry of every
         * engine of the run and /metrics, and provisioning. sm's loop and kubeconfig, borrowed. */
        struct service *svc;
        struct metrics *metrics; /* the service's */
        double scale;
        const char *mode;

        struct spotdrain_config *cfg;
        struct ynode *tree;
        struct sim *sim;
        struct sim_server *srv;
        struct kube_config *kcfg;
        struct loop *loop;
        struct kube_client *client; /* the service's */
        struct alert_bus *bus;      /* the service's */
        /* Direct delivery stands for one process draining every node: its drains share PDB slots. Agents
         * are one process per node, so each of their drains keeps a private ledger, following the drains
         * of the other nodes through the API. */
        struct drain_ledger *ledger;
        struct dispatch *dispatch;    /* direct delivery */
        struct node_effects *effects; /* direct delivery: the dispatcher's effects and the drains */
        struct timer *poll;
        struct sim_imds *imds;
        struct sim_agent *agents;
        struct sim_sqs *sqs;
        struct controller *controller;
        struct aws_credentials sqs_credentials;
        /* Provisioning (the scenario's provisioning: section): the simulator's EC2 surface, and the
         * provisioner of the agent and direct deliveries (the controller builds its own). */
        struct sim_ec2 *ec2;
        struct prov_frontend *prov; /* the service's */
        struct aws_credentials ec2_credentials;
        /* drain.target_groups: ELBv2 on the EC2 surface, signed with the simulator's key. */
        struct elbv2_client *elbv2;

        const char *delivery;
        uint64_t wall0;           /* engine instant of scenario time 0 */
        double last_event_at;     /* the scenario's last event; -1 when it has none */
        double model_progress_at; /* next look at the controller's drains in the model */
        struct sim_node_seen *seen;
        size_t n_nodes;
        struct sim_drain **drains;
        size_t n_drains;
        bool finished;
        int error;
        /* --report FILE: the timeline page, from what the engine's client and bus saw. */
        const char *report_path;
        struct report *report;
        struct report_rec *rec;
};

struct pending_notice {
        size_t node;
        struct notice n;
};

/* The controller's drains, as the simulator sees them: when the node was cordoned and how many of its
 * evictable pods are still there. Called with the model locked; prints nothing itself. */
struct model_progress {
        struct sim_drain *d;
        double cordoned_at; /* < 0: not shown now */
        unsigned left;
        bool changed;
};

/* simulate_timeline.c */
double simulate_scenario_seconds(const struct simulate *sm, uint64_t engine_usec);
/* One line of the timeline, printed as it happens (not with --json). */
void simulate_timeline(const struct simulate *sm, double at, const char *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void simulate_show_progress(struct simulate *sm, struct sim_drain *d);
int simulate_model_progress(struct simulate *sm, struct model_progress **ret, size_t *ret_n);
void simulate_show_model_progress(struct simulate *sm, const struct model_progress *mp, size_t n);

/* simulate_drains.c */
struct sim_drain *simulate_drain_free(struct sim_drain *d);
struct sim_drain *simulate_find_drain(const struct simulate *sm, const char *node);
/* The node's drain as followed here, added when new (out of memory: the run ends with an error, NULL). */
struct sim_drain *simulate_drain_get(struct simulate *sm, const char *node);
void simulate_notice_received(struct simulate *sm, const char *node, const struct notice *n);
int simulate_start_direct(struct simulate *sm);
int simulate_start_agents(struct simulate *sm);

/* simulate_sources.c */
void simulate_alert_to_result(const struct alert *a, void *userdata);
void simulate_follow_controller_drain(struct simulate *sm, const struct alert *a);
int simulate_start_controller(struct simulate *sm);
int simulate_start_elbv2(struct simulate *sm);
int simulate_start_provisioning(struct simulate *sm);
/* Reads the notices that appeared since the last look. Called with the model locked. */
int simulate_collect_notices(struct simulate *sm, struct pending_notice **ret, size_t *ret_n);
/* Each node's drain's two estimates beside what happened (docs/contracts.md, "The two estimates"): null
 * when its drain was never judged against a deadline. */
bool simulate_add_estimates(const struct simulate *sm, cJSON *result);
