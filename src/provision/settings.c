/* Provisioning's configuration keys (provision.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/provision.h"

static const struct config_enum_value provision_modes[] = {
        { "fleet", CONFIG_PROVISION_FLEET },
        { "asg", CONFIG_PROVISION_ASG },
        { NULL, 0 },
};

#define OFF(f) offsetof(struct provision_settings, f)

static const struct config_item provision_items[] = {
        { "provision.enabled", CONFIG_BOOL, "false", OFF(enabled),
          "start replacement capacity when a notice comes (rebalance recommendation first)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "provision.mode", CONFIG_ENUM, "fleet", OFF(mode),
          "fleet: EC2 CreateFleet per bin of displaced pods; asg: raise the Auto Scaling group's desired "
          "capacity",
          provision_modes, 0, CONFIG_NO_RANGE, false },
        { "provision.endpoint", CONFIG_STRING, NULL, OFF(endpoint),
          "EC2 and Auto Scaling endpoint (unset: $AWS_ENDPOINT_URL_EC2, $AWS_ENDPOINT_URL, else AWS's)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.catalog", CONFIG_STRING, NULL, OFF(catalog),
          "instance type catalog JSON (unset: $SPOTDRAIN_CATALOG, else the installed one)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "provision.launch_template", CONFIG_STRING, NULL, OFF(launch_template),
          "launch template of the replacements (fleet mode): an lt-... id or a name", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "provision.launch_template_version", CONFIG_STRING, NULL, OFF(launch_template_version),
          "launch template version (unset: $Default)", NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.asg_name", CONFIG_STRING, NULL, OFF(asg_name),
          "Auto Scaling group whose desired capacity is raised (asg mode)", NULL, 0, CONFIG_NO_RANGE,
          false },
        { "provision.subnets", CONFIG_STRV, NULL, OFF(subnets),
          "subnets replacements may use, each \"subnet-id=zone\"", NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.families", CONFIG_STRV, NULL, OFF(families),
          "instance families allowed (empty: any in the catalog)", NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.sizes", CONFIG_STRV, NULL, OFF(sizes),
          "instance sizes allowed, e.g. xlarge,2xlarge (empty: any)", NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.architectures", CONFIG_STRV, "x86_64", OFF(architectures),
          "architectures allowed (x86_64, arm64)", NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.capacity_types", CONFIG_STRV, "spot,on-demand", OFF(capacity_types),
          "capacity types allowed, spot first with on-demand as the fallback", NULL, 0, CONFIG_NO_RANGE,
          false },
        { "provision.triggers", CONFIG_STRV, "rebalance-recommendation,spot-interruption,scheduled-change",
          OFF(triggers),
          "notice kinds that start a replacement (an interruption after a rebalance launches nothing more)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "provision.max_memory", CONFIG_STRING, NULL, OFF(max_memory),
          "largest instance memory allowed, a quantity such as 72Gi (unset: no limit)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "provision.max_vcpus", CONFIG_INT, "0", OFF(max_vcpus),
          "largest instance vCPU count allowed (0: no limit)", NULL, 0, .min = 0, .max = 100000, false },
        { "provision.vcpu_limit_per_window", CONFIG_INT, "0", OFF(vcpu_limit_per_window),
          "vCPUs that may be launched per window (0: no limit)", NULL, 0, .min = 0, .max = 10000000, false },
        { "provision.vcpu_window_seconds", CONFIG_DURATION, "600", OFF(vcpu_window_usec),
          "the window of provision.vcpu_limit_per_window", NULL, CONFIG_SECONDS, .min = 1, .max = 86400,
          false },
        { "provision.ready_timeout_seconds", CONFIG_DURATION, "600", OFF(ready_timeout_usec),
          "launch to Ready allowed before replacement-failed", NULL, CONFIG_SECONDS, .min = 1, .max = 86400,
          false },
        { "provision.cluster_tag_key", CONFIG_STRING, NULL, OFF(cluster_tag_key),
          "extra instance tag KEY=owned, e.g. kubernetes.io/cluster/NAME (unset: none)", NULL, 0,
          CONFIG_NO_RANGE, false },
};

const struct config_section provision_config_section = { "provision", provision_items,
                                                         ARRAY_SIZE(provision_items) };
