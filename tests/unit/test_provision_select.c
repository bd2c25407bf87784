/* Provisioning, the pure parts: the catalog, kubelet allocatable, first-fit-decreasing packing, requirement
 * filters (max memory: the 32xlarge on offer is never chosen for small pods), zone spread away from the
 * interrupted zone, the vCPU limit, override capping, ClientTokens, the CreateFleet form body and the
 * reading of CreateFleet answers (the fixture's shapes). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "spotdrain/keys.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

#define GIB (1024LL * 1024 * 1024)
#define MIB (1024LL * 1024)

static const char catalog_json[] =
    "{\"instance_types\": ["
    "{\"name\": \"m5.large\", \"vcpu\": 2, \"memory_mib\": 8192, \"architecture\": \"x86_64\", "
    "\"max_enis\": 3, "
    "\"ipv4_per_eni\": 10},"
    "{\"name\": \"m5.xlarge\", \"vcpu\": 4, \"memory_mib\": 16384, \"max_enis\": 4, \"ipv4_per_eni\": 15},"
    "{\"name\": \"m5.2xlarge\", \"vcpu\": 8, \"memory_mib\": 32768, \"max_enis\": 4, \"ipv4_per_eni\": 15},"
    "{\"name\": \"m5.4xlarge\", \"vcpu\": 16, \"memory_mib\": 65536, \"max_enis\": 8, \"ipv4_per_eni\": 30},"
    "{\"name\": \"m6i.32xlarge\", \"vcpu\": 128, \"memory_mib\": 524288, \"max_enis\": 15, "
    "\"ipv4_per_eni\": 50},"
    "{\"name\": \"c5.xlarge\", \"vcpu\": 4, \"memory_mib\": 8192, \"max_pods\": 58},"
    "{\"name\": \"m6g.xlarge\", \"vcpu\": 4, \"memory_mib\": 16384, \"architecture\": \"arm64\", "
    "\"max_pods\": 58}"
    "]}";

static struct prov_catalog *catalog(void)
{
        struct prov_catalog *c = NULL;
        _cleanup_free_ char *err = NULL;
        if (prov_catalog_parse(catalog_json, strlen(catalog_json), &c, &err) < 0)
                fail_msg("catalog: %s", err);
        return c;
}

static const struct prov_subnet subnets3[] = {
        { "subnet-a", "us-east-1a" },
        { "subnet-b", "us-east-1b" },
        { "subnet-c", "us-east-1c" },
};

static void test_catalog(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        _cleanup_(prov_catalog_freep) struct prov_catalog *back = NULL;
        _cleanup_free_ char *json = NULL, *err = NULL;
        const struct prov_itype *t;

        assert_int_equal(c->n, 7);
        t = prov_catalog_find(c, "m5.large");
        assert_non_null(t);
        assert_string_equal(t->family, "m5");
        assert_string_equal(t->size, "large");
        assert_string_equal(t->arch, "x86_64");
        assert_int_equal(t->max_pods, 29); /* 3 * (10 - 1) + 2 */
        assert_int_equal(prov_max_pods(15, 50), 737);
        assert_string_equal(prov_catalog_find(c, "m6g.xlarge")->arch, "arm64");

        assert_int_equal(prov_catalog_format_json(c, &json), 0);
        assert_int_equal(prov_catalog_parse(json, strlen(json), &back, NULL), 0);
        assert_int_equal(back->n, c->n);
        assert_int_equal(prov_catalog_find(back, "m6i.32xlarge")->memory_mib, 524288);
        assert_int_equal(prov_catalog_find(back, "m5.4xlarge")->max_pods, 234);

        static const char bad_name[] =
            "{\"instance_types\": [{\"name\": \"bad\", \"vcpu\": 2, \"memory_mib\": 1}]}";
        static const char no_vcpu[] = "{\"instance_types\": [{\"name\": \"m5.large\"}]}";
        assert_int_equal(prov_catalog_parse(bad_name, strlen(bad_name), &back, &err), -EBADMSG);
        assert_non_null(strstr(err, "instance_types[0]"));
        free(err);
        err = NULL;
        assert_int_equal(prov_catalog_parse(no_vcpu, strlen(no_vcpu), &back, &err), -EBADMSG);
        assert_non_null(strstr(err, "vcpu"));
}

