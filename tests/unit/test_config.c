/* The configuration table: defaults, YAML files, environment and --set overrides, errors, dump. Runs from
 * the repository root: data files are under tests/unit/data/config/ (see the README there). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <syslog.h>
#include <unistd.h>

#include <cmocka.h>

#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/service.h"
#include "spotdrain/util.h"

#define DATA "tests/unit/data/config"
#define SEC  1000000ULL

static void test_defaults(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        assert_int_equal(config_new(&c), 0);
        assert_int_equal(c->log.format, LOG_FORMAT_AUTO);
        assert_int_equal(c->log.level, LOG_INFO);
        assert_null(c->kube.kubeconfig);
        assert_true(c->kube.qps == 200.0);
        assert_int_equal(c->kube.burst, 300);
        assert_string_equal(c->ops.metrics_listen, "0.0.0.0:9464");
        assert_null(c->agent.node_name);
        assert_int_equal(c->drain.budget_usec, 120 * SEC);
        assert_int_equal(c->drain.safety_margin_usec, 5 * SEC);
        assert_int_equal(c->drain.policy, DRAIN_POLICY_FORCE);
        assert_string_equal(c->drain.taint_key, "spotdrain.io/interruption");
        assert_true(c->drain.ignore_daemonsets);
        assert_true(c->drain.delete_emptydir_data);
        assert_int_equal(c->drain.default_startup_usec, 30 * SEC);
        assert_int_equal(c->drain.eviction_retry_floor_usec, 200000);
        assert_string_equal(c->drain.critical_priority_classes[0], "system-cluster-critical");
        assert_string_equal(c->drain.critical_priority_classes[1], "system-node-critical");
        assert_null(c->drain.critical_priority_classes[2]);
        assert_true(c->drain.exclude_from_load_balancers);
        assert_false(c->drain.cordon_only);
        assert_int_equal(c->drain.taint_effect, DRAIN_TAINT_NO_SCHEDULE);
        assert_null(c->drain.skip_namespaces[0]);
        assert_null(c->aws.region);
        assert_null(c->aws.queue_url);
        assert_null(c->imds.endpoint);
        assert_int_equal(c->imds.poll_interval_usec, SEC / 2);
        assert_null(c->alerts.webhook_url);
}

static void test_file_values(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_load_file(c, DATA "/full.yaml", NULL), 0);
        assert_int_equal(c->log.format, LOG_FORMAT_JSON);
        assert_int_equal(c->log.level, LOG_DEBUG);
        assert_string_equal(c->kube.kubeconfig, "/etc/spotdrain/kubeconfig");
        assert_true(c->kube.qps == 12.5);
        assert_int_equal(c->kube.burst, 25);
        assert_string_equal(c->ops.metrics_listen, "127.0.0.1:9000");
        assert_string_equal(c->agent.node_name, "spot-a");
        assert_int_equal(c->drain.budget_usec, 90 * SEC);
        assert_int_equal(c->drain.safety_margin_usec, 10 * SEC);
        assert_int_equal(c->drain.policy, DRAIN_POLICY_RESPECT);
        assert_false(c->drain.ignore_daemonsets);
        assert_true(c->drain.delete_emptydir_data);
        /* a unit suffix overrides the key's unit */
        assert_int_equal(c->drain.eviction_retry_floor_usec, 500000);
        assert_string_equal(c->drain.critical_priority_classes[0], "system-node-critical");
        assert_string_equal(c->drain.critical_priority_classes[1], "payments-critical");
        assert_null(c->drain.critical_priority_classes[2]);
        assert_int_equal(c->drain.default_startup_usec, 45 * SEC);
        assert_string_equal(c->aws.region, "eu-west-1");
        assert_int_equal(c->imds.poll_interval_usec, 2 * SEC);
        assert_string_equal(c->alerts.webhook_url, "https://hooks.example.com/services/T000/B000/XXXX");
}

