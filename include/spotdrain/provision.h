/* provision: replacement capacity started on the earliest signal (issue 6).
 *
 *   catalog      instance types (vCPU, memory, max pods, architecture): the shipped
 * data/instance-types.json, rebuilt by `spotdrain catalog refresh` from EC2 DescribeInstanceTypes. selection
 * pure: the displaced pods' requests (plus DaemonSet overhead) packed first-fit-decreasing into bins; per
 * bin the instance types that fit within the requirements, smallest first, capped; zones spread away from
 * the interrupted zone and balanced over the subnets; a vCPU limit. ec2 client   the EC2 query protocol
 * (CreateFleet instant, DescribeInstances, DescribeInstanceTypes, TerminateInstances) and Auto Scaling
 * (DescribeAutoScalingGroups, SetDesiredCapacity, CreateOrUpdateTags), SigV4-signed, async on the core loop.
 *   provisioner  reacts to notices, launches one fleet per bin (spot, price-capacity-optimized, on-demand
 *                fallback), remembers capacity errors per (type, zone, capacity type) for 3 minutes, derives
 *                ClientTokens from the notice so a restart never launches twice, tracks each instance until
 *                its node is Ready, and raises replacement-launched / replacement-failed alerts.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

/* Values of provision.mode. */
enum config_provision_mode {
        CONFIG_PROVISION_FLEET, /* EC2 CreateFleet instant, one fleet per bin */
        CONFIG_PROVISION_ASG,   /* raise the Auto Scaling group's desired capacity */
};

/* Provisioning's configuration (provision.*). Its keys: provision_config_section (its settings.c). */
struct provision_settings {
        bool enabled;
        int mode; /* enum config_provision_mode */
        char *endpoint;
        char *catalog;
        char *launch_template; /* "lt-..." is an id, anything else a name */
        char *launch_template_version;
        char *asg_name;
        char **subnets; /* "subnet-id=zone" (or "=zone": the zone only) */
        char **families;
        char **sizes;
        char **architectures;
        char **capacity_types; /* "spot", "on-demand" */
        char **triggers;       /* notice kinds (notice.h names) */
        char *max_memory;      /* a quantity, "72Gi"; NULL = no limit */
        int64_t max_vcpus;
        int64_t vcpu_limit_per_window;
        uint64_t vcpu_window_usec;
        uint64_t ready_timeout_usec;
        char *cluster_tag_key;
};
struct config_section;
extern const struct config_section provision_config_section;

struct loop;
struct alert_bus;
struct kube_client;
struct notice;

/* ==== catalog (catalog.c) ==== */

#define PROV_NAME_SIZE 32

struct prov_itype {
        char name[PROV_NAME_SIZE];   /* "m5.2xlarge" */
        char family[PROV_NAME_SIZE]; /* "m5" */
        char size[PROV_NAME_SIZE];   /* "2xlarge" */
        int vcpu;
        int64_t memory_mib;
        int max_pods;               /* the EKS ENI formula: enis * (ipv4_per_eni - 1) + 2 */
        int max_enis, ipv4_per_eni; /* 0 when unknown */
        char arch[PROV_NAME_SIZE];  /* "x86_64" | "arm64" (EC2's spelling) */
};

struct prov_catalog {
        struct prov_itype *types;
        size_t n;
};

/* The ENI formula of the EKS AMI (max-pods-calculator without prefix delegation). */
int prov_max_pods(int enis, int ipv4_per_eni);

/* Parses the catalog JSON ({"instance_types": [{"name", "vcpu", "memory_mib", "architecture", "max_pods" |
 * "max_enis" + "ipv4_per_eni"}]}). -EBADMSG with *ret_error saying what and where. */
int prov_catalog_parse(const char *json, size_t len, struct prov_catalog **ret, char **ret_error);
/* path NULL: $SPOTDRAIN_CATALOG, else the installed data (/usr/local/share/spotdrain, /usr/share/spotdrain),
 * else data/instance-types.json in the working directory. */
