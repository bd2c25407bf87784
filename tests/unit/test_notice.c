/* The notice normalizer against every fixture form (../shared/fixtures, or $SPOTDRAIN_FIXTURES), the time
 * forms AWS writes, and malformed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "spotdrain/notice.h"
#include "spotdrain/util.h"

#define IID "i-0abcd1234ef567890"

static uint64_t t(const char *s)
{
        uint64_t u = 0;
        assert_int_equal(notice_parse_time(s, &u), 0);
        return u;
}

static char *fixture(const char *rel, size_t *ret_len)
{
        const char *dir = getenv("SPOTDRAIN_FIXTURES") ?: "../shared/fixtures";
        _cleanup_free_ char *path = strprintf("%s/%s", dir, rel);
        assert_non_null(path);
        char *data = NULL;
        size_t len = 0;
        int r = read_file_full(path, 1 << 20, &data, &len);
        if (r < 0)
                fail_msg("cannot read fixture %s: %s (set SPOTDRAIN_FIXTURES)", path, strerror(-r));
        if (ret_len)
                *ret_len = len;
        return data;
}

/* Parses a fixture; expects success with `want` notices. */
static struct notice *parse_fixture(const char *rel, const struct notice_parse_opts *opts, size_t want)
{
        size_t len, n = 99;
        _cleanup_free_ char *data = fixture(rel, &len);
        struct notice *v = NULL;
        char reason[256];
        int r = notice_parse(data, len, opts, &v, &n, reason, sizeof(reason));
        if (r < 0)
                fail_msg("%s: %d %s", rel, r, reason);
        assert_int_equal(n, want);
        return v;
}

static int parse_str(const char *s, const struct notice_parse_opts *opts, struct notice **v, size_t *n,
                     char *reason, size_t size)
{
        return notice_parse(s, strlen(s), opts, v, n, reason, size);
}

static const struct notice_parse_opts imds_opts = {
        .instance_id = IID, .now_usec = 1715682115000000ULL, /* 2024-05-14T10:21:55Z */
};

static void test_spot_eventbridge(void **state)
{
        _cleanup_free_ struct notice *v =
            parse_fixture("eventbridge/spot-interruption-warning.json", NULL, 1);
        assert_int_equal(v[0].kind, NOTICE_SPOT_INTERRUPTION);
        assert_string_equal(v[0].instance_id, IID);
        assert_string_equal(v[0].source, "sqs");
        assert_int_equal(v[0].notice_time, t("2024-05-14T10:21:53Z"));
        assert_int_equal(v[0].deadline, t("2024-05-14T10:23:53Z"));
        assert_string_equal(v[0].action, "terminate");
        assert_string_equal(v[0].region, "us-east-1");
        assert_string_equal(v[0].event_id, "1e5527d7-bb36-4607-3370-4164db56a40e");
        assert_string_equal(v[0].asg_name, "");
        assert_int_equal(v[0].start_time, 0);

        _cleanup_free_ char *json = NULL;
        assert_int_equal(notice_format_json(&v[0], &json), 0);
        assert_string_equal(json,
                            "{\"kind\":\"spot-interruption\",\"instance_id\":\"" IID "\",\"source\":\"sqs\","
                            "\"notice_time\":\"2024-05-14T10:21:53Z\",\"deadline\":\"2024-05-14T10:23:53Z\","
                            "\"action\":\"terminate\",\"region\":\"us-east-1\",\"account\":\"123456789012\","
                            "\"event_id\":\"1e5527d7-bb36-4607-3370-4164db56a40e\"}");
        _cleanup_free_ char *human = NULL;
        assert_int_equal(notice_format_human(&v[0], &human), 0);
        assert_non_null(
            strstr(human, "spot-interruption " IID " (terminate): deadline 2024-05-14T10:23:53Z"));
}

static void test_sns_equals_bare_and_duplicates(void **state)
{
        _cleanup_free_ struct notice *bare =
            parse_fixture("eventbridge/spot-interruption-warning.json", NULL, 1);
        _cleanup_free_ struct notice *again =
            parse_fixture("eventbridge/spot-interruption-warning.json", NULL, 1);
        _cleanup_free_ struct notice *sns = parse_fixture("eventbridge/sns-wrapped-spot.json", NULL, 1);
        assert_memory_equal(bare, sns, sizeof(*bare));
        assert_string_equal(bare[0].event_id, again[0].event_id);

        /* The Body of a received message (as the SQS client hands it over) is the same notice. */
        _cleanup_free_ char *resp = fixture("sqs/receive-message.response.json", NULL);
        cJSON *root = cJSON_Parse(resp);
        assert_non_null(root);
        const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(root, "Messages");
        const char *body0 =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, 0), "Body")->valuestring;
        const char *body1 =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(msgs, 1), "Body")->valuestring;
        struct notice *v = NULL;
        size_t n = 0;
        assert_int_equal(parse_str(body0, NULL, &v, &n, NULL, 0), 0);
        assert_int_equal(n, 1);
        assert_memory_equal(v, bare, sizeof(*v));
        free(v);
        _cleanup_free_ struct notice *direct =
            parse_fixture("eventbridge/asg-lifecycle-direct-sqs.json", NULL, 1);
        assert_int_equal(parse_str(body1, NULL, &v, &n, NULL, 0), 0);
        assert_int_equal(n, 1);
        assert_memory_equal(v, direct, sizeof(*v));
        free(v);
        cJSON_Delete(root);

        /* The whole answer is refused with a pointer to what to do instead. */
        char reason[256];
        v = NULL;
        assert_int_equal(parse_str(resp, NULL, &v, &n, reason, sizeof(reason)), -EOPNOTSUPP);
        assert_non_null(strstr(reason, "one message Body at a time"));
        assert_null(v);
}

static void test_rebalance_eventbridge(void **state)
{
        _cleanup_free_ struct notice *v =
            parse_fixture("eventbridge/rebalance-recommendation.json", NULL, 1);
        assert_int_equal(v[0].kind, NOTICE_REBALANCE_RECOMMENDATION);
        assert_string_equal(v[0].instance_id, IID);
        assert_int_equal(v[0].notice_time, t("2024-05-14T10:15:00Z"));
        assert_int_equal(v[0].deadline, 0);
        assert_string_equal(v[0].action, "");
        assert_string_equal(v[0].event_id, "5d5555d5-dd55-5555-5555-5555dd55d55d");
        _cleanup_free_ char *json = NULL;
        assert_int_equal(notice_format_json(&v[0], &json), 0);
        assert_non_null(strstr(json, "\"deadline\":null"));
        assert_null(strstr(json, "\"action\""));
}

