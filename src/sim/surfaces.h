/* Every surface of the simulator at once — the Kubernetes API, IMDS per node, SQS (and the AWS surfaces as
 * they are added) — for `sim serve` and `simulate`, with the endpoints document of docs/contracts.md §1. */
#pragma once

#include <cjson/cJSON.h>

struct sim;
struct sim_server_options;
struct sim_surfaces;

/* Starts every surface on kopt->listen's host. The model's clock must have been started. */
int sim_surfaces_start(struct sim *s, const struct sim_server_options *kopt, struct sim_surfaces **ret);
/* NULL-safe; returns NULL. */
struct sim_surfaces *sim_surfaces_stop(struct sim_surfaces *x);
const char *sim_surfaces_kubernetes_url(const struct sim_surfaces *x);
struct sim_server *sim_surfaces_kubernetes(const struct sim_surfaces *x);
struct sim_imds *sim_surfaces_imds(const struct sim_surfaces *x);
struct sim_sqs *sim_surfaces_sqs(const struct sim_surfaces *x);
struct sim_ec2 *sim_surfaces_ec2(const struct sim_surfaces *x);
/* {"kubernetes": URL, "imds": URL, "imds_by_node": {NODE: URL}, "sqs": URL, "queue_url": URL, "sts": URL,
 *  "ec2": URL, "autoscaling": URL, "elbv2": URL} */
cJSON *sim_surfaces_endpoints(const struct sim_surfaces *x);

/* The AWS surfaces' faults of opt (sqs_error_rate, sqs_duplicate_rate, imds_error_rate, imds_timeout_rate,
 * sts_error_rate; docs/faults.md) on the surfaces given (NULL: not served). sim_surfaces_start() does this
 * itself; it is here for callers that start the surfaces one by one (spotdrain simulate). *ret is NULL when
 * no rate needs the driver thread. Stop it before the surfaces. */
struct sim_imds;
struct sim_sqs;
struct sim_sts;
struct sim_aws_faults;
int sim_aws_faults_start(const struct sim_server_options *opt, struct sim_imds *imds, struct sim_sqs *sqs,
                         struct sim_sts *sts, struct sim_aws_faults **ret);
struct sim_aws_faults *sim_aws_faults_stop(struct sim_aws_faults *f); /* NULL-safe; returns NULL */
