/* The drain engine's configuration keys (drain.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/engine.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/service.h"

static const struct config_enum_value drain_surges[] = {
        { "off", DRAIN_SURGE_OFF },
        { "blocked", DRAIN_SURGE_BLOCKED },
        { "always", DRAIN_SURGE_ALWAYS },
        { NULL, 0 },
};

static const struct config_enum_value drain_taint_effects[] = {
        { "NoSchedule", DRAIN_TAINT_NO_SCHEDULE },
        { "NoExecute", DRAIN_TAINT_NO_EXECUTE },
        { NULL, 0 },
};

static const struct config_enum_value drain_policies[] = {
        { "force", DRAIN_POLICY_FORCE },
        { "respect", DRAIN_POLICY_RESPECT },
        { NULL, 0 },
};

/* drain.skip_pod_selector is read when the configuration is, so that a typo stops the start (or
 * check-config) rather than every drain at its notice. */
static const char *check_selector(const char *text)
{
        struct kube_selector s = { 0 };
        int r = kube_selector_parse_text(text, &s);
        kube_selector_clear(&s);
        return r == -EINVAL ? "not a label selector (a=b,c!=d,e in (f,g),!h)" : NULL;
}

#define OFF(f) offsetof(struct drain_settings, f)

static const struct config_item drain_items[] = {
        { "drain.budget_seconds", CONFIG_DURATION, "120", OFF(budget_usec),
          "time from notice to the instance's end when the notice sets no deadline", NULL, CONFIG_SECONDS,
          .min = 1, .max = 86400, false },
        { "drain.safety_margin_seconds", CONFIG_DURATION, "5", OFF(safety_margin_usec),
          "kept free before the deadline: pods must be gone this long before it", NULL, CONFIG_SECONDS,
          .min = 0, .max = 3600, false },
        { "drain.policy", CONFIG_ENUM, "force", OFF(policy),
          "force: delete a pod around its PDB at its last safe moment; respect: never go around a PDB",
          drain_policies, 0, CONFIG_NO_RANGE, false },
        { "drain.taint_key", CONFIG_STRING, "" SPOTDRAIN_TAINT_INTERRUPTION, OFF(taint_key),
          "NoSchedule taint put on a node being drained", NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.taint_effect", CONFIG_ENUM, "NoSchedule", OFF(taint_effect),
          "effect of that taint: NoSchedule, or NoExecute (the kubelet then evicts every pod that does not "
          "tolerate it, PDBs unheeded)",
          drain_taint_effects, 0, CONFIG_NO_RANGE, false },
        { "drain.exclude_from_load_balancers", CONFIG_BOOL, "true", OFF(exclude_from_load_balancers),
          "label a node being drained " SPOTDRAIN_LABEL_EXCLUDE_LB " before its first eviction, so that "
          "load balancers stop sending it traffic; removed where the drain is undone, when spotdrain set it",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.lb_deregistration_seconds", CONFIG_DURATION, "0", OFF(lb_deregistration_usec),
          "with the exclude label: how long pods behind a Service keep running after it, for the load "
          "balancers to deregister the node (the target group's deregistration delay); the plan reserves it",
          NULL, CONFIG_SECONDS, .min = 0, .max = 3600, false },
        { "drain.target_groups", CONFIG_BOOL, "true", OFF(target_groups),
          "read the AWS Load Balancer Controller's TargetGroupBindings and ask ELBv2 about their target "
          "groups: pods behind an instance target group wait until the node's instance is out of healthy "
          "there (instead of drain.lb_deregistration_seconds), and a deregistration delay longer than the "
          "time left raises lb-deregistration-too-slow (IAM: elasticloadbalancing:DescribeTargetHealth, "
          "DescribeTargetGroupAttributes)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.deregister_targets", CONFIG_BOOL, "false", OFF(deregister_targets),
          "with drain.target_groups: deregister the node's instance from its instance target groups at the "
          "notice, for clusters where nothing else reacts to the exclude label (IAM: "
          "elasticloadbalancing:DeregisterTargets)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.cordon_only", CONFIG_BOOL, "false", OFF(cordon_only),
          "cordon, taint and label the node but evict and delete nothing (beside another drainer)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "drain.skip_namespaces", CONFIG_STRV, NULL, OFF(skip_namespaces),
          "namespaces whose pods a drain leaves alone", NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.skip_pod_selector", CONFIG_STRING, "", OFF(skip_pod_selector),
          "label selector (as kubectl's --selector: a=b,c!=d,e in (f,g),!h) of pods a drain leaves alone",
          NULL, 0, CONFIG_NO_RANGE, false, check_selector },
        { "drain.out_of_service_taint", CONFIG_BOOL, "false", OFF(out_of_service_taint),
          "taint a node that is empty or gone " SPOTDRAIN_TAINT_OUT_OF_SERVICE
          "=" SPOTDRAIN_OUT_OF_SERVICE_VALUE
          ":NoExecute, so that its pods' volumes are detached at once (non-graceful node shutdown)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.ignore_daemonsets", CONFIG_BOOL, "true", OFF(ignore_daemonsets),
          "leave DaemonSet pods on the node", NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.delete_emptydir_data", CONFIG_BOOL, "true", OFF(delete_emptydir_data),
          "evict pods with emptyDir volumes (their data dies with the node anyway)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "drain.default_startup_seconds", CONFIG_DURATION, "30", OFF(default_startup_usec),
          "assumed creation-to-Ready time of a replacement when nothing was measured", NULL, CONFIG_SECONDS,
          .min = 0, .max = 86400, false },
        { "drain.expected_shutdown_fraction", CONFIG_DOUBLE, "0.5", OFF(expected_shutdown_fraction),
          "share of its grace period a pod is expected to take to stop while none of its siblings was seen "
          "stopping (the drain-infeasible verdict; forcing still allows the whole grace period)",
          NULL, 0, .min = 0.01, .max = 1, false },
        { "drain.eviction_retry_floor_ms", CONFIG_DURATION, "200", OFF(eviction_retry_floor_usec),
          "shortest wait before retrying a 429 eviction when the cluster says nothing", NULL,
          CONFIG_MILLISECONDS, .min = 1, .max = 60000, false },
        { "drain.critical_priority_classes", CONFIG_STRV, "system-cluster-critical,system-node-critical",
          OFF(critical_priority_classes), "priority classes evicted last", NULL, 0, CONFIG_NO_RANGE, false },
        { "drain.surge", CONFIG_ENUM, "blocked", OFF(surge),
          "start a Deployment's replacement pods before evicting its pods on the node: blocked: only where "
          "the PDB would otherwise keep them until forced; always; off",
          drain_surges, 0, CONFIG_NO_RANGE, false },
        { "drain.estimates_configmap", CONFIG_STRING, "spotdrain-estimates", OFF(estimates_configmap),
          "ConfigMap in the release namespace where the stop and startup times learnt are kept across "
          "restarts and shared (empty: not kept)",
          NULL, 0, CONFIG_NO_RANGE, false },
};

