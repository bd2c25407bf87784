/* AWS's configuration keys (aws.*) and the IMDS client's (imds.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/awsreq.h"
#include "spotdrain/config.h"
#include "spotdrain/imds.h"

#define AWS_OFF(f) offsetof(struct aws_settings, f)

static const struct config_item aws_items[] = {
        { "aws.region", CONFIG_STRING, NULL, AWS_OFF(region),
          "AWS region (unset: $AWS_REGION, else from IMDS)", NULL, 0, CONFIG_NO_RANGE, false },
        { "aws.queue_url", CONFIG_STRING, NULL, AWS_OFF(queue_url),
          "SQS queue of interruption events (controller)", NULL, 0, CONFIG_NO_RANGE, false },
};

const struct config_section aws_config_section = { "aws", aws_items, ARRAY_SIZE(aws_items) };

#define IMDS_OFF(f) offsetof(struct imds_settings, f)

static const struct config_item imds_items[] = {
        { "imds.endpoint", CONFIG_STRING, NULL, IMDS_OFF(endpoint),
          "IMDS base URL (unset: $AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "imds.poll_interval_seconds", CONFIG_DURATION, "0.5", IMDS_OFF(poll_interval_usec),
          "how often the agent asks IMDS for a notice", NULL, CONFIG_SECONDS, .min = 0.05, .max = 60,
          false },
        { "imds.token_ttl_seconds", CONFIG_DURATION, "21600", IMDS_OFF(token_ttl_usec),
          "lifetime asked for an IMDSv2 token (renewed before it ends and after a 401)", NULL,
          CONFIG_SECONDS, .min = 1, .max = 21600, false },
        { "imds.allow_v1", CONFIG_BOOL, "false", IMDS_OFF(allow_v1),
          "fall back to IMDSv1 (no token) when the token request fails", NULL, 0, CONFIG_NO_RANGE, false },
};

const struct config_section imds_config_section = { "imds", imds_items, ARRAY_SIZE(imds_items) };
