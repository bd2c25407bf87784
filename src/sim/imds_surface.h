/* The simulator's IMDS surface: one libmicrohttpd listener per scenario node, each answering as that
 * instance's metadata service with IMDSv2 required (docs/contracts.md §5; wire formats of fixtures/imds).
 *
 * Served under /latest/: PUT api/token (X-aws-ec2-metadata-token-ttl-seconds 1..21600 required, else 400;
 * X-Forwarded-For refused with 403); every GET needs a live token (401 otherwise, as on an instance with
 * HttpTokens=required); meta-data/ instance-id, local-hostname (the node name), local-ipv4,
 * placement/availability-zone, placement/region, instance-type, instance-life-cycle, ami-id,
 * spot/instance-action and spot/termination-time (once the node's spot interruption happened, with the
 * deadline as time; else 404), events/recommendations/rebalance (after the rebalance recommendation),
 * events/maintenance/scheduled ([] or the scheduled-change event starting at the deadline),
 * autoscaling/target-lifecycle-state (InService, Terminated once an asg-lifecycle-terminate happened),
 * iam/info, iam/security-credentials/ and iam/security-credentials/ROLE (fake credentials expiring in 6 h),
 * and dynamic/instance-identity/document. Times are wall-clock instants of scenario times (sim_wall_usec).
 *
 * Each request runs the model's due actions first (sim_advance), so the surface also works without the
 * Kubernetes surface's ticker. Token lifetimes are real time. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sim;
struct sim_imds;

#define SIM_IMDS_ROLE "spotdrain-sim-node-role"
/* The instance role's credentials iam/security-credentials/ROLE hands out; every AWS surface of the
 * simulator takes requests signed with them (with the session token), as AWS takes the role's. */
#define SIM_IMDS_ACCESS_KEY_ID     "ASIASIMULATEDEXAMPLE"
#define SIM_IMDS_SECRET_ACCESS_KEY "c2ltdWxhdGVkLXNlY3JldC1rZXktZm9yLXRlc3Rz"
#define SIM_IMDS_SESSION_TOKEN     "c2ltdWxhdGVkLXNlc3Npb24tdG9rZW4tZm9yLXRlc3Rz"

/* Starts one listener per node of s on host (an address to bind, port chosen by the kernel; NULL =
 * "127.0.0.1"). s must outlive the surface. Nodes that the scenario adds later get no listener. */
int sim_imds_start(struct sim *s, const char *host, struct sim_imds **ret);
/* Stops every listener (hung answers end at once). NULL-safe; returns NULL. */
struct sim_imds *sim_imds_stop(struct sim_imds *m);
size_t sim_imds_count(const struct sim_imds *m);
/* "http://127.0.0.1:PORT" of node index i (the model's order), NULL when out of range. */
const char *sim_imds_url(const struct sim_imds *m, size_t i);
/* The same by node name. */
const char *sim_imds_url_by_name(const struct sim_imds *m, const char *node);

/* Faults, per node. Counters apply to the next N requests (token PUTs included unless said otherwise). */
struct sim_imds_fault {
        unsigned error_500;     /* answer 500 */
        unsigned hang;          /* never answer; the handler waits hang_usec (or until stop) and drops */
        uint64_t hang_usec;     /* 0 = 5 s */
        uint64_t delay_usec;    /* every answer waits this long first */
        unsigned garbage;       /* 200 answers of the notice paths replaced by malformed JSON */
        unsigned refuse_tokens; /* token PUTs answered 403 */
        bool expire_tokens;     /* every token issued so far stops being valid (401 on use) */
        unsigned token_ttl_cap; /* seconds: tokens live at most this long; 0 = as asked */
};
int sim_imds_set_fault(struct sim_imds *m, size_t i, const struct sim_imds_fault *f);

struct sim_imds_stats {
        uint64_t requests;     /* every request answered (or hung) */
        uint64_t token_puts;   /* tokens issued */
        uint64_t unauthorized; /* 401 answers */
        uint64_t notice_gets;  /* GETs of the four notice paths */
};
int sim_imds_stats(struct sim_imds *m, size_t i, struct sim_imds_stats *ret);