int prov_catalog_load(const char *path, struct prov_catalog **ret, char **ret_error);
struct prov_catalog *prov_catalog_free(struct prov_catalog *c); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct prov_catalog *, prov_catalog_free);
/* Adds or replaces a type (by name); the family and size are derived from the name. */
int prov_catalog_add(struct prov_catalog *c, const struct prov_itype *t);
const struct prov_itype *prov_catalog_find(const struct prov_catalog *c, const char *name);
/* Sorted by family, then vCPU, then memory; pretty JSON with a trailing newline (the shipped file form). */
int prov_catalog_format_json(struct prov_catalog *c, char **ret);
/* What a kubelet on the type offers pods: capacity minus the EKS AMI's kube-reserved (CPU 6% of the first
 * core, 1% of the second, 0.5% of the next two, 0.25% above; memory 11 MiB per pod + 255 MiB) and the
 * 100 MiB eviction threshold. */
void prov_itype_allocatable(const struct prov_itype *t, int64_t *ret_cpu_millis, int64_t *ret_memory_bytes);

/* ==== selection (select.c, pure) ==== */

#define PROV_CAPACITY_SPOT         "spot"
#define PROV_CAPACITY_ON_DEMAND    "on-demand"
#define PROV_DEFAULT_MAX_OVERRIDES 20

struct prov_requirements {
        const char *const *families;      /* NULL-terminated; NULL = any */
        const char *const *sizes;         /* "large", "2xlarge", ...; NULL = any */
        const char *const *architectures; /* NULL = {"x86_64"} */
        int max_vcpu;                     /* 0 = no limit */
        int64_t max_memory_mib;           /* 0 = no limit (e.g. 73728 for 72Gi) */
        bool spot;                        /* capacity types allowed; both false = both allowed */
        bool on_demand;
        unsigned max_overrides; /* (type × subnet) pairs per fleet; 0 = PROV_DEFAULT_MAX_OVERRIDES */
};

struct prov_request {
        int64_t cpu_millis;
        int64_t memory_bytes;
};

struct prov_subnet {
        const char *id;   /* NULL: the override names the zone (AvailabilityZone) instead of a subnet */
        const char *zone; /* required */
};

/* Tells whether (type, zone, capacity type) is known to have no capacity now. */
typedef bool (*prov_unavailable_fn)(const char *instance_type, const char *zone, const char *capacity_type,
                                    void *userdata);

struct prov_select_input {
        const struct prov_catalog *catalog;
        const struct prov_requirements *req;
        const struct prov_request *pods; /* the displaced pods (DaemonSet pods excluded) */
        size_t n_pods;
        struct prov_request daemonset; /* the DaemonSet pods' requests on every node, summed */
        unsigned daemonset_pods;
        const char *interrupted_zone; /* may be NULL */
        const struct prov_subnet *subnets;
        size_t n_subnets;
        /* Replacements already running or under way per subnet (same order), for the balance; may be NULL.
         */
        const unsigned *subnet_load;
        int vcpu_budget; /* vCPUs that may still be launched in the window; < 0 = no limit */
};

struct prov_override {
        const struct prov_itype *type;
        const struct prov_subnet *subnet;
};

struct prov_bin {
        struct prov_request total;       /* pods + DaemonSet overhead */
        unsigned pods;                   /* pods packed (DaemonSet pods excluded) */
        size_t *pod_index;               /* indexes into input pods */
        const struct prov_itype **types; /* candidates, smallest first (before the overrides cap) */
        size_t n_types;
        size_t preferred_subnet; /* index into input subnets: the balanced choice for this bin */
        int vcpu_reserved;       /* the smallest candidate's vCPUs, counted against the budget */
};

struct prov_selection {
        struct prov_bin *bins;
        size_t n_bins;
        unsigned pods_unplaceable; /* pods no allowed type can hold */
        unsigned bins_over_budget; /* bins left out by the vCPU limit */
};

/* -EINVAL for bad input (no catalog, no subnet, a subnet without a zone); 0 with zero bins when nothing is
 * to be placed or nothing fits. */
