/* The provisioner front end (frontend.c): the provision.* keys read into subnets, triggers and
 * requirements; the configuration errors prov_frontend_new reports; and a request end to end against the
 * simulator in-process: the node's zone and pods read from its Kubernetes API, the replacement launched on
 * its EC2 surface away from the interrupted zone, and a second notice for the instance launching nothing. */
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
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static void set(struct spotdrain_config *c, const char *assignment)
{
        _cleanup_free_ char *why = NULL;
        if (config_set(c, assignment, &why) < 0)
                fail_msg("%s: %s", assignment, why ? why : "?");
}

static void test_subnets(void **state)
{
        static const char *const ok[] = { "subnet-1=us-east-1a", "=us-east-1b", NULL };
        static const char *const no_zone[] = { "subnet-1=us-east-1a", "subnet-2", NULL };
        static const char *const empty_zone[] = { "subnet-2=", NULL };
        struct prov_subnet *v = NULL;
        size_t n = 0;
        char *why = NULL;

        assert_int_equal(prov_subnets_from_config(ok, &v, &n, NULL), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[0].id, "subnet-1");
        assert_string_equal(v[0].zone, "us-east-1a");
        /* "=zone": the override names the zone, not a subnet. */
        assert_null(v[1].id);
        assert_string_equal(v[1].zone, "us-east-1b");
        prov_subnets_free(v, n);

        assert_int_equal(prov_subnets_from_config(no_zone, &v, &n, &why), -EINVAL);
        assert_non_null(strstr(why, "subnet-2"));
        free(why);
        assert_int_equal(prov_subnets_from_config(empty_zone, &v, &n, NULL), -EINVAL);
        assert_int_equal(prov_subnets_from_config(NULL, &v, &n, NULL), 0);
        assert_int_equal(n, 0);
        prov_subnets_free(v, n);
}

static void test_triggers(void **state)
{
        static const char *const rebalance_only[] = { "rebalance-recommendation", NULL };
        static const char *const both[] = { "spot-interruption", "scheduled-change", NULL };
        static const char *const bad[] = { "asg-test-notification", NULL };
        static const char *const none[] = { NULL };
        unsigned bits = 0;
        char *why = NULL;

        assert_int_equal(prov_triggers_from_config(rebalance_only, &bits, NULL), 0);
        assert_int_equal(bits, 1u << NOTICE_REBALANCE_RECOMMENDATION);
        assert_int_equal(prov_triggers_from_config(both, &bits, NULL), 0);
        assert_int_equal(bits, (1u << NOTICE_SPOT_INTERRUPTION) | (1u << NOTICE_SCHEDULED_CHANGE));
        assert_int_equal(prov_triggers_from_config(bad, &bits, &why), -EINVAL);
        assert_non_null(strstr(why, "asg-test-notification"));
        free(why);
        /* An empty list would silently launch nothing ever. */
        assert_int_equal(prov_triggers_from_config(none, &bits, NULL), -EINVAL);
}

static void test_requirements(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        struct prov_requirements req;
        char *why = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(prov_requirements_from_config(c, &req, NULL), 0);
        assert_null(req.families);
        assert_int_equal(req.max_memory_mib, 0);
        assert_true(req.spot && req.on_demand);
        assert_string_equal(req.architectures[0], "x86_64");

        set(c, "provision.max_memory=72Gi");
        set(c, "provision.families=m5,c5");
        set(c, "provision.capacity_types=on-demand");
        set(c, "provision.max_vcpus=16");
        assert_int_equal(prov_requirements_from_config(c, &req, NULL), 0);
        assert_int_equal(req.max_memory_mib, 73728);
        assert_string_equal(req.families[1], "c5");
        assert_false(req.spot);
        assert_true(req.on_demand);
        assert_int_equal(req.max_vcpu, 16);

        set(c, "provision.max_memory=lots");
        assert_int_equal(prov_requirements_from_config(c, &req, &why), -EINVAL);
        assert_non_null(strstr(why, "max_memory"));
        free(why);
        why = NULL;
        set(c, "provision.max_memory=72Gi");
        set(c, "provision.capacity_types=spot,reserved");
        assert_int_equal(prov_requirements_from_config(c, &req, &why), -EINVAL);
        assert_non_null(strstr(why, "reserved"));
        free(why);
}

static const struct aws_credentials *no_creds(void *userdata)
{
        return NULL;
}

