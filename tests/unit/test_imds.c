/* The IMDSv2 client against the simulator's IMDS surface: the token flow, renewal on 401, 404 as "nothing",
 * the notice documents in their wire formats, IMDSv1 refusal and fallback, and faults (500, hang). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim_fixture.h"
#include "spotdrain/core.h"
#include "spotdrain/imds.h"
#include "spotdrain/notice.h"
#include "spotdrain/yaml.h"

#define BOUND_USEC (10ULL * 1000000ULL)

static const char scenario_yaml[] =
    "name: imds-test\n"
    "budget_seconds: 120\n"
    "nodes:\n"
    "  - {name: spot-a, instance_id: i-0a00000000000000a, zone: us-east-1a, capacity_type: spot,"
    " instance_type: m5.xlarge}\n"
    "  - {name: maint-b, instance_id: i-0b00000000000000b, zone: eu-west-1b}\n"
    "  - {name: asg-c, instance_id: i-0c00000000000000c, zone: us-east-1c, capacity_type: on-demand}\n"
    "events:\n"
    "  - {at: 5, type: scheduled-change, node: maint-b}\n"
    "  - {at: 5, type: asg-lifecycle-terminate, node: asg-c}\n"
    "  - {at: 10, type: rebalance-recommendation, node: spot-a}\n"
    "  - {at: 20, type: spot-interruption, node: spot-a}\n";

struct fixture {
        struct sim_fixture sf;
        struct sim *sim; /* sf's */
        struct sim_imds *imds;
        struct loop *loop;
        struct imds_client *client;
};

struct got {
        bool done;
        int error;
        long status;
        char *body;
};

static void got_done(struct imds_client *c, const struct imds_reply *r, void *userdata)
{
        struct got *g = userdata;
        g->done = true;
        g->error = r->error;
        g->status = r->status;
        g->body = r->body ? strdup(r->body) : NULL;
}

static void got_clear(struct got *g)
{
        free(g->body);
        *g = (struct got){};
}

static int get_sync(struct fixture *f, struct imds_client *c, const char *path, struct got *g)
{
        got_clear(g);
        assert_int_equal(imds_get(c, path, got_done, g, NULL), 0);
        assert_int_equal(loop_run_until(f->loop, &g->done, BOUND_USEC), 0);
        return g->error;
}

static int setup(void **state)
{
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        sim_fixture_start(&f->sf, scenario_yaml,
                          &(struct sim_fixture_options){ .manual_clock = true, .no_server = true });
        f->sim = f->sf.sim;
        assert_int_equal(sim_imds_start(f->sim, NULL, &f->imds), 0);
        assert_int_equal(sim_imds_count(f->imds), 3);
        assert_int_equal(loop_new(&f->loop), 0);
        assert_int_equal(imds_client_new(f->loop,
                                         &(struct imds_options){ .endpoint = sim_imds_url(f->imds, 0) },
                                         &f->client),
                         0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fixture *f = *state;
        imds_client_free(f->client);
        loop_free(f->loop);
        sim_imds_stop(f->imds);
        sim_fixture_stop(&f->sf);
        free(f);
        return 0;
}

static void set_now(struct fixture *f, double t)
{
        sim_lock(f->sim);
        sim_set_now(f->sim, t);
        (void)sim_advance(f->sim);
        sim_unlock(f->sim);
}

static struct imds_client *client_for(struct fixture *f, size_t node, const struct imds_options *base)
{
        struct imds_options o = base ? *base : (struct imds_options){};
        struct imds_client *c = NULL;
        o.endpoint = sim_imds_url(f->imds, node);
        assert_int_equal(imds_client_new(f->loop, &o, &c), 0);
        return c;
}

static void test_token_flow(void **state)
{
        struct fixture *f = *state;
        struct sim_imds_stats ss;
        struct imds_stats st;
        struct got g = {};

        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);
        assert_string_equal(g.body, "i-0a00000000000000a");
        assert_int_equal(get_sync(f, f->client, "/latest/meta-data/local-hostname", &g), 0);
        assert_string_equal(g.body, "spot-a");
        assert_int_equal(get_sync(f, f->client, "meta-data/placement/availability-zone", &g), 0);
        assert_string_equal(g.body, "us-east-1a");
        assert_int_equal(get_sync(f, f->client, "meta-data/placement/region", &g), 0);
        assert_string_equal(g.body, "us-east-1");
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-type", &g), 0);
        assert_string_equal(g.body, "m5.xlarge");
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-life-cycle", &g), 0);
        assert_string_equal(g.body, "spot");

        /* One token served every GET. */
        imds_client_stats(f->client, &st);
        assert_int_equal(st.tokens, 1);
        assert_int_equal(st.unauthorized, 0);
        assert_int_equal(sim_imds_stats(f->imds, 0, &ss), 0);
        assert_int_equal(ss.token_puts, 1);
        got_clear(&g);
}

