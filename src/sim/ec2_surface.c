/* The simulator's EC2 and Auto Scaling surface (query protocols, XML answers). */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/aws_request.h"
#include "sim/ec2_surface.h"
#include "sim/elbv2.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"
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

static void ans_printf(struct answer *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ans_printf(struct answer *a, const char *fmt, ...)
{
        va_list ap;
        char *s;

        va_start(ap, fmt);
        int k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0 || buf_append(&a->body, s, (size_t)k) < 0)
                a->oom = true;
        if (k >= 0)
                free(s);
}

static void ans_text(struct answer *a, const char *s)
{
        for (; s && *s; s++) {
                const char *e = *s == '&'   ? "&amp;"
                                : *s == '<' ? "&lt;"
                                : *s == '>' ? "&gt;"
                                : *s == '"' ? "&quot;"
                                            : NULL;
                if ((e ? buf_append(&a->body, e, strlen(e)) : buf_append(&a->body, s, 1)) < 0)
                        a->oom = true;
        }
}

/* <name>text</name>, text escaped. */
static void ans_elem(struct answer *a, const char *name, const char *text)
{
        ans_printf(a, "<%s>", name);
        ans_text(a, text);
        ans_printf(a, "</%s>", name);
}

static void ans_reset(struct answer *a)
{
        buf_free(&a->body);
        a->body = (struct buf){};
}

static void request_id(struct sim_ec2 *e, char out[37])
{
        uint64_t n = ++e->seq;
        snprintf(out, 37, "5e2b9f70-%04x-4c3e-b8f6-%012" PRIx64, (unsigned)(n & 0xffff), n * 2654435761u);
}

/* An error answer in the EC2 Query shape, or with an awsquery namespace (Auto Scaling's, ELBv2's) in the
 * awsquery shape. */
