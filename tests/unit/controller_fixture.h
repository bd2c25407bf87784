/* Shared by test_controller and test_leader: the in-process simulator (Kubernetes API + SQS surface) on a
 * scaled clock, and controllers on one loop. Header-only (static functions), so it is not linked into the
 * other tests. */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "spotdrain/alert.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/sigv4.h"
#include "spotdrain/yaml.h"
#include "timescale.h"

#define SEC        UINT64_C(1000000)
#define REAL_BOUND test_real_bound(30 * SEC) /* no test comes near this in real time */
#define MAX_CTL    2

struct cfx {
        char sc_path[64], kc_path[64];
        struct ynode *tree;
        struct sim *sim;
        struct sim_server *srv;
        struct sim_sqs *sqs;
        struct kube_config *kcfg;
        struct loop *loop;
        struct alert_bus *bus;
        struct aws_credentials creds;
        struct kube_client *kube[MAX_CTL];
        struct controller *ctl[MAX_CTL];
        unsigned alerts[_ALERT_KIND_MAX];
        double scale;
};

static inline void cfx_alert(const struct alert *a, void *userdata)
{
        struct cfx *f = userdata;
        f->alerts[a->kind]++;
}

static inline const struct aws_credentials *cfx_creds(void *userdata)
{
        struct cfx *f = userdata;
        return &f->creds;
}

static inline void cfx_write(char *path_template, const char *text)
{
        int fd = mkstemp(path_template);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static inline struct cfx *cfx_new(const char *scenario, double scale, const struct sim_sqs_fault *fault)
{
        struct cfx *f = calloc(1, sizeof(*f));
        _cleanup_free_ char *error = NULL, *kc = NULL;

        assert_non_null(f);
        scale = test_time_scale(scale);
        f->scale = scale;
        strcpy(f->sc_path, "/tmp/test-controller-scenario-XXXXXX");
        strcpy(f->kc_path, "/tmp/test-controller-kubeconfig-XXXXXX");
        cfx_write(f->sc_path, scenario);
        assert_int_equal(sim_scenario_load(f->sc_path, &f->tree, &error), 0);
        if (sim_new(f->tree, &(struct sim_options){ .time_scale = scale }, &f->sim, &error) < 0)
                fail_msg("sim_new: %s", error);
        sim_lock(f->sim);
        sim_start(f->sim);
        sim_unlock(f->sim);
        clk_set_scale(scale);
        assert_int_equal(sim_server_start(f->sim, NULL, &f->srv), 0);
        assert_int_equal(sim_sqs_start(f->sim, NULL, &f->sqs), 0);
        if (fault)
                assert_int_equal(sim_sqs_set_fault(f->sqs, fault), 0);
        kc = sim_server_kubeconfig(sim_server_url(f->srv), "test-token");
        assert_non_null(kc);
        cfx_write(f->kc_path, kc);
        assert_int_equal(kube_config_load_file(f->kc_path, NULL, &f->kcfg, &error), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(alert_bus_new(&f->bus), 0);
        assert_int_equal(alert_bus_add_sink(f->bus, cfx_alert, f), 0);
        f->creds = (struct aws_credentials){ .access_key_id = (char *)SIM_SQS_ACCESS_KEY_ID,
                                             .secret_access_key = (char *)SIM_SQS_SECRET_ACCESS_KEY };
        return f;
}

static inline struct controller_options cfx_options(struct cfx *f, const char *identity, bool election)
{
        return (struct controller_options){
                .queue_url = sim_sqs_queue_url(f->sqs),
                .region = "us-east-1",
                .asg_endpoint = "http://127.0.0.1:9/", /* nothing listens: lifecycle calls fail quietly */
                .credentials = cfx_creds,
                .credentials_userdata = f,
                .lease_namespace = "default",
                .identity = identity,
                .no_leader_election = !election,
                .visibility_usec = 10 * SEC,
        };
}

static inline struct controller *cfx_controller(struct cfx *f, unsigned i,
                                                const struct controller_options *o)
{
        assert_true(i < MAX_CTL);
        assert_int_equal(
            kube_client_new(f->loop, f->kcfg, &(struct kube_client_options){ .qps = -1 }, &f->kube[i]), 0);
        assert_int_equal(controller_new(f->loop, f->kube[i], f->bus, o, &f->ctl[i]), 0);
        assert_int_equal(controller_start(f->ctl[i]), 0);
        return f->ctl[i];
}

/* Kills controller i as a crash would: no hand-over. */
static inline void cfx_kill(struct cfx *f, unsigned i)
{
        f->ctl[i] = controller_free(f->ctl[i]);
        f->kube[i] = kube_client_free(f->kube[i]);
}

static inline void cfx_free(struct cfx *f)
{
        for (unsigned i = 0; i < MAX_CTL; i++)
                cfx_kill(f, i);
        alert_bus_free(f->bus);
        loop_free(f->loop);
        kube_config_free(f->kcfg);
        sim_sqs_stop(f->sqs);
        sim_server_stop(f->srv);
        sim_free(f->sim);
        ynode_free(f->tree);
        clk_set_scale(1.0);
        unlink(f->sc_path);
        unlink(f->kc_path);
        free(f);
}

/* Runs the loop in small slices until pred holds (true) or the real-time bound passes (false). check runs
 * after every slice (invariants). */
static inline bool cfx_run_until(struct cfx *f, bool (*pred)(struct cfx *f, void *ud), void *ud,
                                 void (*check)(struct cfx *f))
{
        bool never = false;
        uint64_t start = now_monotonic_usec();
        while (!pred(f, ud)) {
                if (now_monotonic_usec() - start > REAL_BOUND)
                        return false;
                loop_run_until(f->loop, &never, 5 * 1000);
                if (check)
                        check(f);
        }
        return true;
}

/* Messages left in the queue unread, every reason. */
static inline uint64_t cfx_left_unread(const struct controller_stats *st)
{
        uint64_t n = 0;
        for (int k = 0; k < _CONTROLLER_MALFORMED_MAX; k++)
                n += st->malformed[k];
        return n;
}

static inline struct sim_sqs_stats cfx_sqs_stats(struct cfx *f)
{
        struct sim_sqs_stats st;
        assert_int_equal(sim_sqs_stats(f->sqs, &st), 0);
        return st;
}

/* The result's first node entry named name, as a number field. */
static inline double cfx_result_node(struct cfx *f, const char *name, const char *field)
{
        double v = -1;
        sim_lock(f->sim);
        cJSON *res = sim_result(f->sim);
        sim_unlock(f->sim);
        cJSON *n;
        cJSON_ArrayForEach (n, cJSON_GetObjectItemCaseSensitive(res, "nodes")) {
                if (streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(n, "name")), name)) {
                        cJSON *x = cJSON_GetObjectItemCaseSensitive(n, field);
                        v = cJSON_IsNumber(x) ? x->valuedouble : -1;
                }
        }
        cJSON_Delete(res);
        return v;
}

