/* The world as EC2 sees it: the scenario's nodes and the launched instances, described, tagged and
 * terminated, and the instance types. */
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
#include "sim/ec2_internal.h"
#include "sim/ec2_surface.h"
#include "sim/elbv2.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

/* ---- the world as EC2 sees it ---- */

const char *sim_ec2_zone_of_subnet(const char *subnet)
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

/* With the model's lock held. i < nodes: a scenario (or joined) node; else a launched instance. */
size_t sim_ec2_view_count(struct sim_ec2 *e)
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
bool sim_ec2_view_at(struct sim_ec2 *e, size_t i, struct view *v)
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
                const char *val = sim_ec2_param(p, "Filter.%u.Value.%u", f, k);
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
        sim_ec2_ans_printf(a,
                           "<item><reservationId>r-%.17s</reservationId><ownerId>%s</ownerId><groupSet/>"
                           "<instancesSet><item>",
                           v->id + 2, SIM_EC2_ACCOUNT);
        sim_ec2_ans_elem(a, "instanceId", v->id);
        sim_ec2_ans_printf(a, "<imageId>ami-0c2b8ca1dad447f8a</imageId><instanceState><code>%d</code>",
                           v->code);
        sim_ec2_ans_elem(a, "name", v->state);
        sim_ec2_ans_printf(a, "</instanceState>");
        sim_ec2_ans_elem(a, "privateDnsName", v->dns);
        sim_ec2_ans_printf(a, "<dnsName/><amiLaunchIndex>0</amiLaunchIndex>");
        sim_ec2_ans_elem(a, "instanceType", v->type);
        sim_ec2_ans_elem(a, "launchTime", when);
        sim_ec2_ans_printf(a, "<placement>");
        sim_ec2_ans_elem(a, "availabilityZone", v->zone);
        sim_ec2_ans_printf(
            a, "<tenancy>default</tenancy></placement><monitoring><state>disabled</state></monitoring>");
        if (!isempty(v->subnet))
                sim_ec2_ans_elem(a, "subnetId", v->subnet);
        if (!isempty(v->ip))
                sim_ec2_ans_elem(a, "privateIpAddress", v->ip);
        sim_ec2_ans_printf(a, "<architecture>x86_64</architecture><rootDeviceType>ebs</rootDeviceType>");
        if (streq(v->capacity, "spot"))
                sim_ec2_ans_printf(a, "<instanceLifecycle>spot</instanceLifecycle>");
        sim_ec2_ans_printf(a, "<tagSet>");
        cJSON_ArrayForEach (t, v->tags) {
                sim_ec2_ans_printf(a, "<item>");
                sim_ec2_ans_elem(a, "key", t->string);
                sim_ec2_ans_elem(a, "value", t->valuestring);
                sim_ec2_ans_printf(a, "</item>");
        }
        sim_ec2_ans_printf(a, "</tagSet><hypervisor>nitro</hypervisor></item></instancesSet></item>");
}

/* Naming an unknown id in InstanceId.N is an error, as on EC2: true when *a is that error. */
static bool unknown_instance(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = sim_ec2_param(p, "InstanceId.%u", k);
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

void sim_ec2_act_describe_instances(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        char rid[37];

        if (unknown_instance(e, p, a))
                return;
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(
            a,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstancesResponse xmlns=\"%s\">"
            "<requestId>%s</requestId><reservationSet>",
            EC2_XMLNS, rid);
        for (size_t i = 0; i < sim_ec2_view_count(e); i++) {
                struct view v;
                bool ok = sim_ec2_view_at(e, i, &v);
                if (ok && sim_ec2_param(p, "InstanceId.1")) {
                        ok = false;
                        for (unsigned k = 1; k <= MAX_INDEX && !ok; k++) {
                                const char *id = sim_ec2_param(p, "InstanceId.%u", k);
                                if (!id)
                                        break;
                                ok = streq(id, v.id);
                        }
                }
                for (unsigned f = 1; ok && f <= MAX_INDEX; f++) {
                        const char *name = sim_ec2_param(p, "Filter.%u.Name", f);
                        if (!name)
                                break;
                        ok = filter_matches(&v, name, p, f);
                }
                if (ok)
                        render_instance(a, &v);
        }
        sim_ec2_ans_printf(a, "</reservationSet></DescribeInstancesResponse>");
}

/* CreateTags on instances (ResourceId.N; Tag.N.Key, Tag.N.Value): what `aws ec2 create-tags` sends. */
void sim_ec2_act_create_tags(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        char rid[37];

        if (!sim_ec2_param(p, "ResourceId.1") || !sim_ec2_param(p, "Tag.1.Key")) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameters ResourceId and Tag");
                return;
        }
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = sim_ec2_param(p, "ResourceId.%u", k);
                if (!id)
                        break;
                if (node_of(e, id) < 0 && !launched_of(e, id)) {
                        ec2_error(e, a, 400, "InvalidInstanceID.NotFound",
                                  "The instance ID '%s' does not exist", id);
                        return;
                }
        }
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = sim_ec2_param(p, "ResourceId.%u", k);
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
                        const char *key = sim_ec2_param(p, "Tag.%u.Key", t),
                                   *val = sim_ec2_param(p, "Tag.%u.Value", t);
                        if (!key)
                                break;
                        if (sim_ec2_param_set(tags, key, val ? val : "") < 0)
                                a->oom = true;
                }
        }
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(a,
                           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateTagsResponse xmlns=\"%s\">"
                           "<requestId>%s</requestId><return>true</return></CreateTagsResponse>",
                           EC2_XMLNS, rid);
}