static void error_answer(struct sim_ec2 *e, struct answer *a, unsigned status, const char *xmlns,
                         const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void error_answer(struct sim_ec2 *e, struct answer *a, unsigned status, const char *xmlns,
                         const char *code, const char *fmt, ...)
{
        char msg[512], rid[37];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        request_id(e, rid);
        ans_reset(a);
        a->status = status;
        if (xmlns)
                ans_printf(a, "<ErrorResponse xmlns=\"%s\"><Error><Type>%s</Type>", xmlns,
                           status >= 500 ? "Receiver" : "Sender");
        else
                ans_printf(a, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error>");
        ans_elem(a, "Code", code);
        ans_elem(a, "Message", msg);
        if (xmlns)
                ans_printf(a, "</Error><RequestId>%s</RequestId></ErrorResponse>", rid);
        else
                ans_printf(a, "</Error></Errors><RequestID>%s</RequestID></Response>", rid);
}

/* ec2_error(e, a, status, code, fmt, ...) and asg_error(...): the answer of each API's errors. */
#define ec2_error(e, a, status, ...) error_answer(e, a, status, NULL, __VA_ARGS__)
#define asg_error(e, a, status, ...) error_answer(e, a, status, ASG_XMLNS, __VA_ARGS__)

/* ---- parameters ---- */

static int param_set(cJSON *p, const char *key, const char *value)
{
        cJSON_DeleteItemFromObjectCaseSensitive(p, key);
        return cJSON_AddStringToObject(p, key, value) ? 0 : -ENOMEM;
}

static int form_param(void *userdata, const char *key, const char *value)
{
        return param_set(userdata, key, value);
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        return param_set(cls, key, value ? value : "") < 0 ? MHD_NO : MHD_YES;
}

static const char *param(const cJSON *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *param(const cJSON *p, const char *fmt, ...)
{
        char key[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(key, sizeof(key), fmt, ap);
        va_end(ap);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- the world as EC2 sees it ---- */

static const char *zone_of_subnet(const char *subnet)
{
        return startswith(subnet, SIM_EC2_SUBNET_PREFIX) && subnet[strlen(SIM_EC2_SUBNET_PREFIX)]
                   ? subnet + strlen(SIM_EC2_SUBNET_PREFIX)
                   : NULL;
}

static bool node_terminated(struct sim_ec2 *e, const char *id)
{
        for (size_t i = 0; i < e->n_terminated_nodes; i++)
                if (streq(e->terminated_nodes[i], id))
                        return true;
        return false;
}

/* One instance as DescribeInstances lists it. */
struct view {
        const char *id, *type, *zone, *subnet, *capacity, *dns, *ip;
        const char *state;
        int code;
        uint64_t launch_usec;
        const cJSON *tags;
        bool in_group;
};

/* With the model's lock held. i < nodes: a scenario (or joined) node; else a launched instance. */
static size_t view_count(struct sim_ec2 *e)
{
        return sim_node_count(e->sim) + e->n_inst;
}

static long node_of(struct sim_ec2 *e, const char *id)
{
        for (size_t i = 0; i < sim_node_count(e->sim); i++)
                if (streq(sim_node_instance_id(e->sim, i), id))
                        return (long)i;
        return -1;
}

static struct launched *launched_of(struct sim_ec2 *e, const char *id)
{
        for (size_t i = 0; i < e->n_inst; i++)
                if (streq(e->inst[i].id, id))
                        return &e->inst[i];
        return NULL;
}

/* false when index i is a joined launched node (listed through its launched entry instead). */
static bool view_at(struct sim_ec2 *e, size_t i, struct view *v)
{
        size_t nn = sim_node_count(e->sim);

        *v = (struct view){};
        if (i < nn) {
                v->id = sim_node_instance_id(e->sim, i);
                if (launched_of(e, v->id))
                        return false;
                v->type = sim_node_instance_type(e->sim, i);
                v->zone = sim_node_zone(e->sim, i);
                v->capacity = sim_node_capacity_type(e->sim, i);
                v->dns = sim_node_name(e->sim, i);
                v->ip = sim_node_ip(e->sim, i);
                v->launch_usec = sim_wall_usec(e->sim, -3600);
                v->in_group = true;
                v->tags = cJSON_GetObjectItemCaseSensitive(e->node_tags, v->id);
                bool gone = sim_node_gone(e->sim, i) || node_terminated(e, v->id);
                v->state = gone ? "terminated" : "running";
                v->code = gone ? 48 : 16;
                return true;
        }
        struct launched *l = &e->inst[i - nn];
        long n = node_of(e, l->id);
        v->id = l->id;
        v->type = l->type;
        v->zone = l->zone;
        v->subnet = l->subnet;
        v->capacity = l->capacity;
        v->launch_usec = l->launch_usec;
        v->tags = l->tags;
        v->in_group = l->in_group;
        v->dns = n >= 0 ? sim_node_name(e->sim, (size_t)n) : "";
        v->ip = n >= 0 ? sim_node_ip(e->sim, (size_t)n) : "";
        if (l->terminated || (n >= 0 && sim_node_gone(e->sim, (size_t)n))) {
                v->state = l->terminated ? "shutting-down" : "terminated";
                v->code = l->terminated ? 32 : 48;
        } else if (n >= 0) {
                v->state = "running";
                v->code = 16;
        } else {
                v->state = "pending";
                v->code = 0;
        }
        return true;
}

static const char *tag_value(const struct view *v, const char *key)
{
        const cJSON *t = v->tags ? cJSON_GetObjectItemCaseSensitive(v->tags, key) : NULL;
        return cJSON_IsString(t) ? t->valuestring : NULL;
}

static bool filter_matches(const struct view *v, const char *name, const cJSON *p, unsigned f)
{
        const char *field = NULL;
        bool tag = false, any_key = false;

        if (streq(name, "instance-id"))
                field = v->id;
        else if (streq(name, "instance-state-name"))
                field = v->state;
        else if (streq(name, "private-dns-name"))
                field = v->dns;
        else if (streq(name, "availability-zone"))
                field = v->zone;
        else if (streq(name, "instance-type"))
                field = v->type;
        else if (streq(name, "instance-lifecycle"))
                field = streq(v->capacity, "spot") ? "spot" : "";
        else if (startswith(name, "tag:")) {
                field = tag_value(v, name + 4);
                tag = true;
        } else if (streq(name, "tag-key"))
                any_key = true;
        else
                return true; /* filters the sim does not model match everything */
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *val = param(p, "Filter.%u.Value.%u", f, k);
                if (!val)
                        break;
                if (any_key ? (v->tags && cJSON_GetObjectItemCaseSensitive(v->tags, val))
                            : (field && fnmatch(val, field, 0) == 0))
                        return true;
        }
        (void)tag;
        return false;
}

static void render_instance(struct answer *a, const struct view *v)
{
        char when[40];
        const cJSON *t;

        format_rfc3339(v->launch_usec, when, sizeof(when));
        ans_printf(a,
                   "<item><reservationId>r-%.17s</reservationId><ownerId>%s</ownerId><groupSet/>"
                   "<instancesSet><item>",
                   v->id + 2, SIM_EC2_ACCOUNT);
        ans_elem(a, "instanceId", v->id);
        ans_printf(a, "<imageId>ami-0c2b8ca1dad447f8a</imageId><instanceState><code>%d</code>", v->code);
        ans_elem(a, "name", v->state);
        ans_printf(a, "</instanceState>");
        ans_elem(a, "privateDnsName", v->dns);
        ans_printf(a, "<dnsName/><amiLaunchIndex>0</amiLaunchIndex>");
        ans_elem(a, "instanceType", v->type);
        ans_elem(a, "launchTime", when);
        ans_printf(a, "<placement>");
        ans_elem(a, "availabilityZone", v->zone);
        ans_printf(a,
                   "<tenancy>default</tenancy></placement><monitoring><state>disabled</state></monitoring>");
        if (!isempty(v->subnet))
                ans_elem(a, "subnetId", v->subnet);
        if (!isempty(v->ip))
                ans_elem(a, "privateIpAddress", v->ip);
        ans_printf(a, "<architecture>x86_64</architecture><rootDeviceType>ebs</rootDeviceType>");
        if (streq(v->capacity, "spot"))
                ans_printf(a, "<instanceLifecycle>spot</instanceLifecycle>");
        ans_printf(a, "<tagSet>");
        cJSON_ArrayForEach (t, v->tags) {
                ans_printf(a, "<item>");
                ans_elem(a, "key", t->string);
                ans_elem(a, "value", t->valuestring);
                ans_printf(a, "</item>");
        }
        ans_printf(a, "</tagSet><hypervisor>nitro</hypervisor></item></instancesSet></item>");
}

/* Naming an unknown id in InstanceId.N is an error, as on EC2: true when *a is that error. */
static bool unknown_instance(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = param(p, "InstanceId.%u", k);
                if (!id)
                        break;
                if (node_of(e, id) < 0 && !launched_of(e, id)) {
                        ec2_error(e, a, 400, "InvalidInstanceID.NotFound",
                                  "The instance ID '%s' does not exist", id);
                        return true;
                }
        }
        return false;
}

static void act_describe_instances(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        char rid[37];

        if (unknown_instance(e, p, a))
                return;
        request_id(e, rid);
        ans_printf(a,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstancesResponse xmlns=\"%s\">"
                   "<requestId>%s</requestId><reservationSet>",
                   EC2_XMLNS, rid);
        for (size_t i = 0; i < view_count(e); i++) {
                struct view v;
                bool ok = view_at(e, i, &v);
                if (ok && param(p, "InstanceId.1")) {
                        ok = false;
                        for (unsigned k = 1; k <= MAX_INDEX && !ok; k++) {
                                const char *id = param(p, "InstanceId.%u", k);
                                if (!id)
                                        break;
                                ok = streq(id, v.id);
                        }
                }
                for (unsigned f = 1; ok && f <= MAX_INDEX; f++) {
                        const char *name = param(p, "Filter.%u.Name", f);
                        if (!name)
                                break;
                        ok = filter_matches(&v, name, p, f);
                }
                if (ok)
                        render_instance(a, &v);
        }
        ans_printf(a, "</reservationSet></DescribeInstancesResponse>");
}

/* CreateTags on instances (ResourceId.N; Tag.N.Key, Tag.N.Value): what `aws ec2 create-tags` sends. */
static void act_create_tags(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        char rid[37];

        if (!param(p, "ResourceId.1") || !param(p, "Tag.1.Key")) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameters ResourceId and Tag");
                return;
        }
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = param(p, "ResourceId.%u", k);
                if (!id)
                        break;
                if (node_of(e, id) < 0 && !launched_of(e, id)) {
                        ec2_error(e, a, 400, "InvalidInstanceID.NotFound",
                                  "The instance ID '%s' does not exist", id);
                        return;
                }
        }
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = param(p, "ResourceId.%u", k);
                struct launched *l;
                cJSON *tags;
                if (!id)
                        break;
                l = launched_of(e, id);
                tags = l ? l->tags : cJSON_GetObjectItemCaseSensitive(e->node_tags, id);
                if (!tags && !(tags = cJSON_AddObjectToObject(e->node_tags, id))) {
                        a->oom = true;
                        return;
                }
                for (unsigned t = 1; t <= MAX_INDEX; t++) {
                        const char *key = param(p, "Tag.%u.Key", t), *val = param(p, "Tag.%u.Value", t);
                        if (!key)
                                break;
                        if (param_set(tags, key, val ? val : "") < 0)
                                a->oom = true;
                }
        }
        request_id(e, rid);
        ans_printf(a,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateTagsResponse xmlns=\"%s\">"
                   "<requestId>%s</requestId><return>true</return></CreateTagsResponse>",
                   EC2_XMLNS, rid);
}

