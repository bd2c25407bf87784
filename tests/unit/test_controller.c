/* The controller's message lifecycle against the in-process SQS surface and Kubernetes API of the
 * simulator, on a scaled clock (nothing sleeps; every wait is a condition with a real-time bound), and the
 * handling of malformed messages against a scripted SQS endpoint. */
#include "controller_fixture.h"
#include "spotdrain/config.h"

#include "kube_fake.h"

static bool drained_and_deleted(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return st.deleted >= *(uint64_t *)ud && st.in_flight == 0 && st.dispatch.draining == 0;
}

/* One interruption, each message delivered twice (a standard queue's duplicates): one drain; the message
 * stays hidden while the drain runs (visibility extended, never redelivered), and both copies are deleted,
 * the duplicate at once and the original after the drain. */
static void test_lifecycle(void **state)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("2"), 20, &(struct sim_sqs_fault){ .duplicate_rate = 1.0 });
        struct controller_options o = cfx_options(f, "ctl-0", false);
        struct controller_stats st;
        struct sim_sqs_stats q;
        uint64_t want = 2;

        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, drained_and_deleted, &want, NULL));
        controller_stats(f->ctl[0], &st);
        assert_true(controller_ready(f->ctl[0]));
        assert_int_equal(st.dispatch.drains, 1);
        assert_int_equal(st.dispatch.duplicates, 1);
        assert_int_equal(st.notice_counts[NOTICE_SPOT_INTERRUPTION], 1);
        assert_int_equal(st.deleted, 2);
        assert_int_equal(cfx_left_unread(&st), 0);
        /* The drain lasted several visibility periods: the hold was renewed, and nothing was redelivered. */
        assert_true(st.visibility_extends >= 2);
        q = cfx_sqs_stats(f);
        assert_int_equal(q.delivered, 2);
        assert_int_equal(q.deleted, 2);
        assert_int_equal(q.messages, 0);
        assert_true(f->alerts[ALERT_NOTICE_RECEIVED] >= 1);
        assert_int_equal(f->alerts[ALERT_QUEUE_UNREADABLE], 0);
        assert_true(cfx_result_node(f, "spot-a", "drained_at") > 0);
        assert_int_equal(cfx_result_node(f, "spot-a", "pods_killed"), 0);
        cfx_free(f);
}

static bool pod_killed(struct cfx *f, void *ud)
{
        return f->alerts[ALERT_POD_KILLED] >= 1;
}

static bool drain_done(struct cfx *f, void *ud)
{
        return f->alerts[ALERT_DRAIN_COMPLETED] >= 1;
}

/* A pod the drain leaves (drain.skip_namespaces) is captured 5 s before the node's end (pod-killed) though
 * the drain completed long before: the controller keeps a finished drain until its deadline for it rather
 * than reaping it at once. */
static void test_finished_drain_captures_left_pods(void **state)
{
        struct cfx *f = cfx_new(
            "name: ctl-left\nmode: controller\nbudget_seconds: 120\nnodes:\n"
            "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: \"4\", memory: "
            "16Gi, "
            "pods: 50}}\n"
            "  - {name: od-a, zone: us-east-1a, allocatable: {cpu: \"4\", memory: 16Gi, pods: 50}}\n"
            "workloads:\n"
            "  - {name: web, kind: Deployment, replicas: 1, placement: {spot-a: 1}, shutdown_seconds: 1,\n"
            "     startup_seconds: 1}\n"
            "  - {name: infra, namespace: kept, kind: Deployment, replicas: 1, placement: {spot-a: 1},\n"
            "     shutdown_seconds: 1, startup_seconds: 1}\n"
            "events:\n"
            "  - {at: 2, type: spot-interruption, node: spot-a}\n",
            20, NULL);
        _cleanup_(config_freep) struct spotdrain_config *cfg = NULL;
        assert_int_equal(config_new(&cfg), 0);
        assert_int_equal(config_set(cfg, "drain.skip_namespaces=kept", NULL), 0);
        struct controller_options o = cfx_options(f, "ctl-0", false);
        o.cfg = cfg;
        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, drain_done, NULL, NULL));
        uint64_t completed = clk_now();
        assert_int_equal(f->alerts[ALERT_POD_KILLED], 0);
        assert_true(cfx_run_until(f, pod_killed, NULL, NULL));
        /* About 115 s after the notice, the drain having ended within seconds of it. */
        assert_true(clk_now() - completed > 60 * SEC);
        assert_int_equal(f->alerts[ALERT_POD_KILLED], 1);
        cfx_free(f);
}