static void test_new_errors(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        _cleanup_(loop_freep) struct loop *l = NULL;
        struct prov_frontend_options o = { .region = "us-east-1", .credentials = no_creds };
        struct prov_frontend *f = (struct prov_frontend *)1;
        char *why = NULL;

        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(config_new(&c), 0);
        /* Off by default: nothing is built, and requests are no-ops. */
        assert_int_equal(prov_frontend_new(l, NULL, NULL, c, &o, &f, NULL), 0);
        assert_null(f);
        assert_int_equal(prov_frontend_request(NULL, "node", &(struct notice){ 0 }), 0);

        set(c, "provision.enabled=true");
        assert_int_equal(prov_frontend_new(l, NULL, NULL, c, &o, &f, &why), -EINVAL);
        assert_non_null(strstr(why, "launch_template"));
        free(why);
        why = NULL;
        set(c, "provision.launch_template=lt-0123456789abcdef0");
        assert_int_equal(prov_frontend_new(l, NULL, NULL, c, &o, &f, &why), -EINVAL);
        assert_non_null(strstr(why, "subnets"));
        free(why);
        why = NULL;
        set(c, "provision.mode=asg");
        assert_int_equal(prov_frontend_new(l, NULL, NULL, c, &o, &f, &why), -EINVAL);
        assert_non_null(strstr(why, "asg_name"));
        free(why);
        why = NULL;
        set(c, "provision.mode=fleet");
        set(c, "provision.subnets=subnet-1=us-east-1a");
        set(c, "provision.catalog=/nonexistent/instance-types.json");
        assert_int_equal(prov_frontend_new(l, NULL, NULL, c, &o, &f, &why) < 0, true);
        free(why);
}

/* ---- a request end to end against the simulator ---- */

static const char scenario[] =
    "name: frontend-test\nmode: controller\nbudget_seconds: 120\nnodes:\n"
    "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.2xlarge, "
    "allocatable: {cpu: \"8\", memory: 32Gi, pods: 58}}\n"
    "  - {name: spot-b, zone: us-east-1b, capacity_type: spot, instance_type: m5.2xlarge, "
    "allocatable: {cpu: \"8\", memory: 32Gi, pods: 58}}\n"
    "workloads:\n"
    "  - {name: web, namespace: shop, kind: Deployment, replicas: 8, placement: {spot-a: 5, spot-b: 3}, "
    "requests: {cpu: \"1\", memory: 2Gi}}\n"
    "events:\n"
    "  - {at: 0, type: rebalance-recommendation, node: spot-a}\n"
    "  - {at: 60, type: spot-interruption, node: spot-a}\n"
    "provisioning:\n"
    "  node_launch_seconds: 45\n"
    "  instance_types:\n"
    "    - {name: m5.xlarge, cpu: \"4\", memory: 16Gi}\n"
    "    - {name: m5.2xlarge, cpu: \"8\", memory: 32Gi}\n"
    "    - {name: m5.4xlarge, cpu: \"16\", memory: 64Gi}\n";

struct fx {
        struct sim_fixture sf;
        struct sim_ec2 *ec2s;
        struct loop *loop;
        struct kube_client *kube;
        struct spotdrain_config *cfg;
        struct prov_frontend *f;
        struct aws_credentials creds;
};

static const struct aws_credentials *creds_of(void *userdata)
{
        return &((struct fx *)userdata)->creds;
}

static int setup(void **state)
{
        struct fx *x = calloc(1, sizeof(*x));
        _cleanup_free_ char *endpoint = NULL;

        assert_non_null(x);
        sim_fixture_start(&x->sf, scenario, &(struct sim_fixture_options){ .manual_clock = true });
        assert_int_equal(sim_ec2_start(x->sf.sim, NULL, &x->ec2s), 0);
        assert_int_equal(loop_new(&x->loop), 0);
        assert_int_equal(
            kube_client_new(x->loop, x->sf.kcfg, &(struct kube_client_options){ .qps = -1 }, &x->kube), 0);
        x->creds = (struct aws_credentials){ .access_key_id = (char *)SIM_EC2_ACCESS_KEY_ID,
                                             .secret_access_key = (char *)SIM_EC2_SECRET_ACCESS_KEY };
        assert_int_equal(config_new(&x->cfg), 0);
        endpoint = strprintf("provision.endpoint=%s", sim_ec2_url(x->ec2s));
        assert_non_null(endpoint);
        set(x->cfg, "provision.enabled=true");
        set(x->cfg, endpoint);
        set(x->cfg, "provision.catalog=data/instance-types.json");
        set(x->cfg, "provision.launch_template=spotdrain-nodes");
        set(x->cfg, "provision.subnets=" SIM_EC2_SUBNET_PREFIX "us-east-1a=us-east-1a," SIM_EC2_SUBNET_PREFIX
                    "us-east-1b=us-east-1b");
        set(x->cfg, "provision.families=m5");
        set(x->cfg, "provision.max_memory=72Gi");
        set(x->cfg, "aws.region=us-east-1");
        *state = x;
        return 0;
}