static void act_terminate(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        char rid[37];

        if (!param(p, "InstanceId.1")) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameter InstanceId");
                return;
        }
        if (unknown_instance(e, p, a))
                return;
        request_id(e, rid);
        ans_printf(a,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<TerminateInstancesResponse xmlns=\"%s\">"
                   "<requestId>%s</requestId><instancesSet>",
                   EC2_XMLNS, rid);
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = param(p, "InstanceId.%u", k);
                struct launched *l;
                long n;
                const char *prev = "running";
                int prev_code = 16;
                if (!id)
                        break;
                l = launched_of(e, id);
                n = node_of(e, id);
                if (l) {
                        if (l->terminated) {
                                prev = "shutting-down";
                                prev_code = 32;
                        } else if (n < 0) {
                                prev = "pending";
                                prev_code = 0;
                        }
                        l->terminated = true;
                } else if (!node_terminated(e, id)) {
                        char **v = realloc(e->terminated_nodes, (e->n_terminated_nodes + 1) * sizeof(*v));
                        char *c = strdup(id);
                        if (!v || !c) {
                                free(c);
                                if (v)
                                        e->terminated_nodes = v;
                                a->oom = true;
                                return;
                        }
                        e->terminated_nodes = v;
                        e->terminated_nodes[e->n_terminated_nodes++] = c;
                } else {
                        prev = "shutting-down";
                        prev_code = 32;
                }
                ans_printf(a, "<item>");
                ans_elem(a, "instanceId", id);
                ans_printf(a,
                           "<currentState><code>32</code><name>shutting-down</name></currentState>"
                           "<previousState><code>%d</code><name>%s</name></previousState></item>",
                           prev_code, prev);
        }
        ans_printf(a, "</instancesSet></TerminateInstancesResponse>");
}

static void act_describe_types(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *max_s = param(p, "MaxResults"), *next = param(p, "NextToken");
        long max = max_s ? strtol(max_s, NULL, 10) : 100, skip = next ? strtol(next, NULL, 10) : 0;
        long seen = 0, shown = 0;
        char rid[37];

        if (max < 5 || max > 100) {
                ec2_error(e, a, 400, "InvalidParameterValue", "MaxResults must be between 5 and 100");
                return;
        }
        request_id(e, rid);
        ans_printf(a,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceTypesResponse xmlns=\"%s\">"
                   "<requestId>%s</requestId><instanceTypeSet>",
                   EC2_XMLNS, rid);
        for (size_t i = 0; e->catalog && i < e->catalog->n; i++) {
                const struct prov_itype *t = &e->catalog->types[i];
                bool ok = true;
                if (param(p, "InstanceType.1")) {
                        ok = false;
                        for (unsigned k = 1; k <= MAX_INDEX && !ok; k++) {
                                const char *n = param(p, "InstanceType.%u", k);
                                if (!n)
                                        break;
                                ok = streq(n, t->name);
                        }
                }
                for (unsigned f = 1; ok && f <= MAX_INDEX; f++) {
                        const char *name = param(p, "Filter.%u.Name", f);
                        if (!name)
                                break;
                        if (!streq(name, "instance-type"))
                                continue;
                        ok = false;
                        for (unsigned k = 1; k <= MAX_INDEX && !ok; k++) {
                                const char *val = param(p, "Filter.%u.Value.%u", f, k);
                                if (!val)
                                        break;
                                ok = fnmatch(val, t->name, 0) == 0;
                        }
                }
                if (!ok || seen++ < skip)
                        continue;
                if (shown == max) {
                        ans_printf(
                            a,
                            "</instanceTypeSet><nextToken>%ld</nextToken></DescribeInstanceTypesResponse>",
                            skip + shown);
                        return;
                }
                shown++;
                ans_printf(a, "<item>");
                ans_elem(a, "instanceType", t->name);
                ans_printf(
                    a, "<currentGeneration>true</currentGeneration><supportedUsageClasses><item>on-demand"
                       "</item><item>spot</item></supportedUsageClasses><processorInfo>"
                       "<supportedArchitectures><item>");
                ans_text(a, t->arch);
                ans_printf(
                    a,
                    "</item></supportedArchitectures></processorInfo><vCpuInfo><defaultVCpus>%d"
                    "</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>%" PRId64 "</sizeInMiB>"
                    "</memoryInfo><networkInfo><maximumNetworkInterfaces>%d</maximumNetworkInterfaces>"
                    "<ipv4AddressesPerInterface>%d</ipv4AddressesPerInterface></networkInfo></item>",
                    t->vcpu, t->memory_mib, t->max_enis, t->ipv4_per_eni);
        }
        ans_printf(a, "</instanceTypeSet></DescribeInstanceTypesResponse>");
}

/* ---- launching ---- */

static bool pool_blocked(struct sim_ec2 *e, const char *type, const char *zone, const char *capacity)
{
        for (size_t i = 0; i < e->n_rules; i++) {
                const struct pool_rule *r = &e->rules[i];
                if ((!r->type || streq(r->type, type)) && (!r->zone || streq(r->zone, zone)) &&
                    (!r->capacity || streq(r->capacity, capacity)))
                        return true;
        }
        return false;
}

static void launched_clear(struct launched *l)
{
        free(l->id);
        free(l->type);
        free(l->zone);
        free(l->subnet);
        free(l->capacity);
        cJSON_Delete(l->tags);
}