void sim_ec2_act_terminate(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        char rid[37];

        if (!sim_ec2_param(p, "InstanceId.1")) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameter InstanceId");
                return;
        }
        if (unknown_instance(e, p, a))
                return;
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(
            a,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<TerminateInstancesResponse xmlns=\"%s\">"
            "<requestId>%s</requestId><instancesSet>",
            EC2_XMLNS, rid);
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *id = sim_ec2_param(p, "InstanceId.%u", k);
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
                sim_ec2_ans_printf(a, "<item>");
                sim_ec2_ans_elem(a, "instanceId", id);
                sim_ec2_ans_printf(a,
                                   "<currentState><code>32</code><name>shutting-down</name></currentState>"
                                   "<previousState><code>%d</code><name>%s</name></previousState></item>",
                                   prev_code, prev);
        }
        sim_ec2_ans_printf(a, "</instancesSet></TerminateInstancesResponse>");
}

void sim_ec2_act_describe_types(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *max_s = sim_ec2_param(p, "MaxResults"), *next = sim_ec2_param(p, "NextToken");
        long max = max_s ? strtol(max_s, NULL, 10) : 100, skip = next ? strtol(next, NULL, 10) : 0;
        long seen = 0, shown = 0;
        char rid[37];

        if (max < 5 || max > 100) {
                ec2_error(e, a, 400, "InvalidParameterValue", "MaxResults must be between 5 and 100");
                return;
        }
        sim_ec2_request_id(e, rid);
        sim_ec2_ans_printf(
            a,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceTypesResponse xmlns=\"%s\">"
            "<requestId>%s</requestId><instanceTypeSet>",
            EC2_XMLNS, rid);
        for (size_t i = 0; e->catalog && i < e->catalog->n; i++) {
                const struct prov_itype *t = &e->catalog->types[i];
                bool ok = true;
                if (sim_ec2_param(p, "InstanceType.1")) {
                        ok = false;
                        for (unsigned k = 1; k <= MAX_INDEX && !ok; k++) {
                                const char *n = sim_ec2_param(p, "InstanceType.%u", k);
                                if (!n)
                                        break;
                                ok = streq(n, t->name);
                        }
                }
                for (unsigned f = 1; ok && f <= MAX_INDEX; f++) {
                        const char *name = sim_ec2_param(p, "Filter.%u.Name", f);
                        if (!name)
                                break;
                        if (!streq(name, "instance-type"))
                                continue;
                        ok = false;
                        for (unsigned k = 1; k <= MAX_INDEX && !ok; k++) {
                                const char *val = sim_ec2_param(p, "Filter.%u.Value.%u", f, k);
                                if (!val)
                                        break;
                                ok = fnmatch(val, t->name, 0) == 0;
                        }
                }
                if (!ok || seen++ < skip)
                        continue;
                if (shown == max) {
                        sim_ec2_ans_printf(
                            a,
                            "</instanceTypeSet><nextToken>%ld</nextToken></DescribeInstanceTypesResponse>",
                            skip + shown);
                        return;
                }
                shown++;
                sim_ec2_ans_printf(a, "<item>");
                sim_ec2_ans_elem(a, "instanceType", t->name);
                sim_ec2_ans_printf(
                    a, "<currentGeneration>true</currentGeneration><supportedUsageClasses><item>on-demand"
                       "</item><item>spot</item></supportedUsageClasses><processorInfo>"
                       "<supportedArchitectures><item>");
                sim_ec2_ans_text(a, t->arch);
                sim_ec2_ans_printf(
                    a,
                    "</item></supportedArchitectures></processorInfo><vCpuInfo><defaultVCpus>%d"
                    "</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>%" PRId64 "</sizeInMiB>"
                    "</memoryInfo><networkInfo><maximumNetworkInterfaces>%d</maximumNetworkInterfaces>"
                    "<ipv4AddressesPerInterface>%d</ipv4AddressesPerInterface></networkInfo></item>",
                    t->vcpu, t->memory_mib, t->max_enis, t->ipv4_per_eni);
        }
        sim_ec2_ans_printf(a, "</instanceTypeSet></DescribeInstanceTypesResponse>");
}
