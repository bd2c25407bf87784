/* The AWS request layer: the error classification table, endpoint resolution and its environment
 * precedence, and calls against a scripted fake (retries with Retry-After, one retry after new credentials,
 * cancellation in flight and from callbacks). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kube_fake.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"

static void test_classify(void **state)
{
        static const struct {
                const char *code;
                long status;
                enum aws_error_class cls;
                bool refresh;
        } cases[] = {
                { "Throttling", 400, AWS_ERR_THROTTLED, false },
                { "ThrottlingException", 400, AWS_ERR_THROTTLED, false },
                { "com.amazon.coral.availability#ThrottlingException", 400, AWS_ERR_THROTTLED, false },
                { "RequestThrottled", 403, AWS_ERR_THROTTLED, false },
                { "RequestLimitExceeded", 503, AWS_ERR_THROTTLED, false },
                { "TooManyRequestsException", 400, AWS_ERR_THROTTLED, false },
                { "SlowDown", 503, AWS_ERR_THROTTLED, false },
                { NULL, 429, AWS_ERR_THROTTLED, false },
                { "ExpiredToken", 400, AWS_ERR_EXPIRED_CREDENTIALS, true },
                { "ExpiredTokenException", 400, AWS_ERR_EXPIRED_CREDENTIALS, true },
                { "RequestExpired", 400, AWS_ERR_EXPIRED_CREDENTIALS, true },
                { "InvalidClientTokenId", 403, AWS_ERR_INVALID_CREDENTIALS, true },
                { "UnrecognizedClientException", 403, AWS_ERR_INVALID_CREDENTIALS, true },
                { "SignatureDoesNotMatch", 403, AWS_ERR_INVALID_CREDENTIALS, false },
                { "AuthFailure", 401, AWS_ERR_INVALID_CREDENTIALS, false },
                { "AccessDenied", 403, AWS_ERR_ACCESS_DENIED, false },
                { "AccessDeniedException", 400, AWS_ERR_ACCESS_DENIED, false },
                { "UnauthorizedOperation", 403, AWS_ERR_ACCESS_DENIED, false },
                { NULL, 403, AWS_ERR_ACCESS_DENIED, false },
                { "InternalError", 500, AWS_ERR_SERVER, false },
                { "ServiceUnavailable", 503, AWS_ERR_SERVER, false },
                { NULL, 502, AWS_ERR_SERVER, false },
                { "ValidationError", 400, AWS_ERR_CLIENT, false },
                { "InvalidParameterValue", 400, AWS_ERR_CLIENT, false },
                { "SomethingNew", 500, AWS_ERR_SERVER, false },
                { NULL, 404, AWS_ERR_CLIENT, false },
                { NULL, 200, AWS_ERR_NONE, false },
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                bool refresh = !cases[i].refresh;
                enum aws_error_class c = aws_error_classify(cases[i].code, cases[i].status, &refresh);
                if (c != cases[i].cls || refresh != cases[i].refresh)
                        fail_msg("%s/%ld: %s refresh=%d", cases[i].code, cases[i].status,
                                 aws_error_class_to_string(c), refresh);
        }
        assert_true(aws_error_class_retryable(AWS_ERR_THROTTLED));
        assert_true(aws_error_class_retryable(AWS_ERR_SERVER));
        assert_true(aws_error_class_retryable(AWS_ERR_TRANSPORT));
        assert_false(aws_error_class_retryable(AWS_ERR_ACCESS_DENIED));
        assert_false(aws_error_class_retryable(AWS_ERR_EXPIRED_CREDENTIALS));
        assert_false(aws_error_class_retryable(AWS_ERR_CLIENT));
        assert_int_equal(aws_error_class_errno(AWS_ERR_THROTTLED, 400), -EBUSY);
        assert_int_equal(aws_error_class_errno(AWS_ERR_ACCESS_DENIED, 403), -EACCES);
        assert_int_equal(aws_error_class_errno(AWS_ERR_EXPIRED_CREDENTIALS, 400), -EKEYEXPIRED);
        assert_int_equal(aws_error_class_errno(AWS_ERR_SERVER, 503), -EAGAIN);
        assert_int_equal(aws_error_class_errno(AWS_ERR_CLIENT, 400), -EINVAL);
}

static void test_answers(void **state)
{
        struct aws_result r;
        static const char xml[] = "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>"
                                  "<Message>Rate exceeded</Message></Error></ErrorResponse>";
        static const char ec2[] = "<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>no"
                                  "</Message></Error></Errors><RequestID>x</RequestID></Response>";
        static const char json[] =
            "{\"__type\":\"com.amazonaws.sqs#QueueDoesNotExist\",\"message\":\"gone\"}";

        aws_result_from_answer(AWS_PROTOCOL_QUERY, 0, 400, xml, strlen(xml), &r);
        assert_int_equal(r.cls, AWS_ERR_THROTTLED);
        assert_int_equal(r.error, -EBUSY);
        assert_string_equal(r.code, "Throttling");
        assert_string_equal(r.message, "Rate exceeded");
        aws_result_from_answer(AWS_PROTOCOL_QUERY, 0, 403, ec2, strlen(ec2), &r);
        assert_int_equal(r.cls, AWS_ERR_ACCESS_DENIED);
        assert_string_equal(r.code, "UnauthorizedOperation");
        aws_result_from_answer(AWS_PROTOCOL_JSON_10, 0, 400, json, strlen(json), &r);
        assert_int_equal(r.cls, AWS_ERR_CLIENT);
        assert_string_equal(r.code, "QueueDoesNotExist");
        assert_string_equal(r.message, "gone");
        /* A JSON request answered with the query protocol's XML error document (moto's signature check):
         * the key is rejected, not access denied; a body that is neither keeps the status's class. */
        static const char moto[] =
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<ErrorResponse><Errors><Error>"
            "<Code>SignatureDoesNotMatch</Code><Message>The request signature we "
            "calculated does not match</Message><Type>Sender</Type></Error></Errors>"
            "</ErrorResponse>";
        aws_result_from_answer(AWS_PROTOCOL_JSON_10, 0, 403, moto, strlen(moto), &r);
        assert_int_equal(r.cls, AWS_ERR_INVALID_CREDENTIALS);
        assert_int_equal(r.error, -EKEYREJECTED);
        assert_string_equal(r.code, "SignatureDoesNotMatch");
        assert_string_equal(r.message, "The request signature we calculated does not match");
        aws_result_from_answer(AWS_PROTOCOL_JSON_10, 0, 403, "Forbidden", 9, &r);
        assert_int_equal(r.cls, AWS_ERR_ACCESS_DENIED);
        assert_string_equal(r.code, "");
        aws_result_from_answer(AWS_PROTOCOL_JSON_10, 0, 503, "<html>", 6, &r);
        assert_int_equal(r.cls, AWS_ERR_SERVER);
        assert_string_equal(r.message, "HTTP 503");
        aws_result_from_answer(AWS_PROTOCOL_QUERY, -ETIMEDOUT, 0, NULL, 0, &r);
        assert_int_equal(r.cls, AWS_ERR_TRANSPORT);
        assert_int_equal(r.error, -ETIMEDOUT);
        aws_result_from_answer(AWS_PROTOCOL_QUERY, 0, 200, "<x/>", 4, &r);
        assert_int_equal(r.error, 0);
}