static void test_not_found_is_nothing(void **state)
{
        struct fixture *f = *state;
        struct got g = {};

        set_now(f, 1);
        assert_int_equal(get_sync(f, f->client, "meta-data/spot/instance-action", &g), -ENOENT);
        assert_int_equal(g.status, 404);
        assert_null(g.body);
        assert_int_equal(get_sync(f, f->client, "meta-data/spot/termination-time", &g), -ENOENT);
        assert_int_equal(get_sync(f, f->client, "meta-data/events/recommendations/rebalance", &g), -ENOENT);
        assert_int_equal(get_sync(f, f->client, "meta-data/no/such/thing", &g), -ENOENT);
        assert_int_equal(get_sync(f, f->client, "meta-data/events/maintenance/scheduled", &g), 0);
        assert_string_equal(g.body, "[]");
        assert_int_equal(get_sync(f, f->client, "meta-data/autoscaling/target-lifecycle-state", &g), 0);
        assert_string_equal(g.body, "InService");
        got_clear(&g);
}

static void parse_one(struct fixture *f, const char *body, const char *path, const char *instance,
                      struct notice *ret)
{
        _cleanup_free_ struct notice *ns = NULL;
        char reason[256];
        size_t n = 0;

        assert_int_equal(
            notice_parse(body, strlen(body),
                         &(struct notice_parse_opts){ .instance_id = instance, .imds_path = path }, &ns, &n,
                         reason, sizeof(reason)),
            0);
        assert_int_equal(n, 1);
        *ret = ns[0];
}

static void test_notice_documents(void **state)
{
        struct fixture *f = *state;
        struct notice n;
        struct got g = {};
        uint64_t deadline, rebalance, start;

        set_now(f, 21);
        sim_lock(f->sim);
        deadline = sim_wall_usec(f->sim, 140) / 1000000 * 1000000;
        rebalance = sim_wall_usec(f->sim, 10) / 1000000 * 1000000;
        start = sim_wall_usec(f->sim, 125) / 1000000 * 1000000;
        sim_unlock(f->sim);

        assert_int_equal(get_sync(f, f->client, "meta-data/spot/instance-action", &g), 0);
        parse_one(f, g.body, "spot/instance-action", "i-0a00000000000000a", &n);
        assert_int_equal(n.kind, NOTICE_SPOT_INTERRUPTION);
        assert_string_equal(n.action, "terminate");
        assert_int_equal(n.deadline, deadline);

        assert_int_equal(get_sync(f, f->client, "meta-data/spot/termination-time", &g), 0);
        parse_one(f, g.body, "spot/termination-time", "i-0a00000000000000a", &n);
        assert_int_equal(n.deadline, deadline);

        assert_int_equal(get_sync(f, f->client, "meta-data/events/recommendations/rebalance", &g), 0);
        parse_one(f, g.body, "events/recommendations/rebalance", "i-0a00000000000000a", &n);
        assert_int_equal(n.kind, NOTICE_REBALANCE_RECOMMENDATION);
        assert_int_equal(n.notice_time, rebalance);

        /* The other nodes' surfaces: scheduled maintenance and the ASG lifecycle state. */
        _cleanup_(imds_client_freep) struct imds_client *b = client_for(f, 1, NULL);
        _cleanup_(imds_client_freep) struct imds_client *c = client_for(f, 2, NULL);

        assert_int_equal(get_sync(f, b, "meta-data/placement/region", &g), 0);
        assert_string_equal(g.body, "eu-west-1");
        assert_int_equal(get_sync(f, b, "meta-data/spot/instance-action", &g), -ENOENT);
        assert_int_equal(get_sync(f, b, "meta-data/events/maintenance/scheduled", &g), 0);
        parse_one(f, g.body, "events/maintenance/scheduled", "i-0b00000000000000b", &n);
        assert_int_equal(n.kind, NOTICE_SCHEDULED_CHANGE);
        assert_string_equal(n.state, "active");
        assert_int_equal(n.start_time, start);
        assert_true(startswith(n.event_id, "instance-event-"));

        assert_int_equal(get_sync(f, c, "meta-data/instance-life-cycle", &g), 0);
        assert_string_equal(g.body, "on-demand");
        assert_int_equal(get_sync(f, c, "meta-data/autoscaling/target-lifecycle-state", &g), 0);
        assert_string_equal(g.body, "Terminated");
        parse_one(f, g.body, "autoscaling/target-lifecycle-state", "i-0c00000000000000c", &n);
        assert_int_equal(n.kind, NOTICE_ASG_LIFECYCLE_TERMINATE);
        got_clear(&g);
}

