/* cli/elbv2_sync: ELBv2 asked from a command that waits (audit). */
#pragma once

#include <stddef.h>

struct loop;

/* delays[i]: the deregistration_delay.timeout_seconds of target group arns[i], -1 when it could not be
 * read (logged as a warning). Credentials: the SDKs' chain (environment, web identity, Pod Identity, IMDS);
 * the endpoint: $AWS_ENDPOINT_URL_ELASTIC_LOAD_BALANCING_V2, $AWS_ENDPOINT_URL, else AWS's for region
 * (NULL: $AWS_REGION, else the first ARN's). <0 only for no memory, or no credentials at all (logged). */
int elbv2_sync_delays(struct loop *l, const char *region, const char *const *arns, size_t n, long *delays);
