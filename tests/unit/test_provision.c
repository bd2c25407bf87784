/* The provisioner end to end against the simulator in-process (manual scenario clock): the EC2 surface
 * launches into the model, the Kubernetes surface shows the new node turning Ready. Launch and tracking,
 * on-demand fallback after capacity errors, idempotency across a restart, the vCPU limit, triggers,
 * throttling and permission errors, Auto Scaling mode; and the surface itself (DescribeInstances,
 * DescribeInstanceTypes, TerminateInstances, ClientToken replay, signatures). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include <cjson/cJSON.h>

#include "sim/ec2_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim_fixture.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/keys.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define GIB (1024LL * 1024 * 1024)

static const char scenario[] =
    "name: provision-test\nmode: controller\nbudget_seconds: 120\nnodes:\n"
    "  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot, "
    "instance_type: "
    "m5.2xlarge, allocatable: {cpu: \"8\", memory: 32Gi, pods: 58}}\n"
    "  - {name: spot-b, instance_id: i-0b00000000000000b, zone: us-east-1b, capacity_type: spot, "
    "instance_type: "
    "m5.2xlarge, allocatable: {cpu: \"8\", memory: 32Gi, pods: 58}}\n"
    "workloads:\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 4, placement: {spot-a: 2, spot-b: 2}, "
    "requests: {cpu: \"1\", memory: 2Gi}}\n"
    "events:\n"
    "  - {at: 0, type: rebalance-recommendation, node: spot-a}\n"
    "  - {at: 60, type: spot-interruption, node: spot-a}\n"
    "provisioning:\n"
    "  node_launch_seconds: 45\n"
    "  instance_types:\n"
    "    - {name: m5.xlarge, cpu: \"4\", memory: 16Gi}\n"
    "    - {name: m5.2xlarge, cpu: \"8\", memory: 32Gi}\n"
    "    - {name: m5.4xlarge, cpu: \"16\", memory: 64Gi}\n"
    "    - {name: m5.32xlarge, cpu: \"128\", memory: 512Gi}\n";

static const struct prov_subnet subnets[] = {
        { SIM_EC2_SUBNET_PREFIX "us-east-1a", "us-east-1a" },
        { SIM_EC2_SUBNET_PREFIX "us-east-1b", "us-east-1b" },
        { SIM_EC2_SUBNET_PREFIX "us-east-1c", "us-east-1c" },
};

#define MAX_ALERTS 16

struct fx {
        struct sim_fixture sf;
        struct sim_ec2 *ec2s;
        struct loop *loop;
        struct kube_client *kube;
        struct ec2_client *ec2;
        struct alert_bus *bus;
        struct prov_catalog *catalog;
        struct provisioner *p;
        struct aws_credentials creds;
        enum alert_kind alerts[MAX_ALERTS];
        char *alert_msgs[MAX_ALERTS];
        size_t n_alerts;
};

static const struct aws_credentials *creds_of(void *userdata)
{
        return &((struct fx *)userdata)->creds;
}

static void record_alert(const struct alert *a, void *userdata)
{
        struct fx *f = userdata;
        if (f->n_alerts < MAX_ALERTS) {
                f->alerts[f->n_alerts] = a->kind;
                f->alert_msgs[f->n_alerts++] = strdup(a->message);
        }
}

static unsigned count_alerts(const struct fx *f, enum alert_kind k)
{
        unsigned n = 0;
        for (size_t i = 0; i < f->n_alerts; i++)
                n += f->alerts[i] == k;
        return n;
}

/* /work/shared/scenarios/rebalance-early.yaml: no spare room; the rebalance recommendation comes 60 s
 * before the interruption notice. */