/* The executor's options, as the configuration's drain.* keys give them. */
void drain_exec_options_from_config(const struct spotdrain_config *cfg, struct drain_exec_options *o)
{
        o->margin_usec = cfg->drain.safety_margin_usec;
        o->policy = cfg->drain.policy == DRAIN_POLICY_RESPECT ? DRAIN_POLICY_RESPECT : DRAIN_POLICY_FORCE;
        o->taint_key = cfg->drain.taint_key;
        o->evict_daemonsets = !cfg->drain.ignore_daemonsets;
        o->leave_emptydir = !cfg->drain.delete_emptydir_data;
        o->default_startup_usec = cfg->drain.default_startup_usec;
        o->expected_shutdown_fraction = cfg->drain.expected_shutdown_fraction;
        o->retry_floor_usec = cfg->drain.eviction_retry_floor_usec;
        o->critical_classes = (const char *const *)cfg->drain.critical_priority_classes;
        o->surge = (enum drain_surge_mode)cfg->drain.surge;
        o->taint_no_execute = cfg->drain.taint_effect == DRAIN_TAINT_NO_EXECUTE;
        o->exclude_from_load_balancers = cfg->drain.exclude_from_load_balancers;
        o->lb_deregistration_usec = cfg->drain.lb_deregistration_usec;
        o->deregister_targets = cfg->drain.target_groups && cfg->drain.deregister_targets;
        o->cordon_only = cfg->drain.cordon_only;
        o->skip_namespaces = (const char *const *)cfg->drain.skip_namespaces;
        o->skip_pod_selector = cfg->drain.skip_pod_selector;
        o->out_of_service_taint = cfg->drain.out_of_service_taint;
        o->log_tail_lines = (unsigned)cfg->alerts.log_tail_lines;
        o->postmortem_dir = cfg->alerts.postmortem_dir;
}

const struct config_section drain_config_section = { "drain", drain_items, ARRAY_SIZE(drain_items) };
