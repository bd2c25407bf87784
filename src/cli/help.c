#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/httpd.h"

/* Flags several commands share. */
#define F_CONFIG                                                                                     \
        {                                                                                            \
                "config", "FILE", NULL, "none: the defaults, then SPOTDRAIN_* variables",            \
                    "configuration file (YAML, spotdrain.yaml(5)); SPOTDRAIN_* variables and flags " \
                    "override it"                                                                    \
        }
#define F_KUBECONFIG                                                                                    \
        {                                                                                               \
                "kubeconfig", "FILE", "kubeconfig", NULL,                                               \
                    "kubeconfig to reach the API server (unset: $KUBECONFIG, ~/.kube/config, else the " \
                    "in-cluster "                                                                       \
                    "service account)"                                                                  \
        }
#define F_JSON                                                                       \
        {                                                                            \
                "json", NULL, NULL, "off: text", "machine-readable result on stdout" \
        }
#define F_LOG_LEVEL                                                                  \
        {                                                                            \
                "log-level", "LEVEL", "log.level", NULL,                             \
                    "most verbose level logged: debug, info, notice, warning, error" \
        }
#define F_LOG_FORMAT                                                                   \
        {                                                                              \
                "log-format", "FORMAT", "log.format", NULL,                            \
                    "auto (journal under systemd, else text), text or json, on stderr" \
        }
#define F_METRICS                                                                                  \
        {                                                                                          \
                "metrics-listen", "HOST:PORT", "metrics_listen", NULL,                             \
                    "serve /metrics, /healthz and /readyz there (port 0 picks one; \"off\": none)" \
        }
#define F_BUDGET                                                                                \
        {                                                                                       \
                "budget", "S", "drain.budget_seconds", NULL, "seconds from now to the deadline" \
        }
/* What drain, plan and audit take besides their own. */
#define F_ONESHOT F_JSON, F_KUBECONFIG, F_CONFIG, F_LOG_LEVEL, F_LOG_FORMAT
/* agent and controller: shadow mode (docs/operations.md) */
#define F_SHADOW                                                                                     \
        {                                                                                            \
                "dry-run", NULL, NULL, "off",                                                        \
                    "shadow mode: hear, plan, alert and count, write nothing to the cluster or AWS " \
                    "(\"would ...\" "                                                                \
                    "in the log, spotdrain_dry_run_actions_total)"                                   \
        }
#define F_END                                \
        {                                    \
                NULL, NULL, NULL, NULL, NULL \
        }

static const struct cli_flag agent_flags[] = {
        { "node-name", "NODE", "node_name", NULL,
          "this node (unset: $NODE_NAME, else IMDS local-hostname)" },
        F_KUBECONFIG,
        F_CONFIG,
        F_METRICS,
        { "imds-endpoint", "URL", "imds.endpoint", NULL, "the instance metadata service" },
        { "poll-interval", "S", "imds.poll_interval_seconds", NULL, "how often IMDS is asked for a notice" },
        { "imds-token-ttl", "S", "imds.token_ttl_seconds", NULL, "lifetime asked for an IMDSv2 token" },
        { "imds-v1-fallback", NULL, "imds.allow_v1", NULL,
          "fall back to IMDSv1 when the token request fails" },
        { "rebalance-revert", "S", "notices.rebalance_revert_seconds", NULL,
          "remove the rebalance soft taint when no interruption follows within this time" },
        { "maintenance-lead", "S", "notices.maintenance_lead_seconds", NULL,
          "drain this long before a scheduled maintenance starts" },
        { "asg-deadline", "S", "agent.asg_deadline_seconds", NULL,
          "deadline of an Auto Scaling termination after its notice" },
        F_SHADOW,
        F_LOG_LEVEL,
        F_LOG_FORMAT,
        F_END,
};

static const struct cli_flag controller_flags[] = {
        { "queue-url", "URL", "aws.queue_url", NULL,
          "the SQS queue EventBridge and Auto Scaling deliver to" },
        { "region", "R", "aws.region", NULL, "AWS region" },
        F_KUBECONFIG,
        F_CONFIG,
        F_METRICS,
        { "lease-namespace", "NS", NULL, "$POD_NAMESPACE", "namespace of the Lease spotdrain-controller" },
        { "identity", "ID", NULL, "$POD_NAME, else HOSTNAME_PID", "this controller's name in the Lease" },
        { "no-leader-election", NULL, NULL, "off: only the Lease holder receives",
          "receive without holding the Lease (one replica only)" },
        { "sqs-endpoint", "URL", NULL, "$AWS_ENDPOINT_URL_SQS, $AWS_ENDPOINT_URL, else AWS's",
          "the SQS endpoint" },
        { "asg-endpoint", "URL", NULL, "$AWS_ENDPOINT_URL_AUTO_SCALING, $AWS_ENDPOINT_URL, else AWS's",
          "the Auto Scaling endpoint (lifecycle actions)" },
        F_SHADOW,
        F_LOG_LEVEL,
        F_LOG_FORMAT,
        F_END,
};

