/* The one list of every module's configuration keys, in the order `spotdrain check-config` prints them:
 * each module declares its own section (src/MODULE/settings.c); the front ends read them all into one
 * struct spotdrain_config. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/service.h"

#define SECTION(s, member)                                      \
        {                                                       \
                &(s), offsetof(struct spotdrain_config, member) \
        }

const struct config_section_ref config_sections[] = {
        SECTION(log_config_section, log),
        SECTION(kube_config_section, kube),
        SECTION(ops_config_section, ops),
        SECTION(agent_node_config_section, agent),
        SECTION(drain_config_section, drain),
        SECTION(aws_config_section, aws),
        SECTION(controller_config_section, controller),
        SECTION(imds_config_section, imds),
        SECTION(agent_config_section, agent),
        SECTION(notices_config_section, notices),
        SECTION(alerts_config_section, alerts),
        SECTION(provision_config_section, provision),
};

const size_t config_n_sections = ARRAY_SIZE(config_sections);
const size_t config_struct_size = sizeof(struct spotdrain_config);