static int teardown(void **state)
{
        struct fx *x = *state;
        prov_frontend_free(x->f);
        kube_client_free(x->kube);
        loop_free(x->loop);
        config_free(x->cfg);
        sim_ec2_stop(x->ec2s);
        sim_fixture_stop(&x->sf);
        free(x);
        return 0;
}

static void tick(void *userdata)
{
        *(bool *)userdata = true;
}

static const struct provisioner_replacement *rep0(struct fx *x, size_t *ret_n)
{
        const struct provisioner_replacement *r =
            provisioner_replacements(prov_frontend_provisioner(x->f), ret_n);
        return *ret_n > 0 ? &r[0] : NULL;
}

/* Runs the loop until the first replacement left LAUNCHING (bounded: 10 s of real time). */
static const struct provisioner_replacement *run_until_launched(struct fx *x)
{
        size_t n;
        for (int i = 0; i < 1000; i++) {
                const struct provisioner_replacement *r = rep0(x, &n);
                bool fired = false;
                if (r && r->state != PROV_STATE_LAUNCHING)
                        return r;
                assert_int_equal(timer_start_in(x->loop, 10000, tick, &fired, NULL), 0);
                assert_int_equal(loop_run_until(x->loop, &fired, 5ULL * 1000000ULL), 0);
        }
        return NULL;
}

/* Runs the loop until every request reached the provisioner (bounded: 10 s of real time). */
static void run_until_answered(struct fx *x)
{
        for (int i = 0; i < 1000 && prov_frontend_pending(x->f) > 0; i++) {
                bool fired = false;
                assert_int_equal(timer_start_in(x->loop, 10000, tick, &fired, NULL), 0);
                assert_int_equal(loop_run_until(x->loop, &fired, 5ULL * 1000000ULL), 0);
        }
        assert_int_equal(prov_frontend_pending(x->f), 0);
}

static struct notice notice_for(struct fx *x, enum notice_kind kind, const char *event_id)
{
        struct notice n = { .kind = kind, .notice_time = clk_now() };
        snprintf(n.instance_id, sizeof(n.instance_id), "%s", sim_node_instance_id(x->sf.sim, 0));
        snprintf(n.event_id, sizeof(n.event_id), "%s", event_id);
        return n;
}

static void test_request_end_to_end(void **state)
{
        struct fx *x = *state;
        struct prov_frontend_options o = { .credentials = creds_of, .credentials_userdata = x };
        const struct provisioner_replacement *r;
        struct sim_ec2_stats st;
        char *why = NULL;
        size_t n;

        if (prov_frontend_new(x->loop, x->kube, NULL, x->cfg, &o, &x->f, &why) < 0)
                fail_msg("%s", why ? why : "?");
        assert_non_null(x->f);
        assert_string_equal(sim_node_name(x->sf.sim, 0), "spot-a");

        struct notice rebalance = notice_for(x, NOTICE_REBALANCE_RECOMMENDATION, "ev-rebalance");
        assert_int_equal(prov_frontend_request(x->f, "spot-a", &rebalance), 0);
        r = run_until_launched(x);
        assert_non_null(r);
        assert_int_equal(r->state, PROV_STATE_LAUNCHED);
        assert_string_equal(r->replaces, sim_node_instance_id(x->sf.sim, 0));
        assert_string_equal(r->node, "spot-a");
        /* 5 × (1 CPU, 2Gi) read from the cluster: the 2xlarge is the smallest m5 that holds them. */
        assert_string_equal(r->instance_type, "m5.2xlarge");
        /* The zone came from the node's label, and the replacement keeps away from it. */
        assert_string_equal(r->zone, "us-east-1b");

        /* The interruption that follows finds the replacement under way: nothing more is launched. */
        struct notice interruption = notice_for(x, NOTICE_SPOT_INTERRUPTION, "ev-interruption");
        assert_int_equal(prov_frontend_request(x->f, "spot-a", &interruption), 0);
        run_until_answered(x);
        (void)rep0(x, &n);
        assert_int_equal(n, 1);
        sim_ec2_stats(x->ec2s, &st);
        assert_int_equal(st.launched, 1);

        /* A node that is not there: the request fails quietly, nothing launched. */
        struct notice other = notice_for(x, NOTICE_REBALANCE_RECOMMENDATION, "ev-other");
        snprintf(other.instance_id, sizeof(other.instance_id), "i-0ffffffffffffffff");
        assert_int_equal(prov_frontend_request(x->f, "no-such-node", &other), 0);
        run_until_answered(x);
        (void)rep0(x, &n);
        assert_int_equal(n, 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_subnets),
                cmocka_unit_test(test_triggers),
                cmocka_unit_test(test_requirements),
                cmocka_unit_test(test_new_errors),
                cmocka_unit_test_setup_teardown(test_request_end_to_end, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