static void test_credentials(void **state)
{
        struct fixture *f = *state;
        struct got g = {};
        uint64_t exp;
        cJSON *o;

        assert_int_equal(get_sync(f, f->client, "meta-data/iam/security-credentials/", &g), 0);
        assert_string_equal(g.body, SIM_IMDS_ROLE);
        assert_int_equal(get_sync(f, f->client, "meta-data/iam/security-credentials/" SIM_IMDS_ROLE, &g), 0);
        o = cJSON_Parse(g.body);
        assert_non_null(o);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(o, "Code")), "Success");
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(o, "Type")), "AWS-HMAC");
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(o, "AccessKeyId")));
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(o, "SecretAccessKey")));
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(o, "Token")));
        assert_int_equal(parse_rfc3339(cJSON_GetStringValue(cJSON_GetObjectItem(o, "Expiration")), &exp), 0);
        assert_true(exp > now_realtime_usec());
        cJSON_Delete(o);
        assert_int_equal(get_sync(f, f->client, "meta-data/iam/info", &g), 0);
        o = cJSON_Parse(g.body);
        assert_non_null(cJSON_GetStringValue(cJSON_GetObjectItem(o, "InstanceProfileArn")));
        cJSON_Delete(o);
        assert_int_equal(get_sync(f, f->client, "dynamic/instance-identity/document", &g), 0);
        o = cJSON_Parse(g.body);
        assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(o, "instanceId")),
                            "i-0a00000000000000a");
        cJSON_Delete(o);
        got_clear(&g);
}

static void test_token_renewed_on_401(void **state)
{
        struct fixture *f = *state;
        struct imds_stats st;
        struct got g = {};

        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);
        /* The surface forgets every token: the next GET answers 401, the client asks for a new token and
         * retries once. */
        assert_int_equal(sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){ .expire_tokens = true }),
                         0);
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);
        assert_string_equal(g.body, "i-0a00000000000000a");
        imds_client_stats(f->client, &st);
        assert_int_equal(st.tokens, 2);
        assert_int_equal(st.unauthorized, 1);

        /* Forgotten on purpose: the next GET asks for a new one. */
        imds_client_forget_token(f->client);
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);
        imds_client_stats(f->client, &st);
        assert_int_equal(st.tokens, 3);
        assert_int_equal(st.unauthorized, 1);
        got_clear(&g);
}