static void test_unknown_key(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_load_file(c, DATA "/unknown-key.yaml", &err), -EINVAL);
        assert_string_equal(err, DATA "/unknown-key.yaml:5: unknown key 'drain.foo'");
        /* the keys before the bad one were not applied */
        assert_int_equal(c->drain.budget_usec, 120 * SEC);
        assert_int_equal(c->drain.safety_margin_usec, 5 * SEC);
}

static void expect_yaml_error(const char *yaml, const char *message);

/* Every error of a file is told, each with its line, in the file's order; the file is still not applied. */
static void test_every_error(void **state)
{
        expect_yaml_error("drain:\n  budget_seconds: soon\n  bogus: 1\nkube:\n  burst: many\n",
                          "2: drain.budget_seconds: expected a duration in seconds, got 'soon'\n"
                          "{}:3: unknown key 'drain.bogus'\n"
                          "{}:5: kube.burst: expected an integer, got 'many'");
}

static void expect_yaml_error(const char *yaml, const char *message)
{
        char path[] = "/tmp/spotdrain-config-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(write_file_atomic(path, yaml, strlen(yaml), 0600), 0);
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        _cleanup_free_ char *err = NULL, *want = strprintf("%s:%s", path, message);
        assert_non_null(want);
        /* "{}" in a later line stands for the file's path */
        for (char *p; (p = strstr(want, "{}"));) {
                char *w = strprintf("%.*s%s%s", (int)(p - want), want, path, p + 2);
                assert_non_null(w);
                free(want);
                want = w;
        }
        assert_int_equal(config_new(&c), 0);
        assert_true(config_load_file(c, path, &err) < 0);
        unlink(path);
        assert_string_equal(err, want);
}

static void test_wrong_types(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_load_file(c, DATA "/wrong-type.yaml", &err), -EINVAL);
        assert_string_equal(
            err,
            DATA "/wrong-type.yaml:5: drain.budget_seconds: expected a duration in seconds, got 'soon'");

        expect_yaml_error("kube:\n  burst: many\n", "2: kube.burst: expected an integer, got 'many'");
        expect_yaml_error("kube:\n  burst: 0\n", "2: kube.burst: '0' is out of range [1, 100000]");
        expect_yaml_error("log: {format: xml}\n",
                          "1: log.format: expected one of auto, text, json, journal, got 'xml'");
        expect_yaml_error("drain:\n  ignore_daemonsets: maybe\n",
                          "2: drain.ignore_daemonsets: expected true or false, got 'maybe'");
        expect_yaml_error("node_name: [a, b]\n", "1: node_name: expected a string, got a list");
        expect_yaml_error("node_name:\n  x: 1\n", "1: node_name: expected a string, got a map");
        expect_yaml_error(
            "drain:\n  critical_priority_classes: system-node-critical\n",
            "2: drain.critical_priority_classes: expected a list of strings, got 'system-node-critical'");
        expect_yaml_error("drain: 5\n", "1: unknown key 'drain'");
        expect_yaml_error("- a\n", "1: expected a map of settings");
}

static void clear_env(void)
{
        unsetenv("SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS");
        unsetenv("SPOTDRAIN_NODE_NAME");
        unsetenv("SPOTDRAIN_DRAIN_CRITICAL_PRIORITY_CLASSES");
}

