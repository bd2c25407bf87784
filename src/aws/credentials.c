/* aws/credentials: the credential provider chain (see awscreds.h), async on the core loop. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/awscreds.h"
#include "spotdrain/awsreq.h"
#include "spotdrain/core.h"
#include "spotdrain/imds.h"

#define CREDS_TOKEN_FILE_MAX (64u * 1024u)
#define CREDS_REFRESH_AHEAD  (5ULL * 60ULL * 1000000ULL)
#define CREDS_TIMEOUT        (10ULL * 1000000ULL)
/* Credential answers are a few hundred bytes; anything near this is not one. */
#define CREDS_MAX_ANSWER     ((size_t)64 * 1024)
#define CREDS_ECS_HOST       "http://169.254.170.2"
#define CREDS_IMDS_ROLE_PATH "meta-data/iam/security-credentials/"

enum creds_source {
        SRC_ENV,
        SRC_WEB_IDENTITY,
        SRC_CONTAINER,
        SRC_IMDS,
};

struct waiter {
        aws_creds_fn cb;
        void *userdata;
};

struct aws_creds_provider {
        struct loop *loop;
        struct aws_creds_options o;
        enum creds_source src;
        const char *source_name;

        char *role_arn, *token_file, *session_name, *sts_url; /* web identity */
        struct aws_client *sts;
        char *container_url, *auth_token_file, *auth_token; /* container */
        struct imds_client *imds;                           /* instance role */

        struct aws_credentials cached;
        uint64_t fetched_at;
        bool have;

        bool fetching;
        struct http_call *call;
        struct imds_get *iget;
        struct timer *refresh_timer, *deliver_timer;
        struct backoff backoff;
        uint64_t retry_not_before;
        int last_error;
        char *last_message;
        bool logged;

        struct waiter *waiters;
        size_t n_waiters;
        struct aws_creds_stats stats;
};

static const char *env_get(const struct aws_creds_options *o, const char *name)
{
        size_t n = strlen(name);
        const char *v = NULL;

        if (!o->env)
                v = getenv(name);
        else
                for (const char *const *e = o->env; *e; e++)
                        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
                                v = *e + n + 1;
        return isempty(v) ? NULL : v;
}

int aws_credentials_copy(struct aws_credentials *dst, const struct aws_credentials *src)
{
        struct aws_credentials c = { .expiration_usec = src->expiration_usec };

        if (!dst || !src)
                return -EINVAL;
        if ((src->access_key_id && !(c.access_key_id = strdup(src->access_key_id))) ||
            (src->secret_access_key && !(c.secret_access_key = strdup(src->secret_access_key))) ||
            (src->session_token && !(c.session_token = strdup(src->session_token))) ||
            (src->source && !(c.source = strdup(src->source)))) {
                aws_credentials_clear(&c);
                return -ENOMEM;
        }
        *dst = c;
        return 0;
}

/* ---- parsing ---- */

int aws_creds_parse_json(const char *body, const char *source, struct aws_credentials *ret,
                         char **ret_message)
{
        cJSON *j;
        const char *code, *akid, *secret, *token, *exp;
        struct aws_credentials c = { 0 };
        int r = 0;

        if (!body || !ret || !ret_message)
                return -EINVAL;
        j = cJSON_Parse(body);
        if (!cJSON_IsObject(j)) {
                cJSON_Delete(j);
                *ret_message = strdup("credentials answer is not a JSON object");
                return -EBADMSG;
        }
        code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "Code"));
        akid = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "AccessKeyId"));
        secret = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "SecretAccessKey"));
        token = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "Token"));
        exp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "Expiration"));
        if (code && !streq(code, "Success")) {
                *ret_message = strprintf("credentials answer Code %s", code);
                r = -EIO;
        } else if (isempty(akid) || isempty(secret)) {
                *ret_message = strdup("credentials answer without AccessKeyId/SecretAccessKey");
                r = -EBADMSG;
        } else if (exp && parse_rfc3339(exp, &c.expiration_usec) < 0) {
                *ret_message = strprintf("credentials answer with unreadable Expiration %s", exp);
                r = -EBADMSG;
        }
        if (r >= 0) {
                c.access_key_id = strdup(akid);
                c.secret_access_key = strdup(secret);
                c.session_token = token ? strdup(token) : NULL;
                c.source = strdup(source ? source : "container");
                if (!c.access_key_id || !c.secret_access_key || (token && !c.session_token) || !c.source)
                        r = -ENOMEM;
        }
        /* The parsed tree holds the secret too. */
        if (secret)
                explicit_bzero((char *)secret, strlen(secret));
        if (token)
                explicit_bzero((char *)token, strlen(token));
        cJSON_Delete(j);
        if (r < 0) {
                aws_credentials_clear(&c);
                return r;
        }
        *ret = c;
        return 0;
}