static const struct cli_flag admission_flags[] = {
        F_KUBECONFIG,
        F_CONFIG,
        F_METRICS,
        { "dry-run", NULL, NULL, "off",
          "write no alert Events (\"would ...\" in the log); the webhook's answers still allow and deny" },
        F_LOG_LEVEL,
        F_LOG_FORMAT,
        F_END,
};

static const struct cli_flag drain_flags[] = {
        { "budget", "S", NULL, "the node's notice's deadline, else none",
          "seconds from now to the deadline" },
        { "deadline", "RFC3339", NULL, "the node's notice's, else none",
          "the instance is gone then (excludes --budget)" },
        { "policy", "force|respect", NULL, "respect (drain.policy for a node with a notice)",
          "force: delete a pod around its PDB at its last safe moment; respect: never go around a PDB" },
        { "report", "FILE.html", NULL, "none",
          "write the drain's timeline page there (self-contained HTML: pods, PDBs, alerts, deadline)" },
        { "dry-run", NULL, NULL, "off", "print the plan and change nothing (exit 0)" },
        F_ONESHOT,
        F_END,
};

static const struct cli_flag plan_flags[] = {
        F_BUDGET,
        F_ONESHOT,
        F_END,
};

static const struct cli_flag audit_flags[] = {
        F_BUDGET,
        { "all-nodes", NULL, NULL, "off: spot nodes (and those of unknown capacity type)",
          "judge on-demand nodes too (for scheduled events)" },
        F_ONESHOT,
        F_END,
};

static const struct cli_flag event_flags[] = {
        F_JSON,
        { "imds", "PATH", NULL, "none: the form is detected",
          "the body is the IMDS document at PATH (spot/instance-action, spot/termination-time, "
          "events/recommendations/rebalance, events/maintenance/scheduled, events/maintenance/history, "
          "autoscaling/target-lifecycle-state)" },
        { "instance-id", "ID", NULL, "none: absent from the notice", "instance of an IMDS document" },
        { "region", "R", NULL, "none", "region when the body names none" },
        { "source", "S", NULL, "sqs or imds, by form", "source recorded in the notice" },
        { "now", "RFC3339", NULL, "now", "notice time of IMDS documents that carry none" },
        { "asg-deadline", "S", NULL, "3600",
          "Auto Scaling terminate deadline after the notice (1..172800)" },
        { "config", "FILE", NULL, "none", "accepted and ignored" },
        { "kubeconfig", "FILE", NULL, "none", "accepted and ignored" },
        { "log-level", "LEVEL", NULL, "none", "accepted and ignored" },
        { "log-format", "FORMAT", NULL, "none", "accepted and ignored" },
        { "dry-run", NULL, NULL, "off", "accepted and ignored (parsing changes nothing)" },
        F_END,
};

static const struct cli_flag simulate_flags[] = {
        { "time-scale", "N", NULL, "1",
          "run N times faster than real time, 0 < N <= 1000 (times reported stay in scenario seconds)" },
        { "mode", "agent|controller", NULL, "the scenario's mode", "agent (IMDS) or controller (SQS)" },
        { "delivery", "imds|sqs|direct", NULL, "imds in agent mode, sqs in controller mode",
          "how notices reach the engine: a real agent per node, the real controller, or none" },
        { "metrics-listen", "HOST:PORT", NULL, "none", "serve /metrics, /healthz and /readyz there" },
        { "report", "FILE.html", NULL, "none",
          "write the timeline page there (self-contained HTML: per node its pods, PDBs, alerts, deadline)" },
        F_JSON,
        F_CONFIG,
        F_LOG_LEVEL,
        F_LOG_FORMAT,
        F_END,
};