static void test_override_order(void **state)
{
        clear_env();
        _cleanup_(config_freep) struct spotdrain_config *file_only = NULL;
        assert_int_equal(config_load(DATA "/full.yaml", NULL, &file_only, NULL), 0);
        assert_int_equal(file_only->drain.safety_margin_usec, 10 * SEC);

        /* the environment beats the file */
        assert_int_equal(setenv("SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS", "7", 1), 0);
        assert_int_equal(setenv("SPOTDRAIN_NODE_NAME", "from-env", 1), 0);
        assert_int_equal(setenv("SPOTDRAIN_DRAIN_CRITICAL_PRIORITY_CLASSES", "a, b,,c", 1), 0);
        _cleanup_(config_freep) struct spotdrain_config *env = NULL;
        assert_int_equal(config_load(DATA "/full.yaml", NULL, &env, NULL), 0);
        assert_int_equal(env->drain.safety_margin_usec, 7 * SEC);
        assert_string_equal(env->agent.node_name, "from-env");
        assert_string_equal(env->drain.critical_priority_classes[0], "a");
        assert_string_equal(env->drain.critical_priority_classes[1], "b");
        assert_string_equal(env->drain.critical_priority_classes[2], "c");
        assert_null(env->drain.critical_priority_classes[3]);

        /* --set beats the environment; later --set beats earlier */
        char *sets[] = { "drain.safety_margin_seconds=9", "node_name=", "kube.qps=3", "kube.qps=4", NULL };
        _cleanup_(config_freep) struct spotdrain_config *set = NULL;
        assert_int_equal(config_load(DATA "/full.yaml", sets, &set, NULL), 0);
        assert_int_equal(set->drain.safety_margin_usec, 9 * SEC);
        assert_null(set->agent.node_name);
        assert_true(set->kube.qps == 4.0);

        /* a bad variable is named */
        assert_int_equal(setenv("SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS", "-1", 1), 0);
        _cleanup_(config_freep) struct spotdrain_config *bad = NULL;
        _cleanup_free_ char *err = NULL;
        assert_int_equal(config_load(NULL, NULL, &bad, &err), -EINVAL);
        assert_null(bad);
        assert_string_equal(err,
                            "SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS: drain.safety_margin_seconds: expected a "
                            "duration in seconds, got '-1'");
        clear_env();
}

static void test_set_errors(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        assert_int_equal(config_new(&c), 0);
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;
        assert_int_equal(config_set(c, "drain.foo=1", &e1), -ENOENT);
        assert_string_equal(e1, "--set unknown key 'drain.foo'");
        assert_int_equal(config_set(c, "drain.budget_seconds", &e2), -EINVAL);
        assert_string_equal(e2, "--set drain.budget_seconds: expected KEY=VALUE");
        assert_int_equal(config_set(c, "drain.policy=maybe", &e3), -EINVAL);
        assert_string_equal(e3, "--set drain.policy: expected one of force, respect, got 'maybe'");
        assert_int_equal(c->drain.policy, DRAIN_POLICY_FORCE);
        assert_int_equal(config_set(c, "drain.budget_seconds=2m", NULL), 0);
        assert_int_equal(c->drain.budget_usec, 120 * SEC);
        assert_int_equal(config_set(c, "drain.eviction_retry_floor_ms=250", NULL), 0);
        assert_int_equal(c->drain.eviction_retry_floor_usec, 250000);

        /* A selector that cannot be read is refused with the configuration, and the old value stays. */
        _cleanup_free_ char *e4 = NULL;
        assert_int_equal(config_set(c, "drain.skip_pod_selector=app in (a,b),!c", NULL), 0);
        assert_string_equal(c->drain.skip_pod_selector, "app in (a,b),!c");
        assert_int_equal(config_set(c, "drain.skip_pod_selector=app in (a", &e4), -EINVAL);
        assert_string_equal(e4,
                            "--set drain.skip_pod_selector: not a label selector (a=b,c!=d,e in (f,g),!h)");
        assert_string_equal(c->drain.skip_pod_selector, "app in (a,b),!c");
        assert_int_equal(config_set(c, "drain.taint_effect=NoExecute", NULL), 0);
        assert_int_equal(c->drain.taint_effect, DRAIN_TAINT_NO_EXECUTE);
        assert_int_equal(config_set(c, "drain.skip_namespaces=ci, kept", NULL), 0);
        assert_string_equal(c->drain.skip_namespaces[1], "kept");
}