static void test_shipped_catalog(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = NULL;
        _cleanup_free_ char *err = NULL;
        static const char *const families[] = { "m5", "m6i", "m7i", "c5", "c6i", "c7i", "r5", "r6i", "t3" };

        if (prov_catalog_load("data/instance-types.json", &c, &err) < 0)
                fail_msg("%s", err);
        for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
                bool found = false;
                for (size_t k = 0; k < c->n; k++)
                        found = found || streq(c->types[k].family, families[i]);
                assert_true(found);
        }
        const struct prov_itype *t = prov_catalog_find(c, "m5.2xlarge");
        assert_non_null(t);
        assert_int_equal(t->vcpu, 8);
        assert_int_equal(t->memory_mib, 32768);
        assert_int_equal(t->max_pods, 58);
        assert_int_equal(prov_catalog_find(c, "t3.medium")->max_pods, 17);
}

static void test_allocatable(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        int64_t cpu, mem;

        /* 8 cores: 60 + 10 + 2 * 5 + 4 * 2.5 = 90m reserved; 58 pods: 11 * 58 + 255 MiB + 100 MiB eviction.
         */
        prov_itype_allocatable(prov_catalog_find(c, "m5.2xlarge"), &cpu, &mem);
        assert_int_equal(cpu, 7910);
        assert_int_equal(mem, (32768 - 893 - 100) * MIB);
        prov_itype_allocatable(prov_catalog_find(c, "m5.large"), &cpu, &mem);
        assert_int_equal(cpu, 1930);
}

static struct prov_select_input input(const struct prov_catalog *c, const struct prov_requirements *req,
                                      const struct prov_request *pods, size_t n)
{
        return (struct prov_select_input){ .catalog = c,
                                           .req = req,
                                           .pods = pods,
                                           .n_pods = n,
                                           .interrupted_zone = "us-east-1a",
                                           .subnets = subnets3,
                                           .n_subnets = 3,
                                           .vcpu_budget = -1 };
}

static void test_packing(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        static const char *const m5[] = { "m5", NULL };
        struct prov_requirements req = { .families = m5, .max_vcpu = 4 };
        struct prov_request pods[10];
        struct prov_selection s = {};
        unsigned total = 0;

        for (size_t i = 0; i < 10; i++)
                pods[i] = (struct prov_request){ 1000, 2 * GIB };
        struct prov_select_input in = input(c, &req, pods, 10);
        assert_int_equal(prov_select(&in, &s), 0);
        /* m5.xlarge offers 3920m: three 1-CPU pods per bin, the tenth alone. */
        assert_int_equal(s.n_bins, 4);
        for (size_t b = 0; b < s.n_bins; b++) {
                total += s.bins[b].pods;
                assert_true(s.bins[b].pods <= 3);
                assert_true(s.bins[b].n_types > 0);
        }
        assert_int_equal(total, 10);
        assert_string_equal(s.bins[0].types[0]->name, "m5.xlarge");
        assert_int_equal(s.bins[3].pods, 1);
        assert_string_equal(s.bins[3].types[0]->name, "m5.large"); /* smallest that fits first */
        assert_string_equal(s.bins[3].types[1]->name, "m5.xlarge");
        assert_int_equal(s.pods_unplaceable, 0);
        prov_selection_clear(&s);

        /* Decreasing order: the big pods open the bins, the small ones fill the gaps. */
        struct prov_request mixed[] = {
                { 500, GIB }, { 3000, GIB }, { 500, GIB }, { 3000, GIB }, { 400, GIB }
        };
        in = input(c, &req, mixed, ARRAY_SIZE(mixed));
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.n_bins, 2);
        assert_int_equal(s.bins[0].pod_index[0], 1);
        assert_int_equal(s.bins[1].pod_index[0], 3);
        assert_int_equal(s.bins[0].total.cpu_millis + s.bins[1].total.cpu_millis, 7400);
        prov_selection_clear(&s);

        /* A pod larger than any allowed type is reported, not packed. */
        struct prov_request huge[] = { { 6000, GIB }, { 100, GIB } };
        in = input(c, &req, huge, 2);
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.pods_unplaceable, 1);
        assert_int_equal(s.n_bins, 1);
        prov_selection_clear(&s);

        /* DaemonSet overhead is on every bin: 1 CPU of agents leaves room for two 1-CPU pods per xlarge. */
        in = input(c, &req, pods, 6);
        in.daemonset = (struct prov_request){ 1000, GIB };
        in.daemonset_pods = 3;
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.n_bins, 3);
        assert_int_equal(s.bins[0].total.cpu_millis, 3000);
        prov_selection_clear(&s);

        /* Nothing displaced, nothing to launch. */
        in = input(c, &req, NULL, 0);
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.n_bins, 0);
        prov_selection_clear(&s);
}