static void test_state_change(void **state)
{
        _cleanup_free_ struct notice *v =
            parse_fixture("eventbridge/instance-state-change-stopping.json", NULL, 1);
        assert_int_equal(v[0].kind, NOTICE_STATE_CHANGE);
        assert_string_equal(v[0].instance_id, "i-0fedcba9876543210");
        assert_string_equal(v[0].action, "stopping");
        assert_int_equal(v[0].notice_time, t("2024-05-14T10:23:55Z"));
        assert_int_equal(v[0].deadline, v[0].notice_time);
        assert_string_equal(v[0].event_id, "7bf73129-1428-4cd3-a780-95db273d1602");

        _cleanup_free_ struct notice *w =
            parse_fixture("eventbridge/instance-state-change-terminated.json", NULL, 1);
        assert_string_equal(w[0].action, "terminated");
        assert_string_equal(w[0].instance_id, IID);
        assert_int_equal(w[0].deadline, t("2024-05-14T10:24:41Z"));

        /* running: recognized, nothing to act on */
        struct notice *x = NULL;
        size_t n = 9;
        char reason[256];
        assert_int_equal(
            parse_str("{\"version\":\"0\",\"id\":\"a\",\"detail-type\":\"EC2 Instance State-change "
                      "Notification\",\"source\":\"aws.ec2\",\"time\":\"2024-05-14T10:23:55Z\","
                      "\"detail\":{\"instance-id\":\"" IID "\",\"state\":\"running\"}}",
                      NULL, &x, &n, reason, sizeof(reason)),
            0);
        assert_int_equal(n, 0);
        assert_null(x);
        assert_non_null(strstr(reason, "'running'"));
}

static void test_health(void **state)
{
        _cleanup_free_ struct notice *v =
            parse_fixture("eventbridge/aws-health-scheduled-change.json", NULL, 1);
        assert_int_equal(v[0].kind, NOTICE_SCHEDULED_CHANGE);
        assert_string_equal(v[0].instance_id, IID);
        assert_string_equal(v[0].action, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED");
        assert_int_equal(v[0].notice_time, t("2024-05-14T06:27:57Z"));
        assert_int_equal(v[0].start_time, t("2024-05-28T06:00:00Z"));
        assert_int_equal(v[0].deadline, v[0].start_time);
        assert_int_equal(v[0].end_time, t("2024-05-28T07:00:00Z"));
        assert_string_equal(v[0].state, "upcoming");
        assert_string_equal(v[0].region, "us-east-1");
        /* The event's own id (eventArn), the same in its closing message, not the message's. */
        assert_string_equal(v[0].event_id,
                            "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED_8f0e4c3b-1a2d-4e5f-9a8b-7c6d5e4f3a21");

        /* Several instances, one repeated, one entity that is not an instance: one notice per instance. */
        static const char multi[] =
            "{\"id\":\"h1\",\"detail-type\":\"AWS Health Event\",\"source\":\"aws.health\","
            "\"time\":\"2024-05-14T06:27:57Z\",\"region\":\"us-east-1\",\"detail\":{\"service\":\"EC2\","
            "\"eventTypeCategory\":\"scheduledChange\",\"eventTypeCode\":\"AWS_EC2_SYSTEM_REBOOT_"
            "MAINTENANCE_"
            "SCHEDULED\",\"eventRegion\":\"eu-west-1\",\"startTime\":\"Sat, 05 Jun 2016 15:10:09 GMT\","
            "\"affectedEntities\":[{\"entityValue\":\"i-0abcd1234ef567890\"},{\"entityValue\":\"vol-0123\"},"
            "{\"entityValue\":\"i-01234567\"},{\"entityValue\":\"i-0abcd1234ef567890\"}]}}";
        struct notice *w = NULL;
        size_t n = 0;
        assert_int_equal(parse_str(multi, NULL, &w, &n, NULL, 0), 0);
        assert_int_equal(n, 2);
        assert_string_equal(w[0].instance_id, IID);
        assert_string_equal(w[1].instance_id, "i-01234567");
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(w[i].event_id, "h1");
                assert_string_equal(w[i].region, "eu-west-1");
                assert_int_equal(w[i].deadline, t("2016-06-05T15:10:09Z"));
                assert_int_equal(w[i].end_time, 0);
                assert_string_equal(w[i].state, "");
        }
        _cleanup_free_ char *json = NULL;
        assert_int_equal(notice_format_json(&w[0], &json), 0);
        assert_non_null(strstr(json, "\"start_time\":\"2016-06-05T15:10:09Z\""));
        assert_null(strstr(json, "end_time"));
        free(w);

        /* Entities naming no instance: `resources` stands in. */
        static const char res[] =
            "{\"id\":\"h3\",\"detail-type\":\"AWS Health Event\",\"source\":\"aws.health\","
            "\"time\":\"2024-05-14T06:27:57Z\",\"resources\":[\"i-01234567\"],\"detail\":{"
            "\"service\":\"EC2\",\"eventTypeCategory\":\"scheduledChange\",\"eventTypeCode\":"
            "\"X\",\"startTime\":\"Tue, 28 May 2024 06:00:00 GMT\",\"affectedEntities\":[]}}";
        w = NULL;
        assert_int_equal(parse_str(res, NULL, &w, &n, NULL, 0), 0);
        assert_int_equal(n, 1);
        assert_string_equal(w[0].instance_id, "i-01234567");
        assert_string_equal(w[0].region, "");
        free(w);

        /* Another category: nothing to do. */
        static const char issue[] =
            "{\"id\":\"h2\",\"detail-type\":\"AWS Health Event\",\"source\":\"aws.health\","
            "\"time\":\"2024-05-14T06:27:57Z\",\"detail\":{\"service\":\"EC2\","
            "\"eventTypeCategory\":\"issue\"}}";
        char reason[256];
        w = NULL;
        assert_int_equal(parse_str(issue, NULL, &w, &n, reason, sizeof(reason)), 0);
        assert_int_equal(n, 0);
        assert_non_null(strstr(reason, "not an EC2 scheduled change"));
}

