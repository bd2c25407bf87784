/* The EC2 query-protocol client: CreateFleet (instant), DescribeInstances, DescribeInstanceTypes,
 * TerminateInstances, through the AWS request layer; it holds the Auto Scaling client the capacity calls
 * (asg_capacity.c) use. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/asg.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/awsxml.h"
#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/provision.h"

#define EC2_VERSION   "2016-11-15"
#define EC2_MAX_BODY  (16u * 1024u * 1024u)
#define EC2_MAX_ITEMS 1000

struct ec2_client {
        struct aws_client *ec2;
        struct asg_client *asg; /* the one Auto Scaling client (aws/asg.c) */
        char *region;
};

int ec2_client_new(struct loop *l, const struct ec2_config *cfg, struct ec2_client **ret)
{
        struct ec2_client *c;
        const char *region;
        int r;

        if (!l || !cfg || !cfg->credentials)
                return -EINVAL;
        region = cfg->region ? cfg->region : aws_env_region(NULL);
        if (isempty(region))
                return -EDESTADDRREQ;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->region = strdup(region);
        if (!c->region) {
                ec2_client_free(c);
                return -ENOMEM;
        }
        r = aws_client_new(l,
                           &(struct aws_client_config){
                               .service = "ec2",
                               .protocol = AWS_PROTOCOL_QUERY,
                               .endpoint = { .service_id = "EC2",
                                             .host = "ec2",
                                             .configured = cfg->endpoint,
                                             .region = region },
                               .credentials = cfg->credentials,
                               .credentials_userdata = cfg->userdata,
                               .timeout_usec = cfg->timeout_usec,
                               .max_body = EC2_MAX_BODY,
                               .notify_cancel = true,
                           },
                           &c->ec2);
        if (r >= 0)
                r = asg_client_new(l, cfg->autoscaling_endpoint, region, cfg->credentials, cfg->userdata,
                                   &c->asg);
        if (r < 0) {
                ec2_client_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

struct ec2_client *ec2_client_free(struct ec2_client *c)
{
        if (!c)
                return NULL;
        aws_client_free(c->ec2);
        asg_client_free(c->asg);
        free(c->region);
        free(c);
        return NULL;
}

const char *ec2_client_region(const struct ec2_client *c)
{
        return c->region;
}

bool ec2_capacity_error(const char *code)
{
        static const char *const codes[] = { "InsufficientInstanceCapacity",
                                             "MaxSpotInstanceCountExceeded",
                                             "VcpuLimitExceeded",
                                             "UnfulfillableCapacity",
                                             "Unsupported",
                                             "InsufficientCapacity",
                                             NULL };
        for (size_t i = 0; codes[i]; i++)
                if (streq(code, codes[i]))
                        return true;
        return false;
}

/* ---- form encoding (aws_form_add, with a formatted key) ---- */

int ec2_form_addf(struct buf *b, const char *value, const char *key_fmt, ...)
{
        va_list ap;
        char key[256];

        va_start(ap, key_fmt);
        int k = vsnprintf(key, sizeof(key), key_fmt, ap);
        va_end(ap);
        if (k < 0 || (size_t)k >= sizeof(key))
                return -EINVAL;
        return aws_form_add(b, key, value);
}

/* ---- errors ---- */

static void copy(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

void ec2_result_from_aws(const struct aws_result *a, struct ec2_result *r)
{
        *r = (struct ec2_result){ .status = a->status, .error = a->error };
        copy(r->code, sizeof(r->code), a->code);
        copy(r->message, sizeof(r->message), a->message);
        /* EC2's errno conventions: access denied is -EPERM, capacity -ENOSPC, the rest the status's. */
        if (a->cls == AWS_ERR_ACCESS_DENIED)
                r->error = -EPERM;
        else if (ec2_capacity_error(r->code))
                r->error = -ENOSPC;
        else if (a->cls == AWS_ERR_SERVER || a->cls == AWS_ERR_CLIENT ||
                 a->cls == AWS_ERR_EXPIRED_CREDENTIALS || a->cls == AWS_ERR_INVALID_CREDENTIALS)
                r->error = http_status_to_errno(a->status) ?: -EIO;
}

void ec2_result_from_answer(int error, long status, const char *body, size_t len, struct ec2_result *r)
{
        struct aws_result a;

        aws_result_from_answer(AWS_PROTOCOL_QUERY, error, status, body, len, &a);
        ec2_result_from_aws(&a, r);
}

/* ---- the signed call ---- */

int ec2_call(struct ec2_client *c, bool autoscaling, const char *body, aws_call_fn done, void *userdata)
{
        const char *a = startswith(body, "Action=") ? body + strlen("Action=") : NULL;
        _cleanup_free_ char *action = a ? strndup(a, strcspn(a, "&")) : NULL;

        if (autoscaling)
                return asg_call(c->asg, body, done, userdata);
        if (!action)
                return -EINVAL;
        return aws_request_start(c->ec2, &(struct aws_call_params){ .action = action, .body = body }, done,
                                 userdata, NULL);
}

/* ---- CreateFleet ---- */

int ec2_create_fleet_body(const struct ec2_fleet_request *q, char **ret)
{
        const char *lt = "LaunchTemplateConfigs.1.LaunchTemplateSpecification";
        bool spot = streq(q->capacity_type, PROV_CAPACITY_SPOT);
        struct buf b = {};
        char num[32];
        int r = 0;

        if (isempty(q->client_token) || q->n_overrides == 0 || !q->overrides ||
            (isempty(q->launch_template_id) && isempty(q->launch_template_name)) ||
            (!spot && !streq(q->capacity_type, PROV_CAPACITY_ON_DEMAND)))
                return -EINVAL;
        snprintf(num, sizeof(num), "%u", q->target ? q->target : 1);
        r = aws_form_add(&b, "Action", "CreateFleet");
        r = r ?: aws_form_add(&b, "Version", EC2_VERSION);
        r = r ?: aws_form_add(&b, "ClientToken", q->client_token);
        r = r ?: aws_form_add(&b, "Type", "instant");
        if (!isempty(q->launch_template_id))
                r = r ?: ec2_form_addf(&b, q->launch_template_id, "%s.LaunchTemplateId", lt);
        else
                r = r ?: ec2_form_addf(&b, q->launch_template_name, "%s.LaunchTemplateName", lt);
        r = r
                ?: ec2_form_addf(&b, q->launch_template_version ? q->launch_template_version : "$Default",
                                 "%s.Version", lt);
        for (size_t i = 0; i < q->n_overrides && r == 0; i++) {
                const struct prov_override *o = &q->overrides[i];
                char prio[24];
                r = ec2_form_addf(&b, o->type->name, "LaunchTemplateConfigs.1.Overrides.%zu.InstanceType",
                                  i + 1);
                if (!isempty(o->subnet->id))
                        r = r
                                ?: ec2_form_addf(&b, o->subnet->id,
                                                 "LaunchTemplateConfigs.1.Overrides.%zu.SubnetId", i + 1);
                else
                        r = r
                                ?: ec2_form_addf(&b, o->subnet->zone,
                                                 "LaunchTemplateConfigs.1.Overrides.%zu.AvailabilityZone",
                                                 i + 1);
                if (!spot) {
                        /* On-demand honours the order: smallest type in the balanced zone first. */
                        snprintf(prio, sizeof(prio), "%zu", i);
                        r = r
                                ?: ec2_form_addf(&b, prio, "LaunchTemplateConfigs.1.Overrides.%zu.Priority",
                                                 i + 1);
                }
        }
        r = r ?: aws_form_add(&b, "TargetCapacitySpecification.TotalTargetCapacity", num);
        r = r ?: aws_form_add(&b, "TargetCapacitySpecification.DefaultTargetCapacityType", q->capacity_type);
        if (spot) {
                r = r ?: aws_form_add(&b, "TargetCapacitySpecification.SpotTargetCapacity", num);
                r = r ?: aws_form_add(&b, "SpotOptions.AllocationStrategy", "price-capacity-optimized");
        } else {
                r = r ?: aws_form_add(&b, "TargetCapacitySpecification.OnDemandTargetCapacity", num);
                r = r ?: aws_form_add(&b, "OnDemandOptions.AllocationStrategy", "prioritized");
        }
        if (q->n_tags > 0)
                r = r ?: aws_form_add(&b, "TagSpecification.1.ResourceType", "instance");
        for (size_t i = 0; i < q->n_tags && r == 0; i++) {
                r = ec2_form_addf(&b, q->tags[i].key, "TagSpecification.1.Tag.%zu.Key", i + 1);
                r = r ?: ec2_form_addf(&b, q->tags[i].value, "TagSpecification.1.Tag.%zu.Value", i + 1);
        }
        if (r == 0)
                r = buf_append(&b, "", 1);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = b.data;
        return 0;
}

void ec2_fleet_result_clear(struct ec2_fleet_result *f)
{
        free(f->instances);
        free(f->errors);
        *f = (struct ec2_fleet_result){};
}

static int parse_doc(long status, const char *body, size_t len, struct ec2_result *res, struct awsxml **ret)
{
        ec2_result_from_answer(0, status, body, len, res);
        if (res->error < 0)
                return res->error;
        if (awsxml_parse(body ? body : "", body ? len : 0, ret, NULL) < 0) {
                res->error = -EBADMSG;
                copy(res->message, sizeof(res->message), "unreadable answer");
                return -EBADMSG;
        }
        return 0;
}

static void read_overrides(const struct awsxml_node *item, char *type, char *subnet, char *zone)
{
        const struct awsxml_node *o = awsxml_find(item, "launchTemplateAndOverrides/overrides");
        copy(type, PROV_NAME_SIZE, awsxml_find_text(o, "instanceType"));
        copy(subnet, 64, awsxml_find_text(o, "subnetId"));
        copy(zone, PROV_NAME_SIZE, awsxml_find_text(o, "availabilityZone"));
}

int ec2_parse_create_fleet(long status, const char *body, size_t len, struct ec2_fleet_result *ret)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        struct ec2_fleet_result f = {};
        const struct awsxml_node *root;
        int r;

        r = parse_doc(status, body, len, &f.r, &x);
        if (r < 0) {
                *ret = f;
                return r;
        }
        root = awsxml_root(x);
        copy(f.fleet_id, sizeof(f.fleet_id), awsxml_find_text(root, "fleetId"));
        AWSXML_FOREACH(it, awsxml_child(root, "fleetInstanceSet"), "item")
        {
                char type[PROV_NAME_SIZE], subnet[64], zone[PROV_NAME_SIZE];
                read_overrides(it, type, subnet, zone);
                if (awsxml_find_text(it, "instanceType"))
                        copy(type, sizeof(type), awsxml_find_text(it, "instanceType"));
                AWSXML_FOREACH(id, awsxml_child(it, "instanceIds"), "item")
                {
                        if (f.n_instances >= EC2_MAX_ITEMS)
                                break;
                        struct ec2_fleet_instance *v =
                            realloc(f.instances, (f.n_instances + 1) * sizeof(*v));
                        if (!v) {
                                ec2_fleet_result_clear(&f);
                                return -ENOMEM;
                        }
                        f.instances = v;
                        struct ec2_fleet_instance *i = &f.instances[f.n_instances++];
                        *i = (struct ec2_fleet_instance){};
                        copy(i->instance_id, sizeof(i->instance_id), awsxml_text(id));
                        copy(i->instance_type, sizeof(i->instance_type), type);
                        copy(i->subnet_id, sizeof(i->subnet_id), subnet);
                        copy(i->zone, sizeof(i->zone), zone);
                        copy(i->lifecycle, sizeof(i->lifecycle), awsxml_find_text(it, "lifecycle"));
                }
        }
        AWSXML_FOREACH(it, awsxml_child(root, "errorSet"), "item")
        {
                if (f.n_errors >= EC2_MAX_ITEMS)
                        break;
                struct ec2_fleet_error *v = realloc(f.errors, (f.n_errors + 1) * sizeof(*v));
                if (!v) {
                        ec2_fleet_result_clear(&f);
                        return -ENOMEM;
                }
                f.errors = v;
                struct ec2_fleet_error *e = &f.errors[f.n_errors++];
                *e = (struct ec2_fleet_error){};
                read_overrides(it, e->instance_type, e->subnet_id, e->zone);
                copy(e->lifecycle, sizeof(e->lifecycle), awsxml_find_text(it, "lifecycle"));
                copy(e->code, sizeof(e->code), awsxml_find_text(it, "errorCode"));
                copy(e->message, sizeof(e->message), awsxml_find_text(it, "errorMessage"));
        }
        *ret = f;
        return 0;
}

struct fleet_ctx {
        ec2_fleet_fn done;
        void *userdata;
};

static void fleet_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct fleet_ctx *ctx = userdata;
        struct ec2_fleet_result f = {};

        if (a->status == 0)
                ec2_result_from_aws(a, &f.r);
        else if (ec2_parse_create_fleet(a->status, body, len, &f) == -ENOMEM)
                f.r.error = -ENOMEM;
        log_debug("ec2: CreateFleet → %ld, %zu instance(s), %zu error(s)", a->status, f.n_instances,
                  f.n_errors);
        ctx->done(&f, ctx->userdata);
        ec2_fleet_result_clear(&f);
        free(ctx);
}

int ec2_create_fleet(struct ec2_client *c, const struct ec2_fleet_request *req, ec2_fleet_fn done,
                     void *userdata)
{
        _cleanup_free_ char *body = NULL;
        struct fleet_ctx *ctx;
        int r;

        r = ec2_create_fleet_body(req, &body);
        if (r < 0)
                return r;
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        *ctx = (struct fleet_ctx){ .done = done, .userdata = userdata };
        r = ec2_call(c, false, body, fleet_answer, ctx);
        if (r < 0)
                free(ctx);
        return r;
}

/* ---- DescribeInstances ---- */

int ec2_parse_describe_instances(long status, const char *body, size_t len, struct ec2_result *res,
                                 struct ec2_instance **ret, size_t *ret_n)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        _cleanup_free_ struct ec2_instance *v = NULL;
        size_t n = 0;
        int r;

        r = parse_doc(status, body, len, res, &x);
        if (r < 0)
                return r;
        AWSXML_FOREACH(rv, awsxml_child(awsxml_root(x), "reservationSet"), "item")
        AWSXML_FOREACH(it, awsxml_child(rv, "instancesSet"), "item")
        {
                if (n >= EC2_MAX_ITEMS)
                        break;
                struct ec2_instance *w = realloc(v, (n + 1) * sizeof(*w));
                if (!w)
                        return -ENOMEM;
                v = w;
                struct ec2_instance *i = &v[n++];
                *i = (struct ec2_instance){};
                copy(i->instance_id, sizeof(i->instance_id), awsxml_find_text(it, "instanceId"));
                copy(i->instance_type, sizeof(i->instance_type), awsxml_find_text(it, "instanceType"));
                copy(i->state, sizeof(i->state), awsxml_find_text(it, "instanceState/name"));
                copy(i->zone, sizeof(i->zone), awsxml_find_text(it, "placement/availabilityZone"));
                copy(i->private_dns_name, sizeof(i->private_dns_name),
                     awsxml_find_text(it, "privateDnsName"));
                copy(i->lifecycle, sizeof(i->lifecycle), awsxml_find_text(it, "instanceLifecycle"));
                AWSXML_FOREACH(tag, awsxml_child(it, "tagSet"), "item")
                if (streq(awsxml_find_text(tag, "key"), SPOTDRAIN_TAG_REPLACES))
                        copy(i->replaces, sizeof(i->replaces), awsxml_find_text(tag, "value"));
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

struct instances_ctx {
        ec2_instances_fn done;
        void *userdata;
};

static void instances_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct instances_ctx *ctx = userdata;
        _cleanup_free_ struct ec2_instance *v = NULL;
        struct ec2_result res = {};
        size_t n = 0;

        if (a->status == 0)
                ec2_result_from_aws(a, &res);
        else if (ec2_parse_describe_instances(a->status, body, len, &res, &v, &n) == -ENOMEM)
                res.error = -ENOMEM;
        ctx->done(&res, v, n, ctx->userdata);
        free(ctx);
}

int ec2_describe_instances(struct ec2_client *c, const char *const *ids, const char *const *filters,
                           ec2_instances_fn done, void *userdata)
{
        struct buf b = {};
        struct instances_ctx *ctx;
        int r;

        r = aws_form_add(&b, "Action", "DescribeInstances");
        r = r ?: aws_form_add(&b, "Version", EC2_VERSION);
        for (size_t i = 0; ids && ids[i] && r == 0; i++)
                r = ec2_form_addf(&b, ids[i], "InstanceId.%zu", i + 1);
        for (size_t i = 0; filters && filters[i] && r == 0; i++) {
                const char *eq = strrchr(filters[i], '=');
                _cleanup_free_ char *name = eq ? strndup(filters[i], (size_t)(eq - filters[i])) : NULL;
                if (!eq)
                        r = -EINVAL;
                else if (!name)
                        r = -ENOMEM;
                r = r ?: ec2_form_addf(&b, name, "Filter.%zu.Name", i + 1);
                /* Several values, comma-separated, match any of them. */
                size_t k = 0;
                for (const char *v = eq ? eq + 1 : ""; r == 0 && (k == 0 || *v);) {
                        size_t l = strcspn(v, ",");
                        _cleanup_free_ char *one = strndup(v, l);
                        r = one ? ec2_form_addf(&b, one, "Filter.%zu.Value.%zu", i + 1, ++k) : -ENOMEM;
                        v += l + (v[l] == ',');
                }
        }
        r = r ?: buf_append(&b, "", 1);
        ctx = r == 0 ? calloc(1, sizeof(*ctx)) : NULL;
        if (r == 0 && !ctx)
                r = -ENOMEM;
        if (r == 0) {
                *ctx = (struct instances_ctx){ .done = done, .userdata = userdata };
                r = ec2_call(c, false, b.data, instances_answer, ctx);
                if (r < 0)
                        free(ctx);
        }
        buf_free(&b);
        return r;
}

/* ---- TerminateInstances ---- */

struct done_ctx {
        ec2_done_fn done;
        void *userdata;
};

static void done_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct done_ctx *ctx = userdata;
        struct ec2_result res;

        ec2_result_from_aws(a, &res);
        ctx->done(&res, ctx->userdata);
        free(ctx);
}

