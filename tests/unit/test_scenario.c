/* Scenario files: every bad file is refused with FILE:LINE: key, and the public scenarios load. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "sim/model.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define DATA "tests/unit/data/scenarios/"

static void expect_error(const char *file, const char *want)
{
        _cleanup_free_ char *path = strprintf(DATA "%s", file), *err = NULL;
        struct ynode *tree = NULL;
        assert_int_equal(sim_scenario_load(path, &tree, &err), -EINVAL);
        assert_null(tree);
        assert_non_null(err);
        _cleanup_free_ char *full = strprintf(DATA "%s", want);
        if (!startswith(err, full))
                fail_msg("%s: got \"%s\", want it to start with \"%s\"", file, err, full);
}

static void test_bad_files(void **state)
{
        expect_error("missing-name.yaml", "missing-name.yaml:2: name: required");
        expect_error("dup-node.yaml", "dup-node.yaml:5: nodes[2].name: duplicate node name \"a\"");
        expect_error("unknown-kind.yaml", "unknown-kind.yaml:6: workloads[0].kind: must be Deployment");
        expect_error("placement-node.yaml",
                     "placement-node.yaml:9: workloads[0].placement.z: no node named \"z\"");
        expect_error("placement-too-many.yaml",
                     "placement-too-many.yaml:8: workloads[0].placement: places 4 pods but replicas is 3");
        expect_error("bad-quantity.yaml",
                     "bad-quantity.yaml:4: nodes[0].allocatable.memory: must be a memory quantity");
        expect_error("bad-pdb.yaml",
                     "bad-pdb.yaml:8: workloads[1].pdb.max_unavailable: must be an int or a percent");
        expect_error("bad-event-type.yaml",
                     "bad-event-type.yaml:6: events[1].type: unknown event type \"meteor-strike\"");
        expect_error("event-node.yaml", "event-node.yaml:7: events[0].node: no node named \"b\"");
        expect_error("launch-existing.yaml",
                     "launch-existing.yaml:8: events[1].node: an asg-launch event names a new node");
        expect_error(
            "launch-ready-early.yaml",
            "launch-ready-early.yaml:5: events[0].join_seconds: only an asg-launch event launches a node");
        expect_error("unknown-key.yaml", "unknown-key.yaml:4: nodes[0].cpus: unknown key");
        expect_error(
            "bad-target-group.yaml",
            "bad-target-group.yaml:6: workloads[0].target_group: type must be instance or ip, not \"alb\"");
        expect_error("target-group-delay.yaml",
                     "target-group-delay.yaml:6: workloads[0].target_group.deregistration_delay_seconds:");
        expect_error("syntax.yaml", "syntax.yaml:");
        expect_error("apf-no-qps.yaml", "apf-no-qps.yaml:4: api_priority_fairness.qps: required");
        expect_error("apf-retry-range.yaml",
                     "apf-retry-range.yaml:6: api_priority_fairness.retry_after_seconds:");
}

static void test_missing_file(void **state)
{
        _cleanup_free_ char *err = NULL;
        struct ynode *tree = NULL;
        assert_true(sim_scenario_load(DATA "no-such-file.yaml", &tree, &err) < 0);
        assert_null(tree);
}

static int load_string(const char *doc, char **ret_error)
{
        _cleanup_(ynode_freep) struct ynode *tree = NULL;
        int r = yaml_load_string(doc, strlen(doc), "s.yaml", &tree, ret_error);
        if (r < 0)
                return r;
        struct sim *s = NULL;
        struct sim_options opt = { .manual_clock = true };
        r = sim_new(tree, &opt, &s, ret_error);
        sim_free(s);
        return r;
}

static void test_values(void **state)
{
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL, *e5 = NULL;
        /* A quoted plain number is a string in IntOrString, which the API refuses. */
        assert_int_equal(
            load_string(
                "name: x\nnodes: [{name: a}]\nworkloads:\n  - {name: w, pdb: {min_available: \"2\"}}\n",
                &e1),
            -EINVAL);
        assert_non_null(
            strstr(e1, "scenario:4: workloads[0].pdb.min_available: must be an int or a percent"));
        assert_int_equal(
            load_string("name: x\nnodes: [{name: a}]\nworkloads:\n  - {name: w, pdb: {}}\n", &e2), -EINVAL);
        assert_non_null(strstr(e2, "workloads[0].pdb: exactly one"));
        assert_int_equal(load_string("name: x\nmode: batch\nnodes: [{name: a}]\n", &e3), -EINVAL);
        assert_non_null(strstr(e3, "scenario:2: mode: must be agent or controller"));
        assert_int_equal(load_string("name: x\nnodes: [{name: a, instance_id: i-xyz}]\n", &e4), -EINVAL);
        assert_non_null(strstr(e4, "nodes[0].instance_id"));
        assert_int_equal(
            load_string("name: x\nnodes: [{name: a}]\nworkloads:\n  - {name: w, replicas: -1}\n", &e5),
            -EINVAL);
        assert_non_null(strstr(e5, "workloads[0].replicas"));
        /* A maintenance code is one IMDS has, only on a scheduled change; reboot_seconds only on a reboot.
         */
        _cleanup_free_ char *e6 = NULL, *e7 = NULL, *e8 = NULL;
        assert_int_equal(load_string("name: x\nnodes: [{name: a}]\nevents:\n"
                                     "  - {at: 1, type: scheduled-change, node: a, code: meteor}\n",
                                     &e6),
                         -EINVAL);
        assert_non_null(strstr(e6, "events[0].code: unknown maintenance code \"meteor\""));
        assert_int_equal(load_string("name: x\nnodes: [{name: a}]\nevents:\n"
                                     "  - {at: 1, type: scheduled-change, node: a, code: instance-stop,"
                                     " reboot_seconds: 5}\n",
                                     &e7),
                         -EINVAL);
        assert_non_null(strstr(e7, "events[0].reboot_seconds: only a reboot takes reboot_seconds"));
        assert_int_equal(load_string("name: x\nnodes: [{name: a}]\nevents:\n"
                                     "  - {at: 1, type: spot-interruption, node: a, code: system-reboot}\n",
                                     &e8),
                         -EINVAL);
        assert_non_null(strstr(e8, "events[0].code: only a scheduled-change event takes"));
        assert_int_equal(load_string("name: x\nnodes: [{name: a}]\nevents:\n"
                                     "  - {at: 1, type: scheduled-change, node: a, code: instance-reboot,"
                                     " reboot_seconds: 0}\n",
                                     NULL),
                         0);
        /* Percent strings and ints are both fine. */
        assert_int_equal(load_string("name: x\nnodes: [{name: a}]\nworkloads:\n"
                                     "  - {name: w, pdb: {max_unavailable: \"25%\"}}\n"
                                     "  - {name: v, pdb: {min_available: 1}}\n",
                                     NULL),
                         0);
}

