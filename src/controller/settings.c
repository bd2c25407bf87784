/* The controller's configuration key (controller.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/controller.h"

#define OFF(f) offsetof(struct controller_settings, f)

static const struct config_item controller_items[] = {
        { "controller.first_visibility_seconds", CONFIG_DURATION, "10", OFF(first_visibility_usec),
          "how long a received notice stays hidden until its drain is recorded on the node (then 60 s, "
          "renewed): a controller killed in between gets it back this soon",
          NULL, CONFIG_SECONDS, .min = 2, .max = 60, false },
        { "controller.receivers", CONFIG_INT, "10", OFF(receivers),
          "ReceiveMessage long polls kept in flight at once (each up to 10 messages, handled as they come): "
          "a backlog of malformed or foreign messages ahead of a real notice is read this many calls at a "
          "time",
          NULL, 0, .min = 1, .max = 32, false },
        { "controller.allowed_accounts", CONFIG_STRV, NULL, OFF(allowed_accounts),
          "AWS accounts besides the queue's own (from the queue URL) whose notices are acted on; a notice "
          "from any other account is left in the queue and raised as notice-rejected (docs/security.md)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.asg_names", CONFIG_STRV, NULL, OFF(asg_names),
          "Auto Scaling groups of this cluster: when set, lifecycle actions of other groups are never "
          "completed (unset: only those of instances that are nodes here)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.cluster_name", CONFIG_STRING, NULL, OFF(cluster_name),
          "the cluster's name: lifecycle actions are completed only for Auto Scaling groups tagged "
          "kubernetes.io/cluster/NAME (looked up once per group, kept 10 min); controller.asg_names, when "
          "set, is used instead",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.managed_tag", CONFIG_STRING, NULL, OFF(managed_tag),
          "drain only instances carrying this EC2 tag (KEY, any value, or KEY=VALUE): one DescribeInstances "
          "per instance, kept an hour; another instance's notice is left in the queue as notice-rejected "
          "(unmanaged); unset: every node of the cluster",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.verify_sns_signature", CONFIG_BOOL, "false", OFF(verify_sns_signature),
          "an SNS-wrapped message is acted on only when SNS's signature over it verifies with the "
          "certificate "
          "of the region's SNS endpoint (fetched over HTTPS, kept a day); turn on when SNS sits between "
          "EventBridge and the queue",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.heartbeat_interval_seconds", CONFIG_DURATION, "0", OFF(heartbeat_interval_usec),
          "period of RecordLifecycleActionHeartbeat while a lifecycle action's drain runs (NTH's "
          "heartbeatInterval); 0: half the hook's HeartbeatTimeout (DescribeLifecycleHooks); a period not "
          "shorter than the HeartbeatTimeout is cut to half of it, so that the first heartbeat comes in "
          "time",
          NULL, CONFIG_SECONDS, .min = 0, .max = 3600, false },
        { "controller.heartbeat_until_seconds", CONFIG_DURATION, "172800", OFF(heartbeat_until_usec),
          "how long after its lifecycle notice an action is kept alive by heartbeats (NTH's "
          "heartbeatUntil); "
          "the drain's deadline is then this, within the hook's GlobalTimeout",
          NULL, CONFIG_SECONDS, .min = 60, .max = 172800, false },
        { "controller.launch_ready_timeout_seconds", CONFIG_DURATION, "600", OFF(launch_ready_timeout_usec),
          "an Auto Scaling launch lifecycle action is completed with CONTINUE once the instance's node is "
          "Ready, with ABANDON when it is not within this long of the launch (within the hook's "
          "GlobalTimeout; heartbeats keep the action alive meanwhile when its HeartbeatTimeout is shorter)",
          NULL, CONFIG_SECONDS, .min = 10, .max = 172800, false },
        { "controller.delete_unknown_after_seconds", CONFIG_DURATION, "0", OFF(delete_unknown_after_usec),
          "a notice for an instance that is no node of this cluster is left in the queue for the cluster it "
          "belongs to; set this to delete such messages once they are this old (0: never)",
          NULL, CONFIG_SECONDS, .min = 0, .max = 1209600, false },
        { "controller.admission_listen", CONFIG_STRING, NULL, OFF(admission_listen),
          "HOST:PORT of the eviction admission webhook (TLS, POST /validate-eviction): an agent's eviction "
          "is allowed only for a pod bound to the node its token names (docs/security.md); unset: off",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.admission_cert_file", CONFIG_STRING, NULL, OFF(admission_cert_file),
          "PEM file of the webhook's serving certificate (its chain after it)", NULL, 0, CONFIG_NO_RANGE,
          false },
        { "controller.admission_key_file", CONFIG_STRING, NULL, OFF(admission_key_file),
          "PEM file of the webhook certificate's private key", NULL, 0, CONFIG_NO_RANGE, false },
        { "controller.admission_agent_users", CONFIG_STRV, NULL, OFF(admission_agent_users),
          "the agents' usernames (system:serviceaccount:NAMESPACE:NAME) whose evictions the webhook "
          "judges; anyone else's request is allowed unjudged",
          NULL, 0, CONFIG_NO_RANGE, false },
};

const struct config_section controller_config_section = { "controller", controller_items,
                                                          ARRAY_SIZE(controller_items) };