static void test_requirements(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        struct prov_requirements req = { .max_memory_mib = 72 * 1024 };
        struct prov_request pods[] = { { 250, 256 * MIB }, { 250, 256 * MIB }, { 500, 512 * MIB } };
        struct prov_selection s = {};

        struct prov_select_input in = input(c, &req, pods, ARRAY_SIZE(pods));
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.n_bins, 1);
        for (size_t i = 0; i < s.bins[0].n_types; i++) {
                assert_true(s.bins[0].types[i]->memory_mib <= 72 * 1024);
                assert_null(strstr(s.bins[0].types[i]->name, "32xlarge"));
                assert_string_equal(s.bins[0].types[i]->arch, "x86_64"); /* the default architecture */
        }
        assert_string_equal(s.bins[0].types[0]->name, "m5.large");
        prov_selection_clear(&s);

        /* Without the memory cap the 32xlarge is a candidate, but never the first choice for small pods. */
        req.max_memory_mib = 0;
        assert_int_equal(prov_select(&in, &s), 0);
        assert_string_equal(s.bins[0].types[0]->name, "m5.large");
        assert_string_equal(s.bins[0].types[s.bins[0].n_types - 1]->name, "m6i.32xlarge");
        prov_selection_clear(&s);

        /* Families, sizes and architectures. */
        static const char *const c5[] = { "c5", NULL };
        static const char *const arm[] = { "arm64", NULL };
        static const char *const twox[] = { "2xlarge", NULL };
        req = (struct prov_requirements){ .families = c5 };
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.bins[0].n_types, 1);
        assert_string_equal(s.bins[0].types[0]->name, "c5.xlarge");
        prov_selection_clear(&s);
        req = (struct prov_requirements){ .architectures = arm };
        assert_int_equal(prov_select(&in, &s), 0);
        assert_string_equal(s.bins[0].types[0]->name, "m6g.xlarge");
        prov_selection_clear(&s);
        req = (struct prov_requirements){ .sizes = twox };
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.bins[0].n_types, 1);
        assert_string_equal(s.bins[0].types[0]->name, "m5.2xlarge");
        prov_selection_clear(&s);

        /* Memory-heavy pods skip the types that have the CPU but not the memory (c5.xlarge: 8 GiB). */
        struct prov_request heavy[] = { { 1000, 10 * GIB } };
        req = (struct prov_requirements){ .max_vcpu = 4 };
        in = input(c, &req, heavy, 1);
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.bins[0].n_types, 1);
        assert_string_equal(s.bins[0].types[0]->name, "m5.xlarge");
        prov_selection_clear(&s);
}