static void test_asg(void **state)
{
        _cleanup_free_ struct notice *v = parse_fixture("eventbridge/asg-lifecycle-terminate.json", NULL, 1);
        assert_int_equal(v[0].kind, NOTICE_ASG_LIFECYCLE_TERMINATE);
        assert_string_equal(v[0].instance_id, IID);
        assert_string_equal(v[0].event_id, "782d5b4c-0f6f-1fd6-9d62-ecf6aed0a470");
        assert_string_equal(v[0].asg_name, "eks-spot-ng-1");
        assert_string_equal(v[0].lifecycle_hook_name, "spotguard-terminate");
        assert_string_equal(v[0].lifecycle_action_token, "0befcbdb-6ecd-498a-9ff7-ae9b54447cd6");
        assert_string_equal(v[0].region, "us-east-1");
        assert_string_equal(v[0].account, "123456789012"); /* the event's, not the detail's */
        assert_int_equal(v[0].notice_time, t("2024-05-14T10:22:05Z"));
        assert_int_equal(v[0].deadline, v[0].notice_time + NOTICE_ASG_DEFAULT_DEADLINE_USEC);
        assert_string_equal(v[0].action, "");

        struct notice_parse_opts o = { .asg_deadline_usec = 300 * 1000000ULL, .region = "eu-central-1" };
        _cleanup_free_ struct notice *d = parse_fixture("eventbridge/asg-lifecycle-direct-sqs.json", &o, 1);
        assert_int_equal(d[0].kind, NOTICE_ASG_LIFECYCLE_TERMINATE);
        assert_string_equal(d[0].instance_id, IID);
        assert_string_equal(d[0].event_id, "3775fac9-93c3-7ead-8713-159816566000");
        assert_string_equal(d[0].lifecycle_action_token, "b4dd0f5b-0ef2-4479-9dad-6c55f027000e");
        assert_string_equal(d[0].asg_name, "eks-spot-ng-1");
        assert_string_equal(d[0].lifecycle_hook_name, "spotguard-terminate");
        assert_string_equal(d[0].source, "sqs");
        assert_string_equal(d[0].region, "eu-central-1");  /* the message names none */
        assert_string_equal(d[0].account, "123456789012"); /* AccountId */
        assert_int_equal(d[0].notice_time, t("2024-05-14T10:22:05.318Z"));
        assert_int_equal(d[0].notice_time % 1000000ULL, 318000);
        assert_int_equal(d[0].deadline, d[0].notice_time + 300 * 1000000ULL);

        _cleanup_free_ struct notice *x = parse_fixture("eventbridge/asg-test-notification.json", NULL, 1);
        assert_int_equal(x[0].kind, NOTICE_ASG_TEST_NOTIFICATION);
        assert_string_equal(x[0].instance_id, "");
        assert_string_equal(x[0].event_id, "f20fbb34-77f8-11e5-9842-63a2c2b9270f");
        assert_string_equal(x[0].asg_name, "eks-spot-ng-1");
        assert_string_equal(x[0].region, "us-east-1"); /* from AutoScalingGroupARN */
        assert_string_equal(x[0].account, "123456789012");
        assert_int_equal(x[0].deadline, 0);
        _cleanup_free_ char *json = NULL;
        assert_int_equal(notice_format_json(&x[0], &json), 0);
        assert_null(strstr(json, "instance_id"));
        assert_non_null(strstr(json, "\"kind\":\"asg-test-notification\""));

        /* A launch hook without its group or token is malformed (it could not be completed); an unknown
         * transition is not a notice. */
        struct notice *w = NULL;
        size_t n = 5;
        char reason[256];
        assert_int_equal(parse_str("{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_LAUNCHING\","
                                   "\"EC2InstanceId\":\"" IID "\"}",
                                   NULL, &w, &n, reason, sizeof(reason)),
                         -EBADMSG);
        assert_non_null(strstr(reason, "LifecycleHookName"));
        assert_int_equal(parse_str("{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_EXPLODING\"}", NULL,
                                   &w, &n, reason, sizeof(reason)),
                         -EOPNOTSUPP);
        assert_non_null(strstr(reason, "unknown lifecycle transition 'autoscaling:EC2_INSTANCE_EXPLODING'"));
}