static const struct cli_flag sim_flags[] = {
        { "listen", "HOST:PORT", NULL, "127.0.0.1:0", "where the simulator listens (port 0 picks one)" },
        { "kubeconfig-out", "FILE", NULL, "none", "write a kubeconfig that reaches it (mode 0600)" },
        { "endpoints-out", "FILE", NULL, "none",
          "write its URLs as JSON: kubernetes, imds, imds_by_node, sqs, queue_url, ec2, autoscaling, sts" },
        { "time-scale", "N", NULL, "1", "run N times faster than real time (N > 0)" },
        { "mode", "agent|controller", NULL, "the scenario's mode",
          "how the interrupted node's notice is delivered" },
        { "seed", "N", NULL, "the scenario's seed", "seed of any randomness (faults)" },
        { "apf-qps", "N", NULL, "the scenario's api_priority_fairness.qps",
          "the API server's priority and fairness: N requests a second per client, beyond which it answers "
          "429 "
          "with Retry-After (0 .. 1000000; 0 turns it off)" },
        { "apf-burst", "N", NULL, "the scenario's api_priority_fairness.burst",
          "the burst priority and fairness allows a client above its rate (0 .. 1000000)" },
        F_LOG_LEVEL,
        F_LOG_FORMAT,
        F_END,
};

static const struct cli_flag catalog_flags[] = {
        { "catalog", "FILE", NULL, "$SPOTDRAIN_CATALOG, the installed file, else data/instance-types.json",
          "show: the catalog to read" },
        { "json", NULL, NULL, "off: a table", "show: the catalog as JSON" },
        { "output", "FILE", NULL, "data/instance-types.json", "refresh: where to write (- for stdout)" },
        { "families", "LIST", NULL, "m5,m6i,m7i,c5,c6i,c7i,r5,r6i,t3",
          "refresh: comma-separated instance families, \"all\" for every type" },
        { "region", "R", NULL, "$AWS_REGION", "refresh: the region asked" },
        { "endpoint-url", "URL", NULL, "$AWS_ENDPOINT_URL_EC2, $AWS_ENDPOINT_URL, else AWS's",
          "refresh: the EC2 endpoint" },
        F_END,
};

static const struct cli_flag check_config_flags[] = {
        F_CONFIG,
        { "set", "KEY=VALUE", NULL, "none", "set one key, after the file and the environment (repeatable)" },
        F_END,
};

static const struct cli_flag no_flags[] = { F_END };

#define EXAMPLES(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* plan's glossary (issue 32): the words of its output and of the drain's alerts. */
static const char *const plan_words[] = {
        "last safe moment",
        "the latest a pod's graceful stop may start and still end before the deadline less "
        "drain.safety_margin_seconds; the START BY column. A pod evicted before it (EVICT AT) may be GONE "
        "AT "
        "a "
        "later time: its stop started in time and ends by the deadline.",
        "forced",
        "deleted around its PDB at its last safe moment (drain.policy force), so that its graceful stop "
        "still "
        "ends in time; FORCED counts them. Its containers get their whole grace period.",
        "killed",
        "gone without a graceful stop: still running when its node went (the instance terminated, the Node "
        "deleted or unreachable) or stopped at the end of its grace period; KILLED counts them, and a drain "
        "with one exits 3.",
        "pods never seen stopping",
        "pods of an owner whose stops spotdrain has not observed yet: how long they take after SIGTERM is a "
        "guess between at once and their whole terminationGracePeriodSeconds.",
        "ESTIMATE",
        "the two estimates every surface prints, in this order: the pods never seen stopping stop at once / "
        "take their whole grace. Times are seconds from now; 'unforced' is when the last pod would be gone "
        "if "
        "none were forced.",
        "GRADE",
        "the graded verdict: fits (fits even at their whole grace), at-risk (fits only if the pods never "
        "seen "
        "stopping stop within the time it names), infeasible (does not fit without forcing or killing even "
        "if "
        "they stopped at once). The alert drain-infeasible says 'cannot finish in time without forcing' "
        "when "
        "forcing makes it fit, and 'cannot finish in time' when pods would be killed.",
        "VERDICT",
        "of the plan in the table: FEASIBLE, INFEASIBLE_FORCED (in time only by forcing), INFEASIBLE_KILLED "
        "(some pod cannot end its graceful stop before the deadline).",
        "TIER",
        "the order pods go in: tier 0 first, higher tiers (system-node-critical, then DaemonSet pods) "
        "after.",
        "WAVES",
        "how many rounds of evictions a PDB needs for its pods on the node: pods / disruptions allowed at "
        "once.",
        "RETURN",
        "seconds until an evicted pod's replacement is Ready and its PDB allows the next wave.",
        "FINISH, UNFORCED",
        "when the last pod of a PDB is gone with forcing, and without forcing (through the PDB alone).",
        "LEFT",
        "seconds from now to the deadline less the margin, the time the drain has.",
        NULL
};