static void test_zone_spread(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        static const char *const m5[] = { "m5", NULL };
        struct prov_requirements req = { .families = m5, .max_vcpu = 4 };
        struct prov_request pods[12];
        struct prov_override ov[32];
        struct prov_selection s = {};

        for (size_t i = 0; i < 12; i++)
                pods[i] = (struct prov_request){ 1000, GIB };
        struct prov_select_input in = input(c, &req, pods, 12);
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.n_bins, 4);
        /* Away from us-east-1a, alternating over b and c. */
        assert_int_equal(s.bins[0].preferred_subnet, 1);
        assert_int_equal(s.bins[1].preferred_subnet, 2);
        assert_int_equal(s.bins[2].preferred_subnet, 1);
        assert_int_equal(s.bins[3].preferred_subnet, 2);
        size_t n = prov_bin_overrides(&in, &s.bins[1], PROV_CAPACITY_SPOT, NULL, NULL, ov, ARRAY_SIZE(ov));
        assert_true(n > 0);
        assert_string_equal(ov[0].subnet->zone, "us-east-1c");
        assert_string_equal(ov[1].subnet->zone, "us-east-1b");
        for (size_t i = 0; i < n; i++)
                assert_string_not_equal(ov[i].subnet->zone, "us-east-1a");
        prov_selection_clear(&s);

        /* Replacements already in us-east-1b: the next ones balance towards us-east-1c. */
        unsigned load[] = { 0, 2, 0 };
        in.subnet_load = load;
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.bins[0].preferred_subnet, 2);
        assert_int_equal(s.bins[1].preferred_subnet, 2);
        assert_int_equal(s.bins[2].preferred_subnet, 1);
        prov_selection_clear(&s);

        /* Only the interrupted zone configured: it is used rather than nothing. */
        in = input(c, &req, pods, 2);
        in.subnets = subnets3;
        in.n_subnets = 1;
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.bins[0].preferred_subnet, 0);
        n = prov_bin_overrides(&in, &s.bins[0], PROV_CAPACITY_SPOT, NULL, NULL, ov, ARRAY_SIZE(ov));
        assert_true(n > 0);
        prov_selection_clear(&s);
}

static bool no_spot_b(const char *type, const char *zone, const char *capacity, void *userdata)
{
        return streq(zone, "us-east-1b") && streq(capacity, PROV_CAPACITY_SPOT) && streq(type, userdata);
}

static void test_overrides(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        struct prov_requirements req = { .max_overrides = 5 };
        struct prov_request pods[] = { { 1000, GIB } };
        struct prov_override ov[32];
        struct prov_selection s = {};
        size_t n;

        struct prov_select_input in = input(c, &req, pods, 1);
        assert_int_equal(prov_select(&in, &s), 0);
        n = prov_bin_overrides(&in, &s.bins[0], PROV_CAPACITY_SPOT, NULL, NULL, ov, ARRAY_SIZE(ov));
        assert_int_equal(n, 5);
        /* type × subnet, smallest type first, the preferred subnet first within a type. */
        assert_string_equal(ov[0].type->name, "m5.large");
        assert_string_equal(ov[1].type->name, "m5.large");
        assert_string_not_equal(ov[0].subnet->zone, ov[1].subnet->zone);
        assert_string_not_equal(ov[2].type->name, "m5.large");

        /* Pools known to have no capacity are left out. */
        n = prov_bin_overrides(&in, &s.bins[0], PROV_CAPACITY_SPOT, no_spot_b, (void *)"m5.large", ov,
                               ARRAY_SIZE(ov));
        assert_string_equal(ov[0].type->name, "m5.large");
        assert_string_equal(ov[0].subnet->zone, "us-east-1c");
        assert_string_not_equal(ov[1].type->name, "m5.large");
        n = prov_bin_overrides(&in, &s.bins[0], PROV_CAPACITY_ON_DEMAND, no_spot_b, (void *)"m5.large", ov,
                               ARRAY_SIZE(ov));
        assert_string_equal(ov[1].type->name, "m5.large");
        assert_int_equal(n, 5);
        prov_selection_clear(&s);
}