int ec2_terminate_instances(struct ec2_client *c, const char *const *ids, ec2_done_fn done, void *userdata)
{
        struct buf b = {};
        struct done_ctx *ctx;
        int r;

        if (!ids || !ids[0])
                return -EINVAL;
        r = aws_form_add(&b, "Action", "TerminateInstances");
        r = r ?: aws_form_add(&b, "Version", EC2_VERSION);
        for (size_t i = 0; ids[i] && r == 0; i++)
                r = ec2_form_addf(&b, ids[i], "InstanceId.%zu", i + 1);
        r = r ?: buf_append(&b, "", 1);
        ctx = r == 0 ? calloc(1, sizeof(*ctx)) : NULL;
        if (r == 0 && !ctx)
                r = -ENOMEM;
        if (r == 0) {
                *ctx = (struct done_ctx){ .done = done, .userdata = userdata };
                r = ec2_call(c, false, b.data, done_answer, ctx);
                if (r < 0)
                        free(ctx);
        }
        buf_free(&b);
        return r;
}

/* ---- DescribeInstanceTypes ---- */

static int text_int(const struct awsxml_node *n, const char *path, int64_t *ret)
{
        const char *s = awsxml_find_text(n, path);
        char *end;
        if (isempty(s))
                return -ENOENT;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || *end || v < 0)
                return -EBADMSG;
        *ret = v;
        return 0;
}