static void resolves(const char *const *env, const char *configured, const char *fallback,
                     const char *region, const char *want)
{
        _cleanup_free_ char *got = NULL;
        struct aws_endpoint_query q = { .service_id = "AUTO_SCALING",
                                        .legacy_id = "AUTOSCALING",
                                        .host = "autoscaling",
                                        .configured = configured,
                                        .fallback = fallback,
                                        .region = region,
                                        .env = env };
        assert_int_equal(aws_endpoint_resolve(&q, &got), 0);
        assert_string_equal(got, want);
}

static void test_endpoints(void **state)
{
        const char *none[] = { NULL };
        const char *all[] = { "AWS_ENDPOINT_URL_AUTO_SCALING=http://127.0.0.1:1/",
                              "AWS_ENDPOINT_URL_AUTOSCALING=http://127.0.0.1:2",
                              "AWS_ENDPOINT_URL=http://127.0.0.1:3", NULL };
        const char *legacy[] = { "AWS_ENDPOINT_URL_AUTOSCALING=http://127.0.0.1:2",
                                 "AWS_ENDPOINT_URL=http://127.0.0.1:3", NULL };
        const char *global[] = { "AWS_ENDPOINT_URL=http://127.0.0.1:3//", "AWS_ENDPOINT_URL_EC2=http://x",
                                 NULL };
        const char *ignored[] = { "AWS_ENDPOINT_URL=http://127.0.0.1:3",
                                  "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true", NULL };
        const char *fips[] = { "AWS_USE_FIPS_ENDPOINT=true", NULL };
        const char *dual[] = { "AWS_USE_DUALSTACK_ENDPOINT=TRUE", NULL };
        const char *region_env[] = { "AWS_DEFAULT_REGION=eu-west-1", "AWS_REGION=us-west-2", NULL };
        _cleanup_free_ char *bad = NULL;

        /* A flag beats the service's variable, which beats the legacy one, which beats the global one. */
        resolves(all, "https://vpce-1.example/", NULL, "us-east-1", "https://vpce-1.example");
        resolves(all, NULL, NULL, "us-east-1", "http://127.0.0.1:1");
        resolves(legacy, NULL, NULL, "us-east-1", "http://127.0.0.1:2");
        resolves(global, NULL, NULL, "us-east-1", "http://127.0.0.1:3");
        /* The environment beats the caller's default (the queue URL's host for SQS). */
        resolves(global, NULL, "https://sqs.eu-west-1.amazonaws.com", "eu-west-1", "http://127.0.0.1:3");
        resolves(none, NULL, "https://sqs.eu-west-1.amazonaws.com", "eu-west-1",
                 "https://sqs.eu-west-1.amazonaws.com");
        resolves(ignored, NULL, NULL, "us-east-1", "https://autoscaling.us-east-1.amazonaws.com");
        /* AWS's own. */
        resolves(none, NULL, NULL, "us-east-1", "https://autoscaling.us-east-1.amazonaws.com");
        resolves(none, NULL, NULL, "cn-north-1", "https://autoscaling.cn-north-1.amazonaws.com.cn");
        resolves(none, NULL, NULL, NULL, "https://autoscaling.amazonaws.com");
        resolves(fips, NULL, NULL, "us-east-1", "https://autoscaling-fips.us-east-1.amazonaws.com");
        resolves(dual, NULL, NULL, "us-east-1", "https://autoscaling.us-east-1.api.aws");
        /* A path stays (a proxy may route on it); an endpoint that is not a URL is refused. */
        resolves(none, "http://localhost:4566/aws/", NULL, "us-east-1", "http://localhost:4566/aws");
        struct aws_endpoint_query q = { .host = "ec2", .configured = "ec2.amazonaws.com", .env = none };
        assert_int_equal(aws_endpoint_resolve(&q, &bad), -EINVAL);
        q.configured = "https:///path";
        assert_int_equal(aws_endpoint_resolve(&q, &bad), -EINVAL);

        assert_string_equal(aws_env_region(region_env), "us-west-2");
        assert_null(aws_env_region(none));
}