const struct cli_help cli_helps[] = {
        { "agent", "agent [OPTIONS]",
          "DaemonSet mode: poll this instance's IMDS for notices and drain this node",
          "Polls this instance's metadata service (IMDSv2) for spot interruptions, rebalance "
          "recommendations, "
          "scheduled maintenance and Auto Scaling termination, and drains this node. Runs until SIGTERM.",
          agent_flags,
          EXAMPLES("spotdrain agent --node-name \"$NODE_NAME\" --metrics-listen 0.0.0.0:9464",
                   "spotdrain agent --imds-endpoint http://127.0.0.1:1338 --config "
                   "/etc/spotdrain/spotdrain.yaml"),
          "runs until SIGTERM: 0 after a clean stop, 1 error, 2 usage", NULL },
        { "controller", "controller --queue-url URL [OPTIONS]",
          "queue mode: long-poll SQS for EventBridge/ASG notices, drain any node",
          "Long-polls the SQS queue that EventBridge (spot interruptions, rebalance recommendations, state "
          "changes, AWS Health) and Auto Scaling lifecycle hooks deliver to, and drains the nodes they "
          "name. "
          "Only the holder of the Lease spotdrain-controller receives; /readyz fails while the queue is "
          "unreadable. Runs until SIGTERM.",
          controller_flags,
          EXAMPLES("spotdrain controller --queue-url https://sqs.us-east-1.amazonaws.com/123456789012/spot "
                   "--region us-east-1"),
          "runs until SIGTERM: 0 after a clean stop, 1 error, 2 usage", NULL },
        { "admission", "admission [OPTIONS]",
          "the eviction webhook alone: an agent may evict only its own node's pods",
          "Serves the validating admission webhook of controller.admission_listen (TLS, POST "
          "/validate-eviction) from a pod informer, without a queue, a Lease or drains: where only agents "
          "run, an agent's pods/eviction is allowed only for pods bound to the node its token names. "
          "/readyz fails until the pod list is complete. Runs until SIGTERM.",
          admission_flags, EXAMPLES("spotdrain admission --config /etc/spotdrain/spotdrain.yaml"),
          "runs until SIGTERM: 0 after a clean stop, 1 error, 2 usage", NULL },
        { "drain", "drain NODE [--budget S | --deadline RFC3339] [OPTIONS]",
          "deadline-aware drain of a node",
          "Cordons and taints NODE and evicts its pods under the deadline and every PodDisruptionBudget, "
          "deleting at its last safe moment a pod a PDB still holds only with --policy force: a "
          "deadline-aware kubectl drain. Without --budget or --deadline a node whose drain record names a "
          "notice is drained by that notice's deadline and drain.policy, as the agent would; any other as "
          "kubectl drain, without a deadline and around no PDB. It says its plan in one line first.",
          drain_flags,
          EXAMPLES(
              "spotdrain drain ip-10-0-1-23.ec2.internal --budget 120",
              "spotdrain drain spot-a --deadline 2026-11-30T06:02:00Z --policy respect --report drain.html",
              "spotdrain drain spot-a --dry-run --json"),
          "0 drained in time, 3 deadline missed or a pod killed, 1 error, 2 usage", NULL },
        { "plan", "plan NODE [--budget S] [OPTIONS]", "predict the drain of a node, change nothing",
          "Prints the plan of NODE's drain per PDB (waves, predicted finish, each pod's last safe moment) "
          "and "
          "its verdict, and which PDB value would fit.",
          plan_flags, EXAMPLES("spotdrain plan spot-a --budget 120", "spotdrain plan spot-a --json"),
          "0 fits or at risk, 4 infeasible, 1 error, 2 usage", plan_words },
        { "audit", "audit [--budget S] [OPTIONS]", "PDBs whose pods on one node could not drain in time",
          "Every PDB or workload whose pods on one node could not be drained within the budget, with the "
          "value "
          "that would fit; each finding with its node's capacity type and zone, the furthest over the "
          "budget "
          "first. With drain.target_groups (default true), also every ELBv2 target group (a "
          "TargetGroupBinding's) of pods on those nodes, with its deregistration delay (asked of ELBv2 with "
          "the SDKs' credentials and endpoint rules): one longer than the budget less drain.safety_margin "
          "is a finding, with the delay that would fit.",
          audit_flags, EXAMPLES("spotdrain audit", "spotdrain audit --budget 90 --all-nodes --json"),
          "0 no findings, 4 findings, 1 error, 2 usage", NULL },
        { "event parse", "event parse [FILE|-] [OPTIONS]",
          "normalize one SQS/EventBridge/SNS/IMDS notice body",
          "Normalizes one SQS message body, EventBridge event, SNS envelope or IMDS document (FILE, or "
          "stdin) "
          "into notices: a one-line summary each, or one JSON object per line with --json.",
          event_flags,
          EXAMPLES("spotdrain event parse --json message.json",
                   "curl -s http://169.254.169.254/latest/meta-data/spot/instance-action | spotdrain event "
                   "parse --imds spot/instance-action -"),
          "0 recognized (also when it carries nothing to act on), 65 malformed or unrecognized (stderr says "
          "why), 1 I/O error, 2 usage",
          NULL },
        { "simulate", "simulate SCENARIO [OPTIONS]", "replay a scenario, the real engine acting on it",
          "Runs the scenario on the built-in simulator with the real drain engine; prints a timeline (or "
          "the "
          "simulation result as JSON). Times are scenario seconds.",
          simulate_flags,
          EXAMPLES("spotdrain simulate examples/seed-504.yaml",
                   "spotdrain simulate examples/seed-504.yaml --time-scale 20 --report r.html",
                   "spotdrain simulate examples/drain-8.yaml --mode controller --json"),
          "0 every interrupted node drained in time, 3 otherwise, 1 error, 2 usage", NULL },
        { "sim serve", "sim serve SCENARIO [OPTIONS]",
          "serve the simulator to kubectl, the aws CLI or another spotdrain",
          "Serves the simulator (Kubernetes API, IMDS per node, SQS, STS, EC2 and Auto Scaling) until "
          "SIGTERM.",
          sim_flags,
          EXAMPLES("spotdrain sim serve examples/drain-8.yaml --listen 127.0.0.1:0 --kubeconfig-out "
                   "/tmp/sim.kubeconfig --endpoints-out /tmp/sim.endpoints"),
          "runs until SIGTERM: 0 after a clean stop, 1 error, 2 usage", NULL },
        { "catalog", "catalog show|refresh [OPTIONS]", "the instance types replacements are chosen from",
          "show prints the catalog (vCPUs, memory, max pods by the EKS ENI formula, architecture); refresh "
          "rebuilds it from EC2 DescribeInstanceTypes.",
          catalog_flags,
          EXAMPLES("spotdrain catalog show --json",
                   "spotdrain catalog refresh --families m6i,c6i --output -"),
          "0 done, 1 error, 2 usage", NULL },
        { "check-config", "check-config [--config FILE] [--set KEY=VALUE ...]",
          "validate the configuration, print it",
          "Validates the configuration (file, SPOTDRAIN_* environment, --set) without running anything, and "
          "prints the effective values, secrets hidden. The keys are in spotdrain.yaml(5).",
          check_config_flags,
          EXAMPLES("spotdrain check-config --config /etc/spotdrain/spotdrain.yaml",
                   "spotdrain check-config --set drain.safety_margin_seconds=10"),
          "0 valid, 1 invalid, 2 usage", NULL },
        { "version", "version", "print the version", "Prints the version.", no_flags,
          EXAMPLES("spotdrain version"), "0", NULL },
};