int ec2_parse_instance_types(long status, const char *body, size_t len, struct ec2_result *res,
                             struct prov_catalog *cat, char **ret_next_token)
{
        _cleanup_(awsxml_freep) struct awsxml *x = NULL;
        const struct awsxml_node *root;
        int r;

        r = parse_doc(status, body, len, res, &x);
        if (r < 0)
                return r;
        root = awsxml_root(x);
        AWSXML_FOREACH(it, awsxml_child(root, "instanceTypeSet"), "item")
        {
                struct prov_itype t = {};
                int64_t vcpu = 0, mem = 0, enis = 0, ips = 0;
                const struct awsxml_node *arch;

                copy(t.name, sizeof(t.name), awsxml_find_text(it, "instanceType"));
                if (text_int(it, "vCpuInfo/defaultVCpus", &vcpu) < 0 ||
                    text_int(it, "memoryInfo/sizeInMiB", &mem) < 0 || vcpu > 100000)
                        continue;
                (void)text_int(it, "networkInfo/maximumNetworkInterfaces", &enis);
                (void)text_int(it, "networkInfo/ipv4AddressesPerInterface", &ips);
                arch = awsxml_find(it, "processorInfo/supportedArchitectures");
                /* Types supporting both i386 and x86_64 list both; the 64-bit one is what nodes run. */
                AWSXML_FOREACH(a, arch, "item")
                if (streq(awsxml_text(a), "x86_64") || streq(awsxml_text(a), "arm64"))
                        copy(t.arch, sizeof(t.arch), awsxml_text(a));
                t.vcpu = (int)vcpu;
                t.memory_mib = mem;
                t.max_enis = (int)(enis > 1000 ? 0 : enis);
                t.ipv4_per_eni = (int)(ips > 1000 ? 0 : ips);
                r = prov_catalog_add(cat, &t);
                if (r == -ENOMEM)
                        return r;
        }
        const char *next = awsxml_find_text(root, "nextToken");
        *ret_next_token = isempty(next) ? NULL : strdup(next);
        if (!isempty(next) && !*ret_next_token)
                return -ENOMEM;
        return 0;
}

