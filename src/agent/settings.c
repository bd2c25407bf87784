/* The agent's configuration keys (node_name, agent.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/agent.h"
#include "spotdrain/config.h"

#define OFF(f) offsetof(struct agent_settings, f)

static const struct config_item agent_node_items[] = {
        { "node_name", CONFIG_STRING, NULL, OFF(node_name),
          "this node (agent; unset: $NODE_NAME, else from IMDS)", NULL, 0, CONFIG_NO_RANGE, false },
};

const struct config_section agent_node_config_section = { "agent", agent_node_items,
                                                          ARRAY_SIZE(agent_node_items) };

static const struct config_item agent_items[] = {
        { "agent.asg_deadline_seconds", CONFIG_DURATION, "3600", OFF(asg_deadline_usec),
          "deadline of an Auto Scaling termination (the lifecycle hook's heartbeat timeout)", NULL,
          CONFIG_SECONDS, .min = 1, .max = 172800, false },
        { "agent.estimates_write_interval_seconds", CONFIG_DURATION, "600", OFF(estimates_write_usec),
          "write what the agent learnt of its pods' stop and startup times to the estimates ConfigMap at "
          "most this often (plus up to half at random; and at a drain's end)",
          NULL, CONFIG_SECONDS, .min = 1, .max = 86400, false },
        { "agent.lifecycle_hook_name", CONFIG_STRING, NULL, OFF(lifecycle_hook_name),
          "complete this termination lifecycle hook's action with CONTINUE after the drain (instance role "
          "credentials; unset: left to the hook's timeout)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "agent.asg_name", CONFIG_STRING, NULL, OFF(asg_name),
          "the instance's Auto Scaling group (unset: IMDS tag aws:autoscaling:groupName)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "agent.heartbeat_interval_seconds", CONFIG_DURATION, "0", OFF(heartbeat_interval_usec),
          "lifecycle heartbeats while the drain runs (0: half of agent.asg_deadline_seconds)", NULL,
          CONFIG_SECONDS, .min = 0, .max = 7200, false },
};

const struct config_section agent_config_section = { "agent", agent_items, ARRAY_SIZE(agent_items) };