int prov_select(const struct prov_select_input *in, struct prov_selection *ret);
void prov_selection_clear(struct prov_selection *s);

/* The fleet overrides of a bin for one capacity type: candidates smallest first, each over the subnets
 * (preferred first, the interrupted zone left out unless it is the only one), skipping unavailable pools,
 * capped at req->max_overrides. Returns the number written to out (at most out_size). */
size_t prov_bin_overrides(const struct prov_select_input *in, const struct prov_bin *bin,
                          const char *capacity_type, prov_unavailable_fn unavailable, void *userdata,
                          struct prov_override *out, size_t out_size);

/* A ClientToken (at most 64 ASCII chars) from the notice and the launch (bin, capacity type, attempt after
 * capacity errors): the same inputs always give the same token, so a restart replays the same calls. */
int prov_client_token(const char *event_id, const char *instance_id, size_t bin, const char *capacity_type,
                      unsigned attempt, char ret[65]);

/* ==== EC2 and Auto Scaling client (ec2.c, asg_capacity.c) ==== */

typedef const struct aws_credentials *(*ec2_credentials_fn)(void *userdata);

struct ec2_config {
        const char *endpoint;             /* NULL: $AWS_ENDPOINT_URL_EC2, $AWS_ENDPOINT_URL, else AWS's */
        const char *autoscaling_endpoint; /* NULL: asg_client_new()'s rules (controller.h) */
        const char *region;               /* NULL: $AWS_REGION, $AWS_DEFAULT_REGION */
        ec2_credentials_fn credentials;   /* required */
        void *userdata;
        uint64_t timeout_usec; /* per call, real time; 0 = 30 s */
};

struct ec2_client;
int ec2_client_new(struct loop *l, const struct ec2_config *cfg, struct ec2_client **ret);
/* Calls under way end: their callbacks run with -ECANCELED (and may not start new calls). NULL-safe. */
struct ec2_client *ec2_client_free(struct ec2_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ec2_client *, ec2_client_free);

/* The outcome of a call: 0, or a negative errno with the AWS error code and message. */
struct ec2_result {
        int error;
        long status;
        char code[96];
        char message[256];
};
/* The codes Karpenter treats as "this pool has no capacity now, try another". */
bool ec2_capacity_error(const char *code);

struct ec2_tag {
        const char *key;
        const char *value;
};

struct ec2_fleet_request {
        const char *client_token;
        const char *launch_template_id; /* one of id or name */
        const char *launch_template_name;
        const char *launch_template_version; /* NULL = "$Default" */
        const struct prov_override *overrides;
        size_t n_overrides;
        const char *capacity_type;  /* "spot" | "on-demand" */
        unsigned target;            /* TotalTargetCapacity; 0 = 1 */
        const struct ec2_tag *tags; /* TagSpecification ResourceType=instance */
        size_t n_tags;
};

struct ec2_fleet_instance {
        char instance_id[32];
        char instance_type[PROV_NAME_SIZE];
        char subnet_id[64];
        char zone[PROV_NAME_SIZE];
        char lifecycle[16]; /* "spot" | "on-demand" */
};
struct ec2_fleet_error {
        char instance_type[PROV_NAME_SIZE];
        char subnet_id[64];
        char zone[PROV_NAME_SIZE];
        char lifecycle[16];
        char code[96];
        char message[256];
};
struct ec2_fleet_result {
        struct ec2_result r;
        char fleet_id[64];
        struct ec2_fleet_instance *instances;
        size_t n_instances;
        struct ec2_fleet_error *errors;
        size_t n_errors;
};
void ec2_fleet_result_clear(struct ec2_fleet_result *f);

/* Pieces exposed for tests: the form body of a CreateFleet, and the reading of its answer. */
int ec2_create_fleet_body(const struct ec2_fleet_request *req, char **ret);
int ec2_parse_create_fleet(long status, const char *body, size_t len, struct ec2_fleet_result *ret);