/* ---- calls against the fake ---- */

struct fx {
        struct kfake *fake;
        struct loop *loop;
        struct aws_client *c;
        struct aws_credentials creds, fresh;
        bool use_fresh;
        unsigned refreshes;
        uint64_t refresh_delay_usec;
        aws_refreshed_fn refreshed;
        void *refreshed_ctx;
};

static const struct aws_credentials *fx_creds(void *userdata)
{
        struct fx *f = userdata;
        return f->use_fresh ? &f->fresh : &f->creds;
}

static void fx_refresh_now(void *userdata)
{
        struct fx *f = userdata;
        aws_refreshed_fn fn = f->refreshed;
        f->refreshed = NULL;
        f->use_fresh = true;
        if (fn)
                fn(f->refreshed_ctx);
}

static int fx_refresh(void *userdata, aws_refreshed_fn done, void *ctx)
{
        struct fx *f = userdata;
        f->refreshes++;
        f->refreshed = done;
        f->refreshed_ctx = ctx;
        return timer_start_in(f->loop, f->refresh_delay_usec ?: 1000, fx_refresh_now, f, NULL);
}

static int setup(void **state)
{
        struct fx *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(kfake_start(&f->fake), 0);
        assert_int_equal(loop_new(&f->loop), 0);
        f->creds =
            (struct aws_credentials){ .access_key_id = (char *)"AKIDOLD", .secret_access_key = (char *)"s" };
        f->fresh =
            (struct aws_credentials){ .access_key_id = (char *)"AKIDNEW", .secret_access_key = (char *)"t" };
        const char *env[] = { NULL };
        struct aws_client_config cfg = {
                .service = "autoscaling",
                .endpoint = { .service_id = "AUTO_SCALING",
                              .host = "autoscaling",
                              .configured = kfake_url(f->fake),
                              .env = env },
                .region = "us-east-1",
                .credentials = fx_creds,
                .refresh = fx_refresh,
                .credentials_userdata = f,
                .max_attempts = 3,
                .backoff_base_usec = 1000,
                .backoff_max_usec = 10000,
        };
        assert_int_equal(aws_client_new(f->loop, &cfg, &f->c), 0);
        *state = f;
        return 0;
}