static void test_dump_round_trip(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL, *back = NULL;
        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_load_file(c, DATA "/full.yaml", NULL), 0);
        assert_int_equal(config_set(c, "drain.taint_key=odd \"quoted\" \\ value", NULL), 0);
        assert_int_equal(config_set(c, "drain.safety_margin_seconds=2.5", NULL), 0);
        _cleanup_free_ char *dump = NULL, *dump2 = NULL;
        assert_int_equal(config_dump(c, &dump), 0);
        assert_non_null(strstr(dump, "drain:\n  budget_seconds: 90  # "));
        assert_non_null(strstr(dump, "  policy: respect  # "));
        assert_non_null(
            strstr(dump, "  critical_priority_classes: [\"system-node-critical\", \"payments-critical\"]"));
        /* the webhook URL usually embeds a secret */
        assert_null(strstr(dump, "hooks.example.com"));
        assert_non_null(strstr(dump, "webhook_url: \"<hidden>\""));

        char path[] = "/tmp/spotdrain-dump-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(write_file_atomic(path, dump, strlen(dump), 0600), 0);
        assert_int_equal(config_new(&back), 0);
        assert_int_equal(config_load_file(back, path, NULL), 0);
        unlink(path);
        assert_string_equal(back->drain.taint_key, "odd \"quoted\" \\ value");
        assert_int_equal(back->drain.safety_margin_usec, 2500000);
        assert_int_equal(config_dump(back, &dump2), 0);
        assert_string_equal(dump, dump2);
}

static void test_provision_keys(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL, *back = NULL;
        _cleanup_free_ char *dump = NULL, *why = NULL;

        assert_int_equal(config_new(&c), 0);
        /* Off unless asked for: a production install launches nothing by surprise. */
        assert_false(c->provision.enabled);
        assert_int_equal(c->provision.mode, CONFIG_PROVISION_FLEET);
        assert_null(c->provision.max_memory);
        assert_null(c->provision.subnets[0]);
        assert_null(c->provision.families[0]);
        assert_string_equal(c->provision.architectures[0], "x86_64");
        assert_string_equal(c->provision.capacity_types[0], "spot");
        assert_string_equal(c->provision.capacity_types[1], "on-demand");
        assert_string_equal(c->provision.triggers[0], "rebalance-recommendation");
        assert_int_equal(c->provision.vcpu_window_usec, 600 * SEC);

        assert_int_equal(config_set(c, "provision.enabled=true", NULL), 0);
        assert_int_equal(config_set(c, "provision.mode=asg", NULL), 0);
        assert_int_equal(config_set(c, "provision.max_memory=72Gi", NULL), 0);
        assert_int_equal(config_set(c, "provision.subnets=subnet-1=us-east-1b,subnet-2=us-east-1c", NULL),
                         0);
        assert_int_equal(config_set(c, "provision.vcpu_limit_per_window=64", NULL), 0);
        assert_int_equal(config_set(c, "provision.mode=spotfleet", &why), -EINVAL);
        assert_non_null(why);
        assert_int_equal(config_set(c, "provision.max_vcpus=-1", NULL), -ERANGE);
        assert_true(c->provision.enabled);
        assert_int_equal(c->provision.mode, CONFIG_PROVISION_ASG);
        assert_string_equal(c->provision.max_memory, "72Gi");
        assert_string_equal(c->provision.subnets[0], "subnet-1=us-east-1b");
        assert_string_equal(c->provision.subnets[1], "subnet-2=us-east-1c");
        assert_null(c->provision.subnets[2]);
        assert_int_equal(c->provision.vcpu_limit_per_window, 64);

        /* The dump reads back the same. */
        char path[] = "/tmp/spotdrain-prov-XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(config_dump(c, &dump), 0);
        assert_non_null(strstr(dump, "provision:\n  enabled: true"));
        assert_int_equal(write_file_atomic(path, dump, strlen(dump), 0600), 0);
        assert_int_equal(config_new(&back), 0);
        assert_int_equal(config_load_file(back, path, NULL), 0);
        unlink(path);
        assert_int_equal(back->provision.mode, CONFIG_PROVISION_ASG);
        assert_string_equal(back->provision.subnets[1], "subnet-2=us-east-1c");
        assert_string_equal(back->provision.max_memory, "72Gi");
}

/* notices.KIND.action (issue #17): today's behaviour by default, every kind its own switch, a bad action
 * refused with its line. */