typedef void (*ec2_fleet_fn)(const struct ec2_fleet_result *res, void *userdata);
/* Calls done exactly once, on the loop, never inside ec2_create_fleet (unless it returns < 0). */
int ec2_create_fleet(struct ec2_client *c, const struct ec2_fleet_request *req, ec2_fleet_fn done,
                     void *userdata);

struct ec2_instance {
        char instance_id[32];
        char instance_type[PROV_NAME_SIZE];
        char state[32]; /* pending, running, shutting-down, terminated, stopping, stopped */
        char zone[PROV_NAME_SIZE];
        char private_dns_name[128];
        char lifecycle[16]; /* "spot" or "" (on-demand) */
        char replaces[32];  /* the spotdrain.io/replaces tag, "" when absent */
};
typedef void (*ec2_instances_fn)(const struct ec2_result *res, const struct ec2_instance *v, size_t n,
                                 void *userdata);
/* By ids (ids may be NULL) and/or "Name=value[,value...]" filters, split at the last '=' (tag:KEY=VALUE,
 * instance-state-name=pending,running). One page (up to 1000 instances). */
int ec2_describe_instances(struct ec2_client *c, const char *const *ids, const char *const *filters,
                           ec2_instances_fn done, void *userdata);
int ec2_parse_describe_instances(long status, const char *body, size_t len, struct ec2_result *res,
                                 struct ec2_instance **ret, size_t *ret_n);

typedef void (*ec2_done_fn)(const struct ec2_result *res, void *userdata);
int ec2_terminate_instances(struct ec2_client *c, const char *const *ids, ec2_done_fn done, void *userdata);

/* DescribeInstanceTypes, every page, into a catalog (families: "m5", ...; NULL = every type). */
typedef void (*ec2_catalog_fn)(const struct ec2_result *res, struct prov_catalog *catalog, void *userdata);
int ec2_describe_instance_types(struct ec2_client *c, const char *const *families, ec2_catalog_fn done,
                                void *userdata);
/* One page: adds its types to cat; *ret_next_token is the NextToken (NULL at the end). */
int ec2_parse_instance_types(long status, const char *body, size_t len, struct ec2_result *res,
                             struct prov_catalog *cat, char **ret_next_token);

/* Auto Scaling (asg_capacity.c). */
struct asg_group {
        char name[256];
        int desired, min, max;
        unsigned instances;          /* every instance in the group */
        char replaced_tag_value[16]; /* the spotdrain.io/replaced-INSTANCE tag asked about, "" if absent */
};
typedef void (*asg_group_fn)(const struct ec2_result *res, const struct asg_group *g, void *userdata);
/* replaced_instance (may be NULL): whose spotdrain.io/replaced-INSTANCE tag to report. */
int asg_describe_group(struct ec2_client *c, const char *group, const char *replaced_instance,
                       asg_group_fn done, void *userdata);
int asg_parse_group(long status, const char *body, size_t len, const char *replaced_instance,
                    struct ec2_result *res, struct asg_group *ret);
/* Raises the group's desired capacity by n for the instance being replaced, within its max, idempotently:
 * the group is tagged spotdrain.io/replaced-INSTANCE=TARGET first, and a group already carrying the tag is
 * only brought up to that target, never further. done gets the new desired capacity (or the error). */
typedef void (*asg_raise_fn)(const struct ec2_result *res, int desired, void *userdata);
int asg_raise_desired(struct ec2_client *c, const char *group, const char *instance_id, unsigned n,
                      asg_raise_fn done, void *userdata);

/* Internal to src/provision (ec2.c <-> asg_capacity.c): the query call (EC2's, or the Auto Scaling
 * client's), a form field with a formatted key, and EC2's reading of errors. done runs exactly once: with
 * the answer, or with -ECANCELED from ec2_client_free(). */
struct buf;
struct aws_result;
int ec2_call(struct ec2_client *c, bool autoscaling, const char *body,
             void (*done)(const struct aws_result *res, const char *body, size_t len, void *userdata),
             void *userdata);
