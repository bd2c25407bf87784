/* aws/request: the one AWS request layer. Every AWS API call (SQS, EC2, Auto Scaling, STS) goes through it:
 * endpoint resolution as the AWS SDKs read the environment, SigV4 signing (sigv4.h), the query (form POST,
 * XML answers, awsxml.h) and AWS JSON 1.0 (X-Amz-Target) protocols, one error classification, retries with
 * core's backoff (Retry-After honoured), a credential refresh and one retry after an expired or unknown
 * token, and cancellation. Async on the core loop. Logs at debug only; never bodies or credentials. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

/* AWS configuration (aws.*). Its keys: aws_config_section (its settings.c). */
struct aws_settings {
        char *region;
        char *queue_url;
};
struct config_section;
extern const struct config_section aws_config_section;

struct loop;

/* ---- endpoints ----
 * In order: the configured endpoint (a flag or config key), $AWS_ENDPOINT_URL_<ID> (the service id of the
 * SDKs: SQS, EC2, AUTO_SCALING, STS), $AWS_ENDPOINT_URL, unless $AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is
 * true; then the default endpoint when the caller has one (SQS: the queue URL's host), else AWS's:
 * https://HOST.REGION.amazonaws.com (.com.cn for cn- regions; HOST-fips with $AWS_USE_FIPS_ENDPOINT=true;
 * HOST.REGION.api.aws with $AWS_USE_DUALSTACK_ENDPOINT=true), or https://HOST.amazonaws.com without a
 * region. Trailing slashes are dropped; the result is scheme://authority[/path]. */
struct aws_endpoint_query {
        const char *service_id; /* "SQS", "EC2", "AUTO_SCALING", "STS" */
        const char *legacy_id;  /* also read after service_id (AUTOSCALING, which spotdrain read first) */
        const char *host;       /* "sqs", "ec2", "autoscaling", "sts" */
        const char *configured;
        const char *fallback;   /* the default endpoint before AWS's own, or NULL */
        const char *region;     /* NULL: the global endpoint */
        const char *const *env; /* "NAME=value" strings instead of the process environment; NULL = getenv */
};
/* -EINVAL for an endpoint that is not an absolute http(s) URL with a host, -ENOMEM. */
int aws_endpoint_resolve(const struct aws_endpoint_query *q, char **ret);
/* The variable name from env (as aws_endpoint_query.env), NULL when unset or empty. */
const char *aws_env_get(const char *const *env, const char *name);
/* AWS_REGION, else AWS_DEFAULT_REGION; NULL when neither is set. */
const char *aws_env_region(const char *const *env);

/* ---- errors ---- */
enum aws_error_class {
        AWS_ERR_NONE,
        AWS_ERR_THROTTLED, /* Throttling, RequestLimitExceeded, SlowDown, 429...: retryable, -EBUSY */
        AWS_ERR_EXPIRED_CREDENTIALS, /* ExpiredToken, RequestExpired: -EKEYEXPIRED */
        AWS_ERR_INVALID_CREDENTIALS, /* InvalidClientTokenId, UnrecognizedClient, bad signature:
                                        -EKEYREJECTED */
        AWS_ERR_ACCESS_DENIED,  /* AccessDenied, UnauthorizedOperation, a bare 403: not retried, -EACCES */
        AWS_ERR_SERVER,         /* 5xx, InternalError, ServiceUnavailable: retryable, the status's errno */
        AWS_ERR_TRANSPORT,      /* no answer: retryable, the transport's errno */
        AWS_ERR_CLIENT,         /* any other error code: the status's errno */
        AWS_ERR_PROTOCOL,       /* an answer the protocol does not allow: -EBADMSG */
        AWS_ERR_NO_CREDENTIALS, /* the credentials callback had none: -ENOKEY */
        AWS_ERR_CANCELLED,      /* the client was freed (aws_client_config.notify_cancel): -ECANCELED */
        _AWS_ERR_MAX,
};
const char *aws_error_class_to_string(enum aws_error_class c); /* "throttled", "access-denied", ... */
bool aws_error_class_retryable(enum aws_error_class c);        /* throttled, server, transport */
/* Classifies an error code (with or without a "namespace#" prefix or an "Exception" suffix) and the HTTP
 * status. *ret_refresh (may be NULL) says whether new credentials may cure it (expired or unknown token). */
enum aws_error_class aws_error_classify(const char *code, long status, bool *ret_refresh);
/* The code without its "namespace#" prefix and "Exception" suffix, in buf (the form the tables use). */
const char *aws_error_code_base(const char *code, char *buf, size_t size);
/* The errno of a class (status for the classes that take it from the status). */
int aws_error_class_errno(enum aws_error_class c, long status);

enum aws_protocol {
        AWS_PROTOCOL_QUERY,   /* form POST to "/", XML answers and error documents */
        AWS_PROTOCOL_JSON_10, /* application/x-amz-json-1.0, X-Amz-Target PREFIX.Action, JSON errors */
};