static bool unreadable(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return st.unreadable > 0;
}

static bool unreadable_twice(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return st.unreadable == 2;
}

static bool ready(struct cfx *f, void *ud)
{
        return controller_ready(f->ctl[0]);
}

/* AccessDenied (an IAM change) raises queue-unreadable within one poll cycle, turns readiness off, and
 * clears when access comes back. The same from a NonExistentQueue (a rename). */
static void unreadable_case(const struct sim_sqs_fault *fault)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("1000"), 20, fault);
        struct controller_options o = cfx_options(f, "ctl-0", false);
        struct controller_stats st;

        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, unreadable, NULL, NULL));
        controller_stats(f->ctl[0], &st);
        assert_false(controller_ready(f->ctl[0]));
        assert_int_equal(f->alerts[ALERT_QUEUE_UNREADABLE], 1);
        assert_int_equal(st.unreadable, 1);
        assert_true(st.unreadable_failures >= 1);
        /* The first failing call was enough: no receive succeeded before the alert. */
        assert_int_equal(st.receives, 0);

        assert_int_equal(sim_sqs_set_fault(f->sqs, &(struct sim_sqs_fault){}), 0);
        assert_true(cfx_run_until(f, ready, NULL, NULL));
        controller_stats(f->ctl[0], &st);
        assert_int_equal(st.unreadable, 1);
        assert_int_equal(f->alerts[ALERT_QUEUE_UNREADABLE], 1);

        /* And at any time later, while receiving. */
        assert_int_equal(sim_sqs_set_fault(f->sqs, fault), 0);
        assert_true(cfx_run_until(f, unreadable_twice, NULL, NULL));
        assert_false(controller_ready(f->ctl[0]));
        assert_int_equal(f->alerts[ALERT_QUEUE_UNREADABLE], 2);
        cfx_free(f);
}

static void test_access_denied(void **state)
{
        unreadable_case(&(struct sim_sqs_fault){ .access_denied = true });
}

static void test_nonexistent_queue(void **state)
{
        unreadable_case(&(struct sim_sqs_fault){ .nonexistent_queue = true });
}

/* Transient server errors: unreadable only after several in a row. */
static void test_repeated_failures(void **state)
{
        struct cfx *f = cfx_new(CFX_SCENARIO("1000"), 20, &(struct sim_sqs_fault){ .error_500 = 1 });
        struct controller_options o = cfx_options(f, "ctl-0", false);
        struct controller_stats st;

        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, ready, NULL, NULL));
        controller_stats(f->ctl[0], &st);
        assert_int_equal(st.unreadable, 0);

        assert_int_equal(sim_sqs_set_fault(f->sqs, &(struct sim_sqs_fault){ .error_500 = 1000 }), 0);
        assert_true(cfx_run_until(f, unreadable, NULL, NULL));
        controller_stats(f->ctl[0], &st);
        assert_true(st.receive_failures + st.delete_failures >= 3);
        assert_int_equal(f->alerts[ALERT_QUEUE_UNREADABLE], 1);
        cfx_free(f);
}

/* ---- malformed messages, against a scripted endpoint ---- */

