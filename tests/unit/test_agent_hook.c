/* agent/hook: the agent's own lifecycle calls against a fake IMDS and Auto Scaling endpoint (one fake
 * server plays both): the instance role's credentials fetched from IMDS at the first call (not before),
 * CompleteLifecycleAction named by InstanceId alone, signed for autoscaling in the IMDS region with the
 * role's key; at most once per action; a failed heartbeat retried with backoff; a ValidationError not
 * retried; --dry-run sends nothing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/hook.h"
#include "kube_fake.h"
#include "spotdrain/core.h"

#define CREDS_JSON                                                                            \
        "{\"Code\":\"Success\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"ASIAROLEKEYEXAMPLE\"," \
        "\"SecretAccessKey\":\"role-secret\",\"Token\":\"role-session-token\","               \
        "\"Expiration\":\"2099-01-01T00:00:00Z\"}"
#define ASG_OK(action)                                                                               \
        "<" action "Response><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></" action \
        "Response>"

struct fx {
        struct kfake *fake;
        struct loop *loop;
        struct agent_hook *hook;
};

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(kfake_start(&f->fake), 0);
        assert_int_equal(kfake_add(f->fake, &(struct kfake_script){ .method = "PUT",
                                                                    .path = "/latest/api/token",
                                                                    .status = 200,
                                                                    .body = "imds-token",
                                                                    .sticky = true }),
                         0);
        assert_int_equal(
            kfake_add(f->fake, &(struct kfake_script){ .method = "GET",
                                                       .path = "/latest/meta-data/iam/security-credentials/",
                                                       .status = 200,
                                                       .body = "node-role",
                                                       .sticky = true }),
            0);
        assert_int_equal(
            kfake_add(f->fake,
                      &(struct kfake_script){ .method = "GET",
                                              .path = "/latest/meta-data/iam/security-credentials/node-role",
                                              .status = 200,
                                              .body = CREDS_JSON,
                                              .sticky = true }),
            0);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(agent_hook_new(f->loop,
                                        &(struct agent_hook_options){ .region = "eu-west-1",
                                                                      .imds_endpoint = kfake_url(f->fake),
                                                                      .asg_endpoint = kfake_url(f->fake),
                                                                      .node = "spot-a" },
                                        &f->hook),
                         0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;

        agent_hook_free(f->hook);
        loop_free(f->loop);
        kfake_stop(f->fake);
        free(f);
        return 0;
}

static struct notice action(const char *instance)
{
        struct notice n = { .kind = NOTICE_ASG_LIFECYCLE_TERMINATE,
                            .asg_name = "web group",
                            .lifecycle_hook_name = "drain-hook" };
        snprintf(n.instance_id, sizeof(n.instance_id), "%s", instance);
        return n;
}

static size_t posts(struct fx *f)
{
        size_t n = 0;
        for (long i = 0; (i = kfake_find(f->fake, "POST", "/", (size_t)i)) >= 0; i++)
                n++;
        return n;
}

/* Runs the loop until the stats say what want says (a bound of 10 s, never a fixed wait). */
static void run_until(struct fx *f, unsigned completions, unsigned heartbeats)
{
        struct agent_hook_stats st;
        bool never = false;

        for (int i = 0; i < 5000; i++) {
                agent_hook_stats(f->hook, &st);
                if (st.completions >= completions && st.heartbeats >= heartbeats)
                        return;
                loop_run_until(f->loop, &never, 2 * 1000);
        }
        fail_msg("lifecycle calls did not finish: %u completions, %u heartbeats", st.completions,
                 st.heartbeats);
}

static void test_complete_by_instance(void **state)
{
        struct fx *f = *state;
        struct notice n = action("i-0a00000000000000a");
        struct agent_hook_stats st;
        const struct kfake_request *rq;
        long at;

        /* Nothing is asked of IMDS before the first call. */
        assert_int_equal(kfake_count(f->fake), 0);
        assert_int_equal(kfake_answer(f->fake, "POST", "/", 200, ASG_OK("CompleteLifecycleAction")), 0);
        assert_int_equal(agent_hook_complete(f->hook, &n), 0);
        run_until(f, 1, 0);

        assert_true(kfake_find(f->fake, "GET", "/latest/meta-data/iam/security-credentials/node-role", 0) >=
                    0);
        at = kfake_find(f->fake, "POST", "/", 0);
        assert_true(at >= 0);
        rq = kfake_request(f->fake, (size_t)at);
        assert_string_equal(rq->body, "Action=CompleteLifecycleAction&Version=2011-01-01"
                                      "&AutoScalingGroupName=web%20group&LifecycleHookName=drain-hook"
                                      "&InstanceId=i-0a00000000000000a&LifecycleActionResult=CONTINUE");
        assert_null(strstr(rq->body, "LifecycleActionToken"));
        assert_non_null(strstr(rq->authorization, "Credential=ASIAROLEKEYEXAMPLE/"));
        assert_non_null(strstr(rq->authorization, "/eu-west-1/autoscaling/aws4_request"));
        assert_null(strstr(rq->authorization, "role-secret"));

        /* At most once: the same action again sends nothing. */
        assert_int_equal(agent_hook_complete(f->hook, &n), 0);
        bool never = false;
        for (int i = 0; i < 20; i++)
                loop_run_until(f->loop, &never, 1000);
        assert_int_equal(posts(f), 1);
        agent_hook_stats(f->hook, &st);
        assert_int_equal(st.completions, 1);
        assert_int_equal(st.failures, 0);

        /* An action without its group cannot be named. */
        struct notice bad = n;
        bad.asg_name[0] = '\0';
        assert_int_equal(agent_hook_complete(f->hook, &bad), -EINVAL);
}

