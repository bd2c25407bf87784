/* The configuration: one table of keys {key, type, default, offset, description}; values come from the
 * defaults, then a YAML file, then SPOTDRAIN_* environment variables, then --set KEY=VALUE, each overriding
 * the one before. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum config_type {
        CONFIG_STRING,   /* char *, NULL when unset */
        CONFIG_INT,      /* int64_t */
        CONFIG_DOUBLE,   /* double */
        CONFIG_BOOL,     /* bool */
        CONFIG_DURATION, /* uint64_t microseconds; written as a number in the key's unit, or "500ms", "2m" */
        CONFIG_ENUM,     /* int: the value of the chosen name */
        CONFIG_STRV,     /* char **, NULL-terminated (never NULL once loaded); a YAML list or "a,b,c" */
};

/* Values of drain.policy. */
enum config_drain_policy {
        CONFIG_DRAIN_POLICY_FORCE,   /* at a pod's last safe moment, delete it around its PDB */
        CONFIG_DRAIN_POLICY_RESPECT, /* never go around a PDB */
};

/* Values of provision.mode. */
enum config_provision_mode {
        CONFIG_PROVISION_FLEET, /* EC2 CreateFleet instant, one fleet per bin */
        CONFIG_PROVISION_ASG,   /* raise the Auto Scaling group's desired capacity */
};

struct config_enum_value {
        const char *name;
        int value;
};

struct config_item {
        const char *key; /* dotted path, e.g. "drain.safety_margin_seconds" */
        enum config_type type;
        const char *def; /* default in the same text form as the environment uses; NULL = unset */
        size_t offset;   /* into struct spotdrain_config */
        const char *description;
        const struct config_enum_value *enum_values; /* CONFIG_ENUM: terminated by a NULL name */
        uint64_t unit_usec;                          /* CONFIG_DURATION: the unit of a bare number */
        double min, max; /* CONFIG_INT / DOUBLE / DURATION (in units); min > max = none */
        bool secret;     /* config_dump hides the value */
};

struct spotdrain_config {
        int log_format; /* enum log_format (core.h) */
        int log_level;  /* syslog level: LOG_ERR .. LOG_DEBUG */
        char *kubeconfig;
        char *kube_context;
        double kube_qps;
        int64_t kube_burst;
        char *metrics_listen;
        char *node_name;

        uint64_t drain_budget_usec;
        uint64_t drain_safety_margin_usec;
        int drain_policy; /* enum config_drain_policy */
        char *drain_taint_key;
        bool drain_ignore_daemonsets;
        bool drain_delete_emptydir_data;
        uint64_t drain_default_startup_usec;
        double drain_expected_shutdown_fraction;
        uint64_t drain_eviction_retry_floor_usec;
        char **drain_critical_priority_classes;

        char *aws_region;
        char *aws_queue_url;
        uint64_t controller_first_visibility_usec; /* a notice's hidden time until its drain is recorded */
        char *imds_endpoint;
        uint64_t imds_poll_interval_usec;
        uint64_t imds_token_ttl_usec;
        bool imds_allow_v1;
        uint64_t agent_rebalance_revert_usec;
        uint64_t agent_maintenance_lead_usec;
        uint64_t agent_asg_deadline_usec;
        char *alerts_webhook_url;
        int alerts_webhook_format; /* enum webhook_format (alert_webhook.h) */
        char *alerts_webhook_template;
        char *alerts_webhook_headers_file;
        uint64_t alerts_webhook_timeout_usec;
        int64_t alerts_webhook_max_attempts;
        uint64_t alerts_webhook_flush_usec; /* on exit, the wait for alerts still being delivered */

        /* provisioning (provision.h, frontend.c) */
        bool provision_enabled;
        int provision_mode; /* enum config_provision_mode */
        char *provision_endpoint;
        char *provision_catalog;
        char *provision_launch_template; /* "lt-..." is an id, anything else a name */
        char *provision_launch_template_version;
        char *provision_asg_name;
        char **provision_subnets; /* "subnet-id=zone" (or "=zone": the zone only) */
        char **provision_families;
        char **provision_sizes;
        char **provision_architectures;
        char **provision_capacity_types; /* "spot", "on-demand" */
        char **provision_triggers;       /* notice kinds (notice.h names) */
        char *provision_max_memory;      /* a quantity, "72Gi"; NULL = no limit */
        int64_t provision_max_vcpus;
        int64_t provision_vcpu_limit_per_window;
        uint64_t provision_vcpu_window_usec;
        uint64_t provision_ready_timeout_usec;
        char *provision_cluster_tag_key;
};

/* The table, in dump order. */
const struct config_item *config_items(size_t *ret_n);
const struct config_item *config_find(const char *key);

/* A configuration holding the defaults. */
int config_new(struct spotdrain_config **ret);
struct spotdrain_config *config_free(struct spotdrain_config *c);
static inline void config_freep(struct spotdrain_config **c)
{
        config_free(*c);
}

/* Applies a YAML file: nested maps are dotted keys. Errors: "FILE:LINE: unknown key 'drain.foo'",
 * "FILE:LINE: drain.budget_seconds: expected a duration in seconds, got 'x'". On error c is unchanged. */
int config_load_file(struct spotdrain_config *c, const char *path, char **ret_error);
/* Applies SPOTDRAIN_<KEY> variables (key upper-cased, '.' → '_', e.g.
 * SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS). Unknown SPOTDRAIN_* variables are left alone (other tools may
 * share the prefix). */
int config_load_env(struct spotdrain_config *c, char **ret_error);
/* Applies one "KEY=VALUE" (the CLI's --set). */
int config_set(struct spotdrain_config *c, const char *assignment, char **ret_error);
/* Sets one key from its text form ("" or "null" unsets a string). */
int config_set_value(struct spotdrain_config *c, const char *key, const char *value, char **ret_error);
/* Everything in order: defaults, the file (path may be NULL), the environment, then each of sets (NULL or
 * NULL-terminated "KEY=VALUE" strings). */
int config_load(const char *path, char *const *sets, struct spotdrain_config **ret, char **ret_error);

/* The effective values as YAML that config_load_file reads back (secrets shown as "<hidden>"). */
int config_dump(const struct spotdrain_config *c, char **ret);
/* The environment variable name of a key (malloc'ed). */
char *config_env_name(const char *key);