/* Launches one instance into the model and records it. With the model's lock held. */
static int launch(struct sim_ec2 *e, const char *type, const char *zone, const char *subnet,
                  const char *capacity, const cJSON *tags, bool in_group, char **ret_id)
{
        _cleanup_free_ char *id = NULL;
        struct launched l = {};
        int r;

        if (e->n_inst >= MAX_INSTANCES)
                return -E2BIG;
        r = sim_launch_instance(e->sim, type, zone, capacity, &id);
        if (r < 0)
                return r;
        struct launched *v = realloc(e->inst, (e->n_inst + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        e->inst = v;
        l.id = strdup(id);
        l.type = strdup(type);
        l.zone = strdup(zone);
        l.subnet = subnet ? strdup(subnet) : NULL;
        l.capacity = strdup(capacity);
        l.tags = tags ? cJSON_Duplicate(tags, true) : cJSON_CreateObject();
        l.launch_usec = sim_wall_usec(e->sim, sim_now(e->sim));
        l.in_group = in_group;
        if (!l.id || !l.type || !l.zone || (subnet && !l.subnet) || !l.capacity || !l.tags) {
                launched_clear(&l);
                return -ENOMEM;
        }
        e->inst[e->n_inst++] = l;
        e->stats.launched++;
        if (ret_id)
                *ret_id = TAKE_PTR(id);
        return 0;
}

struct override {
        const char *type, *subnet, *zone;
        double priority;
        unsigned index;
};

static int override_cmp(const void *a, const void *b)
{
        const struct override *x = a, *y = b;
        if (x->priority != y->priority)
                return x->priority < y->priority ? -1 : 1;
        return x->index < y->index ? -1 : (x->index > y->index);
}

static void render_overrides(struct answer *a, const cJSON *p, const struct override *o)
{
        const char *lt = "LaunchTemplateConfigs.1.LaunchTemplateSpecification";
        const char *id = param(p, "%s.LaunchTemplateId", lt), *name = param(p, "%s.LaunchTemplateName", lt);
        const char *version = param(p, "%s.Version", lt);

        ans_printf(a, "<launchTemplateAndOverrides><launchTemplateSpecification>");
        if (id)
                ans_elem(a, "launchTemplateId", id);
        if (name)
                ans_elem(a, "launchTemplateName", name);
        /* EC2 answers the resolved version; the sim's templates only ever have version 1. */
        ans_elem(a, "version", version && isdigit((unsigned char)version[0]) ? version : "1");
        ans_printf(a, "</launchTemplateSpecification><overrides>");
        ans_elem(a, "instanceType", o->type);
        if (o->subnet)
                ans_elem(a, "subnetId", o->subnet);
        else
                ans_elem(a, "availabilityZone", o->zone);
        ans_printf(a, "</overrides></launchTemplateAndOverrides>");
}

static void act_create_fleet(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *lt = "LaunchTemplateConfigs.1.LaunchTemplateSpecification";
        const char *token = param(p, "ClientToken"), *type = param(p, "Type");
        const char *target_s = param(p, "TargetCapacitySpecification.TotalTargetCapacity");
        const char *capacity = param(p, "TargetCapacitySpecification.DefaultTargetCapacityType");
        struct override ov[MAX_INDEX];
        size_t n_ov = 0;
        bool tried[MAX_INDEX] = {};
        char rid[37], fleet[64];
        long target;
        cJSON *tags = NULL;

        for (size_t i = 0; token && i < e->n_fleets; i++)
                if (streq(e->fleets[i].token, token)) {
                        /* The same ClientToken: the first answer again, nothing launched. */
                        if (buf_append(&a->body, e->fleets[i].xml, strlen(e->fleets[i].xml)) < 0)
                                a->oom = true;
                        e->stats.create_fleets++;
                        return;
                }
        if (type && !streq(type, "instant")) {
                ec2_error(e, a, 400, "InvalidParameterValue",
                          "The simulator supports only Type=instant fleets");
                return;
        }
        if (!type) {
                ec2_error(e, a, 400, "InvalidParameterValue",
                          "The simulator supports only Type=instant fleets (the default is maintain)");
                return;
        }
        if (!param(p, "%s.LaunchTemplateId", lt) && !param(p, "%s.LaunchTemplateName", lt)) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameter "
                          "LaunchTemplateConfigs.1.LaunchTemplateSpecification");
                return;
        }
        if (!target_s || !capacity) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameter TargetCapacitySpecification");
                return;
        }
        target = strtol(target_s, NULL, 10);
        if (target < 1 || target > MAX_TARGET ||
            (!streq(capacity, "spot") && !streq(capacity, "on-demand"))) {
                ec2_error(e, a, 400, "InvalidParameterValue", "Invalid TargetCapacitySpecification");
                return;
        }
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *t = param(p, "LaunchTemplateConfigs.1.Overrides.%u.InstanceType", k);
                const char *sn = param(p, "LaunchTemplateConfigs.1.Overrides.%u.SubnetId", k);
                const char *z = param(p, "LaunchTemplateConfigs.1.Overrides.%u.AvailabilityZone", k);
                const char *prio = param(p, "LaunchTemplateConfigs.1.Overrides.%u.Priority", k);
                if (!t)
                        break;
                if (sn && !zone_of_subnet(sn)) {
                        ec2_error(e, a, 400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist",
                                  sn);
                        return;
                }
                ov[n_ov] = (struct override){ .type = t,
                                              .subnet = sn,
                                              .zone = sn ? zone_of_subnet(sn) : z,
                                              .priority = prio ? strtod(prio, NULL) : 0,
                                              .index = k };
                if (!ov[n_ov].zone) {
                        ec2_error(e, a, 400, "MissingParameter",
                                  "Override %u names neither a subnet nor a zone", k);
                        return;
                }
                n_ov++;
        }
        if (n_ov == 0) {
                ec2_error(e, a, 400, "InvalidParameterValue",
                          "The simulator's launch templates name no instance type: give overrides");
                return;
        }
        if (streq(capacity, "on-demand"))
                qsort(ov, n_ov, sizeof(*ov), override_cmp);

        tags = cJSON_CreateObject();
        if (!tags) {
                a->oom = true;
                return;
        }
        for (unsigned s = 1; s <= MAX_INDEX; s++) {
                const char *rt = param(p, "TagSpecification.%u.ResourceType", s);
                if (!rt)
                        break;
                if (!streq(rt, "instance"))
                        continue;
                for (unsigned k = 1; k <= MAX_INDEX; k++) {
                        const char *key = param(p, "TagSpecification.%u.Tag.%u.Key", s, k);
                        const char *val = param(p, "TagSpecification.%u.Tag.%u.Value", s, k);
                        if (!key)
                                break;
                        if (param_set(tags, key, val ? val : "") < 0)
                                a->oom = true;
                }
        }

        /* Launch: each unit goes to the first pool with capacity. */
        struct answer ok = {}, errs = {};
        unsigned launched = 0;
        request_id(e, rid);
        snprintf(fleet, sizeof(fleet), "fleet-%08x-%04x-4e3d-a5c7-%012" PRIx64,
                 (unsigned)(e->seq * 2654435761u), (unsigned)(e->seq & 0xffff), e->seq);
        for (long u = 0; u < target; u++) {
                bool done = false;
                for (size_t k = 0; k < n_ov && !done; k++) {
                        const struct override *o = &ov[k];
                        _cleanup_free_ char *id = NULL;
                        const char *code = NULL, *msg = NULL;
                        int r;
                        if (pool_blocked(e, o->type, o->zone, capacity)) {
                                code = "InsufficientInstanceCapacity";
                                msg =
                                    streq(capacity, "spot")
                                        ? "There is no Spot capacity available that matches your request."
                                        : "We currently do not have sufficient capacity in the Availability "
                                          "Zone you requested.";
                        } else if ((r = launch(e, o->type, o->zone, o->subnet, capacity, tags, false, &id)) <
                                   0) {
                                if (r == -ENOMEM) {
                                        a->oom = true;
                                        break;
                                }
                                code = "Unsupported";
                                msg = "The requested configuration is currently not supported. Please check "
                                      "the "
                                      "documentation for supported configurations.";
                        }
                        if (code) {
                                if (!tried[k]) {
                                        tried[k] = true;
                                        ans_printf(&errs, "<item>");
                                        render_overrides(&errs, p, o);
                                        ans_printf(&errs, "<lifecycle>%s</lifecycle>", capacity);
                                        ans_elem(&errs, "errorCode", code);
                                        ans_elem(&errs, "errorMessage", msg);
                                        ans_printf(&errs, "</item>");
                                }
                                continue;
                        }
                        done = true;
                        launched++;
                        ans_printf(&ok, "<item>");
                        render_overrides(&ok, p, o);
                        ans_printf(&ok,
                                   "<lifecycle>%s</lifecycle><instanceIds><item>%s</item></instanceIds>",
                                   capacity, id);
                        ans_elem(&ok, "instanceType", o->type);
                        ans_printf(&ok, "</item>");
                }
        }
        cJSON_Delete(tags);
        ans_printf(a,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateFleetResponse xmlns=\"%s\">"
                   "<requestId>%s</requestId><fleetId>%s</fleetId>",
                   EC2_XMLNS, rid, fleet);
        if (errs.body.len > 0) {
                ans_printf(a, "<errorSet>");
                if (buf_append(&a->body, errs.body.data, errs.body.len) < 0)
                        a->oom = true;
                ans_printf(a, "</errorSet>");
        } else
                ans_printf(a, "<errorSet/>");
        if (ok.body.len > 0) {
                ans_printf(a, "<fleetInstanceSet>");
                if (buf_append(&a->body, ok.body.data, ok.body.len) < 0)
                        a->oom = true;
                ans_printf(a, "</fleetInstanceSet>");
        } else
                ans_printf(a, "<fleetInstanceSet/>");
        ans_printf(a, "</CreateFleetResponse>");
        a->oom = a->oom || ok.oom || errs.oom;
        buf_free(&ok.body);
        buf_free(&errs.body);
        log_debug("sim ec2: CreateFleet %s: %u of %ld launched", token ? token : "(no token)", launched,
                  target);
        e->stats.create_fleets++;
        if (token && !a->oom && buf_append(&a->body, "", 1) == 0) {
                a->body.len--; /* keep the NUL out of the answer */
                struct fleet_answer *f = realloc(e->fleets, (e->n_fleets + 1) * sizeof(*f));
                if (f) {
                        e->fleets = f;
                        f[e->n_fleets].token = strdup(token);
                        f[e->n_fleets].xml = strdup(a->body.data);
                        if (f[e->n_fleets].token && f[e->n_fleets].xml)
                                e->n_fleets++;
                        else {
                                free(f[e->n_fleets].token);
                                free(f[e->n_fleets].xml);
                        }
                }
        }
}