static const char rebalance_early[] =
    "name: rebalance-early\nmode: controller\nbudget_seconds: 120\nnodes:\n"
    "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.2xlarge, allocatable: "
    "{cpu: "
    "\"8\", memory: 32Gi, pods: 58}}\n"
    "  - {name: spot-b, zone: us-east-1b, capacity_type: spot, instance_type: m5.2xlarge, allocatable: "
    "{cpu: "
    "\"8\", memory: 32Gi, pods: 58}}\n"
    "workloads:\n"
    "  - {name: checkout, namespace: shop, kind: Deployment, replicas: 12, placement: {spot-a: 6, spot-b: "
    "6},\n"
    "     requests: {cpu: \"1\", memory: 2Gi}, termination_grace_seconds: 30, shutdown_seconds: 8, "
    "startup_seconds: 20,\n"
    "     pdb: {min_available: \"75%\"}}\n"
    "  - {name: cart, namespace: shop, kind: StatefulSet, replicas: 3, placement: {spot-a: 1, spot-b: 2},\n"
    "     requests: {cpu: 500m, memory: 4Gi}, termination_grace_seconds: 45, shutdown_seconds: 15, "
    "startup_seconds: 25,\n"
    "     pdb: {max_unavailable: 1}}\n"
    "provisioning:\n"
    "  node_launch_seconds: 45\n"
    "  instance_types:\n"
    "    - {name: m5.xlarge, cpu: \"4\", memory: 16Gi}\n"
    "    - {name: m5.2xlarge, cpu: \"8\", memory: 32Gi}\n"
    "    - {name: m5.4xlarge, cpu: \"16\", memory: 64Gi}\n"
    "    - {name: m5.32xlarge, cpu: \"128\", memory: 512Gi}\n"
    "events:\n"
    "  - {at: 0, type: rebalance-recommendation, node: spot-a}\n"
    "  - {at: 60, type: spot-interruption, node: spot-a}\n";

