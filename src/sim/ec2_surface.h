/* The simulator's EC2 and Auto Scaling surface: one libmicrohttpd listener answering both query protocols
 * (form POST, or GET with the parameters in the query; XML answers: docs/contracts.md §5):
 *
 *   EC2 (Version 2016-11-15, SigV4 service "ec2")
 *     CreateFleet            Type=instant only. Each instance of the target goes to the first override (in
 *                            Priority order when given, else as listed: the sim's price-capacity-optimized
 *                            prefers the first pool that has capacity) whose pool has capacity; pools whose
 *                            type the scenario's provisioning.instance_types lacks answer Unsupported, pools
 *                            set by sim_ec2_set_no_capacity() InsufficientInstanceCapacity, in the errorSet
 * of an HTTP 200 answer. The launch is sim_launch_instance(): the node joins Ready node_launch_seconds
 * later. A ClientToken seen before answers the first answer again and launches nothing. DescribeInstances
 * the scenario's nodes and the launched instances (pending until their node joins, terminated once gone);
 * InstanceId.N, Filter.N (instance-id, instance-state-name, private-dns-name, availability-zone,
 * instance-type, tag:KEY, tag-key); InvalidInstanceID.NotFound for an unknown id. DescribeInstanceTypes from
 * the instance type catalog (provision.h), InstanceType.N, Filter instance-type (wildcards),
 * MaxResults/NextToken paging. TerminateInstances     marks the instances shutting-down (the model keeps
 * their nodes). CreateTags (ResourceId.N, Tag.N.Key/Value) on the scenario's nodes and launched instances:
 * DescribeInstances shows them in tagSet and filters on them. Auto Scaling (Version 2011-01-01, SigV4
 * service "autoscaling") DescribeAutoScalingGroups, SetDesiredCapacity, CreateOrUpdateTags,
 * CompleteLifecycleAction and RecordLifecycleActionHeartbeat (any hook and token of the group's instances;
 * each logged at info with the instance, hook and result, so that a test can tell what a client completed):
 * one group, "spotdrain-SCENARIO" (the group of the SQS surface's lifecycle messages), holding the
 * scenario's nodes, min 0, max nodes + 10. Raising the desired capacity launches instances of the first
 * node's type, in the zone with fewest.
 *
 * Subnets: "subnet-sim-ZONE" (SIM_EC2_SUBNET_PREFIX) is a subnet in ZONE; an override may name the zone with
 * AvailabilityZone instead. Every request must carry a valid SigV4 signature by a key the secret lookup
 * knows (default: SIM_EC2_ACCESS_KEY_ID / SIM_EC2_SECRET_ACCESS_KEY); EC2 answers AuthFailure (401), Auto
 * Scaling SignatureDoesNotMatch / InvalidClientTokenId (403).
 *
 * Locking: the surface has its own lock and takes the model's lock inside it; never call into the surface
 * with the model's lock held. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/sigv4_check.h"

struct sim;
struct sim_ec2;
struct sim_sts;
struct prov_catalog;

#define SIM_EC2_ACCOUNT           "123456789012"
#define SIM_EC2_ACCESS_KEY_ID     "AKIDEXAMPLE"
#define SIM_EC2_SECRET_ACCESS_KEY "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define SIM_EC2_SUBNET_PREFIX     "subnet-sim-"

/* Starts the listener on host (NULL = "127.0.0.1"), port chosen by the kernel. s must outlive the surface.
 * The instance type catalog is loaded as prov_catalog_load(NULL) does (an empty one when none is found). */
int sim_ec2_start(struct sim *s, const char *host, struct sim_ec2 **ret);
struct sim_ec2 *sim_ec2_stop(struct sim_ec2 *e); /* NULL-safe; returns NULL */
/* "http://127.0.0.1:PORT": the endpoint of both EC2 and Auto Scaling. */
const char *sim_ec2_url(const struct sim_ec2 *e);
const char *sim_ec2_group_name(const struct sim_ec2 *e);

/* Replaces the catalog DescribeInstanceTypes answers from (copied). */
int sim_ec2_set_catalog(struct sim_ec2 *e, const struct prov_catalog *c);
void sim_ec2_set_secret_lookup(struct sim_ec2 *e, sigv4_secret_lookup_fn lookup, void *userdata);
/* Verifies with the STS surface's lookup (its temporary credentials and the long-term key); NULL restores.
 */
void sim_ec2_use_sts(struct sim_ec2 *e, struct sim_sts *t);

/* Pools without capacity: NULL matches any type, zone or capacity type ("spot" / "on-demand"). */
int sim_ec2_set_no_capacity(struct sim_ec2 *e, const char *instance_type, const char *zone,
                            const char *capacity_type);
void sim_ec2_clear_no_capacity(struct sim_ec2 *e);

struct sim_ec2_fault {
        bool unauthorized;    /* every EC2 call answers UnauthorizedOperation (403) */
        char deny_action[64]; /* calls of this EC2 action answer UnauthorizedOperation (403); "" = none */
        unsigned throttle;    /* the next N calls answer RequestLimitExceeded (503) */
};
void sim_ec2_set_fault(struct sim_ec2 *e, const struct sim_ec2_fault *f);

struct sim_ec2_stats {
        uint64_t requests;      /* every request answered */
        uint64_t create_fleets; /* CreateFleet calls answered 200 (replays included) */
        uint64_t launched;      /* instances launched (sim_launch_instance succeeded) */
        uint64_t auth_failures;
        uint64_t desired_changes; /* SetDesiredCapacity calls that changed the desired capacity */
        uint64_t lifecycle_completes, lifecycle_heartbeats; /* of the group's lifecycle actions */
        uint64_t hook_describes;                            /* DescribeLifecycleHooks answered */
};
void sim_ec2_stats(struct sim_ec2 *e, struct sim_ec2_stats *ret);

/* The ELBv2 target groups served on the same listener (sim_elbv2.h). */
struct sim_elbv2;
struct sim_elbv2 *sim_ec2_elbv2(struct sim_ec2 *e);