/* drain.cordon_only beside notices.KIND.action: a warning only when no kind drains (it could never apply).
 */
static void test_cordon_only_unused(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        assert_int_equal(config_new(&c), 0);
        assert_null(dispatch_cordon_only_unused(c));
        c->drain.cordon_only = true;
        assert_null(dispatch_cordon_only_unused(c)); /* the defaults drain */
        for (size_t k = 0; k < _NOTICE_KIND_MAX; k++)
                c->notices.action[k] = DISPATCH_ACTION_CORDON;
        c->notices.action[NOTICE_REBALANCE_RECOMMENDATION] = DISPATCH_ACTION_DEFAULT; /* its own: taint */
        assert_non_null(strstr(dispatch_cordon_only_unused(c), "no notices.KIND.action is drain"));
        c->notices.action[NOTICE_ASG_LIFECYCLE_TERMINATE] = DISPATCH_ACTION_DEFAULT; /* its own: drain */
        assert_null(dispatch_cordon_only_unused(c));
        c->notices.action[NOTICE_ASG_LIFECYCLE_TERMINATE] = DISPATCH_ACTION_IGNORE;
        c->notices.action[NOTICE_REBALANCE_RECOMMENDATION] = DISPATCH_ACTION_DRAIN;
        assert_null(dispatch_cordon_only_unused(c));
        c->drain.cordon_only = false;
        c->notices.action[NOTICE_REBALANCE_RECOMMENDATION] = DISPATCH_ACTION_IGNORE;
        assert_null(dispatch_cordon_only_unused(c));
}

static void test_notices_keys(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        struct dispatch_options o = {};
        char path[] = "/tmp/spotdrain-config-XXXXXX";
        const char *yaml = "notices:\n  spot_interruption:\n    action: cordon\n"
                           "  rebalance_recommendation: {action: drain}\n"
                           "  asg_lifecycle.action: ignore\n";
        int fd = mkstemp(path);

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(c->notices.action[NOTICE_SPOT_INTERRUPTION], DISPATCH_ACTION_DRAIN);
        assert_int_equal(c->notices.action[NOTICE_REBALANCE_RECOMMENDATION], DISPATCH_ACTION_TAINT);
        assert_int_equal(c->notices.action[NOTICE_SCHEDULED_CHANGE], DISPATCH_ACTION_DRAIN);
        assert_int_equal(c->notices.action[NOTICE_STATE_CHANGE], DISPATCH_ACTION_DRAIN);
        assert_int_equal(c->notices.action[NOTICE_ASG_LIFECYCLE_TERMINATE], DISPATCH_ACTION_DRAIN);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(write_file_atomic(path, yaml, strlen(yaml), 0600), 0);
        assert_int_equal(config_load_file(c, path, NULL), 0);
        unlink(path);
        dispatch_actions_from_settings(&c->notices, &o);
        assert_int_equal(o.actions[NOTICE_SPOT_INTERRUPTION], DISPATCH_ACTION_CORDON);
        assert_int_equal(o.actions[NOTICE_REBALANCE_RECOMMENDATION], DISPATCH_ACTION_DRAIN);
        assert_int_equal(o.actions[NOTICE_ASG_LIFECYCLE_TERMINATE], DISPATCH_ACTION_IGNORE);
        assert_int_equal(o.actions[NOTICE_STATE_CHANGE], DISPATCH_ACTION_DRAIN);
        expect_yaml_error(
            "notices:\n  state_change:\n    action: evict\n",
            "3: notices.state_change.action: expected one of drain, cordon, taint, ignore, got "
            "'evict'");
        expect_yaml_error("notices:\n  spot:\n    action: drain\n", "2: unknown key 'notices.spot'");
}

/* The dispatcher's durations moved from agent.* and drain.* to its own section: the old names still set
 * them, in a file, the environment (where the new name wins) and --set. */