static int setup_with(void **state, const char *scenario_text)
{
        struct fx *f = calloc(1, sizeof(*f));
        _cleanup_free_ char *error = NULL;

        assert_non_null(f);
        sim_fixture_start(&f->sf, scenario_text, &(struct sim_fixture_options){ .manual_clock = true });
        assert_int_equal(sim_ec2_start(f->sf.sim, NULL, &f->ec2s), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(
            kube_client_new(f->loop, f->sf.kcfg, &(struct kube_client_options){ .qps = -1 }, &f->kube), 0);
        f->creds = (struct aws_credentials){ .access_key_id = (char *)SIM_EC2_ACCESS_KEY_ID,
                                             .secret_access_key = (char *)SIM_EC2_SECRET_ACCESS_KEY };
        struct ec2_config ec = { .endpoint = sim_ec2_url(f->ec2s),
                                 .autoscaling_endpoint = sim_ec2_url(f->ec2s),
                                 .region = "us-east-1",
                                 .credentials = creds_of,
                                 .userdata = f };
        assert_int_equal(ec2_client_new(f->loop, &ec, &f->ec2), 0);
        assert_int_equal(alert_bus_new(&f->bus), 0);
        assert_int_equal(alert_bus_add_sink(f->bus, record_alert, f), 0);
        if (prov_catalog_load("data/instance-types.json", &f->catalog, &error) < 0)
                fail_msg("%s", error);
        assert_int_equal(sim_ec2_set_catalog(f->ec2s, f->catalog), 0);
        *state = f;
        return 0;
}

static int setup(void **state)
{
        return setup_with(state, scenario);
}

static int setup_rebalance_early(void **state)
{
        return setup_with(state, rebalance_early);
}

static int teardown(void **state)
{
        struct fx *f = *state;
        provisioner_free(f->p);
        ec2_client_free(f->ec2);
        kube_client_free(f->kube);
        loop_free(f->loop);
        alert_bus_free(f->bus);
        sim_ec2_stop(f->ec2s);
        sim_fixture_stop(&f->sf);
        prov_catalog_free(f->catalog);
        for (size_t i = 0; i < f->n_alerts; i++)
                free(f->alert_msgs[i]);
        free(f);
        return 0;
}

static void set_time(struct fx *f, double t)
{
        sim_lock(f->sf.sim);
        sim_set_now(f->sf.sim, t);
        (void)sim_advance(f->sf.sim);
        sim_broadcast(f->sf.sim);
        sim_unlock(f->sf.sim);
}

static void tick(void *userdata)
{
        *(bool *)userdata = true;
}

/* Runs the loop until pred holds (bounded: 10 s of real time). */
static bool run_until(struct fx *f, bool (*pred)(struct fx *f))
{
        for (int i = 0; i < 1000; i++) {
                bool fired = false;
                if (pred(f))
                        return true;
                assert_int_equal(timer_start_in(f->loop, 10000, tick, &fired, NULL), 0);
                assert_int_equal(loop_run_until(f->loop, &fired, 5ULL * 1000000ULL), 0);
        }
        return pred(f);
}

static const struct provisioner_replacement *rep0(struct fx *f)
{
        size_t n;
        const struct provisioner_replacement *r = provisioner_replacements(f->p, &n);
        return n > 0 ? &r[0] : NULL;
}

static bool settled(struct fx *f)
{
        const struct provisioner_replacement *r = rep0(f);
        return r && r->state != PROV_STATE_LAUNCHING;
}

static bool ready(struct fx *f)
{
        const struct provisioner_replacement *r = rep0(f);
        return r && (r->state == PROV_STATE_READY || r->state == PROV_STATE_FAILED);
}

static const char *const m5_only[] = { "m5", NULL };

static struct provisioner_options options(struct fx *f)
{
        return (struct provisioner_options){ .catalog = f->catalog,
                                             .req = { .families = m5_only, .max_memory_mib = 72 * 1024 },
                                             .subnets = subnets,
                                             .n_subnets = ARRAY_SIZE(subnets),
                                             .launch_template_name = "spotdrain-nodes",
                                             .launch_template_version = "$Latest" };
}

static struct notice notice(enum notice_kind kind, const char *instance, const char *event_id)
{
        struct notice n = { .kind = kind, .notice_time = clk_now() };
        snprintf(n.instance_id, sizeof(n.instance_id), "%s", instance);
        snprintf(n.event_id, sizeof(n.event_id), "%s", event_id);
        snprintf(n.source, sizeof(n.source), "sqs");
        return n;
}

/* The rebalance-early shape: 6 × (1 CPU, 2Gi) + 1 × (500m, 4Gi), and a DaemonSet agent. */
static const struct provisioner_pod pods[] = {
        { "checkout-1", { 1000, 2 * GIB }, false }, { "checkout-2", { 1000, 2 * GIB }, false },
        { "checkout-3", { 1000, 2 * GIB }, false }, { "checkout-4", { 1000, 2 * GIB }, false },
        { "checkout-5", { 1000, 2 * GIB }, false }, { "checkout-6", { 1000, 2 * GIB }, false },
        { "cart-0", { 500, 4 * GIB }, false },      { "agent", { 100, GIB / 4 }, true },
};

static int on_notice(struct fx *f, enum notice_kind kind, const char *instance, const char *event_id,
                     const char *node, const char *zone)
{
        struct notice n = notice(kind, instance, event_id);
        return provisioner_on_notice(f->p, &n, node, zone, pods, ARRAY_SIZE(pods));
}

static void test_launch_until_ready(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);
        struct sim_ec2_stats st;

        assert_int_equal(provisioner_new(f->loop, f->kube, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-rebalance",
                                   "spot-a", "us-east-1a"),
                         1);
        assert_true(run_until(f, settled));
        const struct provisioner_replacement *r = rep0(f);
        assert_int_equal(r->state, PROV_STATE_LAUNCHED);
        /* 6.5 CPUs and 16.25Gi: the smallest m5 that holds them, never the 32xlarge on offer. */
        assert_string_equal(r->instance_type, "m5.2xlarge");
        assert_string_not_equal(r->zone, "us-east-1a");
        assert_string_equal(r->capacity_type, "spot");
        assert_string_equal(r->replaces, "i-0a00000000000000a");
        assert_true(startswith(r->instance_id, "i-0"));
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.launched, 1);
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_LAUNCHED), 0); /* not Ready yet */

        /* The interruption that follows the rebalance launches nothing more. */
        assert_int_equal(on_notice(f, NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-interruption",
                                   "spot-a", "us-east-1a"),
                         0);

        /* node_launch_seconds later the node joins and is Ready. */
        set_time(f, 46);
        assert_true(run_until(f, ready));
        r = rep0(f);
        assert_int_equal(r->state, PROV_STATE_READY);
        assert_true(startswith(r->new_node, "ip-10-0-"));
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_LAUNCHED), 1);
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.launched, 1);
        assert_false(provisioner_under_way(f->p, "i-0b00000000000000b"));
}

static bool got_instances(struct fx *f);
struct described {
        bool done;
        struct ec2_result res;
        struct ec2_instance v[8];
        size_t n;
};
static struct described described;