/* ---- Auto Scaling ---- */

static unsigned group_live(struct sim_ec2 *e)
{
        unsigned n = 0;
        for (size_t i = 0; i < view_count(e); i++) {
                struct view v;
                if (view_at(e, i, &v) && v.in_group && (v.code == 0 || v.code == 16))
                        n++;
        }
        return n;
}

static void act_describe_groups(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *name = param(p, "AutoScalingGroupNames.member.1");
        char when[40], rid[37];
        const cJSON *t;

        request_id(e, rid);
        ans_printf(a,
                   "<DescribeAutoScalingGroupsResponse xmlns=\"%s\"><DescribeAutoScalingGroupsResult>"
                   "<AutoScalingGroups>",
                   ASG_XMLNS);
        if (name && !streq(name, e->group)) {
                ans_printf(
                    a,
                    "</AutoScalingGroups></DescribeAutoScalingGroupsResult><ResponseMetadata>"
                    "<RequestId>%s</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>",
                    rid);
                return;
        }
        format_rfc3339(e->created_usec, when, sizeof(when));
        ans_printf(a, "<member>");
        ans_elem(a, "AutoScalingGroupName", e->group);
        ans_printf(a,
                   "<AutoScalingGroupARN>arn:aws:autoscaling:%s:%s:autoScalingGroup:"
                   "3f2d9c1e-7b5a-4e8f-9a61-0c2b7d4e5f60:autoScalingGroupName/",
                   e->region, SIM_EC2_ACCOUNT);
        ans_text(a, e->group);
        ans_printf(a,
                   "</AutoScalingGroupARN><MinSize>0</MinSize><MaxSize>%d</MaxSize><DesiredCapacity>%d"
                   "</DesiredCapacity><DefaultCooldown>300</DefaultCooldown><AvailabilityZones>",
                   e->max, e->desired);
        for (size_t i = 0; i < sim_node_count(e->sim); i++) {
                bool dup = false;
                for (size_t k = 0; k < i && !dup; k++)
                        dup = streq(sim_node_zone(e->sim, k), sim_node_zone(e->sim, i));
                if (!dup)
                        ans_elem(a, "member", sim_node_zone(e->sim, i));
        }
        ans_printf(a, "</AvailabilityZones><LoadBalancerNames/><TargetGroupARNs/><HealthCheckType>EC2"
                      "</HealthCheckType><HealthCheckGracePeriod>300</HealthCheckGracePeriod>");
        ans_elem(a, "CreatedTime", when);
        ans_printf(a, "<Instances>");
        for (size_t i = 0; i < view_count(e); i++) {
                struct view v;
                if (!view_at(e, i, &v) || !v.in_group || v.code == 48)
                        continue;
                ans_printf(a, "<member>");
                ans_elem(a, "InstanceId", v.id);
                ans_elem(a, "InstanceType", v.type);
                ans_elem(a, "AvailabilityZone", v.zone);
                const char *hooked = sim_launch_hook_state(e->sim, v.id);
                ans_elem(a, "LifecycleState",
                         hooked         ? hooked
                         : v.code == 0  ? "Pending"
                         : v.code == 16 ? "InService"
                                        : "Terminating");
                ans_printf(a, "<HealthStatus>Healthy</HealthStatus><ProtectedFromScaleIn>false"
                              "</ProtectedFromScaleIn></member>");
        }
        ans_printf(a, "</Instances><Tags>");
        cJSON_ArrayForEach (t, e->group_tags) {
                ans_printf(a, "<member>");
                ans_elem(a, "ResourceId", e->group);
                ans_printf(a, "<ResourceType>auto-scaling-group</ResourceType>");
                ans_elem(a, "Key", t->string);
                ans_elem(a, "Value", t->valuestring);
                ans_printf(a, "<PropagateAtLaunch>false</PropagateAtLaunch></member>");
        }
        ans_printf(a,
                   "</Tags><NewInstancesProtectedFromScaleIn>false</NewInstancesProtectedFromScaleIn>"
                   "</member></AutoScalingGroups></DescribeAutoScalingGroupsResult><ResponseMetadata>"
                   "<RequestId>%s</RequestId></ResponseMetadata></DescribeAutoScalingGroupsResponse>",
                   rid);
}

