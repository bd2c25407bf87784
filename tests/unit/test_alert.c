/* The alert bus: kinds and their Event reasons, fan-out to every sink in order, the log sink's structured
 * fields, and the Kubernetes Event sink against the in-process simulator. */
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
#include "sim_fixture.h"
#include "spotdrain/alert.h"
#include "spotdrain/core.h"
#include "spotdrain/kube.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/metrics.h"
#include "spotdrain/yaml.h"

static void test_kinds(void **state)
{
        assert_string_equal(alert_kind_to_string(ALERT_DRAIN_INFEASIBLE), "drain-infeasible");
        assert_string_equal(alert_kind_reason(ALERT_DRAIN_INFEASIBLE), "DrainInfeasible");
        assert_string_equal(alert_kind_reason(ALERT_PODS_FORCED), "PodsForced");
        assert_string_equal(alert_kind_to_string(ALERT_QUEUE_UNREADABLE), "queue-unreadable");
        assert_true(alert_kind_is_warning(ALERT_DEADLINE_MISSED));
        assert_false(alert_kind_is_warning(ALERT_DRAIN_COMPLETED));
        assert_false(alert_kind_is_warning(ALERT_NOTICE_RECEIVED));
        for (int k = 0; k < _ALERT_KIND_MAX; k++)
                assert_int_equal(alert_kind_from_string(alert_kind_to_string((enum alert_kind)k)), k);
        assert_int_equal(alert_kind_from_string("drain-finished"), -EINVAL);
        assert_int_equal(alert_kind_from_string(NULL), -EINVAL);
        assert_null(alert_kind_to_string(_ALERT_KIND_MAX));
}

struct seen {
        char log[512];
        size_t n;
};

static void record(const struct alert *a, void *userdata)
{
        struct seen *s = userdata;
        size_t used = strlen(s->log);
        snprintf(s->log + used, sizeof(s->log) - used, "%s|%s|%s|%s;", alert_kind_to_string(a->kind),
                 a->node ? a->node : "-", a->fields && a->fields[0] ? a->fields[1] : "-", a->message);
        s->n++;
}

static void test_fan_out(void **state)
{
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        struct seen one = { 0 }, two = { 0 };
        const char *fields[] = { "pdb", "shop/api", NULL };

        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(alert_bus_add_sink(b, record, &one), 0);
        assert_int_equal(alert_bus_add_sink(b, record, &two), 0);
        assert_int_equal(alert_bus_add_sink(b, NULL, NULL), -EINVAL);

        assert_int_equal(
            alert_emit(b, ALERT_DRAIN_INFEASIBLE, "spot-a", fields, "%d pods, %s", 10, "too slow"), 0);
        assert_int_equal(alert_emit(b, ALERT_QUEUE_UNREADABLE, NULL, NULL, "AccessDenied"), 0);
        assert_string_equal(one.log, "drain-infeasible|spot-a|shop/api|10 pods, too slow;"
                                     "queue-unreadable|-|-|AccessDenied;");
        assert_string_equal(two.log, one.log);
        assert_int_equal(alert_bus_count(b, ALERT_DRAIN_INFEASIBLE), 1);
        assert_int_equal(alert_bus_count(b, ALERT_QUEUE_UNREADABLE), 1);
        assert_int_equal(alert_bus_count(b, ALERT_DRAIN_COMPLETED), 0);
        assert_int_equal(alert_emit(b, _ALERT_KIND_MAX, "n", NULL, "x"), -EINVAL);
        assert_int_equal(one.n, 2);
}

static void test_log_sink(void **state)
{
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        const char *fields[] = { "pods", "3", NULL };
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        log_set_output(f);
        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(alert_bus_add_log_sink(b), 0);
        assert_int_equal(alert_emit(b, ALERT_PODS_FORCED, "spot-a", fields, "3 pods forced"), 0);
        assert_int_equal(alert_emit(b, ALERT_DRAIN_COMPLETED, "spot-a", NULL, "drained"), 0);
        log_set_output(NULL);
        fclose(f);

        assert_non_null(strstr(text, "warning 3 pods forced"));
        assert_non_null(strstr(text, "alert=pods-forced"));
        assert_non_null(strstr(text, "node=spot-a"));
        assert_non_null(strstr(text, "pods=3"));
        assert_non_null(strstr(text, "notice drained"));
        assert_non_null(strstr(text, "alert=drain-completed"));
        free(text);
}