static void on_described(const struct ec2_result *res, const struct ec2_instance *v, size_t n,
                         void *userdata)
{
        described.done = true;
        described.res = *res;
        described.n = n < 8 ? n : 8;
        if (described.n > 0)
                memcpy(described.v, v, described.n * sizeof(*v));
}

static bool got_instances(struct fx *f)
{
        return described.done;
}

static void test_describe_and_terminate(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);

        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-1",
                                   "spot-a", "us-east-1a"),
                         1);
        assert_true(run_until(f, settled));
        /* Without a Kubernetes client the launch is the outcome. */
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_LAUNCHED), 1);
        const char *id = rep0(f)->instance_id;

        described = (struct described){};
        const char *const filters[] = { "tag:" SPOTDRAIN_TAG_REPLACES "=i-0a00000000000000a", NULL };
        assert_int_equal(ec2_describe_instances(f->ec2, NULL, filters, on_described, NULL), 0);
        assert_true(run_until(f, got_instances));
        assert_int_equal(described.res.error, 0);
        assert_int_equal(described.n, 1);
        assert_string_equal(described.v[0].instance_id, id);
        assert_string_equal(described.v[0].state, "pending");
        assert_string_equal(described.v[0].replaces, "i-0a00000000000000a");
        assert_string_equal(described.v[0].lifecycle, "spot");

        set_time(f, 50);
        described = (struct described){};
        assert_int_equal(
            ec2_describe_instances(f->ec2, (const char *const[]){ id, NULL }, NULL, on_described, NULL), 0);
        assert_true(run_until(f, got_instances));
        assert_int_equal(described.n, 1);
        assert_string_equal(described.v[0].state, "running");
        assert_true(startswith(described.v[0].private_dns_name, "ip-10-0-"));

        /* Every instance, scenario nodes included. */
        described = (struct described){};
        assert_int_equal(ec2_describe_instances(f->ec2, NULL, NULL, on_described, NULL), 0);
        assert_true(run_until(f, got_instances));
        assert_int_equal(described.n, 3);

        described = (struct described){};
        assert_int_equal(ec2_describe_instances(f->ec2, (const char *const[]){ "i-0ffffffffffffffff", NULL },
                                                NULL, on_described, NULL),
                         0);
        assert_true(run_until(f, got_instances));
        assert_int_equal(described.res.error, -EINVAL);
        assert_string_equal(described.res.code, "InvalidInstanceID.NotFound");
}

static void test_on_demand_fallback(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);

        /* No spot anywhere, and no m5.2xlarge on-demand in us-east-1b either. */
        assert_int_equal(sim_ec2_set_no_capacity(f->ec2s, NULL, NULL, "spot"), 0);
        assert_int_equal(sim_ec2_set_no_capacity(f->ec2s, "m5.2xlarge", "us-east-1b", "on-demand"), 0);
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-2",
                                   "spot-a", "us-east-1a"),
                         1);
        assert_true(run_until(f, settled));
        const struct provisioner_replacement *r = rep0(f);
        assert_int_equal(r->state, PROV_STATE_LAUNCHED);
        assert_string_equal(r->capacity_type, "on-demand");
        assert_string_equal(r->instance_type, "m5.2xlarge");
        assert_string_equal(r->zone, "us-east-1c");
        /* The capacity errors are remembered per (type, zone, capacity type). */
        assert_true(provisioner_unavailable(f->p, "m5.2xlarge", "us-east-1b", "spot"));
        assert_true(provisioner_unavailable(f->p, "m5.2xlarge", "us-east-1c", "spot"));
        assert_false(provisioner_unavailable(f->p, "m5.2xlarge", "us-east-1c", "on-demand"));
        assert_false(provisioner_unavailable(f->p, "m5.2xlarge", "us-east-1a", "spot")); /* never asked */
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_FAILED), 0);
}

static void test_no_capacity_at_all(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);

        assert_int_equal(sim_ec2_set_no_capacity(f->ec2s, NULL, NULL, NULL), 0);
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-3", "spot-a", "us-east-1a");
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_FAILED);
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_FAILED), 1);
        assert_false(provisioner_under_way(f->p, "i-0a00000000000000a"));
}