#define BAD_ANSWER                                                                                     \
        "{\"Attributes\": {\"QueueArn\": \"arn:aws:sqs:us-east-1:123456789012:q\"}, \"Messages\": ["   \
        "{\"MessageId\": \"bad-1\", \"ReceiptHandle\": \"rh-bad-1\", \"Body\": \"this is not json\"}," \
        "{\"MessageId\": \"odd-2\", \"ReceiptHandle\": \"rh-odd-2\", \"Body\": \"{\\\"id\\\": "        \
        "\\\"e-1\\\", "                                                                                \
        "\\\"time\\\": \\\"2026-11-30T06:00:00Z\\\", \\\"source\\\": \\\"aws.s3\\\", "                 \
        "\\\"detail-type\\\": \\\"Object Created\\\", \\\"detail\\\": {}}\"}]}"

struct mfx {
        struct kfake *fake;
        struct loop *loop;
        struct kube_client *kube;
        struct kube_config *kcfg;
        struct controller *ctl;
        struct aws_credentials creds;
        char kc_path[64];
};

static const struct aws_credentials *mfx_creds(void *userdata)
{
        return &((struct mfx *)userdata)->creds;
}

static const struct aws_credentials *mfx_creds_asg(void *userdata)
{
        return userdata;
}

static size_t count_bodies(struct kfake *fake, const char *needle)
{
        size_t n = 0;
        for (size_t i = 0; i < kfake_count(fake); i++) {
                const struct kfake_request *r = kfake_request(fake, i);
                n += r && r->body && strstr(r->body, needle);
        }
        return n;
}

/* A controller on its own loop against one scripted SQS answer (the same to every call) and a cluster with
 * no nodes; bus may be NULL. */
