/* aws/credentials: where the AWS credentials come from, in the AWS SDK order, async on the core loop.
 *
 *   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY [+ AWS_SESSION_TOKEN]      source "env"
 *   2. web identity (IRSA): AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE [+ AWS_ROLE_SESSION_NAME] →
 *      sts:AssumeRoleWithWebIdentity, an UNSIGNED query-protocol POST (the token is the proof), the
 *      token file re-read on every call; endpoint as aws_sts_endpoint() says        source "web-identity"
 *   3. container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI (EKS Pod Identity) with the Authorization
 *      header read from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (or AWS_CONTAINER_AUTHORIZATION_TOKEN), or
 *      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS, http://169.254.170.2 + the URI)
 *      source "pod-identity" / "ecs"
 *   4. IMDS instance role: IMDSv2 token, iam/security-credentials/ then /ROLE          source "imds"
 * The first source whose variables are set is the one used (as the SDKs do: a configured source that fails
 * is an error, not a reason to try the next one).
 *
 * The provider caches the credentials and fetches new ones ahead of expiry (refresh_ahead before it, or at
 * half the lifetime for short-lived ones), in the background; failures are retried with core's backoff while
 * the cached credentials stay valid. It logs the source once at info; secrets are never logged. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/sigv4.h"
#include "spotdrain/util.h"

struct loop;

struct aws_creds_options {
        /* "NAME=value" strings used instead of the process environment (tests), borrowed for the provider's
         * life; NULL = getenv. */
        const char *const *env;
        const char *imds_endpoint;   /* NULL: $AWS_EC2_METADATA_SERVICE_ENDPOINT, else the IMDS address */
        uint64_t refresh_ahead_usec; /* 0 = 5 min */
        uint64_t timeout_usec;       /* each HTTP call, real time; 0 = 10 s */
        uint64_t backoff_base_usec;  /* retries after a failed fetch; 0 = 1 s */
        uint64_t backoff_max_usec;   /* 0 = 60 s */
        /* Called on the loop after each successful fetch (first one and refreshes). */
        void (*on_refresh)(const struct aws_credentials *c, void *userdata);
        void *userdata;
};

struct aws_creds_provider;
/* Picks the source (no I/O yet; IMDS when nothing else is configured). -EINVAL for an incomplete
 * configuration (AWS_ACCESS_KEY_ID without AWS_SECRET_ACCESS_KEY, AWS_ROLE_ARN without a token file). */
int aws_creds_provider_new(struct loop *l, const struct aws_creds_options *o,
                           struct aws_creds_provider **ret);
struct aws_creds_provider *aws_creds_provider_free(struct aws_creds_provider *p); /* NULL-safe */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct aws_creds_provider *, aws_creds_provider_free);
const char *aws_creds_provider_source(const struct aws_creds_provider *p); /* "env", "web-identity", ... */

/* Asks for credentials. cb runs on the loop, never inside aws_creds_get: error 0 and c (borrowed for the
 * call) or a negative errno and a readable message ("sts:AssumeRoleWithWebIdentity: InvalidIdentityToken:
 * Couldn't parse web identity token."). */
typedef void (*aws_creds_fn)(int error, const struct aws_credentials *c, const char *message,
                             void *userdata);
int aws_creds_get(struct aws_creds_provider *p, aws_creds_fn cb, void *userdata);

struct aws_creds_stats {
        uint64_t fetches;  /* successful fetches */
        uint64_t failures; /* failed fetches */
};
void aws_creds_provider_stats(const struct aws_creds_provider *p, struct aws_creds_stats *ret);

int aws_credentials_copy(struct aws_credentials *dst, const struct aws_credentials *src);

/* ---- the pieces, pure (tests and other callers) ---- */

/* The STS endpoint ("URL/", env as in aws_creds_options): AWS_ENDPOINT_URL_STS, else AWS_ENDPOINT_URL, else
 * https://sts.REGION.amazonaws.com/ (.com.cn for cn- regions) with AWS_REGION / AWS_DEFAULT_REGION, else the
 * global https://sts.amazonaws.com/. */
int aws_sts_endpoint(const char *const *env, char **ret);
/* The AssumeRoleWithWebIdentity form body (Action, Version, RoleArn, RoleSessionName, WebIdentityToken). */
int aws_sts_web_identity_body(const char *role_arn, const char *session_name, const char *token, char **ret);
/* Reads an AssumeRoleWithWebIdentity answer: 0 and the credentials (source "web-identity") for a 2xx with
 * the Credentials element; else a negative errno (the HTTP status mapped, -EBADMSG for an unreadable
 * answer) and *ret_message "Code: Message" from the ErrorResponse. */
int aws_sts_parse_web_identity(long status, const char *body, size_t len, struct aws_credentials *ret,
                               char **ret_message);
/* The JSON of the container credential endpoints and of IMDS (AccessKeyId, SecretAccessKey, Token,
 * Expiration; IMDS's Code must be "Success" when present). */
int aws_creds_parse_json(const char *body, const char *source, struct aws_credentials *ret,
                         char **ret_message);

/* ---- region ---- */
/* AWS_REGION, else AWS_DEFAULT_REGION (env as above). -ENOENT when neither is set. */
int aws_region_from_env(const char *const *env, char **ret);
/* https://sqs.REGION.amazonaws.com/ACCOUNT/NAME, https://REGION.queue.amazonaws.com/ACCOUNT/NAME (legacy)
 * and the .amazonaws.com.cn forms. -EINVAL when the URL names no region. */
int aws_region_from_queue_url(const char *url, char **ret);
/* IMDS meta-data/placement/region, async: cb(error, region) on the loop. */
typedef void (*aws_region_fn)(int error, const char *region, void *userdata);
struct imds_client;
int aws_region_from_imds(struct imds_client *c, aws_region_fn cb, void *userdata);