const size_t cli_n_helps = ARRAY_SIZE(cli_helps);

const struct cli_help *cli_help_find(const char *command)
{
        size_t len = command ? strlen(command) : 0;
        for (size_t i = 0; len && i < cli_n_helps; i++)
                if (streq(cli_helps[i].name, command) ||
                    (strncmp(cli_helps[i].name, command, len) == 0 && cli_helps[i].name[len] == ' '))
                        return &cli_helps[i];
        return NULL;
}

const char *cli_flag_default(const struct cli_flag *f)
{
        static char buf[256];
        if (!f->key)
                return f->def ?: "none";
        const struct config_item *it = config_find(f->key);
        snprintf(buf, sizeof(buf), "%s (%s)", it && it->def ? it->def : "unset", f->key);
        return buf;
}

/* Words of text wrapped at width, from column col, each line after the first indented by indent. */
static void wrap(FILE *f, const char *text, size_t col, size_t indent, size_t width)
{
        bool first = true;
        for (const char *s = text; *s;) {
                size_t len = strcspn(s, " ");
                if (!first && col + 1 + len > width) {
                        fprintf(f, "\n%*s", (int)indent, "");
                        col = indent;
                } else if (!first) {
                        fputc(' ', f);
                        col++;
                }
                fprintf(f, "%.*s", (int)len, s);
                col += len;
                first = false;
                s += len;
                while (*s == ' ')
                        s++;
        }
        fputc('\n', f);
}