static void test_restart_idempotent(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);
        struct sim_ec2_stats st;
        char first[32];

        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-restart", "spot-a",
                  "us-east-1a");
        assert_true(run_until(f, settled));
        snprintf(first, sizeof(first), "%s", rep0(f)->instance_id);

        /* A restart: a new provisioner, the same notice delivered again. The instance tagged as replacing
         * the node is found and adopted: no CreateFleet at all. */
        f->p = provisioner_free(f->p);
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-restart", "spot-a",
                  "us-east-1a");
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_LAUNCHED);
        assert_string_equal(rep0(f)->instance_id, first);
        assert_string_equal(rep0(f)->instance_type, "m5.2xlarge");
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.launched, 1);
        assert_int_equal(st.create_fleets, 1);

        /* The interruption after a restart (another event of the same instance) adopts it too. */
        f->p = provisioner_free(f->p);
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-later", "spot-a", "us-east-1a");
        assert_true(run_until(f, settled));
        assert_string_equal(rep0(f)->instance_id, first);
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.create_fleets, 1);

        /* Without the lookup (no ec2:DescribeInstances permission) the ClientToken derived from the notice
         * makes EC2 answer the first launch again. */
        struct sim_ec2_fault fault = {};
        snprintf(fault.deny_action, sizeof(fault.deny_action), "DescribeInstances");
        sim_ec2_set_fault(f->ec2s, &fault);
        f->p = provisioner_free(f->p);
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-restart", "spot-a",
                  "us-east-1a");
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_LAUNCHED);
        assert_string_equal(rep0(f)->instance_id, first);
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.launched, 1);
        assert_int_equal(st.create_fleets, 2);
}

static void test_vcpu_limit(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);
        struct sim_ec2_stats st;
        size_t n;

        o.vcpu_limit = 12;
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-a",
                                   "spot-a", "us-east-1a"),
                         1);
        assert_true(run_until(f, settled));
        assert_int_equal(provisioner_vcpus_in_window(f->p), 8);
        /* The second node's replacement would need 8 more: over the limit of 12. */
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0b00000000000000b", "ev-b",
                                   "spot-b", "us-east-1b"),
                         0);
        (void)provisioner_replacements(f->p, &n);
        assert_int_equal(n, 1);
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_FAILED), 1);
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.launched, 1);
}

static void test_triggers(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);
        size_t n;

        o.triggers = 1u << NOTICE_SPOT_INTERRUPTION;
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-r",
                                   "spot-a", "us-east-1a"),
                         0);
        assert_int_equal(on_notice(f, NOTICE_ASG_LIFECYCLE_TERMINATE, "i-0a00000000000000a", "ev-l",
                                   "spot-a", "us-east-1a"),
                         0);
        (void)provisioner_replacements(f->p, &n);
        assert_int_equal(n, 0);
        assert_int_equal(
            on_notice(f, NOTICE_SPOT_INTERRUPTION, "i-0a00000000000000a", "ev-i", "spot-a", "us-east-1a"),
            1);
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_LAUNCHED);
}

static void test_throttled_then_launched(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);

        sim_ec2_set_fault(f->ec2s, &(struct sim_ec2_fault){ .throttle = 1 });
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-t", "spot-a", "us-east-1a");
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_LAUNCHED);
}

static void test_unauthorized(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);

        sim_ec2_set_fault(f->ec2s, &(struct sim_ec2_fault){ .unauthorized = true });
        assert_int_equal(provisioner_new(f->loop, NULL, f->ec2, &o, f->bus, &f->p), 0);
        on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-u", "spot-a", "us-east-1a");
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_FAILED);
        assert_non_null(strstr(rep0(f)->error, "UnauthorizedOperation"));
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_FAILED), 1);
}

static void test_bad_signature(void **state)
{
        struct fx *f = *state;

        f->creds.secret_access_key = (char *)"not-the-secret";
        described = (struct described){};
        assert_int_equal(ec2_describe_instances(f->ec2, NULL, NULL, on_described, NULL), 0);
        assert_true(run_until(f, got_instances));
        assert_string_equal(described.res.code, "AuthFailure");
        assert_int_equal(described.res.status, 401);
}