struct types_ctx {
        struct ec2_client *client;
        char **families;
        struct prov_catalog *cat;
        ec2_catalog_fn done;
        void *userdata;
        unsigned pages;
};

static void types_ctx_free(struct types_ctx *t)
{
        for (size_t i = 0; t->families && t->families[i]; i++)
                free(t->families[i]);
        free(t->families);
        prov_catalog_free(t->cat);
        free(t);
}

static int types_request(struct types_ctx *t, const char *next_token);

static void types_finish(struct types_ctx *t, const struct ec2_result *res)
{
        struct prov_catalog *cat = res->error < 0 ? NULL : TAKE_PTR(t->cat);
        t->done(res, cat, t->userdata);
        types_ctx_free(t);
}

static void types_answer(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct types_ctx *t = userdata;
        _cleanup_free_ char *next = NULL;
        struct ec2_result res = {};

        if (a->status == 0)
                ec2_result_from_aws(a, &res);
        else if (ec2_parse_instance_types(a->status, body, len, &res, t->cat, &next) == -ENOMEM)
                res.error = -ENOMEM;
        if (res.error == 0 && next && ++t->pages < 1000) {
                int r = types_request(t, next);
                if (r == 0)
                        return;
                res.error = r;
        }
        types_finish(t, &res);
}