static void test_imds_spot(void **state)
{
        static const struct {
                const char *file, *action, *time;
        } cases[] = {
                { "imds/spot-instance-action-terminate.json", "terminate", "2024-05-14T10:23:53Z" },
                { "imds/spot-instance-action-stop.json", "stop", "2024-05-14T10:23:53Z" },
                { "imds/spot-instance-action-hibernate.json", "hibernate", "2024-05-14T10:21:53Z" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                /* detected, and told */
                for (int told = 0; told < 2; told++) {
                        struct notice_parse_opts o = imds_opts;
                        if (told)
                                o.imds_path = "/latest/meta-data/spot/instance-action";
                        _cleanup_free_ struct notice *v = parse_fixture(cases[i].file, &o, 1);
                        assert_int_equal(v[0].kind, NOTICE_SPOT_INTERRUPTION);
                        assert_string_equal(v[0].instance_id, IID);
                        assert_string_equal(v[0].source, "imds");
                        assert_string_equal(v[0].action, cases[i].action);
                        assert_int_equal(v[0].deadline, t(cases[i].time)); /* the action's own time */
                        assert_int_equal(v[0].notice_time, imds_opts.now_usec);
                        assert_string_equal(v[0].region, "");
                        assert_true(startswith(v[0].event_id, "imds:spot/instance-action:" IID ":"));
                }
        }

        /* An instance-action document with a field an SNS envelope has ("Type", but neither TopicArn nor
         * MessageId) is still read as IMDS: its source says so, and without an instance ID it names none
         * (fuzz/regressions/fuzz_notice: it was read as IMDS and called a queue's, whose notices always
         * name their instance). */
        struct notice *y = NULL;
        size_t ny = 0;
        char why[256];
        struct notice_parse_opts queue = { .now_usec = imds_opts.now_usec };
        assert_int_equal(
            parse_str("{\"action\":\"terminate\",\"time\":\"2024-05-14T10:23:53Z\",\"Type\":\"x\"}", &queue,
                      &y, &ny, why, sizeof(why)),
            0);
        assert_int_equal(ny, 1);
        assert_string_equal(y[0].source, "imds");
        assert_string_equal(y[0].instance_id, "");
        free(y);

        /* Polled again later: a new notice time, the same id. */
        struct notice_parse_opts later = imds_opts;
        later.now_usec += 5000000ULL;
        _cleanup_free_ struct notice *p1 =
            parse_fixture("imds/spot-instance-action-stop.json", &imds_opts, 1);
        _cleanup_free_ struct notice *p2 = parse_fixture("imds/spot-instance-action-stop.json", &later, 1);
        assert_int_not_equal(p1[0].notice_time, p2[0].notice_time);
        assert_string_equal(p1[0].event_id, p2[0].event_id);

        /* termination-time is the same interruption, with the same id */
        _cleanup_free_ struct notice *a =
            parse_fixture("imds/spot-instance-action-terminate.json", &imds_opts, 1);
        _cleanup_free_ struct notice *b = parse_fixture("imds/spot-termination-time.txt", &imds_opts, 1);
        assert_memory_equal(a, b, sizeof(*a));

        /* No instance given: the notice is whole but for its instance, which is absent. */
        size_t len, n;
        _cleanup_free_ char *data = fixture("imds/spot-instance-action-terminate.json", &len);
        struct notice *v = NULL;
        assert_int_equal(notice_parse(data, len, NULL, &v, &n, NULL, 0), 0);
        assert_int_equal(n, 1);
        assert_int_equal(v[0].kind, NOTICE_SPOT_INTERRUPTION);
        assert_string_equal(v[0].instance_id, "");
        assert_int_equal(v[0].deadline, a[0].deadline);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(notice_format_json(&v[0], &text), 0);
        assert_null(strstr(text, "instance_id"));
        free(v);
        v = NULL;

        /* The caller can name the source. */
        struct notice_parse_opts o = imds_opts;
        o.source = "sim";
        assert_int_equal(notice_parse(data, len, &o, &v, &n, NULL, 0), 0);
        assert_string_equal(v[0].source, "sim");
        free(v);
}

static void test_imds_rebalance_and_lifecycle(void **state)
{
        _cleanup_free_ struct notice *v = parse_fixture("imds/rebalance-recommendation.json", &imds_opts, 1);
        assert_int_equal(v[0].kind, NOTICE_REBALANCE_RECOMMENDATION);
        assert_int_equal(v[0].notice_time, t("2024-05-14T10:15:00Z"));
        assert_int_equal(v[0].deadline, 0);
        assert_string_equal(v[0].source, "imds");

        _cleanup_free_ struct notice *w =
            parse_fixture("imds/autoscaling-target-lifecycle-state.txt", &imds_opts, 1);
        assert_int_equal(w[0].kind, NOTICE_ASG_LIFECYCLE_TERMINATE);
        assert_string_equal(w[0].instance_id, IID);
        assert_int_equal(w[0].notice_time, imds_opts.now_usec);
        assert_int_equal(w[0].deadline, imds_opts.now_usec + NOTICE_ASG_DEFAULT_DEADLINE_USEC);

        struct notice_parse_opts o = imds_opts;
        o.imds_path = "autoscaling/target-lifecycle-state";
        struct notice *x = NULL;
        size_t n = 7;
        char reason[256];
        assert_int_equal(parse_str("InService\n", &o, &x, &n, reason, sizeof(reason)), 0);
        assert_int_equal(n, 0);
        assert_non_null(strstr(reason, "InService"));
        assert_int_equal(parse_str("Exploded", &o, &x, &n, reason, sizeof(reason)), -EOPNOTSUPP);
}

static void test_imds_scheduled(void **state)
{
        _cleanup_free_ struct notice *v = parse_fixture("imds/scheduled-events.json", &imds_opts, 1);
        assert_int_equal(v[0].kind, NOTICE_SCHEDULED_CHANGE);
        assert_string_equal(v[0].instance_id, IID);
        assert_string_equal(v[0].action, "system-reboot");
        assert_string_equal(v[0].event_id, "instance-event-0d59937288b749b32");
        assert_string_equal(v[0].state, "active");
        assert_int_equal(v[0].start_time, t("2024-05-28T06:00:00Z"));
        assert_int_equal(v[0].deadline, v[0].start_time);
        assert_int_equal(v[0].end_time, t("2024-05-28T08:00:00Z"));
        assert_int_equal(v[0].notice_time, imds_opts.now_usec);

        _cleanup_free_ struct notice *d =
            parse_fixture("imds/scheduled-events-with-deadline.json", &imds_opts, 1);
        assert_string_equal(d[0].action, "instance-stop");
        assert_string_equal(d[0].event_id, "instance-event-1234567890abcdef0");

        struct notice_parse_opts o = imds_opts;
        o.imds_path = "events/maintenance/history";
        _cleanup_free_ struct notice *h = parse_fixture("imds/scheduled-events-history.json", &o, 2);
        assert_string_equal(h[0].state, "canceled");
        assert_int_equal(h[0].start_time, t("21 Jan 2019 09:00:43 GMT"));
        assert_int_equal(h[0].start_time, t("2019-01-21T09:00:43Z"));
        assert_int_equal(h[0].end_time, t("2019-01-21T09:17:23Z"));
        assert_string_equal(h[1].state, "completed");
        assert_int_equal(h[1].start_time, t("2019-01-29T09:00:43Z"));

        /* No events: an empty array, or (told the path) an empty body. Needs no instance. */
        struct notice *x = NULL;
        size_t n = 3;
        char reason[256];
        assert_int_equal(parse_str("[ ]", NULL, &x, &n, reason, sizeof(reason)), 0);
        assert_int_equal(n, 0);
        o.imds_path = "events/maintenance/scheduled";
        o.instance_id = NULL;
        assert_int_equal(parse_str("", &o, &x, &n, reason, sizeof(reason)), 0);
        assert_int_equal(n, 0);
        assert_null(x);
}

static void test_times(void **state)
{
        uint64_t u;
        assert_int_equal(t("2024-05-14T10:21:53Z"), 1715682113000000ULL);
        assert_int_equal(t("2024-05-14T10:22:05.318Z"), 1715682125318000ULL);
        assert_int_equal(t("2024-05-14T12:21:53+02:00"), 1715682113000000ULL);
        assert_int_equal(t("Tue, 28 May 2024 06:00:00 GMT"), t("2024-05-28T06:00:00Z"));
        assert_int_equal(t("28 May 2024 06:00:00 GMT"), t("2024-05-28T06:00:00Z"));
        assert_int_equal(t("4 Jun 2024 06:00:00 GMT"), t("2024-06-04T06:00:00Z"));
        assert_int_equal(t("29 Feb 2024 00:00:00 UTC"), t("2024-02-29T00:00:00Z"));
        static const char *const bad[] = {
                "",
                "2024-05-14T10:21:53",        /* no zone */
                "2024-05-14 10:21:53Z",       /* no T */
                "2024-02-30T00:00:00Z",       /* no such day */
                "2023-02-29T00:00:00Z",       /* not a leap year */
                "2024-05-14T24:00:00Z",       /* no such hour */
                "2024-05-14T10:21:53+1:2",    /* short offset */
                "2024-05-14T10:21:53.Z",      /* empty fraction */
                "2024-05-14T10:21:53Zjunk",   /* trailing */
                "1969-12-31T23:59:59Z",       /* before the epoch */
                "Tue, 28 May 2024 06:00:00",  /* no zone */
                "28 Foo 2024 06:00:00 GMT",   /* no such month */
                "32 May 2024 06:00:00 GMT",   /* no such day */
                "28 May 2024 06:00:00 PST",   /* not UTC */
                "28 May 24 06:00:00 GMT",     /* two-digit year */
                "Tue, 28 May 2024 06:00 GMT", /* no seconds */
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                if (notice_parse_time(bad[i], &u) != -EINVAL)
                        fail_msg("accepted '%s'", bad[i]);
}

static void test_instance_ids(void **state)
{
        assert_true(notice_instance_id_valid("i-0abcd1234ef567890"));
        assert_true(notice_instance_id_valid("i-01234567"));
        assert_false(notice_instance_id_valid("i-0123456"));            /* 7 */
        assert_false(notice_instance_id_valid("i-0abcd1234ef5678901")); /* 18 */
        assert_false(notice_instance_id_valid("i-0ABCD123"));
        assert_false(notice_instance_id_valid("i-0abcd12g"));
        assert_false(notice_instance_id_valid("vol-0abcd1234"));
        assert_false(notice_instance_id_valid(""));
        assert_false(notice_instance_id_valid(NULL));
        assert_false(notice_instance_id_valid("arn:aws:ec2:us-east-1a:instance/i-0abcd1234ef567890"));

        struct notice_parse_opts o = { .instance_id = "i-xyz" };
        struct notice *v = NULL;
        size_t n;
        assert_int_equal(parse_str("{\"noticeTime\":\"2024-05-14T10:15:00Z\"}", &o, &v, &n, NULL, 0),
                         -EINVAL);
        o = (struct notice_parse_opts){ .imds_path = "spot/nothing" };
        assert_int_equal(parse_str("{}", &o, &v, &n, NULL, 0), -EINVAL);
        o = (struct notice_parse_opts){ .region = "us-east-1\n" };
        assert_int_equal(parse_str("{}", &o, &v, &n, NULL, 0), -EINVAL);
        o = (struct notice_parse_opts){ .source = "a-source-name-that-is-too-long" };
        assert_int_equal(parse_str("{}", &o, &v, &n, NULL, 0), -EINVAL);
}

#define SPOT_HEAD \
        "{\"id\":\"x1\",\"detail-type\":\"EC2 Spot Instance Interruption Warning\",\"source\":\"aws.ec2\","

static void test_malformed(void **state)
{
        static const struct {
                const char *body;
                int err;
                const char *reason;
        } cases[] = {
                { "{\"detail-type\": oops}", -EBADMSG, "not JSON at byte 16" },
                { "{\"a\":1} {\"b\":2}", -EBADMSG, "not JSON at byte 8 (data after the JSON value)" },
                { "   \n", -EBADMSG, "empty body" },
                { "\"a string\"", -EBADMSG, "a JSON string, not an object" },
                { SPOT_HEAD
                  "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{\"instance-action\":\"terminate\"}}",
                  -EBADMSG, "EventBridge event without detail.instance-id" },
                { SPOT_HEAD "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{\"instance-id\":\"i-nothex00\","
                            "\"instance-action\":\"terminate\"}}",
                  -EBADMSG, "detail.instance-id 'i-nothex00' is not an EC2 instance ID" },
                { SPOT_HEAD "\"time\":\"yesterday\",\"detail\":{}}", -EBADMSG,
                  "time 'yesterday' is not a time" },
                { SPOT_HEAD "\"detail\":{}}", -EBADMSG, "EventBridge event without time" },
                { SPOT_HEAD "\"account\":\"12345\",\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{}}",
                  -EBADMSG, "EventBridge event: account '12345' is not a 12-digit account id" },
                { SPOT_HEAD "\"account\":12345,\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{}}", -EBADMSG,
                  "EventBridge event: account is not a string" },
                { "{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\",\"EC2InstanceId\":"
                  "\"" IID "\","
                  "\"LifecycleHookName\":\"h\",\"AutoScalingGroupName\":\"g\",\"LifecycleActionToken\":"
                  "\"t\","
                  "\"Time\":\"2024-05-14T10:21:53Z\",\"AccountId\":\"12345678901x\"}",
                  -EBADMSG, "AccountId '12345678901x' is not a 12-digit account id" },
                { SPOT_HEAD "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":[]}", -EBADMSG,
                  "non-object detail" },
                { SPOT_HEAD "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{\"instance-id\":\"" IID "\","
                            "\"instance-action\":\"explode\"}}",
                  -EBADMSG, "unknown detail.instance-action 'explode'" },
                { SPOT_HEAD "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{\"instance-id\":7}}", -EBADMSG,
                  "detail.instance-action" },
                { "{\"id\":\"x\",\"detail-type\":\"EC2 Fleet Error\",\"source\":\"aws.ec2fleet\","
                  "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{}}",
                  -EOPNOTSUPP, "unknown detail-type 'EC2 Fleet Error' from source 'aws.ec2fleet'" },
                { "{\"detail-type\":42}", -EBADMSG, "detail-type is not a string" },
                { "{\"hello\":\"world\"}", -EOPNOTSUPP, "unrecognized JSON object" },
                { "{\"Type\":\"Notification\",\"TopicArn\":\"arn:aws:sns:x\",\"Message\":\"{nope\"}",
                  -EBADMSG, "SNS Message: not JSON at byte " },
                { "{\"Type\":\"Notification\",\"TopicArn\":\"arn:aws:sns:x\"}", -EBADMSG,
                  "SNS notification without a Message string" },
                { "{\"Event\":\"autoscaling:EC2_INSTANCE_TERMINATE\",\"EC2InstanceId\":\"" IID "\"}",
                  -EOPNOTSUPP, "is not a lifecycle hook message" },
                { "{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\",\"EC2InstanceId\":"
                  "\"" IID "\","
                  "\"LifecycleHookName\":\"h\",\"AutoScalingGroupName\":\"g\",\"Time\":\"2024-05-14T10:22:"
                  "05Z\"}",
                  -EBADMSG, "Auto Scaling message without LifecycleActionToken" },
                { "{\"action\":\"terminate\",\"time\":\"soon\"}", -EBADMSG, "time 'soon' is not a time" },
                { "[{\"Code\":\"system-reboot\"}]", -EBADMSG, "without EventId" },
                { "[1]", -EBADMSG, "an event is a JSON number, not an object" },
                { SPOT_HEAD "\"time\":\"2024-05-14T10:21:53Z\",\"detail\":{\"instance-id\":\"" IID "\","
                            "\"instance-action\":\"terminate\"},\"region\":\"us\\u0001east\"}",
                  -EBADMSG, "region contains a control character" },
                { "{\"id\":\"h\",\"detail-type\":\"AWS Health Event\",\"source\":\"aws.health\","
                  "\"time\":\"2024-05-14T06:27:57Z\",\"detail\":{\"service\":\"EC2\",\"eventTypeCategory\":"
                  "\"scheduledChange\",\"eventTypeCode\":\"X\",\"startTime\":\"Tue, 28 May 2024 06:00:00 "
                  "GMT\","
                  "\"affectedEntities\":[{\"entityValue\":\"AWS_ACCOUNT\"}]}}",
                  -EBADMSG, "names no EC2 instance" },
        };
        struct notice_parse_opts o = { .instance_id = IID };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                struct notice *v = (struct notice *)&o; /* must stay untouched on failure */
                size_t n = 42;
                char reason[256];
                int r = parse_str(cases[i].body, &o, &v, &n, reason, sizeof(reason));
                if (r != cases[i].err || !strstr(reason, cases[i].reason))
                        fail_msg("case %zu: got %d '%s', want %d '%s'", i, r, reason, cases[i].err,
                                 cases[i].reason);
                assert_ptr_equal(v, &o);
                assert_int_equal(n, 42);
        }
}