struct aws_result {
        int error; /* 0 or a negative errno */
        enum aws_error_class cls;
        long status;               /* HTTP status; 0 when no answer came */
        char code[96];             /* the AWS error code ("" when none), without the JSON "namespace#" */
        char message[256];         /* the server's message (truncated), or what went wrong locally */
        bool refresh;              /* new credentials may cure it */
        uint64_t retry_after_usec; /* the answer's Retry-After, 0 when none */
        unsigned attempts;         /* requests sent for this call */
};
/* Reads an answer (a transport error < 0, or the status and body): error 0 for a 2xx, else the class, the
 * errno, the code and message from the protocol's error document. Pure. */
void aws_result_from_answer(enum aws_protocol p, int transport_error, long status, const char *body,
                            size_t len, struct aws_result *ret);

/* ---- clients and requests ---- */

/* Borrowed credentials to sign the next request with; NULL when none (the call fails with -ENOKEY). */
typedef const struct aws_credentials *(*aws_credentials_fn)(void *userdata);
/* Asks for fresh credentials; done(ctx) runs on the loop once they are there (or the attempt failed), never
 * inside refresh. <0: no refresh possible (the error is reported as it came). */
typedef void (*aws_refreshed_fn)(void *ctx);
typedef int (*aws_refresh_fn)(void *userdata, aws_refreshed_fn done, void *ctx);

struct aws_client_config {
        const char *service; /* SigV4 service: "sqs", "ec2", "autoscaling", "sts" */
        enum aws_protocol protocol;
        const char *target_prefix; /* JSON 1.0: "AmazonSQS" */
        struct aws_endpoint_query endpoint;
        const char *region;             /* the signing region; NULL: endpoint.region, else $AWS_REGION... */
        aws_credentials_fn credentials; /* NULL: unsigned requests (sts:AssumeRoleWithWebIdentity) */
        aws_refresh_fn refresh;         /* NULL: an expired token is reported, not retried */
        void *credentials_userdata;
        const char *const *headers; /* added to every request ("Accept: text/xml") */
        uint64_t timeout_usec;      /* each request, real time; 0 = 30 s */
        size_t max_body;            /* 0 = 16 MiB */
        unsigned max_attempts;      /* throttling, server and transport errors; 0 = 1 (the caller retries) */
        uint64_t backoff_base_usec; /* 0 = 100 ms */
        uint64_t backoff_max_usec;  /* 0 = 20 s */
        bool notify_cancel;         /* aws_client_free() ends calls with AWS_ERR_CANCELLED, not silently */
};

struct aws_client;
/* -EINVAL for a bad endpoint or no service, -EDESTADDRREQ without a region, -ENOMEM. */
int aws_client_new(struct loop *l, const struct aws_client_config *cfg, struct aws_client **ret);
/* Cancels the calls in flight (see notify_cancel; those callbacks may not start calls). NULL-safe. */
struct aws_client *aws_client_free(struct aws_client *c);
static inline void aws_client_freep(struct aws_client **c)
{
        aws_client_free(*c);
}
const char *aws_client_endpoint(const struct aws_client *c); /* without a trailing slash */
/* The client of a service that holds nothing but its aws_client, as its first member (asg.c, elbv2.c):
 * -EINVAL without a loop, a region or ret, else a zeroed client of size bytes whose aws_client is made from
 * cfg (aws_client_new's errors). */
int aws_service_client_new(struct loop *l, const char *region, const struct aws_client_config *cfg,
                           size_t size, void **ret);
const char *aws_client_region(const struct aws_client *c);

struct aws_call_params {
        const char *action;    /* JSON: the X-Amz-Target operation; query: for the logs (the body has it) */
        const char *body;      /* the form, or the JSON document */
        size_t body_len;       /* 0 = strlen(body) */
        uint64_t timeout_usec; /* 0: the client's */
};
/* res->error 0: body is the 2xx answer; otherwise the classified error (body is the error answer, or NULL
 * when none came). body is valid during the callback only. */
typedef void (*aws_call_fn)(const struct aws_result *res, const char *body, size_t len, void *userdata);
struct aws_request;
/* Signs and sends. done runs exactly once (unless cancelled), on the loop, never inside aws_request_start;
 * when it returns <0 (-ENOKEY without credentials, http_send()'s errors, -ECANCELED while the client is
 * being freed) nothing was sent and done never runs. ret may be NULL. */
int aws_request_start(struct aws_client *c, const struct aws_call_params *p, aws_call_fn done,
                      void *userdata, struct aws_request **ret);
/* Stops a call wherever it is (in flight, waiting to retry, waiting for credentials); done is not called.
 * Safe from any callback, its own done included (then a no-op). NULL-safe; returns NULL. */
struct aws_request *aws_request_cancel(struct aws_request *r);

/* application/x-www-form-urlencoded as botocore writes it: unreserved kept, the rest %XX ("&" between). */
int aws_form_add(struct buf *b, const char *key, const char *value);