static void test_old_names(void **state)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        char path[] = "/tmp/spotdrain-config-XXXXXX";
        const char *yaml = "agent:\n  rebalance_revert_seconds: 7\ndrain:\n  min_budget_seconds: 9\n";
        struct dispatch_options o = { 0 };
        int fd = mkstemp(path);

        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(config_new(&c), 0);
        assert_int_equal(c->notices.min_budget_usec, 30 * 1000000ULL);
        assert_int_equal(write_file_atomic(path, yaml, strlen(yaml), 0600), 0);
        assert_int_equal(config_load_file(c, path, NULL), 0);
        unlink(path);
        assert_int_equal(c->notices.rebalance_revert_usec, 7 * 1000000ULL);
        assert_int_equal(c->notices.min_budget_usec, 9 * 1000000ULL);
        assert_null(config_find("agent.rebalance_revert_seconds"));

        assert_int_equal(setenv("SPOTDRAIN_AGENT_MAINTENANCE_LEAD_SECONDS", "11", 1), 0);
        assert_int_equal(config_load_env(c, NULL), 0);
        assert_int_equal(c->notices.maintenance_lead_usec, 11 * 1000000ULL);
        assert_int_equal(setenv("SPOTDRAIN_NOTICES_MAINTENANCE_LEAD_SECONDS", "12", 1), 0);
        assert_int_equal(config_load_env(c, NULL), 0);
        assert_int_equal(c->notices.maintenance_lead_usec, 12 * 1000000ULL);
        unsetenv("SPOTDRAIN_AGENT_MAINTENANCE_LEAD_SECONDS");
        unsetenv("SPOTDRAIN_NOTICES_MAINTENANCE_LEAD_SECONDS");

        assert_int_equal(config_set(c, "drain.min_budget_seconds=4", NULL), 0);
        dispatch_options_from_config(c, &o);
        assert_int_equal(o.min_budget_usec, 4 * 1000000ULL);
        assert_int_equal(o.rebalance_revert_usec, 7 * 1000000ULL);
        assert_int_equal(o.maintenance_lead_usec, 12 * 1000000ULL);
}

static void test_table(void **state)
{
        size_t n = 0;
        /* Every module's keys, each found (no key declared twice), each with its values inside struct
         * spotdrain_config. */
        for (size_t s = 0; s < config_n_sections; s++) {
                const struct config_section *sec = config_sections[s].section;
                assert_non_null(sec->name);
                assert_true(sec->n_items > 0);
                for (size_t i = 0; i < sec->n_items; i++, n++) {
                        assert_ptr_equal(config_find(sec->items[i].key), &sec->items[i]);
                        assert_non_null(sec->items[i].description);
                        assert_true(config_sections[s].offset + sec->items[i].offset <
                                    sizeof(struct spotdrain_config));
                }
        }
        assert_int_equal(n, 95);
        /* Old names are no keys of their own. */
        for (size_t s = 0; s < config_n_sections; s++)
                for (size_t i = 0; i < config_sections[s].section->n_items; i++) {
                        const char *old = config_sections[s].section->items[i].old_key;
                        assert_true(!old || !config_find(old));
                }
        assert_null(config_find("drain"));
        /* Surge before evict (#20) is the drain module's own key, on by default where a PDB blocks. */
        const struct config_item *surge = config_find("drain.surge");
        assert_non_null(surge);
        assert_string_equal(surge->def, "blocked");
        _cleanup_free_ char *env = config_env_name("drain.safety_margin_seconds");
        assert_string_equal(env, "SPOTDRAIN_DRAIN_SAFETY_MARGIN_SECONDS");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),        cmocka_unit_test(test_file_values),
                cmocka_unit_test(test_unknown_key),     cmocka_unit_test(test_wrong_types),
                cmocka_unit_test(test_override_order),  cmocka_unit_test(test_set_errors),
                cmocka_unit_test(test_dump_round_trip), cmocka_unit_test(test_table),
                cmocka_unit_test(test_provision_keys),  cmocka_unit_test(test_every_error),
                cmocka_unit_test(test_notices_keys),    cmocka_unit_test(test_cordon_only_unused),
                cmocka_unit_test(test_old_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