static void test_wire_rules(void **state)
{
        struct fixture *f = *state;
        _cleanup_free_ char *token_url = strprintf("%s/latest/api/token", sim_imds_url(f->imds, 0));
        _cleanup_free_ char *get_url =
            strprintf("%s/latest/meta-data/instance-id", sim_imds_url(f->imds, 0));
        struct http_response resp = {};

        /* IMDSv1 (no token) is refused as on an instance with HttpTokens=required. */
        assert_int_equal(http_send_sync(f->loop, &(struct http_request){ .url = get_url }, &resp), 0);
        assert_int_equal(resp.status, 401);
        http_response_clear(&resp);
        /* A wrong token too. */
        assert_int_equal(
            http_send_sync(
                f->loop,
                &(struct http_request){ .url = get_url,
                                        .headers = (const char *[]){ IMDS_TOKEN_HEADER ": bogus", NULL } },
                &resp),
            0);
        assert_int_equal(resp.status, 401);
        http_response_clear(&resp);
        /* The token PUT needs a TTL in 1..21600. */
        assert_int_equal(
            http_send_sync(f->loop, &(struct http_request){ .method = "PUT", .url = token_url }, &resp), 0);
        assert_int_equal(resp.status, 400);
        http_response_clear(&resp);
        assert_int_equal(
            http_send_sync(f->loop,
                           &(struct http_request){
                               .method = "PUT",
                               .url = token_url,
                               .headers = (const char *[]){ IMDS_TOKEN_TTL_HEADER ": 30000", NULL } },
                           &resp),
            0);
        assert_int_equal(resp.status, 400);
        http_response_clear(&resp);
        assert_int_equal(
            http_send_sync(
                f->loop,
                &(struct http_request){ .method = "PUT",
                                        .url = token_url,
                                        .headers = (const char *[]){ IMDS_TOKEN_TTL_HEADER ": 60",
                                                                     "X-Forwarded-For: 10.0.0.1", NULL } },
                &resp),
            0);
        assert_int_equal(resp.status, 403);
        http_response_clear(&resp);
        assert_int_equal(
            http_send_sync(
                f->loop,
                &(struct http_request){ .method = "PUT",
                                        .url = token_url,
                                        .headers = (const char *[]){ IMDS_TOKEN_TTL_HEADER ": 60", NULL } },
                &resp),
            0);
        assert_int_equal(resp.status, 200);
        assert_true(strlen(resp.body) >= 40);
        http_response_clear(&resp);
}

static void test_faults(void **state)
{
        struct fixture *f = *state;
        struct got g = {};
        uint64_t t0;

        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);

        /* 500: reported, and the next GET works. */
        assert_int_equal(sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){ .error_500 = 1 }), 0);
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), -EIO);
        assert_int_equal(g.status, 500);
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);

        /* A hung connection ends with the client's request timeout, not the server's hang: before the hang
         * is over (30 s, far above the client's timeout, so a loaded machine cannot blur the two). */
        assert_int_equal(
            sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){ .hang = 1, .hang_usec = 30000000 }), 0);
        t0 = now_monotonic_usec();
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), -ETIMEDOUT);
        assert_true(now_monotonic_usec() - t0 < 30000000);
        assert_int_equal(sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){}), 0);
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), 0);

        /* Garbage where JSON belongs is passed on as is (the reader refuses it). */
        set_now(f, 21);
        assert_int_equal(sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){ .garbage = 1 }), 0);
        assert_int_equal(get_sync(f, f->client, "meta-data/spot/instance-action", &g), 0);
        assert_null(cJSON_Parse(g.body));
        assert_int_equal(get_sync(f, f->client, "meta-data/spot/instance-action", &g), 0);
        cJSON *o = cJSON_Parse(g.body);
        assert_non_null(o);
        cJSON_Delete(o);
        got_clear(&g);
}

