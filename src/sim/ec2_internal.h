/* The EC2 and Auto Scaling surface's files for each other (ec2_surface.h says what the surface does):
 * ec2_surface.c the listener and dispatch; ec2_asg.c the Auto Scaling group; ec2_fleet.c launching;
 * ec2_instances.c the instances; ec2_answer.c the answers and parameters they all use. */
#pragma once

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim/ec2_surface.h"
#include "sim/sigv4_check.h"
#include "spotdrain/util.h"

#define EC2_XMLNS     "http://ec2.amazonaws.com/doc/2016-11-15/"
#define ASG_XMLNS     "http://autoscaling.amazonaws.com/doc/2011-01-01/"
#define ELBV2_XMLNS   "http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"
#define MAX_INDEX     200
#define MAX_TARGET    50
#define ASG_HEADROOM  10
#define MAX_INSTANCES 10000

struct launched {
        char *id, *type, *zone, *subnet, *capacity;
        cJSON *tags; /* object KEY → VALUE */
        uint64_t launch_usec;
        bool terminated;
        bool in_group; /* launched by the Auto Scaling group */
};

struct fleet_answer {
        char *token;
        char *xml;
};

struct pool_rule {
        char *type, *zone, *capacity; /* NULL = any */
};

struct sim_ec2 {
        struct sim *sim;
        struct sim_http *http;
        char *region, *group;
        pthread_mutex_t lock;
        struct launched *inst;
        size_t n_inst;
        struct fleet_answer *fleets;
        size_t n_fleets;
        struct pool_rule *rules;
        size_t n_rules;
        struct prov_catalog *catalog;
        char **terminated_nodes; /* scenario node instance ids terminated through the API */
        size_t n_terminated_nodes;
        int desired, max;
        cJSON *group_tags; /* object KEY → VALUE */
        cJSON *node_tags;  /* scenario nodes' tags set by CreateTags: instance id → {KEY: VALUE} */
        uint64_t created_usec;
        uint64_t seq;
        struct sim_ec2_fault fault;
        struct sim_ec2_stats stats;
        sigv4_secret_lookup_fn lookup;
        void *lookup_userdata;
        struct sim_sts *sts;
        struct sim_elbv2 *elbv2;
};

/* ---- answers ---- */

struct answer {
        unsigned status;
        struct buf body; /* the XML */
        bool oom;
};

/* An error answer in the EC2 Query shape, or with an awsquery namespace (Auto Scaling's, ELBv2's) in the
 * awsquery shape. */

/* ec2_error(e, a, status, code, fmt, ...) and asg_error(...): the answer of each API's errors. */
#define ec2_error(e, a, status, ...) sim_ec2_error_answer(e, a, status, NULL, __VA_ARGS__)
#define asg_error(e, a, status, ...) sim_ec2_error_answer(e, a, status, ASG_XMLNS, __VA_ARGS__)

/* One instance as DescribeInstances lists it. */
struct view {
        const char *id, *type, *zone, *subnet, *capacity, *dns, *ip;
        const char *state;
        int code;
        uint64_t launch_usec;
        const cJSON *tags;
        bool in_group;
};

/* ec2_answer.c */
void sim_ec2_ans_printf(struct answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_ec2_ans_text(struct answer *a, const char *s);
void sim_ec2_ans_elem(struct answer *a, const char *name, const char *text);
void sim_ec2_ans_reset(struct answer *a);
void sim_ec2_request_id(struct sim_ec2 *e, char out[37]);
void sim_ec2_error_answer(struct sim_ec2 *e, struct answer *a, unsigned status, const char *xmlns,
                          const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int sim_ec2_param_set(cJSON *p, const char *key, const char *value);
int sim_ec2_form_param(void *userdata, const char *key, const char *value);
enum MHD_Result sim_ec2_collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value);
const char *sim_ec2_param(const cJSON *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ec2_instances.c (with the model's lock held for the views) */
const char *sim_ec2_zone_of_subnet(const char *subnet);
size_t sim_ec2_view_count(struct sim_ec2 *e);
bool sim_ec2_view_at(struct sim_ec2 *e, size_t i, struct view *v);
void sim_ec2_act_describe_instances(struct sim_ec2 *e, const cJSON *p, struct answer *a);
void sim_ec2_act_create_tags(struct sim_ec2 *e, const cJSON *p, struct answer *a);
void sim_ec2_act_terminate(struct sim_ec2 *e, const cJSON *p, struct answer *a);
void sim_ec2_act_describe_types(struct sim_ec2 *e, const cJSON *p, struct answer *a);

/* ec2_fleet.c */
void sim_ec2_launched_clear(struct launched *l);
int sim_ec2_launch(struct sim_ec2 *e, const char *type, const char *zone, const char *subnet,
                   const char *capacity, const cJSON *tags, bool in_group, char **ret_id);
void sim_ec2_act_create_fleet(struct sim_ec2 *e, const cJSON *p, struct answer *a);

/* ec2_asg.c */
void sim_ec2_act_describe_groups(struct sim_ec2 *e, const cJSON *p, struct answer *a);
void sim_ec2_act_set_desired(struct sim_ec2 *e, const cJSON *p, struct answer *a);
void sim_ec2_act_tags(struct sim_ec2 *e, const cJSON *p, struct answer *a);
void sim_ec2_act_lifecycle(struct sim_ec2 *e, const cJSON *p, struct answer *a, const char *action,
                           bool role);
void sim_ec2_act_describe_hooks(struct sim_ec2 *e, const cJSON *p, struct answer *a);