static void test_heartbeat_retried(void **state)
{
        struct fx *f = *state;
        struct notice n = action("i-0b00000000000000b");
        struct agent_hook_stats st;

        assert_int_equal(kfake_answer(f->fake, "POST", "/", 500,
                                      "<ErrorResponse><Error><Code>InternalFailure</Code><Message>try "
                                      "again</Message></Error></ErrorResponse>"),
                         0);
        assert_int_equal(kfake_answer(f->fake, "POST", "/", 200, ASG_OK("RecordLifecycleActionHeartbeat")),
                         0);
        assert_int_equal(agent_hook_heartbeat(f->hook, &n), 0);
        run_until(f, 0, 1);
        agent_hook_stats(f->hook, &st);
        assert_int_equal(st.retries, 1);
        assert_int_equal(posts(f), 2);
        const struct kfake_request *rq = kfake_request(f->fake, (size_t)kfake_find(f->fake, "POST", "/", 0));
        assert_non_null(strstr(rq->body, "Action=RecordLifecycleActionHeartbeat"));
        assert_non_null(strstr(rq->body, "&InstanceId=i-0b00000000000000b"));
        assert_null(strstr(rq->body, "LifecycleActionResult"));
}

static void test_validation_error_not_retried(void **state)
{
        struct fx *f = *state;
        struct notice n = action("i-0c00000000000000c");
        struct agent_hook_stats st;
        bool never = false;

        assert_int_equal(kfake_answer(f->fake, "POST", "/", 400,
                                      "<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code>"
                                      "<Message>No active Lifecycle Action found with instance ID "
                                      "i-0c00000000000000c</Message></Error></ErrorResponse>"),
                         0);
        assert_int_equal(agent_hook_complete(f->hook, &n), 0);
        for (int i = 0; i < 5000 && posts(f) < 1; i++)
                loop_run_until(f->loop, &never, 2 * 1000);
        for (int i = 0; i < 50; i++)
                loop_run_until(f->loop, &never, 1000);
        agent_hook_stats(f->hook, &st);
        assert_int_equal(posts(f), 1);
        assert_int_equal(st.retries, 0);
        assert_int_equal(st.completions, 0);
        /* Auto Scaling has no such action: it is not asked again. */
        assert_int_equal(agent_hook_complete(f->hook, &n), 0);
        for (int i = 0; i < 20; i++)
                loop_run_until(f->loop, &never, 1000);
        assert_int_equal(posts(f), 1);
}

static void test_dry_run_sends_nothing(void **state)
{
        struct fx *f = *state;
        struct notice n = action("i-0d00000000000000d");
        bool never = false;

        dry_run_enable(NULL, NULL);
        assert_int_equal(agent_hook_complete(f->hook, &n), 0);
        assert_int_equal(agent_hook_heartbeat(f->hook, &n), 0);
        for (int i = 0; i < 20; i++)
                loop_run_until(f->loop, &never, 1000);
        dry_run_disable();
        /* Not even the credentials are fetched. */
        assert_int_equal(kfake_count(f->fake), 0);
}

static void test_record(void **state)
{
        struct notice n = action("i-0a00000000000000a");
        _cleanup_free_ char *r = NULL;

        assert_int_equal(agent_hook_record(&n, &r), 0);
        assert_string_equal(r, "web group/drain-hook/i-0a00000000000000a");
        n.instance_id[0] = '\0';
        char *none = NULL;
        assert_int_equal(agent_hook_record(&n, &none), -EINVAL);
        assert_null(none);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_complete_by_instance, setup, teardown),
                cmocka_unit_test_setup_teardown(test_heartbeat_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_validation_error_not_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dry_run_sends_nothing, setup, teardown),
                cmocka_unit_test(test_record),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