static int teardown(void **state)
{
        struct fx *f = *state;
        aws_client_free(f->c);
        loop_free(f->loop);
        kfake_stop(f->fake);
        free(f);
        return 0;
}

struct got {
        bool done;
        struct aws_result res;
        char body[256];
        struct aws_request *self;
        struct aws_request *other;
        struct got *other_got; /* whose request other is: not cancelled once it is done */
};

static void on_done(const struct aws_result *res, const char *body, size_t len, void *userdata)
{
        struct got *g = userdata;
        g->done = true;
        g->res = *res;
        snprintf(g->body, sizeof(g->body), "%.*s", (int)len, body ? body : "");
        /* Cancelling the call from inside its own callback is a no-op; another one is cancelled. */
        aws_request_cancel(g->self);
        if (g->other_got && g->other_got->done)
                g->other = NULL;
        g->other = aws_request_cancel(g->other);
}

static void run(struct fx *f, struct got *g)
{
        assert_int_equal(loop_run_until(f->loop, &g->done, 10 * 1000000ULL), 0);
}

static const struct aws_call_params form = { .action = "DescribeAutoScalingGroups",
                                             .body = "Action=DescribeAutoScalingGroups&Version=2011-01-01" };

static void test_retries(void **state)
{
        struct fx *f = *state;
        struct got g = {};
        struct timespec a, b;
        static const char throttled[] = "<ErrorResponse><Error><Code>Throttling</Code><Message>Rate exceeded"
                                        "</Message></Error></ErrorResponse>";

        assert_int_equal(kfake_add(f->fake, &(struct kfake_script){ .method = "POST",
                                                                    .path = "/",
                                                                    .status = 400,
                                                                    .body = throttled,
                                                                    .retry_after = "1" }),
                         0);
        assert_int_equal(kfake_add(f->fake,
                                   &(struct kfake_script){
                                       .method = "POST", .path = "/", .status = 500, .body = "<html/>" }),
                         0);
        assert_int_equal(kfake_add(f->fake,
                                   &(struct kfake_script){
                                       .method = "POST", .path = "/", .status = 200, .body = "<ok/>" }),
                         0);
        clock_gettime(CLOCK_MONOTONIC, &a);
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, &g.self), 0);
        run(f, &g);
        clock_gettime(CLOCK_MONOTONIC, &b);
        assert_int_equal(g.res.error, 0);
        assert_int_equal(g.res.attempts, 3);
        assert_string_equal(g.body, "<ok/>");
        assert_int_equal(kfake_count(f->fake), 3);
        /* Retry-After: 1 was waited for, not the 1 ms backoff. */
        assert_true((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) >= 900000000L);
        assert_string_equal(kfake_request(f->fake, 0)->body, form.body);
        assert_non_null(
            strstr(kfake_request(f->fake, 0)->authorization, "/us-east-1/autoscaling/aws4_request"));

        /* Access denied is not retried, and says so. */
        g = (struct got){};
        assert_int_equal(kfake_add(f->fake,
                                   &(struct kfake_script){
                                       .method = "POST",
                                       .path = "/",
                                       .status = 403,
                                       .body = "<ErrorResponse><Error><Code>AccessDenied</Code><Message>"
                                               "not authorized</Message></Error></ErrorResponse>" }),
                         0);
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, &g.self), 0);
        run(f, &g);
        assert_int_equal(g.res.error, -EACCES);
        assert_int_equal(g.res.cls, AWS_ERR_ACCESS_DENIED);
        assert_int_equal(g.res.attempts, 1);
        assert_string_equal(g.res.message, "not authorized");
        assert_int_equal(kfake_count(f->fake), 4);

        /* Throttled every time: given up after max_attempts, reported as throttled. */
        g = (struct got){};
        assert_int_equal(
            kfake_add(f->fake,
                      &(struct kfake_script){
                          .method = "POST", .path = "/", .status = 400, .body = throttled, .sticky = true }),
            0);
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, &g.self), 0);
        run(f, &g);
        assert_int_equal(g.res.error, -EBUSY);
        assert_int_equal(g.res.attempts, 3);
        assert_int_equal(kfake_count(f->fake), 7);
}