/* Every public scenario loads and builds (the shared folder, when this machine has it, and examples/). */
static void test_public_scenarios(void **state)
{
        const char *dirs[] = { getenv("SPOTDRAIN_SCENARIOS"), "/work/shared/scenarios", "examples" };
        unsigned loaded = 0;
        for (size_t d = 0; d < ARRAY_SIZE(dirs); d++) {
                if (!dirs[d])
                        continue;
                DIR *dir = opendir(dirs[d]);
                if (!dir)
                        continue;
                struct dirent *de;
                while ((de = readdir(dir))) {
                        size_t n = strlen(de->d_name);
                        if (n < 6 || strcmp(de->d_name + n - 5, ".yaml") != 0)
                                continue;
                        _cleanup_free_ char *path = strprintf("%s/%s", dirs[d], de->d_name), *err = NULL;
                        _cleanup_(ynode_freep) struct ynode *tree = NULL;
                        int r = sim_scenario_load(path, &tree, &err);
                        if (r < 0)
                                fail_msg("%s: %s", path, err);
                        struct sim *s = NULL;
                        struct sim_options opt = { .manual_clock = true };
                        _cleanup_free_ char *err2 = NULL;
                        assert_int_equal(sim_new(tree, &opt, &s, &err2), 0);
                        assert_true(sim_node_count(s) > 0);
                        sim_free(s);
                        loaded++;
                }
                closedir(dir);
        }
        if (loaded == 0)
                skip();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bad_files),
                cmocka_unit_test(test_missing_file),
                cmocka_unit_test(test_values),
                cmocka_unit_test(test_public_scenarios),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