static void test_vcpu_limit(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        static const char *const m5[] = { "m5", NULL };
        struct prov_requirements req = { .families = m5, .max_vcpu = 4 };
        struct prov_request pods[12];
        struct prov_selection s = {};

        for (size_t i = 0; i < 12; i++)
                pods[i] = (struct prov_request){ 1000, GIB };
        struct prov_select_input in = input(c, &req, pods, 12);
        in.vcpu_budget = 8;
        assert_int_equal(prov_select(&in, &s), 0);
        /* Four xlarge bins wanted (16 vCPUs), 8 allowed. */
        assert_int_equal(s.n_bins, 2);
        assert_int_equal(s.bins_over_budget, 2);
        assert_int_equal(s.bins[0].vcpu_reserved + s.bins[1].vcpu_reserved, 8);
        prov_selection_clear(&s);

        /* A budget that fits only smaller types than the bin needs launches nothing. */
        in.vcpu_budget = 2;
        assert_int_equal(prov_select(&in, &s), 0);
        assert_int_equal(s.n_bins, 0);
        assert_int_equal(s.bins_over_budget, 4);
        prov_selection_clear(&s);

        in.vcpu_budget = 0;
        in.n_subnets = 0;
        assert_int_equal(prov_select(&in, &s), -EINVAL);
}

static void test_client_token(void **state)
{
        char a[65], b[65], c[65], d[65];

        assert_int_equal(prov_client_token("ev-1", "i-0abc", 0, "spot", 0, a), 0);
        assert_int_equal(prov_client_token("ev-1", "i-0abc", 0, "spot", 0, b), 0);
        assert_string_equal(a, b);
        assert_true(strlen(a) <= 64);
        assert_int_equal(prov_client_token("ev-1", "i-0abc", 1, "spot", 0, c), 0);
        assert_string_not_equal(a, c);
        assert_int_equal(prov_client_token("ev-1", "i-0abc", 0, "spot", 1, d), 0);
        assert_string_not_equal(a, d);
        assert_int_equal(prov_client_token("ev-2", "i-0abc", 0, "spot", 0, d), 0);
        assert_string_not_equal(a, d);
}

static void test_fleet_body(void **state)
{
        _cleanup_(prov_catalog_freep) struct prov_catalog *c = catalog();
        const struct prov_subnet sn[] = { { "subnet-0a1b2c3d4e5f67890", "us-east-1a" },
                                          { NULL, "us-east-1b" } };
        const struct prov_override ov[] = { { prov_catalog_find(c, "m5.large"), &sn[0] },
                                            { prov_catalog_find(c, "m5.xlarge"), &sn[1] } };
        const struct ec2_tag tags[] = { { SPOTDRAIN_TAG_REPLACES, "i-0abcd1234ef567890" } };
        struct ec2_fleet_request q = { .client_token = "tok-1",
                                       .launch_template_id = "lt-0123456789abcdef0",
                                       .launch_template_version = "$Latest",
                                       .overrides = ov,
                                       .n_overrides = 2,
                                       .capacity_type = PROV_CAPACITY_SPOT,
                                       .tags = tags,
                                       .n_tags = 1 };
        _cleanup_free_ char *body = NULL, *od = NULL;

        assert_int_equal(ec2_create_fleet_body(&q, &body), 0);
        assert_true(
            startswith(body, "Action=CreateFleet&Version=2016-11-15&ClientToken=tok-1&Type=instant&"));
        assert_non_null(
            strstr(body, "LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version=%24Latest"));
        assert_non_null(strstr(body,
                               "LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large&"
                               "LaunchTemplateConfigs.1.Overrides.1.SubnetId=subnet-0a1b2c3d4e5f67890"));
        assert_non_null(strstr(body, "LaunchTemplateConfigs.1.Overrides.2.AvailabilityZone=us-east-1b"));
        assert_non_null(strstr(body, "TargetCapacitySpecification.TotalTargetCapacity=1"));
        assert_non_null(strstr(body, "TargetCapacitySpecification.DefaultTargetCapacityType=spot"));
        assert_non_null(strstr(body, "SpotOptions.AllocationStrategy=price-capacity-optimized"));
        assert_non_null(
            strstr(body, "TagSpecification.1.ResourceType=instance&TagSpecification.1.Tag.1.Key="
                         "spotdrain.io%2Freplaces&TagSpecification.1.Tag.1.Value=i-0abcd1234ef567890"));
        assert_null(strstr(body, "Priority"));

        q.capacity_type = PROV_CAPACITY_ON_DEMAND;
        assert_int_equal(ec2_create_fleet_body(&q, &od), 0);
        assert_non_null(strstr(od, "OnDemandOptions.AllocationStrategy=prioritized"));
        assert_non_null(strstr(od, "LaunchTemplateConfigs.1.Overrides.2.Priority=1"));
        assert_null(strstr(od, "SpotOptions"));

        q.client_token = NULL;
        assert_int_equal(ec2_create_fleet_body(&q, &od), -EINVAL);
}