int ec2_form_addf(struct buf *b, const char *value, const char *key_fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ec2_result_from_answer(int error, long status, const char *body, size_t len, struct ec2_result *r);
void ec2_result_from_aws(const struct aws_result *a, struct ec2_result *r);
const char *ec2_client_region(const struct ec2_client *c);

/* ==== provisioner (provisioner.c) ==== */

#define PROV_ICE_TTL_USEC (180ULL * 1000000ULL)

struct provisioner_options {
        const struct prov_catalog *catalog; /* borrowed; required */
        struct prov_requirements req;
        const struct prov_subnet *subnets; /* borrowed; required unless asg_name is set */
        size_t n_subnets;
        const char *launch_template_id; /* one of id / name for fleet mode */
        const char *launch_template_name;
        const char *launch_template_version;
        const char *asg_name; /* set: Auto Scaling mode (raise desired capacity) instead of CreateFleet */
        /* Notice kinds that start a replacement: bits (1u << NOTICE_...); 0 = rebalance recommendation, spot
         * interruption and scheduled change. An interruption after a rebalance launches nothing more. */
        unsigned triggers;
        int vcpu_limit;              /* vCPUs per window; 0 = no limit */
        uint64_t vcpu_window_usec;   /* 0 = 10 min */
        uint64_t ready_timeout_usec; /* launch → Ready before replacement-failed; 0 = 10 min */
        /* An extra instance tag KEY=owned (e.g. kubernetes.io/cluster/NAME); NULL = none. */
        const char *cluster_tag_key;
};

/* A pod the replacement must hold. */
struct provisioner_pod {
        const char *name; /* for logs; may be NULL */
        struct prov_request req;
        bool daemonset; /* counted as per-node overhead instead of packed */
};
struct cJSON;
/* From a core/v1 Pod object: its effective requests as the scheduler counts them (the sum over containers,
 * at least the largest init container, plus spec.overhead) and whether a DaemonSet owns it. name borrows the
 * object's metadata.name. -EINVAL for a malformed quantity. */
int provisioner_pod_from_json(const struct cJSON *pod, struct provisioner_pod *ret);

enum prov_state {
        PROV_STATE_LAUNCHING,
        PROV_STATE_LAUNCHED, /* waiting for the node to register and turn Ready */
        PROV_STATE_READY,
        PROV_STATE_FAILED,
};
const char *prov_state_to_string(enum prov_state s);

struct provisioner_replacement {
        char replaces[32]; /* the interrupted instance */
        char node[256];    /* the interrupted node, "" when unknown */
        size_t bin;
        enum prov_state state;
        char instance_id[32];
        char instance_type[PROV_NAME_SIZE];
        char zone[PROV_NAME_SIZE];
        char capacity_type[16];
        char new_node[256];
        char client_token[65];
        uint64_t requested_usec, launched_usec, ready_usec; /* engine clock; 0 = not yet */
        char error[256];
};

struct provisioner;
/* kube may be NULL: no tracking to Ready, replacements stay LAUNCHED and replacement-launched is raised at
 * launch instead of at Ready (with kube, a launched node not Ready within ready_timeout_usec raises
 * replacement-failed). alerts may be NULL. All borrowed; the caller frees the provisioner before ec2. */
int provisioner_new(struct loop *l, struct kube_client *kube, struct ec2_client *ec2,
                    const struct provisioner_options *o, struct alert_bus *alerts, struct provisioner **ret);
struct provisioner *provisioner_free(struct provisioner *p); /* NULL-safe; cancels what is under way */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct provisioner *, provisioner_free);

/* A notice for a node and the pods on it. Starts replacements when the notice kind is a configured trigger
 * and no replacement for the instance is under way (a rebalance followed by the interruption launches once).
 * Fleet mode first looks for instances already tagged spotdrain.io/replaces=INSTANCE (pending or running:
 * launched before a restart) and adopts them; the others are launched with ClientTokens derived from the
 * notice, so a replayed notice gets EC2's first answer again.
 * Returns 1 when a launch was started, 0 when nothing was to be done, < 0 on bad input or ENOMEM (launch
 * failures are reported through alerts and provisioner_replacements()). node may be NULL; zone is the
 * interrupted instance's zone (may be NULL). */