/* A post-mortem's lines: counted in a text log (a terminal's, one line a record), whole in a JSON one. */
static void test_log_sink_postmortem(void **state)
{
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        const struct alert_pod pod = { "jobs", "batch-1", NULL };
        cJSON *pm = cJSON_Parse("[{\"name\":\"batch-1\"}]");
        char *text = NULL, *json = NULL;
        size_t len = 0;

        assert_non_null(pm);
        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(alert_bus_add_log_sink(b), 0);
        for (int format = 0; format < 2; format++) {
                FILE *f = open_memstream(format ? &json : &text, &len);
                assert_non_null(f);
                log_setup(format ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT, LOG_INFO);
                log_set_output(f);
                assert_int_equal(alert_emit_pod(b, ALERT_POD_EVICTED, "spot-a", &pod, pm, NULL, "%s",
                                                "pod jobs/batch-1 evicted\n  | served 3\n  | bye"),
                                 0);
                log_set_output(NULL);
                fclose(f);
        }
        log_setup(LOG_FORMAT_TEXT, LOG_INFO);
        assert_non_null(strstr(text, "pod jobs/batch-1 evicted (post-mortem: 2 more lines"));
        assert_null(strstr(text, "served 3"));
        assert_int_equal(strchr(text, '\n') - text + 1, (ptrdiff_t)strlen(text)); /* one line */
        assert_non_null(strstr(json, "pod jobs/batch-1 evicted\\n  | served 3\\n  | bye"));
        free(text);
        free(json);
        cJSON_Delete(pm);
}

static const char scenario[] = "name: alerts\n"
                               "nodes:\n"
                               "  - {name: spot-a}\n"
                               "workloads: []\n"
                               "events: []\n";

/* Runs the loop until the simulator stores n Events (bounded); returns how many it has, *events their list.
 */
static int wait_events(struct loop *l, struct sim *s, cJSON **events, int n)
{
        bool never = false;
        int found = 0;
        for (int i = 0; i < 2000 && found < n; i++) {
                loop_run_until(l, &never, 10 * 1000);
                cJSON_Delete(*events);
                *events = NULL;
                sim_lock(s);
                assert_int_equal(sim_list(s, SIM_EVENT, NULL, events), 0);
                sim_unlock(s);
                found = cJSON_GetArraySize(*events);
        }
        return found;
}

/* Runs the loop until the client has no request waiting or under way (bounded). */
static void wait_client_idle(struct loop *l, struct kube_client *c)
{
        struct kube_client_stats st;
        bool never = false;
        for (int i = 0; i < 2000; i++) {
                kube_client_stats(c, &st);
                if (st.in_flight == 0 && st.queued == 0)
                        return;
                loop_run_until(l, &never, 10 * 1000);
        }
        fail_msg("the client's requests never ended");
}