static void test_limits(void **state)
{
        struct notice *v = NULL;
        size_t n;
        char reason[256];

        /* Larger than the limit: refused before reading. */
        _cleanup_free_ char *huge = malloc(NOTICE_BODY_MAX + 2);
        assert_non_null(huge);
        memset(huge, ' ', NOTICE_BODY_MAX + 1);
        huge[0] = '{';
        huge[NOTICE_BODY_MAX] = '}';
        huge[NOTICE_BODY_MAX + 1] = 0;
        assert_int_equal(notice_parse(huge, NOTICE_BODY_MAX + 1, NULL, &v, &n, reason, sizeof(reason)),
                         -EMSGSIZE);
        assert_non_null(strstr(reason, "larger than the 262144-byte limit"));
        /* At the limit it is read (and found to be no notice). */
        assert_int_equal(notice_parse(huge, NOTICE_BODY_MAX, NULL, &v, &n, reason, sizeof(reason)),
                         -EBADMSG);

        /* Deep nesting: refused without recursing; brackets inside strings do not count. */
        _cleanup_free_ char *deep = malloc(100001);
        assert_non_null(deep);
        memset(deep, '[', 50000);
        memset(deep + 50000, ']', 50000);
        deep[100000] = 0;
        assert_int_equal(parse_str(deep, NULL, &v, &n, reason, sizeof(reason)), -ELOOP);
        assert_non_null(strstr(reason, "nested deeper than 32 levels at byte 32"));
        assert_int_equal(parse_str("{\"x\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[[\"}", NULL,
                                   &v, &n, reason, sizeof(reason)),
                         -EOPNOTSUPP);

        /* SNS inside SNS inside SNS. */
        _cleanup_free_ char *spot = fixture("eventbridge/spot-interruption-warning.json", NULL);
        char *body = strdup(spot);
        assert_non_null(body);
        for (int depth = 1; depth <= 3; depth++) {
                cJSON *env = cJSON_CreateObject();
                assert_non_null(env);
                cJSON_AddStringToObject(env, "Type", "Notification");
                cJSON_AddStringToObject(env, "MessageId", "m");
                cJSON_AddStringToObject(env, "Message", body);
                free(body);
                body = cJSON_PrintUnformatted(env);
                cJSON_Delete(env);
                assert_non_null(body);
                int r = parse_str(body, NULL, &v, &n, reason, sizeof(reason));
                if (depth <= 2) {
                        assert_int_equal(r, 0);
                        assert_int_equal(n, 1);
                        assert_string_equal(v[0].event_id, "1e5527d7-bb36-4607-3370-4164db56a40e");
                        free(v);
                } else {
                        assert_int_equal(r, -ELOOP);
                        assert_non_null(strstr(reason, "SNS envelopes nested more than 2 deep"));
                }
        }
        free(body);

        /* A field longer than its slot is refused, not cut. */
        _cleanup_free_ char *name = malloc(400);
        assert_non_null(name);
        memset(name, 'g', 399);
        name[399] = 0;
        _cleanup_free_ char *asg = strprintf(
            "{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\",\"EC2InstanceId\":\"" IID
            "\","
            "\"LifecycleHookName\":\"h\",\"AutoScalingGroupName\":\"%s\",\"LifecycleActionToken\":\"t\","
            "\"Time\":\"2024-05-14T10:22:05Z\",\"RequestId\":\"r\"}",
            name);
        assert_non_null(asg);
        assert_int_equal(parse_str(asg, NULL, &v, &n, reason, sizeof(reason)), -EBADMSG);
        assert_non_null(strstr(reason, "AutoScalingGroupName is longer than 255 bytes"));

        /* SNS subscription confirmations are not notices. */
        assert_int_equal(
            parse_str("{\"Type\":\"SubscriptionConfirmation\",\"MessageId\":\"m\",\"Token\":\"t\"}", NULL,
                      &v, &n, reason, sizeof(reason)),
            0);
        assert_int_equal(n, 0);
}