/* The shapes of fixtures/ec2/create-fleet-instant.response*.xml. */
static const char fleet_partial[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
    "<requestId>a31c4a4a</requestId><fleetId>fleet-5d130ff7</fleetId>"
    "<errorSet><item><launchTemplateAndOverrides><launchTemplateSpecification><launchTemplateId>lt-1"
    "</launchTemplateId><version>3</version></launchTemplateSpecification><overrides><instanceType>m5.large"
    "</instanceType><subnetId>subnet-a</subnetId></overrides></launchTemplateAndOverrides>"
    "<lifecycle>spot</lifecycle><errorCode>InsufficientInstanceCapacity</errorCode>"
    "<errorMessage>There is no Spot capacity available that matches your request.</errorMessage></item>"
    "</errorSet><fleetInstanceSet><item><launchTemplateAndOverrides><launchTemplateSpecification>"
    "<launchTemplateId>lt-1</launchTemplateId><version>3</version></launchTemplateSpecification><overrides>"
    "<instanceType>m5a.large</instanceType><subnetId>subnet-a</subnetId></overrides>"
    "</launchTemplateAndOverrides><lifecycle>spot</lifecycle><instanceIds><item>i-0fedcba9876543210</item>"
    "</instanceIds><instanceType>m5a.large</instanceType></item></fleetInstanceSet></CreateFleetResponse>";

static const char fleet_none[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
    "<requestId>0b7c9e2d</requestId><fleetId>fleet-8e2d4c6a</fleetId><errorSet><item>"
    "<launchTemplateAndOverrides><overrides><instanceType>m5a.large</instanceType><subnetId>subnet-a"
    "</subnetId></overrides></launchTemplateAndOverrides><lifecycle>spot</lifecycle>"
    "<errorCode>UnfulfillableCapacity</errorCode><errorMessage>Unable to fulfill capacity</errorMessage>"
    "</item></errorSet><fleetInstanceSet/></CreateFleetResponse>";

static const char unauthorized[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>UnauthorizedOperation</Code>"
    "<Message>You are not authorized to perform this operation.</Message></Error></Errors>"
    "<RequestID>5e2b9f70</RequestID></Response>";

static void test_fleet_answers(void **state)
{
        struct ec2_fleet_result f = {};

        assert_int_equal(ec2_parse_create_fleet(200, fleet_partial, strlen(fleet_partial), &f), 0);
        assert_string_equal(f.fleet_id, "fleet-5d130ff7");
        assert_int_equal(f.n_instances, 1);
        assert_string_equal(f.instances[0].instance_id, "i-0fedcba9876543210");
        assert_string_equal(f.instances[0].instance_type, "m5a.large");
        assert_string_equal(f.instances[0].subnet_id, "subnet-a");
        assert_string_equal(f.instances[0].lifecycle, "spot");
        assert_int_equal(f.n_errors, 1);
        assert_string_equal(f.errors[0].code, "InsufficientInstanceCapacity");
        assert_string_equal(f.errors[0].instance_type, "m5.large");
        assert_true(ec2_capacity_error(f.errors[0].code));
        ec2_fleet_result_clear(&f);

        /* Nothing launched is still HTTP 200: the errorSet says why. */
        assert_int_equal(ec2_parse_create_fleet(200, fleet_none, strlen(fleet_none), &f), 0);
        assert_int_equal(f.r.error, 0);
        assert_int_equal(f.n_instances, 0);
        assert_int_equal(f.n_errors, 1);
        assert_true(ec2_capacity_error(f.errors[0].code));
        ec2_fleet_result_clear(&f);

        assert_int_equal(ec2_parse_create_fleet(403, unauthorized, strlen(unauthorized), &f), -EPERM);
        assert_string_equal(f.r.code, "UnauthorizedOperation");
        assert_false(ec2_capacity_error(f.r.code));
        ec2_fleet_result_clear(&f);
}

static void test_pod_requests(void **state)
{
        static const char pod_json[] =
            "{\"metadata\": {\"name\": \"web-1\", \"ownerReferences\": [{\"kind\": \"ReplicaSet\"}]},"
            " \"spec\": {\"containers\": [{\"resources\": {\"requests\": {\"cpu\": \"250m\", \"memory\": "
            "\"256Mi\"}}}, {\"resources\": {\"requests\": {\"cpu\": \"1\"}}}, {}],"
            " \"initContainers\": [{\"resources\": {\"requests\": {\"memory\": \"1Gi\"}}}],"
            " \"overhead\": {\"cpu\": \"50m\"}}}";
        static const char ds_json[] =
            "{\"metadata\": {\"name\": \"agent\", \"ownerReferences\": [{\"kind\": "
            "\"DaemonSet\"}]}, \"spec\": {\"containers\": []}}";
        static const char bad_json[] =
            "{\"spec\": {\"containers\": [{\"resources\": {\"requests\": {\"cpu\": \"lots\"}}}]}}";
        struct provisioner_pod p;
        cJSON *o;

        o = cJSON_Parse(pod_json);
        assert_int_equal(provisioner_pod_from_json(o, &p), 0);
        assert_string_equal(p.name, "web-1");
        assert_int_equal(p.req.cpu_millis, 1300);  /* 250m + 1 + 50m overhead */
        assert_int_equal(p.req.memory_bytes, GIB); /* the init container's 1Gi beats 256Mi */
        assert_false(p.daemonset);
        cJSON_Delete(o);
        o = cJSON_Parse(ds_json);
        assert_int_equal(provisioner_pod_from_json(o, &p), 0);
        assert_true(p.daemonset);
        cJSON_Delete(o);
        o = cJSON_Parse(bad_json);
        assert_int_equal(provisioner_pod_from_json(o, &p), -EINVAL);
        cJSON_Delete(o);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_catalog),       cmocka_unit_test(test_shipped_catalog),
                cmocka_unit_test(test_allocatable),   cmocka_unit_test(test_packing),
                cmocka_unit_test(test_requirements),  cmocka_unit_test(test_zone_spread),
                cmocka_unit_test(test_overrides),     cmocka_unit_test(test_vcpu_limit),
                cmocka_unit_test(test_client_token),  cmocka_unit_test(test_fleet_body),
                cmocka_unit_test(test_fleet_answers), cmocka_unit_test(test_pod_requests),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