static void asg_ok(struct sim_ec2 *e, struct answer *a, const char *action)
{
        char rid[37];
        request_id(e, rid);
        ans_printf(a,
                   "<%sResponse xmlns=\"%s\"><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata>"
                   "</%sResponse>",
                   action, ASG_XMLNS, rid, action);
}

/* The zone of the group with the fewest live instances. */
static const char *emptiest_zone(struct sim_ec2 *e)
{
        const char *best = NULL;
        unsigned best_n = 0;
        for (size_t z = 0; z < sim_node_count(e->sim); z++) {
                const char *zone = sim_node_zone(e->sim, z);
                unsigned n = 0;
                for (size_t i = 0; i < view_count(e); i++) {
                        struct view v;
                        if (view_at(e, i, &v) && v.in_group && (v.code == 0 || v.code == 16) &&
                            streq(v.zone, zone))
                                n++;
                }
                if (!best || n < best_n) {
                        best = zone;
                        best_n = n;
                }
        }
        return best;
}

static void act_set_desired(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *name = param(p, "AutoScalingGroupName"), *d = param(p, "DesiredCapacity");
        char *end = NULL;
        long want = d ? strtol(d, &end, 10) : -1;

        if (!name || !d || !end || *end || want < 0) {
                asg_error(e, a, 400, "ValidationError",
                          "AutoScalingGroupName and DesiredCapacity are required");
                return;
        }
        if (!streq(name, e->group)) {
                asg_error(e, a, 400, "ValidationError",
                          "AutoScalingGroup name not found - no such group: %s", name);
                return;
        }
        if (want > e->max) {
                asg_error(e, a, 400, "ValidationError",
                          "New SetDesiredCapacity value %ld is above max value %d for the AutoScalingGroup.",
                          want, e->max);
                return;
        }
        if (want != e->desired)
                e->stats.desired_changes++;
        e->desired = (int)want;
        /* Scale out at once (the sim's group does not scale in: nodes only leave when interrupted). */
        const char *type = sim_node_count(e->sim) > 0 ? sim_node_instance_type(e->sim, 0) : NULL;
        const char *capacity = sim_node_count(e->sim) > 0 ? sim_node_capacity_type(e->sim, 0) : "on-demand";
        for (unsigned live = group_live(e); type && live < (unsigned)e->desired; live++) {
                const char *zone = emptiest_zone(e);
                int r = zone ? launch(e, type, zone, NULL, capacity, NULL, true, NULL) : -EINVAL;
                if (r < 0) {
                        log_debug_errno(r, "sim ec2: group %s could not launch %s", e->group, type);
                        break;
                }
        }
        asg_ok(e, a, "SetDesiredCapacity");
}

static void act_tags(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = param(p, "Tags.member.%u.ResourceId", k);
                const char *key = param(p, "Tags.member.%u.Key", k);
                const char *val = param(p, "Tags.member.%u.Value", k);
                if (!key)
                        break;
                if (!streq(id, e->group)) {
                        asg_error(e, a, 400, "ValidationError", "AutoScalingGroup name not found - %s",
                                  id ? id : "(none)");
                        return;
                }
                if (param_set(e->group_tags, key, val ? val : "") < 0)
                        a->oom = true;
        }
        asg_ok(e, a, "CreateOrUpdateTags");
}

/* CompleteLifecycleAction, RecordLifecycleActionHeartbeat: taken for the group's own hooks; another
 * group's is refused as Auto Scaling refuses an action it has no record of. The action is named by its
 * LifecycleActionToken or, as the API allows, by its InstanceId alone. Each is logged with the scenario
 * time it came at and whether the instance role's credentials (IMDS) signed it: the record tests read. */
static void act_lifecycle(struct sim_ec2 *e, const cJSON *p, struct answer *a, const char *action, bool role)
{
        const char *group = param(p, "AutoScalingGroupName"), *hook = param(p, "LifecycleHookName");
        const char *instance = param(p, "InstanceId"), *token = param(p, "LifecycleActionToken");
        const char *result = param(p, "LifecycleActionResult");
        bool complete = streq(action, "CompleteLifecycleAction");

        if (!hook || (!instance && !token) || (complete && !result)) {
                asg_error(e, a, 400, "ValidationError",
                          "%s needs LifecycleHookName, InstanceId or "
                          "LifecycleActionToken%s",
                          action, complete ? " and LifecycleActionResult" : "");
                return;
        }
        if (!streq(group, e->group)) {
                asg_error(e, a, 400, "ValidationError",
                          "No active Lifecycle Action found with instance ID %s",
                          instance ? instance : token);
                return;
        }
        /* An instance launched under the launch hook: its one action, pending until completed. */
        const char *state = sim_launch_hook_state(e->sim, instance);
        if (state && sim_launch_hook_complete(e->sim, instance, complete ? result : NULL) < 0) {
                asg_error(e, a, 400, "ValidationError",
                          "No active Lifecycle Action found with instance ID %s", instance);
                return;
        }
        if (complete)
                e->stats.lifecycle_completes++;
        else
                e->stats.lifecycle_heartbeats++;
        log_info("sim autoscaling: %s for %s of group %s, hook %s%s%s, at %.3f s, by %s", action,
                 instance ? instance : token, group, hook, complete ? ", result " : "",
                 complete ? result : "", sim_now(e->sim), role ? "the instance role" : "other credentials");
        asg_ok(e, a, action);
}

/* One hook of the group, when the request lists it (or names none). */
static void hook_member(struct sim_ec2 *e, const cJSON *p, struct answer *a, const char *hook,
                        const char *transition, const char *default_result, int timeout)
{
        bool listed = !param(p, "LifecycleHookNames.member.1");

        for (unsigned k = 1; k <= MAX_INDEX && !listed; k++) {
                const char *name = param(p, "LifecycleHookNames.member.%u", k);
                if (!name)
                        break;
                listed = streq(name, hook);
        }
        if (!listed)
                return;
        ans_printf(a, "<member>");
        ans_elem(a, "LifecycleHookName", hook);
        ans_elem(a, "AutoScalingGroupName", e->group);
        ans_elem(a, "LifecycleTransition", transition);
        ans_printf(a,
                   "<HeartbeatTimeout>%d</HeartbeatTimeout><GlobalTimeout>%d</GlobalTimeout>"
                   "<DefaultResult>%s</DefaultResult></member>",
                   timeout, timeout * 100 < 172800 ? timeout * 100 : 172800, default_result);
}