static void test_fields_and_told_paths(void **state)
{
        struct notice *v = NULL;
        size_t n = 0;
        char reason[256];

        /* Auto Scaling names may be any Unicode; broken UTF-8 is refused. */
        static const char utf8[] = "{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\","
                                   "\"EC2InstanceId\":\"" IID "\",\"LifecycleHookName\":\"h\","
                                   "\"AutoScalingGroupName\":\"gr\\u00fcn-\\u65e5\\ud83d\\ude00\","
                                   "\"LifecycleActionToken\":\"t\",\"Time\":\"2024-05-14T10:22:05Z\"}";
        assert_int_equal(parse_str(utf8, NULL, &v, &n, reason, sizeof(reason)), 0);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].asg_name, "gr\xc3\xbcn-\xe6\x97\xa5\xf0\x9f\x98\x80");
        assert_string_equal(v[0].event_id, "t"); /* no RequestId: the action token */
        _cleanup_free_ char *human = NULL;
        assert_int_equal(notice_format_human(&v[0], &human), 0);
        assert_non_null(strstr(human, ", group gr\xc3\xbcn-"));
        assert_non_null(strstr(human, ", hook h"));
        free(v);
        static const char *const bad_utf8[] = { "\xff", "\xc0\xaf", "\xe6\x97", "\x80", "\xf5\x80\x80\x80" };
        for (size_t i = 0; i < ARRAY_SIZE(bad_utf8); i++) {
                _cleanup_free_ char *body =
                    strprintf("{\"LifecycleTransition\":\"autoscaling:EC2_INSTANCE_TERMINATING\","
                              "\"EC2InstanceId\":\"" IID "\",\"LifecycleHookName\":\"h%s\","
                              "\"AutoScalingGroupName\":\"g\",\"LifecycleActionToken\":\"t\","
                              "\"Time\":\"2024-05-14T10:22:05Z\"}",
                              bad_utf8[i]);
                assert_non_null(body);
                v = NULL;
                assert_int_equal(parse_str(body, NULL, &v, &n, reason, sizeof(reason)), -EBADMSG);
                assert_non_null(strstr(reason, "LifecycleHookName is not valid UTF-8"));
        }

        /* EventBridge launch hook without its detail: malformed (nothing to complete it with). */
        assert_int_equal(
            parse_str("{\"id\":\"l\",\"detail-type\":\"EC2 Instance-launch Lifecycle Action\","
                      "\"source\":\"aws.autoscaling\",\"time\":\"2024-05-14T10:22:05Z\",\"detail\":{}}",
                      NULL, &v, &n, reason, sizeof(reason)),
            -EBADMSG);
        assert_non_null(strstr(reason, "detail.LifecycleTransition"));

        /* Told an IMDS path, the body must be that document. */
        struct notice_parse_opts o = imds_opts;
        o.imds_path = "spot/instance-action";
        assert_int_equal(parse_str("[]", &o, &v, &n, reason, sizeof(reason)), -EBADMSG);
        assert_non_null(strstr(reason, "IMDS spot/instance-action document is a JSON array, not an object"));
        assert_int_equal(parse_str("", &o, &v, &n, reason, sizeof(reason)), -EBADMSG);
        assert_non_null(strstr(reason, "empty IMDS spot/instance-action document"));
        assert_int_equal(notice_parse("{\"action\":\"stop\"}\0", 18, &o, &v, &n, reason, sizeof(reason)),
                         -EBADMSG);
        assert_non_null(strstr(reason, "NUL byte"));
        assert_int_equal(parse_str("{\"action\":\"reboot\",\"time\":\"2024-05-14T10:23:53Z\"}", &o, &v, &n,
                                   reason, sizeof(reason)),
                         -EBADMSG);
        assert_non_null(strstr(reason, "unknown action 'reboot'"));
        o.imds_path = "events/maintenance/scheduled";
        assert_int_equal(parse_str("{}", &o, &v, &n, reason, sizeof(reason)), -EBADMSG);
        assert_non_null(strstr(reason, "is a JSON object, not an array"));
        o.imds_path = "spot/termination-time";
        assert_int_equal(parse_str("not-a-time\n", &o, &v, &n, reason, sizeof(reason)), -EBADMSG);
        assert_non_null(strstr(reason, "'not-a-time' is not a time"));

        /* More notices than one body may produce. */
        struct buf b = { 0 };
        assert_int_equal(buf_printf(&b, "{\"id\":\"h\",\"detail-type\":\"AWS Health Event\",\"source\":"
                                        "\"aws.health\",\"time\":\"2024-05-14T06:27:57Z\",\"detail\":{"
                                        "\"service\":\"EC2\",\"eventTypeCategory\":\"scheduledChange\","
                                        "\"eventTypeCode\":\"X\",\"startTime\":\"28 May 2024 06:00:00 GMT\","
                                        "\"affectedEntities\":["),
                         0);
        for (int i = 0; i <= NOTICE_LIST_MAX; i++)
                assert_int_equal(buf_printf(&b, "%s{\"entityValue\":\"i-%08x\"}", i ? "," : "", i), 0);
        assert_int_equal(buf_printf(&b, "]}}"), 0);
        assert_int_equal(parse_str(b.data, NULL, &v, &n, reason, sizeof(reason)), -EMSGSIZE);
        assert_non_null(strstr(reason, "more than 1024 notices"));
        buf_free(&b);

        /* Reasons quote input safely and briefly; a short buffer still gets a terminated string. */
        _cleanup_free_ char *long_type = strprintf(
            "{\"id\":\"x\",\"detail-type\":\"%s\\n\",\"source\":\"s\",\"time\":\"2024-05-14T10:21:53Z\","
            "\"detail\":{}}",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ");
        assert_non_null(long_type);
        assert_int_equal(parse_str(long_type, NULL, &v, &n, reason, sizeof(reason)), -EOPNOTSUPP);
        assert_non_null(strstr(reason, "'ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH...'"));
        char tiny[8];
        assert_int_equal(parse_str(long_type, NULL, &v, &n, tiny, sizeof(tiny)), -EOPNOTSUPP);
        assert_int_equal(strlen(tiny), 7);
}