static void test_kube_event_sink(void **state)
{
        struct sim_fixture fx;
        _cleanup_(loop_freep) struct loop *l = NULL;
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        struct kube_client *c = NULL;
        struct metrics *metrics = NULL;
        cJSON *events = NULL;
        double dropped = 0;

        sim_fixture_start(&fx, scenario, NULL);
        struct sim *s = fx.sim;
        struct kube_config *cfg = fx.kcfg;
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(metrics_new(&metrics), 0);
        assert_int_equal(kube_client_new(l, cfg, &(struct kube_client_options){ .metrics = metrics }, &c),
                         0);

        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(alert_bus_add_kube_event_sink(b, c), 0);
        assert_int_equal(alert_bus_set_event_annotations(b, "team=sre, example.com/ticket=OPS-42", NULL), 0);
        assert_int_equal(alert_emit(b, ALERT_DRAIN_INFEASIBLE, "spot-a", NULL, "PDB shop/api is too tight"),
                         0);
        /* About a pod: its Event is on the pod, in its namespace; a message longer than an Event's note is
         * cut at a line's end. */
        _cleanup_(buf_free) struct buf long_message = { 0 };
        assert_int_equal(buf_printf(&long_message, "pod shop/web-1 deleted at its last safe moment"), 0);
        for (int i = 0; long_message.len <= ALERT_EVENT_MESSAGE_MAX; i++)
                assert_int_equal(buf_printf(&long_message, "\n  | served %d requests", i), 0);
        const struct alert_pod pod = { "shop", "web-1", "uid-web-1" };
        assert_int_equal(
            alert_emit_pod(b, ALERT_POD_DELETED, "spot-a", &pod, NULL, NULL, "%s", long_message.data), 0);
        assert_int_equal(alert_emit(b, ALERT_DRAIN_COMPLETED, "spot-a", NULL, "drained"), 0);
        /* No node: nothing to hang an Event on. */
        assert_int_equal(alert_emit(b, ALERT_QUEUE_UNREADABLE, NULL, NULL, "AccessDenied"), 0);

        /* Wait (bounded) until the three Events are stored. */
        assert_int_equal(wait_events(l, s, &events, 3), 3);
        bool infeasible = false, completed = false, deleted = false;
        const cJSON *e;
        cJSON_ArrayForEach (e, events) {
                const char *reason = kube_object_str(e, "reason");
                const cJSON *ann = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "metadata"), "annotations");
                assert_string_equal(kube_object_str(ann, "team"), "sre");
                assert_string_equal(cJSON_GetObjectItem(ann, "example.com/ticket")->valuestring, "OPS-42");
                if (streq_ptr(reason, "DeletedAtLastSafeMoment")) {
                        const char *m = kube_object_str(e, "message");
                        deleted = true;
                        assert_string_equal(kube_object_str(e, "metadata.namespace"), "shop");
                        assert_string_equal(kube_object_str(e, "involvedObject.kind"), "Pod");
                        assert_string_equal(kube_object_str(e, "involvedObject.namespace"), "shop");
                        assert_string_equal(kube_object_str(e, "involvedObject.name"), "web-1");
                        assert_string_equal(kube_object_str(e, "involvedObject.uid"), "uid-web-1");
                        assert_string_equal(kube_object_str(e, "type"), "Warning");
                        assert_true(strlen(m) <= ALERT_EVENT_MESSAGE_MAX);
                        assert_true(strlen(m) > ALERT_EVENT_MESSAGE_MAX - 40);
                        /* whole lines kept, the first of them the pod's */
                        assert_int_equal(strncmp(m, long_message.data, strlen(m) - 4), 0);
                        assert_string_equal(m + strlen(m) - 4, " ...");
                        assert_int_equal(long_message.data[strlen(m) - 4], '\n');
                        continue;
                }
                assert_string_equal(kube_object_str(e, "metadata.namespace"), "default");
                assert_string_equal(kube_object_str(e, "involvedObject.kind"), "Node");
                assert_string_equal(kube_object_str(e, "involvedObject.name"), "spot-a");
                if (streq_ptr(reason, "DrainInfeasible")) {
                        infeasible = true;
                        assert_string_equal(kube_object_str(e, "type"), "Warning");
                        assert_string_equal(kube_object_str(e, "message"), "PDB shop/api is too tight");
                } else if (streq_ptr(reason, "DrainCompleted")) {
                        completed = true;
                        assert_string_equal(kube_object_str(e, "type"), "Normal");
                }
        }
        assert_true(infeasible);
        assert_true(completed);
        assert_true(deleted);

        /* A burst of alerts (a mass reclaim's evictions): KUBE_EVENTS_IN_FLIGHT Events wait for the API
         * server at most, the rest are dropped and counted; once answered, Events are recorded again. */
        wait_client_idle(l, c);
        const unsigned burst = KUBE_EVENTS_IN_FLIGHT + 44;
        for (unsigned i = 0; i < burst; i++) {
                char name[32], uid[32];
                snprintf(name, sizeof(name), "burst-%u", i);
                snprintf(uid, sizeof(uid), "uid-burst-%u", i);
                const struct alert_pod bp = { "shop", name, uid };
                assert_int_equal(alert_emit_pod(b, ALERT_POD_EVICTED, "spot-a", &bp, NULL, NULL, "evicted"),
                                 0);
        }
        assert_int_equal(alert_bus_events_dropped(b), 44);
        assert_int_equal(metrics_get(metrics, METRIC_EVENTS_DROPPED, &dropped, "queue_full", NULL), 0);
        assert_int_equal((int)dropped, 44);
        assert_int_equal(wait_events(l, s, &events, 3 + KUBE_EVENTS_IN_FLIGHT), 3 + KUBE_EVENTS_IN_FLIGHT);
        wait_client_idle(l, c);
        const struct alert_pod late = { "shop", "late-1", "uid-late-1" };
        assert_int_equal(alert_emit_pod(b, ALERT_POD_EVICTED, "spot-a", &late, NULL, NULL, "evicted"), 0);
        assert_int_equal(alert_bus_events_dropped(b), 44);
        assert_int_equal(wait_events(l, s, &events, 4 + KUBE_EVENTS_IN_FLIGHT), 4 + KUBE_EVENTS_IN_FLIGHT);

        assert_int_equal(metrics_get(metrics, METRIC_EVENTS_DROPPED, &dropped, "queue_full", NULL), 0);
        assert_int_equal((int)dropped, 44);

        cJSON_Delete(events);
        kube_client_free(c);
        metrics_free(metrics);
        sim_fixture_stop(&fx);
}

static void test_event_annotations(void **state)
{
        _cleanup_(alert_bus_freep) struct alert_bus *b = NULL;
        static const char *const bad[] = {
                "team", "=sre", "team=sre,,x=1", "-team=sre", "a/b/c=1", "has space=1", "/name=1",
        };
        assert_int_equal(alert_bus_new(&b), 0);
        assert_int_equal(alert_bus_set_event_annotations(b, NULL, NULL), 0);
        assert_int_equal(alert_bus_set_event_annotations(b, "", NULL), 0);
        assert_int_equal(alert_bus_set_event_annotations(b, "a=1,example.com/b=x=y,c=", NULL), 0);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_free_ char *error = NULL;
                assert_int_equal(alert_bus_set_event_annotations(b, bad[i], &error), -EINVAL);
                assert_non_null(error);
                assert_non_null(strstr(error, "alerts.event_annotations"));
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kinds),           cmocka_unit_test(test_fan_out),
                cmocka_unit_test(test_log_sink),        cmocka_unit_test(test_log_sink_postmortem),
                cmocka_unit_test(test_kube_event_sink), cmocka_unit_test(test_event_annotations),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