/* DescribeLifecycleHooks: the group's termination hook, the one the SQS surface's lifecycle messages name
 * (SIM_SQS_LIFECYCLE_HOOK), and when the scenario has asg-launch events its launch hook
 * (SIM_SQS_LAUNCH_HOOK, default result ABANDON); their HeartbeatTimeout from the scenario, GlobalTimeout
 * Auto Scaling's min(100 x HeartbeatTimeout, 48 h). LifecycleHookNames.member.N filters them as Auto Scaling
 * does. */
static void act_describe_hooks(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *group = param(p, "AutoScalingGroupName");
        char rid[37];
        int timeout;

        if (!group) {
                asg_error(e, a, 400, "ValidationError", "AutoScalingGroupName is required");
                return;
        }
        if (!streq(group, e->group)) {
                asg_error(e, a, 400, "ValidationError", "Group %s not found", group);
                return;
        }
        timeout = sim_hook_heartbeat_timeout(e->sim); /* the sim's lock is held */
        e->stats.hook_describes++;
        request_id(e, rid);
        ans_printf(
            a, "<DescribeLifecycleHooksResponse xmlns=\"%s\"><DescribeLifecycleHooksResult><LifecycleHooks>",
            ASG_XMLNS);
        /* The launch hook, when the scenario launches under it: ABANDON by default, as many groups set it.
         */
        if (sim_has_launch_hook(e->sim))
                hook_member(e, p, a, SIM_SQS_LAUNCH_HOOK, "autoscaling:EC2_INSTANCE_LAUNCHING", "ABANDON",
                            timeout);
        hook_member(e, p, a, SIM_SQS_LIFECYCLE_HOOK, "autoscaling:EC2_INSTANCE_TERMINATING", "CONTINUE",
                    timeout);
        ans_printf(a,
                   "</LifecycleHooks></DescribeLifecycleHooksResult><ResponseMetadata><RequestId>%s"
                   "</RequestId></ResponseMetadata></DescribeLifecycleHooksResponse>",
                   rid);
}

/* ---- authentication ---- */

static const char *default_lookup(const char *akid, void *userdata)
{
        return streq(akid, SIM_EC2_ACCESS_KEY_ID) ? SIM_EC2_SECRET_ACCESS_KEY : NULL;
}

/* ---- dispatch ---- */

static bool asg_action(const char *action)
{
        return streq(action, "DescribeAutoScalingGroups") || streq(action, "SetDesiredCapacity") ||
               streq(action, "CreateOrUpdateTags") || streq(action, "CompleteLifecycleAction") ||
               streq(action, "RecordLifecycleActionHeartbeat") || streq(action, "DescribeLifecycleHooks");
}

static int on_request(void *userdata, const struct sim_http_request *rq)
{
        struct sim_ec2 *e = userdata;
        struct answer a = { .status = 200 };
        cJSON *p = cJSON_CreateObject();
        const char *action;
        bool asg;
        int r;

        if (!p)
                return sim_http_reply(rq->connection, 500, "text/plain", strdup("out of memory"));
        if ((streq(rq->method, "POST") && sim_aws_form_parse(rq->body, rq->body_len, form_param, p) < 0) ||
            MHD_get_connection_values(rq->connection, MHD_GET_ARGUMENT_KIND, collect_arg, p) < 0) {
                cJSON_Delete(p);
                return sim_http_reply(rq->connection, 500, "text/plain", strdup("out of memory"));
        }
        action = param(p, "Action");
        asg = asg_action(action);
        bool elb = sim_elbv2_action(action);

        pthread_mutex_lock(&e->lock);
        e->stats.requests++;
        r = sim_aws_verify(rq,
                           elb   ? "elasticloadbalancing"
                           : asg ? "autoscaling"
                                 : "ec2",
                           e->lookup ? e->lookup : default_lookup, e->lookup ? e->lookup_userdata : NULL,
                           e->sts);
        if (r < 0) {
                e->stats.auth_failures++;
                if (r == -ENOMEM)
                        a.oom = true;
                else if (asg || elb)
                        error_answer(e, &a, 403, elb ? ELBV2_XMLNS : ASG_XMLNS,
                                     r == -EACCES ? "SignatureDoesNotMatch" : "InvalidClientTokenId", "%s",
                                     r == -EACCES
                                         ? "The request signature we calculated does not match the "
                                           "signature you provided."
                                         : "The security token included in the request is invalid.");
                else
                        ec2_error(
                            e, &a, 401, r == -EPERM ? "MissingAuthenticationToken" : "AuthFailure", "%s",
                            r == -EPERM ? "Request is missing Authentication Token"
                                        : "AWS was not able to validate the provided access credentials");
        } else if (!action)
                ec2_error(e, &a, 400, "MissingAction", "The request must contain the parameter Action");
        else if (elb) {
                char rid[37];
                request_id(e, rid);
                sim_lock(e->sim);
                (void)sim_advance(e->sim);
                sim_count_request(e->sim);
                if (streq(action, "DeregisterTargets"))
                        sim_record_write(e->sim, "elbv2", action);
                if (sim_elbv2_answer(e->elbv2, e->sim, p, rid, &a.status, &a.body) < 0)
                        a.oom = true;
                sim_unlock(e->sim);
        } else if (e->fault.throttle > 0) {
                e->fault.throttle--;
                if (asg)
                        asg_error(e, &a, 400, "Throttling", "Rate exceeded");
                else
                        ec2_error(e, &a, 503, "RequestLimitExceeded", "Request limit exceeded.");
        } else if ((e->fault.unauthorized || streq(e->fault.deny_action, action)) && !asg)
                ec2_error(
                    e, &a, 403, "UnauthorizedOperation",
                    "You are not authorized to perform this operation. User: arn:aws:sts::%s:assumed-role/"
                    "spotdrain/sim is not authorized to perform: ec2:%s",
                    SIM_EC2_ACCOUNT, action);
        else {
                sim_lock(e->sim);
                (void)sim_advance(e->sim);
                sim_count_request(e->sim);
                if (strncmp(action, "Describe", strlen("Describe")) != 0)
                        sim_record_write(e->sim, asg ? "autoscaling" : "ec2", action);
                if (streq(action, "CreateFleet"))
                        act_create_fleet(e, p, &a);
                else if (streq(action, "DescribeInstances"))
                        act_describe_instances(e, p, &a);
                else if (streq(action, "DescribeInstanceTypes"))
                        act_describe_types(e, p, &a);
                else if (streq(action, "TerminateInstances"))
                        act_terminate(e, p, &a);
                else if (streq(action, "CreateTags"))
                        act_create_tags(e, p, &a);
                else if (streq(action, "DescribeAutoScalingGroups"))
                        act_describe_groups(e, p, &a);
                else if (streq(action, "SetDesiredCapacity"))
                        act_set_desired(e, p, &a);
                else if (streq(action, "CreateOrUpdateTags"))
                        act_tags(e, p, &a);
                else if (streq(action, "CompleteLifecycleAction") ||
                         streq(action, "RecordLifecycleActionHeartbeat"))
                        act_lifecycle(e, p, &a, action, sim_aws_instance_role(rq));
                else if (streq(action, "DescribeLifecycleHooks"))
                        act_describe_hooks(e, p, &a);
                else
                        ec2_error(e, &a, 400, "InvalidAction",
                                  "The action %s is not valid for this web service.", action);
                sim_unlock(e->sim);
        }
        pthread_mutex_unlock(&e->lock);
        log_debug("sim ec2: %s → %u", action ? action : "?", a.oom ? 500 : a.status);
        cJSON_Delete(p);
        if (a.oom || buf_append(&a.body, "", 1) < 0) {
                buf_free(&a.body);
                return sim_http_reply(rq->connection, 500, "text/plain", strdup("out of memory"));
        }
        return sim_http_reply(rq->connection, a.status, "text/xml;charset=UTF-8", a.body.data);
}