static bool raised_done;
static int raised_desired;
static struct ec2_result raised_res;
static void on_raised(const struct ec2_result *res, int desired, void *userdata)
{
        raised_done = true;
        raised_desired = desired;
        raised_res = *res;
}
static bool raised(struct fx *f)
{
        return raised_done;
}

static void test_asg_mode(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = { .catalog = f->catalog, .asg_name = sim_ec2_group_name(f->ec2s) };
        struct sim_ec2_stats st;

        assert_int_equal(provisioner_new(f->loop, f->kube, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(on_notice(f, NOTICE_REBALANCE_RECOMMENDATION, "i-0a00000000000000a", "ev-g",
                                   "spot-a", "us-east-1a"),
                         1);
        assert_true(run_until(f, settled));
        assert_int_equal(rep0(f)->state, PROV_STATE_LAUNCHED);
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.desired_changes, 1);
        assert_int_equal(st.launched, 1);

        /* Asked again (a restart): the group already carries the target, nothing is added. */
        raised_done = false;
        assert_int_equal(asg_raise_desired(f->ec2, sim_ec2_group_name(f->ec2s), "i-0a00000000000000a", 1,
                                           on_raised, NULL),
                         0);
        assert_true(run_until(f, raised));
        assert_int_equal(raised_res.error, 0);
        assert_int_equal(raised_desired, 3);
        sim_ec2_stats(f->ec2s, &st);
        assert_int_equal(st.desired_changes, 1);

        /* The group's new instance registers as a node and turns Ready. */
        set_time(f, 46);
        assert_true(run_until(f, ready));
        assert_int_equal(rep0(f)->state, PROV_STATE_READY);
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_LAUNCHED), 1);

        /* Another instance's replacement within the max. */
        raised_done = false;
        assert_int_equal(asg_raise_desired(f->ec2, sim_ec2_group_name(f->ec2s), "i-0b00000000000000b", 1,
                                           on_raised, NULL),
                         0);
        assert_true(run_until(f, raised));
        assert_int_equal(raised_desired, 4);
}

struct typed {
        bool done;
        struct ec2_result res;
        struct prov_catalog *cat;
};
static struct typed typed;
static void on_types(const struct ec2_result *res, struct prov_catalog *cat, void *userdata)
{
        typed.done = true;
        typed.res = *res;
        typed.cat = cat;
}
static bool got_types(struct fx *f)
{
        return typed.done;
}

static void test_describe_instance_types(void **state)
{
        struct fx *f = *state;
        const char *const families[] = { "m5", "c6i", NULL };

        typed = (struct typed){};
        assert_int_equal(ec2_describe_instance_types(f->ec2, families, on_types, NULL), 0);
        assert_true(run_until(f, got_types));
        assert_int_equal(typed.res.error, 0);
        assert_non_null(typed.cat);
        /* Paged by 100 on the wire; 8 m5 and 9 c6i sizes in the shipped catalog. */
        assert_int_equal(typed.cat->n, 17);
        const struct prov_itype *t = prov_catalog_find(typed.cat, "m5.4xlarge");
        assert_non_null(t);
        assert_int_equal(t->vcpu, 16);
        assert_int_equal(t->memory_mib, 65536);
        assert_int_equal(t->max_pods, 234);
        assert_string_equal(t->arch, "x86_64");
        prov_catalog_free(typed.cat);

        /* Every page of the whole catalog. */
        typed = (struct typed){};
        assert_int_equal(ec2_describe_instance_types(f->ec2, NULL, on_types, NULL), 0);
        assert_true(run_until(f, got_types));
        assert_int_equal(typed.cat->n, f->catalog->n);
        prov_catalog_free(typed.cat);
}

static bool term_done;
static struct ec2_result term_res;
static void on_terminated(const struct ec2_result *res, void *userdata)
{
        term_done = true;
        term_res = *res;
}
static bool terminated(struct fx *f)
{
        return term_done;
}

static void test_terminate(void **state)
{
        struct fx *f = *state;

        term_done = false;
        assert_int_equal(ec2_terminate_instances(f->ec2,
                                                 (const char *const[]){ "i-0b00000000000000b", NULL },
                                                 on_terminated, NULL),
                         0);
        assert_true(run_until(f, terminated));
        assert_int_equal(term_res.error, 0);
        described = (struct described){};
        assert_int_equal(ec2_describe_instances(f->ec2, NULL,
                                                (const char *const[]){ "instance-state-name=running", NULL },
                                                on_described, NULL),
                         0);
        assert_true(run_until(f, got_instances));
        assert_int_equal(described.n, 1);
        assert_string_equal(described.v[0].instance_id, "i-0a00000000000000a");
}