static void count_dry(const char *action, void *userdata)
{
        snprintf(userdata, 64, "%s", action);
}

/* Shadow mode: a write (CompleteLifecycleAction) is not sent, yet answered as accepted from the loop, and
 * counted under service:action; a read (Describe*) goes out as ever. */
static void test_dry_run_keeps_writes(void **state)
{
        struct fx *f = *state;
        struct got w = {}, rd = {};
        char counted[64] = "";
        static const struct aws_call_params complete = {
                .action = "CompleteLifecycleAction",
                .body = "Action=CompleteLifecycleAction&Version=2011-01-01&LifecycleActionResult=CONTINUE"
        };

        assert_int_equal(kfake_add(f->fake,
                                   &(struct kfake_script){
                                       .method = "POST", .path = "/", .status = 200, .body = "<ok/>" }),
                         0);
        dry_run_enable(count_dry, counted);
        assert_int_equal(aws_request_start(f->c, &complete, on_done, &w, &w.self), 0);
        /* Not answered inside the start: the caller stores its handle first. */
        assert_false(w.done);
        run(f, &w);
        assert_int_equal(w.res.error, 0);
        assert_int_equal(w.res.status, 200);
        assert_string_equal(counted, "autoscaling:CompleteLifecycleAction");
        assert_int_equal(kfake_count(f->fake), 0);

        assert_int_equal(aws_request_start(f->c, &form, on_done, &rd, &rd.self), 0);
        run(f, &rd);
        dry_run_disable();
        assert_string_equal(rd.body, "<ok/>");
        assert_int_equal(kfake_count(f->fake), 1);
        assert_string_equal(kfake_request(f->fake, 0)->body, form.body);
}

static void test_refresh_once(void **state)
{
        struct fx *f = *state;
        struct got g = {};
        static const char expired[] = "<ErrorResponse><Error><Code>ExpiredToken</Code><Message>expired"
                                      "</Message></Error></ErrorResponse>";

        assert_int_equal(kfake_add(f->fake,
                                   &(struct kfake_script){
                                       .method = "POST", .path = "/", .status = 400, .body = expired }),
                         0);
        assert_int_equal(kfake_add(f->fake,
                                   &(struct kfake_script){
                                       .method = "POST", .path = "/", .status = 200, .body = "<ok/>" }),
                         0);
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, &g.self), 0);
        run(f, &g);
        assert_int_equal(g.res.error, 0);
        assert_int_equal(f->refreshes, 1);
        assert_non_null(strstr(kfake_request(f->fake, 0)->authorization, "Credential=AKIDOLD/"));
        assert_non_null(strstr(kfake_request(f->fake, 1)->authorization, "Credential=AKIDNEW/"));

        /* Still expired with the new ones: reported after that one retry, not refreshed again. */
        g = (struct got){};
        assert_int_equal(
            kfake_add(f->fake,
                      &(struct kfake_script){
                          .method = "POST", .path = "/", .status = 400, .body = expired, .sticky = true }),
            0);
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, &g.self), 0);
        run(f, &g);
        assert_int_equal(g.res.error, -EKEYEXPIRED);
        assert_int_equal(g.res.attempts, 2);
        assert_int_equal(f->refreshes, 2);
        assert_int_equal(kfake_count(f->fake), 4);

        /* Cancelled while waiting for the credentials: never called back, released when they come. */
        g = (struct got){};
        f->refresh_delay_usec = 60 * 1000000ULL;
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, &g.self), 0);
        for (int i = 0; i < 500 && !f->refreshed; i++)
                loop_run_until(f->loop, &g.done, 1000);
        assert_non_null(f->refreshed);
        assert_null(aws_request_cancel(g.self));
        fx_refresh_now(f);
        loop_run_until(f->loop, &g.done, 50 * 1000);
        assert_false(g.done);
        assert_int_equal(kfake_count(f->fake), 5);
}