static void test_v1_fallback(void **state)
{
        struct fixture *f = *state;
        struct imds_stats st;
        struct got g = {};

        /* Tokens refused: without the fallback the GET fails with the token error. */
        assert_int_equal(sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){ .refuse_tokens = 1 }), 0);
        assert_int_equal(get_sync(f, f->client, "meta-data/instance-id", &g), -EPERM);
        imds_client_stats(f->client, &st);
        assert_int_equal(st.token_failures, 1);

        /* With the fallback, the GET goes out without a token; IMDSv2 being required, the surface answers
         * 401, and the client gets a fresh token and retries. */
        _cleanup_(imds_client_freep) struct imds_client *c =
            client_for(f, 0, &(struct imds_options){ .allow_v1 = true });
        assert_int_equal(sim_imds_set_fault(f->imds, 0, &(struct sim_imds_fault){ .refuse_tokens = 1 }), 0);
        assert_int_equal(get_sync(f, c, "meta-data/instance-id", &g), 0);
        assert_string_equal(g.body, "i-0a00000000000000a");
        imds_client_stats(c, &st);
        assert_int_equal(st.v1_requests, 1);
        assert_int_equal(st.unauthorized, 1);
        assert_int_equal(st.tokens, 1);
        got_clear(&g);
}

static void test_unreachable(void **state)
{
        struct fixture *f = *state;
        struct imds_stats st;
        struct got g = {};

        /* Nothing listens on port 1 of the loopback: refused at once, reported as the token's failure. */
        _cleanup_(imds_client_freep) struct imds_client *c = NULL;
        assert_int_equal(
            imds_client_new(f->loop, &(struct imds_options){ .endpoint = "http://127.0.0.1:1/" }, &c), 0);
        assert_string_equal(imds_client_endpoint(c), "http://127.0.0.1:1");
        assert_int_equal(get_sync(f, c, "meta-data/instance-id", &g), -ECONNREFUSED);
        imds_client_stats(c, &st);
        assert_int_equal(st.token_failures, 1);
        assert_int_equal(st.last_token_error, -ECONNREFUSED);
        /* While the retry is not due, GETs fail at once with the same error, from the loop. */
        assert_int_equal(get_sync(f, c, "meta-data/instance-id", &g), -ECONNREFUSED);
        got_clear(&g);
}

static void test_options(void **state)
{
        struct fixture *f = *state;
        struct imds_client *c = NULL;

        assert_int_equal(imds_client_new(f->loop, &(struct imds_options){ .token_ttl_seconds = 21601 }, &c),
                         -EINVAL);
        assert_int_equal(imds_client_new(f->loop, &(struct imds_options){ .endpoint = "ftp://x" }, &c),
                         -EINVAL);
        setenv(IMDS_ENDPOINT_ENV, "http://127.0.0.2:9", 1);
        assert_int_equal(imds_client_new(f->loop, NULL, &c), 0);
        assert_string_equal(imds_client_endpoint(c), "http://127.0.0.2:9");
        c = imds_client_free(c);
        unsetenv(IMDS_ENDPOINT_ENV);
        assert_int_equal(imds_client_new(f->loop, NULL, &c), 0);
        assert_string_equal(imds_client_endpoint(c), IMDS_DEFAULT_ENDPOINT);
        imds_client_free(c);
}

static void test_cancel(void **state)
{
        struct fixture *f = *state;
        struct got g1 = {}, g2 = {};
        struct imds_get *h = NULL;

        /* Two GETs wait for one token; cancelling one leaves the other to finish. */
        assert_int_equal(imds_get(f->client, "meta-data/instance-id", got_done, &g1, &h), 0);
        assert_int_equal(imds_get(f->client, "meta-data/local-hostname", got_done, &g2, NULL), 0);
        assert_null(imds_get_cancel(h));
        assert_int_equal(loop_run_until(f->loop, &g2.done, BOUND_USEC), 0);
        assert_false(g1.done);
        assert_string_equal(g2.body, "spot-a");
        got_clear(&g2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_token_flow, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_found_is_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_notice_documents, setup, teardown),
                cmocka_unit_test_setup_teardown(test_credentials, setup, teardown),
                cmocka_unit_test_setup_teardown(test_token_renewed_on_401, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wire_rules, setup, teardown),
                cmocka_unit_test_setup_teardown(test_faults, setup, teardown),
                cmocka_unit_test_setup_teardown(test_v1_fallback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
                cmocka_unit_test_setup_teardown(test_options, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        };
        log_setup(LOG_FORMAT_TEXT, LOG_WARNING);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