int cli_help(FILE *f, const char *command)
{
        const struct cli_help *h = cli_help_find(command);
        if (!h) {
                fprintf(stderr, "spotdrain help: no command '%s' (spotdrain --help lists them)\n",
                        command ? command : "");
                return EXIT_USAGE;
        }
        fprintf(f, "usage: spotdrain %s\n\n", h->synopsis);
        wrap(f, h->description, 0, 0, 100);
        if (h->flags[0].name)
                fprintf(f, "\noptions:\n");
        for (const struct cli_flag *fl = h->flags; fl->name; fl++) {
                char head[64];
                snprintf(head, sizeof(head), "  --%s%s%s", fl->name, fl->arg ? " " : "", fl->arg ?: "");
                fprintf(f, "%-28s", head);
                if (strlen(head) >= 28)
                        fprintf(f, "\n%28s", "");
                wrap(f, fl->text, 28, 28, 100);
                fprintf(f, "%28sdefault: %s\n", "", cli_flag_default(fl));
        }
        if (h->words) {
                fprintf(f, "\nwords:\n");
                for (const char *const *w = h->words; w[0] && w[1]; w += 2) {
                        fprintf(f, "  %s\n%6s", w[0], "");
                        wrap(f, w[1], 6, 6, 100);
                }
        }
        fprintf(f, "\nexamples:\n");
        for (const char *const *e = h->examples; *e; e++)
                fprintf(f, "  %s\n", *e);
        fprintf(f, "\nexit status: %s\nsee also: spotdrain help, man spotdrain, man spotdrain.yaml\n",
                h->exit_status);
        return EXIT_OK;
}

/* ---- roff ---- */

/* Text for roff: backslashes doubled as \e, dashes as \-, a leading dot or quote made harmless. */
static void roff(FILE *f, const char *s)
{
        if (*s == '.' || *s == '\'')
                fputs("\\&", f);
        for (; *s; s++) {
                if (*s == '\\')
                        fputs("\\e", f);
                else if (*s == '-')
                        fputs("\\-", f);
                else if (*s == '\n') {
                        fputc('\n', f);
                        if (s[1] == '.' || s[1] == '\'')
                                fputs("\\&", f);
                } else
                        fputc(*s, f);
        }
}

static void roff_flag(FILE *f, const struct cli_flag *fl)
{
        fprintf(f, ".TP\n\\fB\\-\\-");
        roff(f, fl->name);
        fprintf(f, "\\fR");
        if (fl->arg) {
                fprintf(f, " \\fI");
                roff(f, fl->arg);
                fprintf(f, "\\fR");
        }
        fprintf(f, "\n");
        roff(f, fl->text);
        fprintf(f, ".\nDefault: ");
        roff(f, cli_flag_default(fl));
        fprintf(f, ".\n");
}