/* ---- life cycle ---- */

int sim_ec2_start(struct sim *s, const char *host, struct sim_ec2 **ret)
{
        _cleanup_free_ char *listen = NULL;
        struct sim_ec2 *e;
        const char *zone;
        size_t zl;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->sim = s;
        pthread_mutex_init(&e->lock, NULL);
        if (prov_catalog_load(NULL, &e->catalog, NULL) < 0)
                e->catalog = calloc(1, sizeof(*e->catalog));
        e->group_tags = cJSON_CreateObject();
        e->node_tags = cJSON_CreateObject();
        sim_lock(s);
        (void)sim_asg_group_name(s, &e->group);
        zone = sim_node_count(s) > 0 && sim_node_zone(s, 0) ? sim_node_zone(s, 0) : "us-east-1a";
        zl = strlen(zone);
        /* The region is the zone without its letter. */
        e->region = strndup(zone, zl > 1 && zone[zl - 1] >= 'a' && zone[zl - 1] <= 'z' ? zl - 1 : zl);
        e->desired = (int)sim_node_count(s);
        e->max = e->desired + ASG_HEADROOM;
        e->created_usec = sim_wall_usec(s, -3600);
        sim_unlock(s);
        host = host ? host : "127.0.0.1";
        listen = strchr(host, ':') && host[0] != '[' ? strprintf("[%s]:0", host) : strprintf("%s:0", host);
        if (!e->catalog || !e->group_tags || !e->node_tags || !e->group || !e->region || !listen ||
            sim_elbv2_new(&e->elbv2) < 0) {
                sim_ec2_stop(e);
                return -ENOMEM;
        }
        r = sim_http_start(listen, on_request, e, &e->http);
        if (r < 0) {
                sim_ec2_stop(e);
                return r;
        }
        *ret = e;
        return 0;
}

struct sim_ec2 *sim_ec2_stop(struct sim_ec2 *e)
{
        if (!e)
                return NULL;
        sim_http_stop(e->http);
        for (size_t i = 0; i < e->n_inst; i++)
                launched_clear(&e->inst[i]);
        free(e->inst);
        for (size_t i = 0; i < e->n_fleets; i++) {
                free(e->fleets[i].token);
                free(e->fleets[i].xml);
        }
        free(e->fleets);
        sim_ec2_clear_no_capacity(e);
        for (size_t i = 0; i < e->n_terminated_nodes; i++)
                free(e->terminated_nodes[i]);
        free(e->terminated_nodes);
        prov_catalog_free(e->catalog);
        sim_elbv2_free(e->elbv2);
        cJSON_Delete(e->group_tags);
        cJSON_Delete(e->node_tags);
        free(e->group);
        free(e->region);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
}

const char *sim_ec2_url(const struct sim_ec2 *e)
{
        return sim_http_url(e->http);
}

const char *sim_ec2_group_name(const struct sim_ec2 *e)
{
        return e->group;
}

int sim_ec2_set_catalog(struct sim_ec2 *e, const struct prov_catalog *c)
{
        struct prov_catalog *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++)
                if (prov_catalog_add(n, &c->types[i]) < 0) {
                        prov_catalog_free(n);
                        return -ENOMEM;
                }
        pthread_mutex_lock(&e->lock);
        prov_catalog_free(e->catalog);
        e->catalog = n;
        pthread_mutex_unlock(&e->lock);
        return 0;
}

void sim_ec2_set_secret_lookup(struct sim_ec2 *e, sigv4_secret_lookup_fn lookup, void *userdata)
{
        pthread_mutex_lock(&e->lock);
        e->lookup = lookup;
        e->lookup_userdata = userdata;
        e->sts = NULL;
        pthread_mutex_unlock(&e->lock);
}

void sim_ec2_use_sts(struct sim_ec2 *e, struct sim_sts *t)
{
        pthread_mutex_lock(&e->lock);
        e->lookup = t ? sim_sts_secret_lookup : NULL;
        e->lookup_userdata = t;
        e->sts = t;
        pthread_mutex_unlock(&e->lock);
}

int sim_ec2_set_no_capacity(struct sim_ec2 *e, const char *instance_type, const char *zone,
                            const char *capacity_type)
{
        struct pool_rule r = {};

        if ((instance_type && !(r.type = strdup(instance_type))) || (zone && !(r.zone = strdup(zone))) ||
            (capacity_type && !(r.capacity = strdup(capacity_type)))) {
                free(r.type);
                free(r.zone);
                return -ENOMEM;
        }
        pthread_mutex_lock(&e->lock);
        struct pool_rule *v = realloc(e->rules, (e->n_rules + 1) * sizeof(*v));
        if (v) {
                e->rules = v;
                e->rules[e->n_rules++] = r;
        }
        pthread_mutex_unlock(&e->lock);
        if (!v) {
                free(r.type);
                free(r.zone);
                free(r.capacity);
                return -ENOMEM;
        }
        return 0;
}

void sim_ec2_clear_no_capacity(struct sim_ec2 *e)
{
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->n_rules; i++) {
                free(e->rules[i].type);
                free(e->rules[i].zone);
                free(e->rules[i].capacity);
        }
        free(e->rules);
        e->rules = NULL;
        e->n_rules = 0;
        pthread_mutex_unlock(&e->lock);
}

void sim_ec2_set_fault(struct sim_ec2 *e, const struct sim_ec2_fault *f)
{
        pthread_mutex_lock(&e->lock);
        e->fault = *f;
        pthread_mutex_unlock(&e->lock);
}

void sim_ec2_stats(struct sim_ec2 *e, struct sim_ec2_stats *ret)
{
        pthread_mutex_lock(&e->lock);
        *ret = e->stats;
        pthread_mutex_unlock(&e->lock);
}

struct sim_elbv2 *sim_ec2_elbv2(struct sim_ec2 *e)
{
        return e->elbv2;
}