/* The Capacity Reservation warning (issue #17), from its documentation page (tests/unit/data/eventbridge,
 * SOURCES.txt): its own kind, the termination time it names as the deadline, else two minutes; its
 * detail-type only from aws.ec2, as AWS Health events only from aws.health. */
static void test_capacity_reservation(void **state)
{
        _cleanup_free_ char *data = NULL, *json = NULL;
        size_t len = 0, n = 99;
        struct notice *v = NULL;
        char reason[256];

        assert_int_equal(
            read_file_full("tests/unit/data/eventbridge/capacity-reservation-interruption-warning.json",
                           1 << 20, &data, &len),
            0);
        assert_int_equal(notice_parse(data, len, NULL, &v, &n, reason, sizeof(reason)), 0);
        assert_int_equal(n, 1);
        assert_int_equal(v[0].kind, NOTICE_CAPACITY_RESERVATION_INTERRUPTION);
        assert_string_equal(v[0].instance_id, IID);
        assert_string_equal(v[0].action, "terminate");
        assert_int_equal(v[0].notice_time, t("2025-11-20T10:00:00Z"));
        assert_int_equal(v[0].deadline, t("2025-11-20T10:02:00Z"));
        assert_string_equal(v[0].account, "123456789012");
        assert_string_equal(v[0].event_id, "12345678-1234-1234-1234-123456789012");
        assert_int_equal(notice_format_json(&v[0], &json), 0);
        assert_non_null(strstr(json, "\"kind\":\"capacity-reservation-interruption\""));
        free(v);
        v = NULL;

#define CR_HEAD                                                                                     \
        "{\"id\":\"c\",\"detail-type\":\"EC2 Capacity Reservation Instance Interruption Warning\"," \
        "\"time\":\"2025-11-20T10:00:00Z\","
        /* No termination time: two minutes from the event, as a spot warning. */
        assert_int_equal(parse_str(CR_HEAD "\"source\":\"aws.ec2\",\"detail\":{\"instance-id\":\"" IID
                                           "\",\"instance-action\":\"terminate\"}}",
                                   NULL, &v, &n, reason, sizeof(reason)),
                         0);
        assert_int_equal(n, 1);
        assert_int_equal(v[0].deadline, t("2025-11-20T10:02:00Z"));
        free(v);
        v = NULL;
        assert_int_equal(parse_str(CR_HEAD "\"source\":\"aws.ec2\",\"detail\":{\"instance-id\":\"" IID
                                           "\",\"instance-action\":\"terminate\","
                                           "\"instance-termination-time\":\"soon\"}}",
                                   NULL, &v, &n, reason, sizeof(reason)),
                         -EBADMSG);
        assert_non_null(strstr(reason, "detail.instance-termination-time 'soon' is not a time"));
        assert_int_equal(parse_str(CR_HEAD "\"source\":\"aws.ec2\",\"detail\":{\"instance-id\":\"" IID
                                           "\"}}",
                                   NULL, &v, &n, reason, sizeof(reason)),
                         -EBADMSG);
        assert_non_null(strstr(reason, "detail.instance-action"));
        /* The detail-type from another source is no notice (anyone may put events on a custom bus, but not
         * under aws.* sources), nor an AWS Health event from aws.ec2. */
        assert_int_equal(parse_str(CR_HEAD "\"source\":\"aws.health\",\"detail\":{\"instance-id\":\"" IID
                                           "\",\"instance-action\":\"terminate\"}}",
                                   NULL, &v, &n, reason, sizeof(reason)),
                         -EOPNOTSUPP);
        assert_non_null(strstr(reason, "from source 'aws.health'"));
        assert_int_equal(
            parse_str("{\"id\":\"h\",\"detail-type\":\"AWS Health Event\",\"source\":\"aws.ec2\","
                      "\"time\":\"2024-05-14T06:27:57Z\",\"detail\":{\"service\":\"EC2\","
                      "\"eventTypeCategory\":\"scheduledChange\",\"eventTypeCode\":\"X\","
                      "\"startTime\":\"Tue, 28 May 2024 06:00:00 GMT\","
                      "\"affectedEntities\":[{\"entityValue\":\"" IID "\"}]}}",
                      NULL, &v, &n, reason, sizeof(reason)),
            -EOPNOTSUPP);
        assert_non_null(strstr(reason, "from source 'aws.ec2'"));
#undef CR_HEAD
}