int cli_help_man1(FILE *f)
{
        fprintf(f, ".TH SPOTDRAIN 1 \"\" \"spotdrain " SPOTDRAIN_VERSION "\" \"User Commands\"\n"
                   ".SH NAME\nspotdrain \\- spot\\-interruption handler and deadline\\-aware drain for "
                   "Kubernetes on AWS\n.SH SYNOPSIS\n");
        for (size_t i = 0; i < cli_n_helps; i++) {
                fprintf(f, ".B spotdrain\n");
                roff(f, cli_helps[i].synopsis);
                fprintf(f, "\n.br\n");
        }
        fprintf(f,
                ".SH DESCRIPTION\nWhen EC2 reclaims a spot instance it gives two minutes' notice. "
                "spotdrain hears that notice (IMDS on the node, or EventBridge through SQS for the whole "
                "cluster), cordons and taints the node, and evicts its pods under a budget computed from "
                "the deadline and every PodDisruptionBudget.\n"
                ".PP\nEvery command takes \\fB\\-\\-help\\fR; \\fBspotdrain help\\fR \\fICOMMAND\\fR prints "
                "the same. Long options may be abbreviated to any unambiguous prefix.\n.SH COMMANDS\n");
        for (size_t i = 0; i < cli_n_helps; i++) {
                const struct cli_help *h = &cli_helps[i];
                fprintf(f, ".SS ");
                roff(f, h->name);
                fprintf(f, "\n.B spotdrain\n");
                roff(f, h->synopsis);
                fprintf(f, "\n.PP\n");
                roff(f, h->description);
                fprintf(f, "\n");
                for (const struct cli_flag *fl = h->flags; fl->name; fl++)
                        roff_flag(f, fl);
                if (h->words) {
                        fprintf(f, ".PP\nWords:\n");
                        for (const char *const *w = h->words; w[0] && w[1]; w += 2) {
                                fprintf(f, ".TP\n\\fB");
                                roff(f, w[0]);
                                fprintf(f, "\\fR\n");
                                roff(f, w[1]);
                                fprintf(f, "\n");
                        }
                }
                fprintf(f, ".PP\nExamples:\n");
                for (const char *const *e = h->examples; *e; e++) {
                        fprintf(f, ".PP\n.RS 4\n.nf\n");
                        roff(f, *e);
                        fprintf(f, "\n.fi\n.RE\n");
                }
                fprintf(f, ".PP\nExit status: ");
                roff(f, h->exit_status);
                fprintf(f, ".\n");
        }
        fprintf(f,
                ".SH ENVIRONMENT\n.TP\n.B SPOTDRAIN_*\nconfiguration keys (spotdrain.yaml(5)): the key "
                "upper\\-cased, dots as underscores, e.g. SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS\n"
                ".TP\n.B KUBECONFIG\nthe kubeconfig when neither \\-\\-kubeconfig nor the kubeconfig key "
                "names one\n.TP\n.B NODE_NAME\nthe agent's node\n.TP\n.B AWS_REGION\\fR, "
                "\\fBAWS_ENDPOINT_URL\\fR, \\fBAWS_ENDPOINT_URL_SQS\\fR, \\fBAWS_ENDPOINT_URL_EC2\\fR, "
                "\\fBAWS_ENDPOINT_URL_STS\\fR, \\fBAWS_EC2_METADATA_SERVICE_ENDPOINT\nAWS endpoints, as the "
                "AWS SDKs read them\n.TP\n.B HTTPS_PROXY\\fR, \\fBNO_PROXY\nproxies of outbound HTTPS\n"
                ".SH FILES\n.TP\n.I /etc/spotdrain/spotdrain.yaml\nthe example configuration the systemd "
                "units read\n.SH SEE ALSO\n.BR spotdrain.yaml (5),\n.BR kubectl (1)\n");
        return ferror(f) ? -EIO : 0;
}

static const char *type_name(enum config_type t)
{
        switch (t) {
        case CONFIG_STRING:
                return "string";
        case CONFIG_INT:
                return "integer";
        case CONFIG_DOUBLE:
                return "number";
        case CONFIG_BOOL:
                return "boolean";
        case CONFIG_DURATION:
                return "duration";
        case CONFIG_ENUM:
                return "one of";
        case CONFIG_STRV:
                return "list";
        }
        return "value";
}

int cli_help_man5(FILE *f)
{
        fprintf(
            f, ".TH SPOTDRAIN.YAML 5 \"\" \"spotdrain " SPOTDRAIN_VERSION "\" \"File Formats\"\n"
               ".SH NAME\nspotdrain.yaml \\- configuration of spotdrain\n.SH DESCRIPTION\nA YAML "
               "mapping; nested maps are dotted keys (\\fBdrain:\\fR then \\fBsafety_margin_seconds: 10\\fR "
               "is \\fBdrain.safety_margin_seconds\\fR). Values come from the defaults below, then the "
               "file given with \\fB\\-\\-config\\fR, then SPOTDRAIN_* environment variables (the key "
               "upper\\-cased, dots as underscores), then \\fB\\-\\-set\\fR \\fIKEY=VALUE\\fR and the "
               "commands' flags. An unknown key is an error naming the file and line. A duration is a "
               "number in the key's unit or a number with a unit (500ms, 2m). \\fBspotdrain "
               "check\\-config\\fR validates a file and prints the effective values.\n.SH KEYS\n");
        for (size_t i = 0; i < config_n_sections; i++) {
                const struct config_section *sec = config_sections[i].section;
                fprintf(f, ".SS ");
                roff(f, sec->name);
                fprintf(f, "\n");
                for (size_t j = 0; j < sec->n_items; j++) {
                        const struct config_item *it = &sec->items[j];
                        fprintf(f, ".TP\n\\fB");
                        roff(f, it->key);
                        fprintf(f, "\\fR (");
                        roff(f, type_name(it->type));
                        for (const struct config_enum_value *e = it->enum_values;
                             it->type == CONFIG_ENUM && e && e->name; e++) {
                                fprintf(f, "%s", e == it->enum_values ? " " : ", ");
                                roff(f, e->name);
                        }
                        if (it->type == CONFIG_DURATION)
                                fprintf(f, ", in %s",
                                        it->unit_usec == CONFIG_MILLISECONDS ? "ms" : "seconds");
                        if (it->min <= it->max)
                                fprintf(f, ", %g to %g", it->min, it->max);
                        fprintf(f, "; default: ");
                        roff(f, it->def ? it->def : it->type == CONFIG_STRV ? "empty" : "unset");
                        fprintf(f, "%s)\n", it->secret ? "; secret: check\\-config hides it" : "");
                        roff(f, it->description);
                        fprintf(f, ".\n");
                }
        }
        fprintf(f, ".SH FILES\n.TP\n.I /etc/spotdrain/spotdrain.yaml\nthe example configuration\n"
                   ".SH SEE ALSO\n.BR spotdrain (1)\n");
        return ferror(f) ? -EIO : 0;
}