struct listed {
        bool done;
        cJSON *list;
};

static void on_listed(struct kube_client *c, struct kube_result *r, void *userdata)
{
        struct listed *l = userdata;
        l->done = true;
        l->list = r->error < 0 ? NULL : TAKE_PTR(r->object);
}

/* The acceptance shape of rebalance-early: the pods on the node, read from the API as a front end does, are
 * packed at the rebalance recommendation; the replacement is requested at once, is not the 32xlarge on
 * offer, and is Ready before the interruption notice at t=60. */
static void test_rebalance_early(void **state)
{
        struct fx *f = *state;
        struct provisioner_options o = options(f);
        struct provisioner_pod pods_on_a[64];
        size_t n = 0;
        struct listed l = {};
        const cJSON *it;
        char zone_a[32] = "";

        o.req.families = NULL;
        assert_int_equal(kube_list(f->kube, "/api/v1/pods",
                                   &(struct kube_list_options){ .field_selector = "spec.nodeName=spot-a" },
                                   on_listed, &l, NULL),
                         0);
        assert_int_equal(loop_run_until(f->loop, &l.done, 10ULL * 1000000ULL), 0);
        assert_non_null(l.list);
        cJSON_ArrayForEach (it, kube_list_items(l.list)) {
                assert_true(n < ARRAY_SIZE(pods_on_a));
                assert_int_equal(provisioner_pod_from_json(it, &pods_on_a[n]), 0);
                n++;
        }
        assert_int_equal(n, 7); /* 6 checkout + 1 cart */
        sim_lock(f->sf.sim);
        snprintf(zone_a, sizeof(zone_a), "%s", sim_node_zone(f->sf.sim, 0));
        const char *instance = sim_node_instance_id(f->sf.sim, 0);
        struct notice nt = notice(NOTICE_REBALANCE_RECOMMENDATION, instance, "rebalance-spot-a");
        sim_unlock(f->sf.sim);

        assert_int_equal(provisioner_new(f->loop, f->kube, f->ec2, &o, f->bus, &f->p), 0);
        assert_int_equal(provisioner_on_notice(f->p, &nt, "spot-a", zone_a, pods_on_a, n), 1);
        cJSON_Delete(l.list);
        assert_true(run_until(f, settled));
        const struct provisioner_replacement *r = rep0(f);
        assert_int_equal(r->state, PROV_STATE_LAUNCHED);
        assert_string_equal(r->instance_type, "m5.2xlarge");
        assert_string_not_equal(r->zone, zone_a);

        /* The model saw the request at t=0 (the clock has not moved) and lists it as a replacement. */
        sim_lock(f->sf.sim);
        cJSON *result = sim_result(f->sf.sim);
        sim_unlock(f->sf.sim);
        const cJSON *reps = cJSON_GetObjectItemCaseSensitive(result, "replacements");
        assert_int_equal(cJSON_GetArraySize(reps), 1);
        const cJSON *rq = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(reps, 0), "requested_at");
        assert_true(cJSON_IsNumber(rq) && rq->valuedouble <= 1.0);
        cJSON_Delete(result);

        set_time(f, 46);
        assert_true(run_until(f, ready));
        assert_int_equal(rep0(f)->state, PROV_STATE_READY);
        assert_int_equal(count_alerts(f, ALERT_REPLACEMENT_LAUNCHED), 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_launch_until_ready, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rebalance_early, setup_rebalance_early, teardown),
                cmocka_unit_test_setup_teardown(test_describe_and_terminate, setup, teardown),
                cmocka_unit_test_setup_teardown(test_on_demand_fallback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_capacity_at_all, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_idempotent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_vcpu_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_triggers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_throttled_then_launched, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unauthorized, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_signature, setup, teardown),
                cmocka_unit_test_setup_teardown(test_asg_mode, setup, teardown),
                cmocka_unit_test_setup_teardown(test_describe_instance_types, setup, teardown),
                cmocka_unit_test_setup_teardown(test_terminate, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