static int types_request(struct types_ctx *t, const char *next_token)
{
        struct buf b = {};
        int r;

        r = aws_form_add(&b, "Action", "DescribeInstanceTypes");
        r = r ?: aws_form_add(&b, "Version", EC2_VERSION);
        r = r ?: aws_form_add(&b, "MaxResults", "100");
        if (t->families && t->families[0])
                r = r ?: aws_form_add(&b, "Filter.1.Name", "instance-type");
        for (size_t i = 0; t->families && t->families[i] && r == 0; i++) {
                _cleanup_free_ char *pat = strprintf("%s.*", t->families[i]);
                r = pat ? ec2_form_addf(&b, pat, "Filter.1.Value.%zu", i + 1) : -ENOMEM;
        }
        if (next_token)
                r = r ?: aws_form_add(&b, "NextToken", next_token);
        r = r ?: buf_append(&b, "", 1);
        if (r == 0)
                r = ec2_call(t->client, false, b.data, types_answer, t);
        buf_free(&b);
        return r;
}

int ec2_describe_instance_types(struct ec2_client *c, const char *const *families, ec2_catalog_fn done,
                                void *userdata)
{
        struct types_ctx *t = calloc(1, sizeof(*t));
        size_t n = 0;
        int r;

        if (!t)
                return -ENOMEM;
        *t = (struct types_ctx){ .client = c, .done = done, .userdata = userdata };
        while (families && families[n])
                n++;
        t->families = calloc(n + 1, sizeof(char *));
        t->cat = calloc(1, sizeof(*t->cat));
        if (!t->families || !t->cat) {
                types_ctx_free(t);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (!(t->families[i] = strdup(families[i]))) {
                        types_ctx_free(t);
                        return -ENOMEM;
                }
        r = types_request(t, NULL);
        if (r < 0)
                types_ctx_free(t);
        return r;
}