/* The words a command takes right after its name: "parse" of "event parse [FILE|-]", "show refresh" of
 * "catalog show|refresh"; "" when its synopsis goes on with an operand or an option. */
static void put_subcommands(FILE *f, const struct cli_help *h)
{
        const char *s = h->synopsis + strcspn(h->synopsis, " ");
        s += strspn(s, " ");
        size_t len = strcspn(s, " ");
        if (len == 0 || strspn(s, "abcdefghijklmnopqrstuvwxyz|") != len)
                return;
        for (size_t k = 0; k < len; k++)
                fputc(s[k] == '|' ? ' ' : s[k], f);
}

int cli_help_bash_completion(FILE *f)
{
        fprintf(
            f,
            "# bash completion of spotdrain, written by `spotdrain help --completion bash` from the table\n"
            "# its --help is printed from.\n"
            "_spotdrain() {\n"
            "\tlocal cur=${COMP_WORDS[COMP_CWORD]} cmd=${COMP_WORDS[1]:-} words= sub=\n"
            "\tcase $cmd in\n");
        for (size_t i = 0; i < cli_n_helps; i++) {
                const struct cli_help *h = &cli_helps[i];
                fprintf(f, "\t%.*s) sub=\"", (int)strcspn(h->name, " "), h->name);
                put_subcommands(f, h);
                fprintf(f, "\" words=\"--help");
                for (const struct cli_flag *fl = h->flags; fl->name; fl++)
                        fprintf(f, " --%s", fl->name);
                fprintf(f, "\" ;;\n");
        }
        fprintf(f, "\thelp) sub=\"");
        for (size_t i = 0; i < cli_n_helps; i++)
                fprintf(f, "%s%.*s", i ? " " : "", (int)strcspn(cli_helps[i].name, " "), cli_helps[i].name);
        fprintf(f, "\" ;;\n\tesac\n\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\twords=\"help");
        for (size_t i = 0; i < cli_n_helps; i++)
                fprintf(f, " %.*s", (int)strcspn(cli_helps[i].name, " "), cli_helps[i].name);
        fprintf(
            f,
            "\"\n\telif [ \"$COMP_CWORD\" -eq 2 ] && [ -n \"$sub\" ] && [ \"${cur#-}\" = \"$cur\" ]; then\n"
            "\t\twords=$sub\n"
            "\telif [ \"${cur#-}\" = \"$cur\" ]; then\n\t\twords=\n\tfi\n"
            "\tif [ -n \"$words\" ]; then\n"
            "\t\tmapfile -t COMPREPLY < <(compgen -W \"$words\" -- \"$cur\")\n"
            "\telse\n\t\tmapfile -t COMPREPLY < <(compgen -f -- \"$cur\")\n\tfi\n}\n"
            "complete -F _spotdrain spotdrain\n");
        return ferror(f) ? -EIO : 0;
}

int cli_help_main(int argc, char **argv)
{
        int r = 1;
        if (argc == 3 && streq(argv[1], "--man") && (streq(argv[2], "1") || streq(argv[2], "5")))
                r = streq(argv[2], "1") ? cli_help_man1(stdout) : cli_help_man5(stdout);
        else if (argc == 3 && streq(argv[1], "--completion") && streq(argv[2], "bash"))
                r = cli_help_bash_completion(stdout);
        else if (argc == 2 ||
                 (argc == 3 && cli_help_find(argv[1]) && strchr(cli_help_find(argv[1])->name, ' ')))
                return cli_help(stdout, argv[1]);
        if (r == 1) {
                fprintf(stderr, "usage: spotdrain help [COMMAND | --man 1|5 | --completion bash]\n");
                return EXIT_USAGE;
        }
        if (r < 0 || fflush(stdout) != 0) {
                fprintf(stderr, "spotdrain help: cannot write: %s\n", strerror(r < 0 ? -r : errno));
                return EXIT_ERROR;
        }
        return EXIT_OK;
}
