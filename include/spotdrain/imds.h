/* aws/imds: the EC2 instance metadata service (IMDS) client, IMDSv2 session tokens, async on the core loop.
 *
 * Every GET carries a session token obtained by PUT /latest/api/token with the
 * X-aws-ec2-metadata-token-ttl-seconds header. One token is shared by every request and renewed a little
 * before its TTL runs out (tracked here on the monotonic clock; the TTL header of the answer is not
 * trusted), and at once when a GET answers 401 (the GET is then retried once with the new token).
 * IMDSv1 (GETs without a token) is only used when imds_options.allow_v1 is set, and only while token
 * requests fail.
 *
 * Hop limit: the answer to the token PUT is sent with an IP TTL of the instance's HttpPutResponseHopLimit
 * (1 on launch templates unless changed). A pod without host networking sits one hop further away, so with
 * hop limit 1 the token answer is dropped on the way: the PUT times out and, on instances that require
 * IMDSv2, every GET is refused with 401. Such an agent never sees a notice. Run the agent with
 * hostNetwork: true, or set the hop limit to 2; allow_v1 only helps where IMDSv1 is still enabled. The
 * client reports this case as token requests failing with -ETIMEDOUT (imds_stats.token_failures), and the
 * agent says so in its log.
 *
 * Errors are answered after one request timeout (1 s by default, real time): a hung IMDS costs one poll, not
 * the agent. Failed token requests are retried with jittered exponential backoff (core's backoff); while a
 * retry is pending GETs fail at once with the token error (or go out as IMDSv1 when allowed). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/util.h"

/* The IMDS client's configuration (imds.*). Its keys: imds_config_section (its settings.c). */
struct imds_settings {
        char *endpoint;
        uint64_t poll_interval_usec;
        uint64_t token_ttl_usec;
        bool allow_v1;
};
struct config_section;
extern const struct config_section imds_config_section;

struct loop;

#define IMDS_DEFAULT_ENDPOINT     "http://169.254.169.254"
#define IMDS_ENDPOINT_ENV         "AWS_EC2_METADATA_SERVICE_ENDPOINT"
#define IMDS_TOKEN_TTL_MAX        21600u /* seconds; also the default */
#define IMDS_DEFAULT_TIMEOUT_USEC (1000ULL * 1000ULL)
#define IMDS_BODY_MAX             (256u * 1024u)
#define IMDS_TOKEN_TTL_HEADER     "X-aws-ec2-metadata-token-ttl-seconds"
#define IMDS_TOKEN_HEADER         "X-aws-ec2-metadata-token"

struct imds_options {
        const char *endpoint; /* NULL: $AWS_EC2_METADATA_SERVICE_ENDPOINT, else IMDS_DEFAULT_ENDPOINT */
        unsigned token_ttl_seconds; /* 1..21600; 0 = 21600 */
        uint64_t timeout_usec;      /* each request, real time; 0 = 1 s */
        bool allow_v1;              /* fall back to GETs without a token while token requests fail */
        uint64_t backoff_base_usec; /* token request retries; 0 = 200 ms */
        uint64_t backoff_max_usec;  /* 0 = 5 s */
};

struct imds_client;
/* The client borrows l. Errors: -EINVAL for a TTL out of range or an endpoint that is not http(s)://. */
int imds_client_new(struct loop *l, const struct imds_options *o, struct imds_client **ret);
/* Cancels every request under way (no callbacks). NULL-safe; returns NULL. */
struct imds_client *imds_client_free(struct imds_client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct imds_client *, imds_client_free);
/* The base URL in use, without a trailing slash. */
const char *imds_client_endpoint(const struct imds_client *c);
/* Forgets the token, so the next GET asks for a new one. */
void imds_client_forget_token(struct imds_client *c);

struct imds_reply {
        /* 0 (2xx); -ENOENT 404 (the item does not exist: for the notice paths, "no notice"); -EACCES 401
         * even with a fresh token; -EPERM 403; -EBUSY 429; -EIO/-EAGAIN 5xx; transport errors as core's
         * HTTP client reports them (-ETIMEDOUT, -ECONNREFUSED, ...); a token error when no token could be
         * had. */
        int error;
        long status;      /* 0 when no answer came */
        const char *body; /* 2xx: the body, NUL-terminated (""), borrowed for the callback; else NULL */
        size_t body_len;
};

struct imds_get;
typedef void (*imds_done_fn)(struct imds_client *c, const struct imds_reply *r, void *userdata);
/* GETs path below /latest/ ("meta-data/instance-id", "dynamic/instance-identity/document"; a leading
 * "/latest/" is allowed). done runs exactly once (unless cancelled), from the loop, never from inside
 * imds_get(); the handle is invalid once done has started. ret may be NULL. */
int imds_get(struct imds_client *c, const char *path, imds_done_fn done, void *userdata,
             struct imds_get **ret);
/* Cancels a GET under way; done is not called. NULL-safe; returns NULL. */
struct imds_get *imds_get_cancel(struct imds_get *g);

struct imds_stats {
        uint64_t requests;       /* GETs sent (retries included) */
        uint64_t tokens;         /* tokens obtained */
        uint64_t token_failures; /* token requests that failed */
        uint64_t unauthorized;   /* GETs answered 401 */
        uint64_t v1_requests;    /* GETs sent without a token (IMDSv1 fallback) */
        int last_token_error;    /* of the latest failed token request; 0 once one succeeds */
};
void imds_client_stats(const struct imds_client *c, struct imds_stats *ret);