static void mfx_start(struct mfx *f, const char *answer, struct alert_bus *bus)
{
        _cleanup_free_ char *error = NULL, *kc = NULL;

        f->creds = (struct aws_credentials){ .access_key_id = (char *)"AKID",
                                             .secret_access_key = (char *)"secret" };
        assert_int_equal(kfake_start(&f->fake), 0);
        assert_int_equal(
            kfake_add(f->fake,
                      &(struct kfake_script){
                          .method = "POST", .path = "/", .status = 200, .body = answer, .sticky = true }),
            0);
        /* The Kubernetes side: an empty node list, and a watch that never says anything. */
        assert_int_equal(
            kfake_add(f->fake, &(struct kfake_script){ .method = "GET",
                                                       .path = "/api/v1/nodes",
                                                       .query_contains = "watch",
                                                       .status = 200,
                                                       .chunks = (const char *const[]){ "", NULL },
                                                       .sticky = true }),
            0);
        assert_int_equal(
            kfake_add(f->fake,
                      &(struct kfake_script){ .method = "GET",
                                              .path = "/api/v1/nodes",
                                              .status = 200,
                                              .body = "{\"metadata\": {\"resourceVersion\": \"1\"}, "
                                                      "\"items\": []}",
                                              .sticky = true }),
            0);
        kc = sim_server_kubeconfig(kfake_url(f->fake), "t");
        strcpy(f->kc_path, "/tmp/test-controller-kfake-XXXXXX");
        cfx_write(f->kc_path, kc);
        assert_int_equal(kube_config_load_file(f->kc_path, NULL, &f->kcfg, &error), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(kube_client_new(f->loop, f->kcfg, NULL, &f->kube), 0);
        _cleanup_free_ char *qurl = strprintf("%s/123456789012/q", kfake_url(f->fake));
        assert_int_equal(controller_new(f->loop, f->kube, bus,
                                        &(struct controller_options){ .queue_url = qurl,
                                                                      .region = "us-east-1",
                                                                      .credentials = mfx_creds,
                                                                      .credentials_userdata = f,
                                                                      .no_leader_election = true },
                                        &f->ctl),
                         0);
        assert_int_equal(controller_start(f->ctl), 0);
}

static void mfx_stop(struct mfx *f)
{
        controller_free(f->ctl);
        kube_client_free(f->kube);
        loop_free(f->loop);
        kube_config_free(f->kcfg);
        kfake_stop(f->fake);
        unlink(f->kc_path);
}

static void test_malformed_left_in_queue(void **state)
{
        struct mfx f = { 0 };
        struct controller_stats st;
        bool never = false;

        /* The same answer to every SQS call: each receive brings the two bad messages again. */
        mfx_start(&f, BAD_ANSWER, NULL);
        for (int i = 0; i < 2000; i++) {
                controller_stats(f.ctl, &st);
                if (cfx_left_unread(&st) >= 4 && count_bodies(f.fake, "rh-odd-2") >= 2)
                        break;
                loop_run_until(f.loop, &never, 2 * 1000);
        }
        controller_stats(f.ctl, &st);
        /* Counted, never deleted, hidden for the long timeout, and polling went on (never blocked). */
        assert_true(
            st.malformed[CONTROLLER_MALFORMED_BODY] + st.malformed[CONTROLLER_MALFORMED_UNRECOGNIZED] >= 4);
        assert_true(st.receives >= 2);
        assert_int_equal(st.deleted, 0);
        assert_int_equal(count_bodies(f.fake, "\"Id\":\"m0\""), 0); /* no DeleteMessageBatch entry */
        assert_true(count_bodies(f.fake, "\"VisibilityTimeout\":600") >= 2);
        assert_true(controller_ready(f.ctl));
        mfx_stop(&f);
}

/* Well-formed spot warnings the queue's sender may not make us act on (controller/trust.h): another
 * account's, one naming no account, another region's. */
#define SPOT_BODY(id, account, region)                                                             \
        "{\\\"id\\\": \\\"" id                                                                     \
        "\\\", \\\"detail-type\\\": \\\"EC2 Spot Instance Interruption Warning\\\", "              \
        "\\\"source\\\": \\\"aws.ec2\\\", " account "\\\"time\\\": \\\"2026-11-30T06:00:00Z\\\", " \
        "\\\"region\\\": \\\"" region "\\\", \\\"detail\\\": {\\\"instance-id\\\": "               \
        "\\\"i-0a00000000000000a\\\", \\\"instance-action\\\": \\\"terminate\\\"}}"
#define UNTRUSTED_ANSWER                                                                                   \
        "{\"Messages\": ["                                                                                 \
        "{\"MessageId\": \"m-foreign\", \"ReceiptHandle\": \"rh-foreign\", \"Body\": \"" SPOT_BODY(        \
            "e-1", "\\\"account\\\": \\\"999999999999\\\", ",                                              \
            "us-east-1") "\"},"                                                                            \
                         "{\"MessageId\": \"m-none\", \"ReceiptHandle\": \"rh-none\", \"Body\": "          \
                         "\"" SPOT_BODY("e-2", "",                                                         \
                                        "us-east-1") "\"},"                                                \
                                                     "{\"MessageId\": \"m-region\", \"ReceiptHandle\": "   \
                                                     "\"rh-region\", \"Body\": \"" SPOT_BODY(              \
                                                         "e-3", "\\\"account\\\": \\\"123456789012\\\", ", \
                                                         "eu-west-1") "\"}]}"

static void on_rejected_alert(const struct alert *a, void *userdata)
{
        unsigned *n = userdata;
        if (a->kind == ALERT_NOTICE_REJECTED)
                (*n)++;
}

static void test_untrusted_left_in_queue(void **state)
{
        struct mfx f = { 0 };
        struct controller_stats st;
        struct alert_bus *bus = NULL;
        unsigned alerts = 0;
        bool never = false;

        assert_int_equal(alert_bus_new(&bus), 0);
        assert_int_equal(alert_bus_add_sink(bus, on_rejected_alert, &alerts), 0);
        mfx_start(&f, UNTRUSTED_ANSWER, bus);
        for (int i = 0; i < 2000; i++) {
                controller_stats(f.ctl, &st);
                if (st.rejected[CONTROLLER_REJECT_FOREIGN_ACCOUNT] >= 2 &&
                    st.rejected[CONTROLLER_REJECT_NO_ACCOUNT] >= 2 &&
                    st.rejected[CONTROLLER_REJECT_FOREIGN_REGION] >= 2 &&
                    count_bodies(f.fake, "\"VisibilityTimeout\":600") >= 6)
                        break;
                loop_run_until(f.loop, &never, 2 * 1000);
        }
        controller_stats(f.ctl, &st);
        /* Each reason counted on every receive, nothing deleted, nothing taken in, each hidden for the long
         * timeout (the redrive policy's way), and alerted once per sender and reason, not per receive. */
        assert_true(st.rejected[CONTROLLER_REJECT_FOREIGN_ACCOUNT] >= 2);
        assert_true(st.rejected[CONTROLLER_REJECT_NO_ACCOUNT] >= 2);
        assert_true(st.rejected[CONTROLLER_REJECT_FOREIGN_REGION] >= 2);
        assert_int_equal(cfx_left_unread(&st), 0);
        assert_int_equal(st.deleted, 0);
        assert_int_equal(st.dispatch.notices, 0);
        assert_int_equal(count_bodies(f.fake, "\"Id\":\"m0\""), 0); /* no DeleteMessageBatch entry */
        assert_true(count_bodies(f.fake, "\"VisibilityTimeout\":600") >= 6);
        assert_int_equal(alerts, 3);
        mfx_stop(&f);
        alert_bus_free(bus);
}

static bool lifecycle_ended(struct cfx *f, void *ud)
{
        struct controller_stats st;
        controller_stats(f->ctl[0], &st);
        return st.lifecycle_completions + st.lifecycle_failures >= 1 && st.in_flight == 0;
}

/* A termination lifecycle action whose completion fails twice (Auto Scaling answering 500) is completed on
 * the third attempt, after the drain, rather than left to its hook's timeout; the message is deleted. */
static void test_lifecycle_completion_retried(void **state)
{
        struct cfx *f = cfx_new(
            "name: ctl-lc\nmode: controller\nbudget_seconds: 120\nnodes:\n"
            "  - {name: spot-a, zone: us-east-1a, capacity_type: spot, allocatable: {cpu: \"4\", memory: "
            "16Gi, pods: 50}}\n"
            "  - {name: od-a, zone: us-east-1a, allocatable: {cpu: \"4\", memory: 16Gi, pods: 50}}\n"
            "workloads:\n"
            "  - {name: web, kind: Deployment, replicas: 1, placement: {spot-a: 1}, shutdown_seconds: 1,\n"
            "     startup_seconds: 1}\n"
            "events:\n"
            "  - {at: 2, type: asg-lifecycle-terminate, node: spot-a}\n",
            20, NULL);
        static const char failure[] = "<ErrorResponse><Error><Type>Receiver</Type><Code>InternalFailure"
                                      "</Code><Message>try again</Message></Error><RequestId>r</RequestId>"
                                      "</ErrorResponse>";
        struct kfake *asg = NULL;
        struct controller_stats st;
        size_t completes = 0;

        assert_int_equal(kfake_start(&asg), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(
                    kfake_add(asg, &(struct kfake_script){ .method = "POST",
                                                           .path = "/",
                                                           .body_contains = "Action=CompleteLifecycleAction",
                                                           .status = 500,
                                                           .body = failure }),
                    0);
        /* Everything else (the heartbeats, the hook's description) answers an empty success. */
        assert_int_equal(
            kfake_add(asg, &(struct kfake_script){ .method = "POST",
                                                   .path = "/",
                                                   .status = 200,
                                                   .body = "<R><ResponseMetadata><RequestId>r"
                                                           "</RequestId></ResponseMetadata></R>",
                                                   .sticky = true }),
            0);
        struct controller_options o = cfx_options(f, "ctl-0", false);
        o.asg_endpoint = kfake_url(asg);
        cfx_controller(f, 0, &o);
        assert_true(cfx_run_until(f, lifecycle_ended, NULL, NULL));
        controller_stats(f->ctl[0], &st);
        assert_int_equal(st.lifecycle_completions, 1);
        assert_int_equal(st.lifecycle_retries, 2);
        assert_int_equal(st.lifecycle_failures, 0);
        for (size_t i = 0; i < kfake_count(asg); i++)
                if (strstr(kfake_request(asg, i)->body, "Action=CompleteLifecycleAction"))
                        completes++;
        assert_int_equal(completes, 3);
        /* Completed only once the drain was over. */
        assert_true(cfx_result_node(f, "spot-a", "drained_at") > 0);
        assert_int_equal(cfx_result_node(f, "spot-a", "pods_killed"), 0);
        assert_int_equal(st.deleted, 1);
        cfx_free(f);
        kfake_stop(asg);
}

/* ---- the Auto Scaling lifecycle client ---- */

static void on_asg(int error, const char *message, void *userdata)
{
        int *ret = userdata;
        *ret = error < 0 ? error : 1;
        if (message)
                assert_non_null(strstr(message, "ValidationError: No active Lifecycle Action"));
}

static void test_asg_client(void **state)
{
        struct notice n = { .kind = NOTICE_ASG_LIFECYCLE_TERMINATE,
                            .instance_id = "i-0a00000000000000a",
                            .asg_name = "my group",
                            .lifecycle_hook_name = "drain-hook",
                            .lifecycle_action_token = "tok-1" };
        struct aws_credentials creds = { .access_key_id = (char *)"AKID", .secret_access_key = (char *)"s" };
        _cleanup_free_ char *body = NULL;
        struct asg_client *c = NULL;
        struct loop *l = NULL;
        struct kfake *fake = NULL;
        int result = 0;
        bool never = false;

        assert_int_equal(asg_lifecycle_body(&n, "CompleteLifecycleAction", "CONTINUE", &body), 0);
        assert_string_equal(
            body, "Action=CompleteLifecycleAction&Version=2011-01-01&AutoScalingGroupName=my%20group"
                  "&LifecycleHookName=drain-hook&LifecycleActionToken=tok-1"
                  "&InstanceId=i-0a00000000000000a&LifecycleActionResult=CONTINUE");
        struct notice bad = n;
        bad.asg_name[0] = '\0';
        char *none = NULL;
        assert_int_equal(asg_lifecycle_body(&bad, "CompleteLifecycleAction", "CONTINUE", &none), -EINVAL);

        assert_int_equal(kfake_start(&fake), 0);
        assert_int_equal(
            kfake_answer(fake, "POST", "/", 200,
                         "<CompleteLifecycleActionResponse><ResponseMetadata><RequestId>r</RequestId>"
                         "</ResponseMetadata></CompleteLifecycleActionResponse>"),
            0);
        assert_int_equal(
            kfake_add(fake,
                      &(struct kfake_script){
                          .method = "POST",
                          .path = "/",
                          .status = 400,
                          .body = "<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError"
                                  "</Code><Message>No active Lifecycle Action found with token "
                                  "tok-1</Message></Error><RequestId>r</RequestId>"
                                  "</ErrorResponse>" }),
            0);
        assert_int_equal(loop_new(&l), 0);
        assert_int_equal(asg_client_new(l, kfake_url(fake), "us-east-1", mfx_creds_asg, &creds, &c), 0);
        assert_int_equal(asg_complete_lifecycle(c, &n, NULL, on_asg, &result), 0);
        for (int i = 0; i < 2000 && result == 0; i++)
                loop_run_until(l, &never, 2 * 1000);
        assert_int_equal(result, 1);
        const struct kfake_request *rq = kfake_request(fake, 0);
        assert_non_null(rq);
        assert_string_equal(rq->body, body);
        assert_non_null(strstr(rq->authorization, "/us-east-1/autoscaling/aws4_request"));

        result = 0;
        assert_int_equal(asg_heartbeat(c, &n, on_asg, &result), 0);
        for (int i = 0; i < 2000 && result == 0; i++)
                loop_run_until(l, &never, 2 * 1000);
        assert_int_equal(result, -EINVAL);
        assert_non_null(strstr(kfake_request(fake, 1)->body, "Action=RecordLifecycleActionHeartbeat"));
        assert_null(strstr(kfake_request(fake, 1)->body, "LifecycleActionResult"));

        asg_client_free(c);
        loop_free(l);
        kfake_stop(fake);
}

/* Two state changes of one instance, the later one received first (parallel receivers, a standard queue's
 * order): the earlier one is superseded, never handed to the dispatcher after the later one. */
#define STATE_BODY(id, time, state)                                                                       \
        "{\\\"id\\\": \\\"" id                                                                            \
        "\\\", \\\"detail-type\\\": \\\"EC2 Instance State-change Notification\\\", "                     \
        "\\\"source\\\": \\\"aws.ec2\\\", \\\"account\\\": \\\"123456789012\\\", \\\"time\\\": \\\"" time \
        "\\\", \\\"region\\\": \\\"us-east-1\\\", \\\"detail\\\": {\\\"instance-id\\\": "                 \
        "\\\"i-0a00000000000000a\\\", \\\"state\\\": \\\"" state "\\\"}}"
#define LATE_ANSWER                                                                                \
        "{\"Messages\": [{\"MessageId\": \"m-later\", \"ReceiptHandle\": \"rh-later\", \"Body\": " \
        "\"" STATE_BODY("e-later", "2026-11-30T06:05:00Z",                                         \
                        "shutting-down") "\"},"                                                    \
                                         "{\"MessageId\": \"m-earlier\", \"ReceiptHandle\": "      \
                                         "\"rh-earlier\", \"Body\": \"" STATE_BODY(                \
                                             "e-earlier", "2026-11-30T06:00:00Z", "stopping") "\"}]}"

static void test_earlier_notice_superseded(void **state)
{
        struct mfx f = { 0 };
        struct controller_stats st;
        bool never = false;

        mfx_start(&f, LATE_ANSWER, NULL);
        for (int i = 0; i < 2000; i++) {
                controller_stats(f.ctl, &st);
                if (st.superseded >= 2 && count_bodies(f.fake, "\"ReceiptHandle\":\"rh-earlier\"}") >= 1)
                        break;
                loop_run_until(f.loop, &never, 2 * 1000);
        }
        controller_stats(f.ctl, &st);
        /* Each answer: the later notice taken in, the earlier one not; the earlier one's message is deleted
         * (a DeleteMessageBatch entry ends with its handle; a visibility change's goes on), the later
         * one's left in the queue (its instance is no node here). */
        assert_true(st.superseded >= 2);
        assert_int_equal(st.dispatch.notices, st.superseded);
        assert_true(count_bodies(f.fake, "\"ReceiptHandle\":\"rh-earlier\"}") >= 1);
        assert_int_equal(count_bodies(f.fake, "\"ReceiptHandle\":\"rh-later\"}"), 0);
        assert_int_equal(cfx_left_unread(&st), 0);
        mfx_stop(&f);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lifecycle),
                cmocka_unit_test(test_lifecycle_completion_retried),
                cmocka_unit_test(test_finished_drain_captures_left_pods),
                cmocka_unit_test(test_access_denied),
                cmocka_unit_test(test_nonexistent_queue),
                cmocka_unit_test(test_repeated_failures),
                cmocka_unit_test(test_malformed_left_in_queue),
                cmocka_unit_test(test_untrusted_left_in_queue),
                cmocka_unit_test(test_earlier_notice_superseded),
                cmocka_unit_test(test_asg_client),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_WARNING);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
