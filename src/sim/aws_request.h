/* sim/aws_request: what the simulator's AWS query-protocol surfaces (SQS, EC2 / Auto Scaling, STS) share in
 * reading a request: the form body and the SigV4 check. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "sim/server.h"
#include "sim/sigv4_check.h"

struct sim_sts;

/* Calls field(userdata, name, value) for each pair of an application/x-www-form-urlencoded body (a pair
 * without '=' has the value ""); stops at the first error field returns, or -ENOMEM. */
typedef int (*sim_aws_form_field_fn)(void *userdata, const char *name, const char *value);
int sim_aws_form_parse(const char *body, size_t len, sim_aws_form_field_fn field, void *userdata);

/* Checks rq's SigV4 signature (Authorization header or presigned query) for service with the secret lookup
 * gives; when sts is set, the session token sent must be the one issued with the key (none for long-term
 * keys). 0 valid; -EPERM no authentication at all; -EACCES wrong or malformed signature; -ENOKEY unknown key
 * or session token; -ENOMEM. */
int sim_aws_verify(const struct sim_http_request *rq, const char *service, sigv4_secret_lookup_fn lookup,
                   void *userdata, struct sim_sts *sts);
/* After sim_aws_verify() took rq: whether it was signed with the instance role's key of the IMDS surface
 * (SIM_IMDS_ACCESS_KEY_ID; the key ID only, never a secret). */
bool sim_aws_instance_role(const struct sim_http_request *rq);