static inline bool cfx_node_annotated(struct cfx *f, const char *node)
{
        cJSON *o = NULL;
        bool yes;
        sim_lock(f->sim);
        int r = sim_get(f->sim, SIM_NODE, NULL, node, &o);
        sim_unlock(f->sim);
        if (r < 0)
                return false;
        yes = cJSON_GetObjectItemCaseSensitive(
                  cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "metadata"),
                                                   "annotations"),
                  "spotdrain.io/drain") != NULL;
        cJSON_Delete(o);
        return yes;
}

/* A two-node cluster: spot-a with four pods under a maxUnavailable 1 PDB that take 40 s to shut down (the
 * drain lasts about a minute of scenario time, several visibility periods), od-a with room. */
#define CFX_SCENARIO(at)                                                                                    \
        "name: ctl\n"                                                                                       \
        "mode: controller\n"                                                                                \
        "budget_seconds: 120\n"                                                                             \
        "nodes:\n"                                                                                          \
        "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, instance_type: m5.xlarge, allocatable: " \
        "{cpu: \"4\", memory: 16Gi, pods: 50}}\n"                                                           \
        "  - {name: od-a, zone: us-east-1a, capacity_type: on-demand, instance_type: m5.xlarge, "           \
        "allocatable: {cpu: \"4\", memory: 16Gi, pods: 50}}\n"                                              \
        "workloads:\n"                                                                                      \
        "  - name: web\n"                                                                                   \
        "    kind: Deployment\n"                                                                            \
        "    replicas: 4\n"                                                                                 \
        "    placement: {spot-a: 4}\n"                                                                      \
        "    requests: {cpu: 100m, memory: 64Mi}\n"                                                         \
        "    termination_grace_seconds: 60\n"                                                               \
        "    shutdown_seconds: 40\n"                                                                        \
        "    startup_seconds: 5\n"                                                                          \
        "    pdb: {max_unavailable: 1}\n"                                                                   \
        "events:\n"                                                                                         \
        "  - {at: " at ", type: spot-interruption, node: spot-a}\n"