/* ---- region ---- */

int aws_region_from_env(const char *const *env, char **ret)
{
        struct aws_creds_options o = { .env = env };
        const char *v = env_get(&o, "AWS_REGION") ?: env_get(&o, "AWS_DEFAULT_REGION");

        if (!ret)
                return -EINVAL;
        if (!v)
                return -ENOENT;
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

static bool region_ok(const char *s, size_t n)
{
        if (n < 4 || n > 32)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-'))
                        return false;
        return true;
}

int aws_region_from_queue_url(const char *url, char **ret)
{
        const char *h, *e, *r = NULL;
        size_t hn, rn = 0;

        if (!url || !ret)
                return -EINVAL;
        h = strstr(url, "://");
        h = h ? h + 3 : url;
        hn = strcspn(h, "/:?#");
        e = h + hn;
        /* sqs.REGION.amazonaws.com[.cn] */
        if (hn > 4 && strncmp(h, "sqs.", 4) == 0) {
                r = h + 4;
                rn = strcspn(r, ".");
                if (r + rn >= e || (strncmp(r + rn, ".amazonaws.com", 14) != 0))
                        r = NULL;
        } else {
                /* REGION.queue.amazonaws.com[.cn] (legacy) */
                const char *q = strstr(h, ".queue.amazonaws.com");
                if (q && q < e) {
                        r = h;
                        rn = (size_t)(q - h);
                }
        }
        if (!r || !region_ok(r, rn))
                return -EINVAL;
        *ret = strndup(r, rn);
        return *ret ? 0 : -ENOMEM;
}

struct region_ctx {
        aws_region_fn cb;
        void *userdata;
};

static void region_done(struct imds_client *c, const struct imds_reply *r, void *userdata)
{
        struct region_ctx *ctx = userdata;
        _cleanup_free_ char *region = NULL;
        int error = r->error;

        if (error == 0) {
                size_t n = strcspn(r->body, "\r\n");
                region = strndup(r->body, n);
                if (!region)
                        error = -ENOMEM;
                else if (!region_ok(region, n))
                        error = -EBADMSG;
        }
        ctx->cb(error, error == 0 ? region : NULL, ctx->userdata);
        free(ctx);
}

int aws_region_from_imds(struct imds_client *c, aws_region_fn cb, void *userdata)
{
        struct region_ctx *ctx;
        int r;

        if (!c || !cb)
                return -EINVAL;
        ctx = malloc(sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        *ctx = (struct region_ctx){ cb, userdata };
        r = imds_get(c, "meta-data/placement/region", region_done, ctx, NULL);
        if (r < 0)
                free(ctx);
        return r;
}

/* ---- the provider ---- */

static bool cache_valid(const struct aws_creds_provider *p)
{
        return p->have && (p->cached.expiration_usec == 0 || clk_now() < p->cached.expiration_usec);
}

static uint64_t refresh_at(const struct aws_creds_provider *p)
{
        uint64_t exp = p->cached.expiration_usec, life, ahead = p->o.refresh_ahead_usec;

        if (exp == 0)
                return UINT64_MAX;
        life = exp > p->fetched_at ? exp - p->fetched_at : 0;
        /* Short-lived credentials are renewed at half-life, so they are never used in their last moments. */
        if (ahead > life / 2)
                ahead = life / 2;
        return exp - ahead;
}

static void set_error(struct aws_creds_provider *p, int error, char *message)
{
        p->last_error = error < 0 ? error : -EIO;
        free(p->last_message);
        p->last_message = message;
}

static void deliver(struct aws_creds_provider *p)
{
        struct waiter *w = p->waiters;
        size_t n = p->n_waiters;
        bool ok = cache_valid(p);

        /* The cached credentials ran out while new ones are on their way: wait for those. */
        if (!ok && p->fetching)
                return;

        /* Callbacks may ask again: they then queue on a fresh list. */
        p->waiters = NULL;
        p->n_waiters = 0;
        for (size_t i = 0; i < n; i++)
                w[i].cb(ok ? 0 : p->last_error ?: -ENOKEY, ok ? &p->cached : NULL,
                        ok ? NULL : p->last_message ?: "no credentials", w[i].userdata);
        free(w);
}

static void deliver_timer_fn(void *userdata)
{
        struct aws_creds_provider *p = userdata;
        p->deliver_timer = NULL;
        deliver(p);
}

static void schedule_deliver(struct aws_creds_provider *p)
{
        if (!p->deliver_timer && timer_start_in(p->loop, 0, deliver_timer_fn, p, &p->deliver_timer) < 0)
                p->deliver_timer = NULL;
}

static void fetch_start(struct aws_creds_provider *p);

static void refresh_timer_fn(void *userdata)
{
        struct aws_creds_provider *p = userdata;
        p->refresh_timer = NULL;
        if (!p->fetching)
                fetch_start(p);
}

static void arm_refresh(struct aws_creds_provider *p, uint64_t at)
{
        p->refresh_timer = timer_cancel(p->refresh_timer);
        if (at != UINT64_MAX && timer_start(p->loop, at, refresh_timer_fn, p, &p->refresh_timer) < 0)
                p->refresh_timer = NULL;
}

static void fetch_done(struct aws_creds_provider *p, int error, struct aws_credentials *c, char *message)
{
        p->fetching = false;
        if (error >= 0) {
                aws_credentials_clear(&p->cached);
                p->cached = *c;
                p->have = true;
                p->fetched_at = clk_now();
                p->stats.fetches++;
                backoff_reset(&p->backoff);
                p->retry_not_before = 0;
                free(message);
                if (!p->logged) {
                        char exp[40] = "never";
                        if (p->cached.expiration_usec)
                                format_rfc3339(p->cached.expiration_usec, exp, sizeof(exp));
                        log_full(LOG_INFO, 0,
                                 (const char *[]){ "source", p->source_name, "expires", exp, NULL },
                                 "AWS credentials from %s", p->source_name);
                        p->logged = true;
                } else
                        log_debug("AWS credentials from %s refreshed", p->source_name);
                arm_refresh(p, refresh_at(p));
                if (p->o.on_refresh)
                        p->o.on_refresh(&p->cached, p->o.userdata);
        } else {
                uint64_t delay = backoff_next(&p->backoff);
                p->stats.failures++;
                log_debug_reason(error, message, "AWS credentials from %s", p->source_name);
                set_error(p, error, message);
                p->retry_not_before = clk_now() + delay;
                /* While the cached credentials last, keep trying in the background. */
                if (cache_valid(p))
                        arm_refresh(p, p->retry_not_before);
        }
        /* Through the loop: a fetch can fail inside aws_creds_get(), whose caller is not ready for it. */
        schedule_deliver(p);
}

static void fetch_fail(struct aws_creds_provider *p, int error, char *message)
{
        /* IMDS is the chain's last resort: its failure means that no source had credentials, which is
         * what the user needs to hear, with how to provide them. */
        if (p->src == SRC_IMDS && message) {
                char *all = strprintf(
                    "no AWS credentials: none in the environment (AWS_ACCESS_KEY_ID, "
                    "AWS_SECRET_ACCESS_KEY), "
                    "no web identity (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), no EKS Pod Identity "
                    "(AWS_CONTAINER_CREDENTIALS_FULL_URI), and none from IMDS (%s); give spotdrain an IAM "
                    "role "
                    "through EKS Pod Identity or IRSA, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                    message);
                if (all) {
                        free(message);
                        message = all;
                }
        }
        fetch_done(p, error, NULL, message ? message : strdup("out of memory"));
}

/* -- web identity -- */

static void sts_done(const struct aws_result *a, const char *body, size_t len, void *userdata)
{
        struct aws_creds_provider *p = userdata;
        struct aws_credentials c = { 0 };
        char *msg = NULL, *full;
        int r;

        if (a->status == 0) {
                fetch_fail(p, a->error,
                           strprintf("sts:AssumeRoleWithWebIdentity at %s: %s", p->sts_url, a->message));
                return;
        }
        r = aws_sts_parse_web_identity(a->status, body, len, &c, &msg);
        if (r < 0) {
                full =
                    strprintf("sts:AssumeRoleWithWebIdentity at %s: %s", p->sts_url, msg ? msg : "failed");
                free(msg);
                fetch_fail(p, r, full);
                return;
        }
        fetch_done(p, 0, &c, NULL);
}

static void fetch_web_identity(struct aws_creds_provider *p)
{
        _cleanup_free_ char *token = NULL;
        char *body = NULL;
        size_t len;
        int r;

        /* The kubelet rotates the projected token: read it on every call. */
        r = read_file_full(p->token_file, CREDS_TOKEN_FILE_MAX, &token, &len);
        if (r < 0)
                return fetch_fail(p, r,
                                  strprintf("web identity token file %s: %s", p->token_file, strerror(-r)));
        while (len > 0 && isspace((unsigned char)token[len - 1]))
                token[--len] = '\0';
        r = aws_sts_web_identity_body(p->role_arn, p->session_name, token, &body);
        explicit_bzero(token, len);
        if (r < 0)
                return fetch_fail(p, r, strdup("cannot build the AssumeRoleWithWebIdentity request"));
        /* Unsigned (the STS client has no credentials): the token is the proof. The layer keeps (and wipes)
         * its own copy of the body. */
        r = aws_request_start(
            p->sts, &(struct aws_call_params){ .action = "AssumeRoleWithWebIdentity", .body = body },
            sts_done, p, NULL);
        explicit_bzero(body, strlen(body));
        free(body);
        if (r < 0)
                fetch_fail(p, r,
                           strprintf("sts:AssumeRoleWithWebIdentity at %s: %s", p->sts_url, strerror(-r)));
}

/* -- container (EKS Pod Identity, ECS) -- */

static void container_done(const struct http_response *resp, void *userdata)
{
        struct aws_creds_provider *p = userdata;
        struct aws_credentials c = { 0 };
        char *msg = NULL;
        int r;

        p->call = NULL;
        if (resp->error < 0)
                return fetch_fail(p, resp->error,
                                  strprintf("container credentials at %s: %s", p->container_url,
                                            resp->errbuf[0] ? resp->errbuf : strerror(-resp->error)));
        if (resp->status < 200 || resp->status > 299) {
                size_t n = strcspn(resp->body ? resp->body : "", "\n");
                r = http_status_to_errno(resp->status);
                return fetch_fail(p, r ?: -EIO,
                                  strprintf("container credentials at %s: HTTP %ld: %.*s", p->container_url,
                                            resp->status, (int)(n > 200 ? 200 : n),
                                            resp->body ? resp->body : ""));
        }
        r = aws_creds_parse_json(resp->body, p->source_name, &c, &msg);
        if (r < 0) {
                char *full = strprintf("container credentials at %s: %s", p->container_url, msg ? msg : "");
                free(msg);
                return fetch_fail(p, r, full);
        }
        fetch_done(p, 0, &c, NULL);
}

static void fetch_container(struct aws_creds_provider *p)
{
        _cleanup_free_ char *token = NULL, *auth = NULL;
        const char *headers[3] = { "Accept: application/json", NULL, NULL };
        size_t len = 0;
        int r;

        if (p->auth_token_file) {
                r = read_file_full(p->auth_token_file, CREDS_TOKEN_FILE_MAX, &token, &len);
                if (r < 0)
                        return fetch_fail(p, r,
                                          strprintf("container authorization token file %s: %s",
                                                    p->auth_token_file, strerror(-r)));
        } else if (p->auth_token) {
                token = strdup(p->auth_token);
                if (!token)
                        return fetch_fail(p, -ENOMEM, NULL);
                len = strlen(token);
        }
        if (token) {
                while (len > 0 && isspace((unsigned char)token[len - 1]))
                        token[--len] = '\0';
                auth = strprintf("Authorization: %s", token);
                explicit_bzero(token, len);
                if (!auth)
                        return fetch_fail(p, -ENOMEM, NULL);
                headers[1] = auth;
        }
        struct http_request req = { .url = p->container_url,
                                    .headers = headers,
                                    .timeout_usec = p->o.timeout_usec,
                                    .max_body = CREDS_MAX_ANSWER };
        r = http_send(p->loop, &req, container_done, p, &p->call);
        if (auth)
                explicit_bzero(auth, strlen(auth));
        if (r < 0)
                fetch_fail(p, r,
                           strprintf("container credentials at %s: %s", p->container_url, strerror(-r)));
}

/* -- IMDS instance role -- */

static void imds_creds_done(struct imds_client *c, const struct imds_reply *rp, void *userdata)
{
        struct aws_creds_provider *p = userdata;
        struct aws_credentials cr = { 0 };
        char *msg = NULL;
        int r;

        p->iget = NULL;
        if (rp->error < 0)
                return fetch_fail(p, rp->error,
                                  strprintf("IMDS role credentials: %s", strerror(-rp->error)));
        r = aws_creds_parse_json(rp->body, "imds", &cr, &msg);
        if (r < 0) {
                char *full = strprintf("IMDS role credentials: %s", msg ? msg : "");
                free(msg);
                return fetch_fail(p, r, full);
        }
        fetch_done(p, 0, &cr, NULL);
}

static void imds_role_done(struct imds_client *c, const struct imds_reply *rp, void *userdata)
{
        struct aws_creds_provider *p = userdata;
        _cleanup_free_ char *path = NULL;
        size_t n;
        int r;

        p->iget = NULL;
        if (rp->error < 0)
                return fetch_fail(p, rp->error,
                                  strprintf("IMDS %s: %s%s", CREDS_IMDS_ROLE_PATH, strerror(-rp->error),
                                            rp->error == -ENOENT ? " (no instance profile attached)" : ""));
        n = strcspn(rp->body, "\r\n");
        if (n == 0)
                return fetch_fail(p, -ENOENT, strdup("IMDS: no instance profile role"));
        path = strprintf(CREDS_IMDS_ROLE_PATH "%.*s", (int)n, rp->body);
        if (!path)
                return fetch_fail(p, -ENOMEM, NULL);
        r = imds_get(p->imds, path, imds_creds_done, p, &p->iget);
        if (r < 0)
                fetch_fail(p, r, strprintf("IMDS role credentials: %s", strerror(-r)));
}

static void fetch_imds(struct aws_creds_provider *p)
{
        int r = imds_get(p->imds, CREDS_IMDS_ROLE_PATH, imds_role_done, p, &p->iget);
        if (r < 0)
                fetch_fail(p, r, strprintf("IMDS %s: %s", CREDS_IMDS_ROLE_PATH, strerror(-r)));
}

static void fetch_start(struct aws_creds_provider *p)
{
        p->fetching = true;
        switch (p->src) {
        case SRC_WEB_IDENTITY:
                fetch_web_identity(p);
                break;
        case SRC_CONTAINER:
                fetch_container(p);
                break;
        case SRC_IMDS:
                fetch_imds(p);
                break;
        case SRC_ENV:
                p->fetching = false;
                break;
        }
}

int aws_creds_get(struct aws_creds_provider *p, aws_creds_fn cb, void *userdata)
{
        struct waiter *nw;

        if (!p || !cb)
                return -EINVAL;
        nw = realloc(p->waiters, (p->n_waiters + 1) * sizeof(*nw));
        if (!nw)
                return -ENOMEM;
        p->waiters = nw;
        p->waiters[p->n_waiters++] = (struct waiter){ cb, userdata };

        if (cache_valid(p)) {
                /* Still good, even in the refresh window: answer now, renew in the background. */
                schedule_deliver(p);
                if (!p->fetching && clk_now() >= refresh_at(p) && clk_now() >= p->retry_not_before)
                        fetch_start(p);
                return 0;
        }
        if (p->fetching)
                return 0;
        if (clk_now() < p->retry_not_before) {
                /* Backing off after a failure: answer with the last error. */
                schedule_deliver(p);
                return 0;
        }
        fetch_start(p);
        return 0;
}

/* ---- set-up ---- */

static int dup_env(const struct aws_creds_options *o, const char *name, char **ret)
{
        const char *v = env_get(o, name);
        *ret = NULL;
        if (!v)
                return 0;
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

static struct aws_endpoint_query sts_endpoint_query(const char *const *env)
{
        return (struct aws_endpoint_query){
                .service_id = "STS", .host = "sts", .region = aws_env_region(env), .env = env
        };
}

int aws_sts_endpoint(const char *const *env, char **ret)
{
        struct aws_endpoint_query q = sts_endpoint_query(env);
        _cleanup_free_ char *e = NULL;
        int r;

        if (!ret)
                return -EINVAL;
        r = aws_endpoint_resolve(&q, &e);
        if (r < 0)
                return r;
        *ret = strprintf("%s/", e);
        return *ret ? 0 : -ENOMEM;
}

static int setup_web_identity(struct aws_creds_provider *p)
{
        int r;

        if ((r = dup_env(&p->o, "AWS_ROLE_ARN", &p->role_arn)) < 0 ||
            (r = dup_env(&p->o, "AWS_WEB_IDENTITY_TOKEN_FILE", &p->token_file)) < 0 ||
            (r = dup_env(&p->o, "AWS_ROLE_SESSION_NAME", &p->session_name)) < 0)
                return r;
        if (!p->token_file)
                return -EINVAL;
        if (!p->session_name &&
            !(p->session_name =
                  strprintf("spotdrain-%llu", (unsigned long long)(now_realtime_usec() / 1000000))))
                return -ENOMEM;
        /* The global endpoint signs (were it signed) for us-east-1. */
        r = aws_client_new(
            p->loop,
            &(struct aws_client_config){ .service = "sts",
                                         .protocol = AWS_PROTOCOL_QUERY,
                                         .endpoint = sts_endpoint_query(p->o.env),
                                         .region = aws_env_region(p->o.env) ?: "us-east-1",
                                         .headers = (const char *const[]){ "Accept: text/xml", NULL },
                                         .timeout_usec = p->o.timeout_usec,
                                         .max_body = CREDS_MAX_ANSWER },
            &p->sts);
        if (r < 0)
                return r;
        p->sts_url = strprintf("%s/", aws_client_endpoint(p->sts));
        return p->sts_url ? 0 : -ENOMEM;
}

static int setup_container(struct aws_creds_provider *p, const char *full, const char *relative)
{
        int r;

        if (full) {
                p->container_url = strdup(full);
                p->source_name = "pod-identity";
        } else {
                p->container_url = strprintf(CREDS_ECS_HOST "%s%s", relative[0] == '/' ? "" : "/", relative);
                p->source_name = "ecs";
        }
        if (!p->container_url)
                return -ENOMEM;
        if ((r = dup_env(&p->o, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", &p->auth_token_file)) < 0 ||
            (!p->auth_token_file &&
             (r = dup_env(&p->o, "AWS_CONTAINER_AUTHORIZATION_TOKEN", &p->auth_token)) < 0))
                return r;
        return 0;
}

int aws_creds_provider_new(struct loop *l, const struct aws_creds_options *o,
                           struct aws_creds_provider **ret)
{
        _cleanup_(aws_creds_provider_freep) struct aws_creds_provider *p = NULL;
        const char *akid, *secret, *full, *relative;
        int r;

        if (!l || !ret)
                return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->loop = l;
        if (o)
                p->o = *o;
        if (!p->o.refresh_ahead_usec)
                p->o.refresh_ahead_usec = CREDS_REFRESH_AHEAD;
        if (!p->o.timeout_usec)
                p->o.timeout_usec = CREDS_TIMEOUT;
        p->backoff =
            BACKOFF_INIT(p->o.backoff_base_usec ?: 1000000ULL, p->o.backoff_max_usec ?: 60000000ULL);

        akid = env_get(&p->o, "AWS_ACCESS_KEY_ID");
        secret = env_get(&p->o, "AWS_SECRET_ACCESS_KEY");
        full = env_get(&p->o, "AWS_CONTAINER_CREDENTIALS_FULL_URI");
        relative = env_get(&p->o, "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
        if (akid || secret) {
                if (!akid || !secret)
                        return -EINVAL;
                p->src = SRC_ENV;
                p->source_name = "env";
                if ((r = dup_env(&p->o, "AWS_ACCESS_KEY_ID", &p->cached.access_key_id)) < 0 ||
                    (r = dup_env(&p->o, "AWS_SECRET_ACCESS_KEY", &p->cached.secret_access_key)) < 0 ||
                    (r = dup_env(&p->o, "AWS_SESSION_TOKEN", &p->cached.session_token)) < 0 ||
                    !(p->cached.source = strdup("env")))
                        return r < 0 ? r : -ENOMEM;
                p->have = true;
        } else if (env_get(&p->o, "AWS_ROLE_ARN") || env_get(&p->o, "AWS_WEB_IDENTITY_TOKEN_FILE")) {
                p->src = SRC_WEB_IDENTITY;
                p->source_name = "web-identity";
                if (!env_get(&p->o, "AWS_ROLE_ARN"))
                        return -EINVAL;
                r = setup_web_identity(p);
                if (r < 0)
                        return r;
        } else if (full || relative) {
                p->src = SRC_CONTAINER;
                r = setup_container(p, full, relative);
                if (r < 0)
                        return r;
        } else {
                struct imds_options io = { .endpoint = p->o.imds_endpoint };
                p->src = SRC_IMDS;
                p->source_name = "imds";
                r = imds_client_new(l, &io, &p->imds);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

struct aws_creds_provider *aws_creds_provider_free(struct aws_creds_provider *p)
{
        if (!p)
                return NULL;
        http_cancel(p->call);
        aws_client_free(p->sts);
        imds_get_cancel(p->iget);
        imds_client_free(p->imds);
        timer_cancel(p->refresh_timer);
        timer_cancel(p->deliver_timer);
        aws_credentials_clear(&p->cached);
        free(p->role_arn);
        free(p->token_file);
        free(p->session_name);
        free(p->sts_url);
        free(p->container_url);
        free(p->auth_token_file);
        if (p->auth_token) {
                explicit_bzero(p->auth_token, strlen(p->auth_token));
                free(p->auth_token);
        }
        free(p->last_message);
        free(p->waiters);
        free(p);
        return NULL;
}

const char *aws_creds_provider_source(const struct aws_creds_provider *p)
{
        return p ? p->source_name : NULL;
}

void aws_creds_provider_stats(const struct aws_creds_provider *p, struct aws_creds_stats *ret)
{
        *ret = p->stats;
}