int provisioner_on_notice(struct provisioner *p, const struct notice *n, const char *node, const char *zone,
                          const struct provisioner_pod *pods, size_t n_pods);
/* The replacements so far (borrowed; valid until the next provisioner call or loop iteration). */
const struct provisioner_replacement *provisioner_replacements(const struct provisioner *p, size_t *ret_n);
/* Whether a replacement for the instance is launching or launched and not yet failed. */
bool provisioner_under_way(const struct provisioner *p, const char *instance_id);
/* Capacity errors remembered now (type, zone, capacity type); for tests and metrics. */
bool provisioner_unavailable(const struct provisioner *p, const char *instance_type, const char *zone,
                             const char *capacity_type);
/* vCPUs launched within the current window. */
int provisioner_vcpus_in_window(const struct provisioner *p);

/* ==== front ends (frontend.c): the provisioner built from the configuration ====
 * What the agent, the controller and `spotdrain simulate` call: the EC2 client, the catalog, requirements,
 * subnets and triggers from the provision.* keys (config.h), and one request per notice that reads the
 * node's zone and the pods bound to it from the cluster, then calls provisioner_on_notice(). */

struct spotdrain_config;

struct prov_frontend_options {
        const char *region; /* NULL: aws.region, else ec2_config's rules ($AWS_REGION, ...) */
        /* Credentials (borrowed for each call), e.g. the controller's; NULL: an own provider chain
         * (awscreds.h) whose latest answer is kept. */
        ec2_credentials_fn credentials;
        void *credentials_userdata;
};

struct prov_frontend;
/* 0 with *ret NULL when provision.enabled is false. -EINVAL with *ret_error (malloc'ed) for a bad
 * provision.* value (a subnet without its zone, an unreadable max_memory, an unknown trigger or capacity
 * type, fleet mode without launch template or subnets, asg mode without a group) or no catalog. cfg, kube
 * and alerts (both may be NULL) are borrowed and must outlive the frontend. */
int prov_frontend_new(struct loop *l, struct kube_client *kube, struct alert_bus *alerts,
                      const struct spotdrain_config *cfg, const struct prov_frontend_options *o,
                      struct prov_frontend **ret, char **ret_error);
struct prov_frontend *prov_frontend_free(struct prov_frontend *f); /* NULL-safe; cancels what is under way */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct prov_frontend *, prov_frontend_free);
/* A notice for node: reads the node (its zone) and its pods, then asks the provisioner, which decides
 * whether the kind is a trigger and whether a replacement is under way already. 0 once asked (the outcome
 * comes through alerts and provisioner_replacements()), -EINVAL, -ENOMEM. f NULL (provisioning off): 0. */
int prov_frontend_request(struct prov_frontend *f, const char *node, const struct notice *n);
/* The same, with the zone (may be NULL) and the pods bound to the node (core/v1 Pod objects) at hand:
 * finished pods and static (mirror) pods are left out. */
int prov_frontend_request_pods(struct prov_frontend *f, const char *node, const char *zone,
                               const struct notice *n, const struct cJSON *pods);
struct provisioner *prov_frontend_provisioner(const struct prov_frontend *f); /* NULL when f is */
/* Requests still reading the cluster (or waiting for credentials) before they reach the provisioner. */
size_t prov_frontend_pending(const struct prov_frontend *f);

/* Pieces of the configuration (pure; tests). Subnets: "SUBNET-ID=ZONE" or "=ZONE" (an override by zone);
 * free with prov_subnets_free(). Requirements borrow cfg's lists. Triggers: notice kind names to bits. */
int prov_subnets_from_config(const char *const *spec, struct prov_subnet **ret, size_t *ret_n,
                             char **ret_error);
void prov_subnets_free(struct prov_subnet *v, size_t n);
int prov_requirements_from_config(const struct spotdrain_config *cfg, struct prov_requirements *ret,
                                  char **ret_error);
int prov_triggers_from_config(const char *const *kinds, unsigned *ret, char **ret_error);