/* Every answer takes 200 ms; the one marked slow waits until the test lets it go (at most 5 s), so that
 * it cannot be answered before the callback that cancels it, however loaded the machine. */
static atomic_bool slow_release;

static void slow_hook(const struct kfake_request *req, void *userdata)
{
        if (!strstr(req->body, "Marker=slow")) {
                usleep(200 * 1000);
                return;
        }
        for (int i = 0; i < 1000 && !atomic_load(&slow_release); i++)
                usleep(5 * 1000);
}

static void test_cancel_in_flight(void **state)
{
        struct fx *f = *state;
        struct got a = {}, b = {}, c = {};

        kfake_set_hook(f->fake, slow_hook, NULL);
        assert_int_equal(
            kfake_add(f->fake,
                      &(struct kfake_script){
                          .method = "POST", .path = "/", .status = 200, .body = "<ok/>", .sticky = true }),
            0);
        /* a is cancelled while in flight; b's callback cancels c, still in flight. */
        assert_int_equal(aws_request_start(f->c, &form, on_done, &a, &a.self), 0);
        assert_int_equal(aws_request_start(f->c, &form, on_done, &b, &b.self), 0);
        struct aws_call_params slow = form;
        slow.body = "Action=DescribeAutoScalingGroups&Version=2011-01-01&Marker=slow";
        assert_int_equal(aws_request_start(f->c, &slow, on_done, &c, &c.self), 0);
        b.other = c.self;
        b.other_got = &c;
        assert_null(aws_request_cancel(a.self));
        atomic_store(&slow_release, false);
        run(f, &b);
        assert_int_equal(b.res.error, 0);
        atomic_store(&slow_release, true);
        loop_run_until(f->loop, &c.done, 500 * 1000);
        assert_false(a.done);
        assert_false(c.done);

        /* Freeing the client cancels what is left; with notify_cancel the callbacks say so. */
        struct aws_client *n = NULL;
        struct got d = {};
        const char *env[] = { NULL };
        struct aws_client_config cfg = {
                .service = "sqs",
                .protocol = AWS_PROTOCOL_JSON_10,
                .target_prefix = "AmazonSQS",
                .endpoint = { .host = "sqs", .configured = kfake_url(f->fake), .env = env },
                .region = "us-east-1",
                .credentials = fx_creds,
                .credentials_userdata = f,
                .notify_cancel = true
        };
        assert_int_equal(aws_client_new(f->loop, &cfg, &n), 0);
        assert_int_equal(
            aws_request_start(n, &(struct aws_call_params){ .action = "ReceiveMessage", .body = "{}" },
                              on_done, &d, &d.self),
            0);
        aws_client_free(n);
        assert_true(d.done);
        assert_int_equal(d.res.cls, AWS_ERR_CANCELLED);
        assert_int_equal(d.res.error, -ECANCELED);
        kfake_set_hook(f->fake, NULL, NULL);
}

static void test_no_credentials(void **state)
{
        struct fx *f = *state;
        struct got g = {};

        f->creds.access_key_id = NULL;
        assert_int_equal(aws_request_start(f->c, &form, on_done, &g, NULL), -ENOKEY);
        assert_int_equal(kfake_count(f->fake), 0);
        assert_false(g.done);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_classify),
                cmocka_unit_test(test_answers),
                cmocka_unit_test(test_endpoints),
                cmocka_unit_test_setup_teardown(test_retries, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dry_run_keeps_writes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refresh_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_credentials, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