/* Launch lifecycle actions (issue #17 item 2; tests/unit/data/eventbridge, SOURCES.txt): their own kind,
 * through EventBridge and straight from Auto Scaling alike, the same action (token) both ways, no deadline
 * (nothing is going away), everything CompleteLifecycleAction needs. */
static void test_asg_launch(void **state)
{
        static const char *const files[] = {
                "tests/unit/data/eventbridge/asg-lifecycle-launch.json",
                "tests/unit/data/eventbridge/asg-lifecycle-launch-direct-sqs.json"
        };
        struct notice got[2];

        for (size_t i = 0; i < 2; i++) {
                _cleanup_free_ char *data = NULL, *json = NULL;
                _cleanup_free_ struct notice *v = NULL;
                size_t len = 0, n = 99;
                char reason[256];

                assert_int_equal(read_file_full(files[i], 1 << 20, &data, &len), 0);
                assert_int_equal(notice_parse(data, len, NULL, &v, &n, reason, sizeof(reason)), 0);
                assert_int_equal(n, 1);
                assert_int_equal(v[0].kind, NOTICE_ASG_LIFECYCLE_LAUNCH);
                assert_string_equal(v[0].instance_id, "i-0fedc4321ba098765");
                assert_string_equal(v[0].asg_name, "eks-spot-ng-1");
                assert_string_equal(v[0].lifecycle_hook_name, "spotdrain-launch");
                assert_string_equal(v[0].lifecycle_action_token, "c3a1e2f4-7b6d-4e5a-9c8b-0f1e2d3c4b5a");
                assert_string_equal(v[0].account, "123456789012");
                assert_int_equal(v[0].deadline, 0);
                assert_int_equal(notice_format_json(&v[0], &json), 0);
                assert_non_null(strstr(json, "\"kind\":\"asg-lifecycle-launch\""));
                assert_non_null(strstr(json, "\"deadline\":null"));
                got[i] = v[0];
        }
        assert_string_equal(got[0].event_id, "5b2c7e41-8a1d-4f3e-b6c0-2d9e8f7a6b51");
        assert_string_equal(got[1].event_id, "9e4f1a2b-3c5d-6e7f-8a9b-0c1d2e3f4a5b");
        assert_int_equal(got[0].notice_time, t("2024-05-14T10:25:12Z"));
        assert_string_equal(got[0].region, "us-east-1");
        assert_int_equal(notice_kind_from_string("asg-lifecycle-launch"), NOTICE_ASG_LIFECYCLE_LAUNCH);
}

static void test_kinds(void **state)
{
        for (int k = 0; k < _NOTICE_KIND_MAX; k++)
                assert_int_equal(notice_kind_from_string(notice_kind_to_string(k)), k);
        assert_int_equal(notice_kind_from_string("launch"), -EINVAL);
        assert_null(notice_kind_to_string(_NOTICE_KIND_MAX));
        assert_string_equal(notice_kind_to_string(NOTICE_ASG_LIFECYCLE_TERMINATE),
                            "asg-lifecycle-terminate");
        assert_string_equal(notice_kind_to_string(NOTICE_CAPACITY_RESERVATION_INTERRUPTION),
                            "capacity-reservation-interruption");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_spot_eventbridge),
                cmocka_unit_test(test_sns_equals_bare_and_duplicates),
                cmocka_unit_test(test_rebalance_eventbridge),
                cmocka_unit_test(test_state_change),
                cmocka_unit_test(test_health),
                cmocka_unit_test(test_asg),
                cmocka_unit_test(test_imds_spot),
                cmocka_unit_test(test_imds_rebalance_and_lifecycle),
                cmocka_unit_test(test_imds_scheduled),
                cmocka_unit_test(test_times),
                cmocka_unit_test(test_instance_ids),
                cmocka_unit_test(test_malformed),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_fields_and_told_paths),
                cmocka_unit_test(test_capacity_reservation),
                cmocka_unit_test(test_asg_launch),
                cmocka_unit_test(test_kinds),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
