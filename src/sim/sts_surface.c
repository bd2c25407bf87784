/* The simulator's STS surface: AssumeRoleWithWebIdentity in the query protocol (see sts_surface.h). */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sim/aws_request.h"
#include "sim/model.h"
#include "sim/sts_surface.h"
#include "spotdrain/util.h"

#define STS_BODY_MAX (64u * 1024u)
#define STS_XMLNS    "https://sts.amazonaws.com/doc/2011-06-15/"

struct issued {
        char akid[21];
        char secret[41];
        char *token;
        uint64_t expires_usec;
};

struct sim_sts {
        struct sim *sim;
        struct MHD_Daemon *daemon;
        char url[64];
        pthread_mutex_t lock;
        struct issued **issued; /* each entry lives until stop: lookups hand out its secret */
        size_t n_issued, cap_issued;
        struct sim_sts_fault fault;
        struct sim_sts_stats stats;
        uint64_t request_seq;
};

struct sts_req {
        struct buf body;
        bool too_big;
};

struct param {
        char *name, *value;
};

struct params {
        struct param *v;
        size_t n;
};

static void params_free(struct params *p)
{
        for (size_t i = 0; i < p->n; i++) {
                free(p->v[i].name);
                free(p->v[i].value);
        }
        free(p->v);
        *p = (struct params){ 0 };
}

static int params_add(struct params *p, char *name, char *value)
{
        struct param *nv = realloc(p->v, (p->n + 1) * sizeof(*nv));
        if (!nv) {
                free(name);
                free(value);
                return -ENOMEM;
        }
        p->v = nv;
        p->v[p->n++] = (struct param){ name, value };
        return 0;
}

static const char *param_get(const struct params *p, const char *name)
{
        for (size_t i = 0; i < p->n; i++)
                if (streq(p->v[i].name, name))
                        return p->v[i].value;
        return NULL;
}

static int form_param(void *userdata, const char *name, const char *value)
{
        char *n = strdup(name), *v = strdup(value);
        if (!n || !v) {
                free(n);
                free(v);
                return -ENOMEM;
        }
        return params_add(userdata, n, v);
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
        struct params *p = cls;
        char *n = strdup(key), *v = strdup(value ? value : "");
        if (!n || !v) {
                free(n);
                free(v);
                return MHD_NO;
        }
        return params_add(p, n, v) < 0 ? MHD_NO : MHD_YES;
}

static int xml_escape(struct buf *b, const char *s)
{
        int r = 0;
        for (; r >= 0 && s && *s; s++) {
                switch (*s) {
                case '&':
                        r = buf_printf(b, "&amp;");
                        break;
                case '<':
                        r = buf_printf(b, "&lt;");
                        break;
                case '>':
                        r = buf_printf(b, "&gt;");
                        break;
                case '"':
                        r = buf_printf(b, "&quot;");
                        break;
                default:
                        r = buf_append(b, s, 1);
                }
        }
        return r;
}

static uint64_t sts_now(struct sim_sts *t)
{
        uint64_t now;
        if (!t->sim)
                return now_realtime_usec();
        sim_lock(t->sim);
        now = sim_wall_usec(t->sim, sim_now(t->sim));
        sim_unlock(t->sim);
        return now;
}

static void request_id(struct sim_sts *t, char out[37])
{
        uint64_t seq;
        pthread_mutex_lock(&t->lock);
        seq = ++t->request_seq;
        pthread_mutex_unlock(&t->lock);
        snprintf(out, 37, "5f7e%04x-0000-4000-8000-%012" PRIx64, (unsigned)(seq & 0xffff), seq);
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, struct buf *body)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        resp = MHD_create_response_from_buffer(body->len, body->data, MHD_RESPMEM_MUST_COPY);
        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/xml");
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result respond_error(struct sim_sts *t, struct MHD_Connection *c, unsigned status,
                                     const char *type, const char *code, const char *message)
{
        struct buf b = { 0 };
        char rid[37];
        enum MHD_Result ret;

        request_id(t, rid);
        pthread_mutex_lock(&t->lock);
        t->stats.errors++;
        pthread_mutex_unlock(&t->lock);
        if (buf_printf(&b,
                       "<ErrorResponse xmlns=\"" STS_XMLNS
                       "\">\n  <Error>\n    <Type>%s</Type>\n    <Code>%s</Code>\n"
                       "    <Message>",
                       type, code) < 0 ||
            xml_escape(&b, message) < 0 ||
            buf_printf(&b, "</Message>\n  </Error>\n  <RequestId>%s</RequestId>\n</ErrorResponse>\n", rid) <
                0) {
                buf_free(&b);
                return MHD_NO;
        }
        ret = respond(c, status, &b);
        buf_free(&b);
        return ret;
}

/* The JWT's claims (the signature is not checked). NULL when the token is not a JWT with a JSON payload. */
static cJSON *jwt_claims(const char *token)
{
        const char *a = strchr(token, '.'), *b = a ? strchr(a + 1, '.') : NULL;
        _cleanup_free_ char *std = NULL;
        _cleanup_free_ unsigned char *json = NULL;
        size_t n, len = 0, json_len = 0;
        cJSON *claims;

        if (!a || !b || b == a + 1 || a == token)
                return NULL;
        n = (size_t)(b - a - 1);
        std = malloc(n + 4);
        if (!std)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                char ch = a[1 + i];
                std[len++] = ch == '-' ? '+' : ch == '_' ? '/' : ch;
        }
        while (len % 4)
                std[len++] = '=';
        std[len] = '\0';
        if (base64_decode(std, len, &json, &json_len) < 0)
                return NULL;
        claims = cJSON_ParseWithLength((const char *)json, json_len);
        if (claims && !cJSON_IsObject(claims)) {
                cJSON_Delete(claims);
                return NULL;
        }
        return claims;
}

static bool session_name_ok(const char *s)
{
        size_t n = strlen(s);
        if (n < 2 || n > 64)
                return false;
        for (; *s; s++)
                if (!(isalnum((unsigned char)*s) || strchr("_+=,.@-", *s)))
                        return false;
        return true;
}

static void random_chars(char *out, size_t n, const char *alphabet)
{
        unsigned char rnd[128]; /* callers ask for at most 96 */
        size_t an = strlen(alphabet);

        if (n > sizeof(rnd))
                n = sizeof(rnd);
        if (getrandom(rnd, n, 0) != (ssize_t)n)
                for (size_t i = 0; i < n; i++)
                        rnd[i] = (unsigned char)rand();
        for (size_t i = 0; i < n; i++)
                out[i] = alphabet[rnd[i] % an];
        out[n] = '\0';
}

static void issued_free(struct issued *is)
{
        if (!is)
                return;
        explicit_bzero(is->secret, sizeof(is->secret));
        free(is->token);
        free(is);
}

static int issue(struct sim_sts *t, uint64_t expires, struct issued *ret)
{
        struct issued *is = calloc(1, sizeof(*is));
        char tok[97];

        if (!is)
                return -ENOMEM;
        is->expires_usec = expires;
        memcpy(is->akid, "ASIA", 4);
        random_chars(is->akid + 4, 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");
        random_chars(is->secret, 40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
        random_chars(tok, 96, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
        is->token = strprintf("IQoJb3JpZ2luX2VjSIM%s==", tok);
        if (!is->token) {
                issued_free(is);
                return -ENOMEM;
        }
        pthread_mutex_lock(&t->lock);
        if (t->n_issued == t->cap_issued) {
                size_t nc = t->cap_issued ? t->cap_issued * 2 : 16;
                struct issued **nv = realloc(t->issued, nc * sizeof(*nv));
                if (!nv) {
                        pthread_mutex_unlock(&t->lock);
                        issued_free(is);
                        return -ENOMEM;
                }
                t->issued = nv;
                t->cap_issued = nc;
        }
        t->issued[t->n_issued++] = is;
        t->stats.issued++;
        *ret = *is;
        pthread_mutex_unlock(&t->lock);
        return 0;
}

static enum MHD_Result answer(struct sim_sts *t, struct MHD_Connection *c, const struct params *p)
{
        const char *action = param_get(p, "Action"), *role = param_get(p, "RoleArn"),
                   *session = param_get(p, "RoleSessionName"), *token = param_get(p, "WebIdentityToken"),
                   *duration_s = param_get(p, "DurationSeconds");
        unsigned long duration = 3600;
        struct sim_sts_fault fault;
        struct issued is;
        struct buf b = { 0 };
        char rid[37], exp[40], msg[160];
        uint64_t now = sts_now(t);
        enum MHD_Result ret;

        pthread_mutex_lock(&t->lock);
        fault = t->fault;
        if (t->fault.error_500 > 0)
                t->fault.error_500--;
        pthread_mutex_unlock(&t->lock);

        if (fault.error_500 > 0)
                return respond_error(t, c, 500, "Receiver", "InternalFailure",
                                     "The request processing has failed "
                                     "because of an unknown error.");
        if (!action)
                return respond_error(t, c, 400, "Sender", "MissingAction", "Missing Action");
        if (!streq(action, "AssumeRoleWithWebIdentity")) {
                snprintf(msg, sizeof(msg), "Could not find operation %.100s for version %.20s", action,
                         param_get(p, "Version") ?: "NO_VERSION_SPECIFIED");
                return respond_error(t, c, 400, "Sender", "InvalidAction", msg);
        }
        if (isempty(role) || isempty(session))
                return respond_error(t, c, 400, "Sender", "MissingParameter",
                                     isempty(role)
                                         ? "The request must contain the parameter RoleArn"
                                         : "The request must contain the parameter RoleSessionName");
        if (!startswith(role, "arn:") || !strstr(role, ":role/") || strlen(role) < 20 || strlen(role) > 2048)
                return respond_error(t, c, 400, "Sender", "ValidationError",
                                     "RoleArn is not a valid role ARN");
        if (!session_name_ok(session))
                return respond_error(
                    t, c, 400, "Sender", "ValidationError",
                    "1 validation error detected: Value at 'roleSessionName' failed to satisfy "
                    "constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*");
        if (duration_s) {
                char *e = NULL;
                duration = strtoul(duration_s, &e, 10);
                if (!e || *e || duration < 900 || duration > 43200)
                        return respond_error(
                            t, c, 400, "Sender", "ValidationError",
                            "1 validation error detected: Value at 'durationSeconds' failed to "
                            "satisfy constraint: Member must have value between 900 and 43200");
        }
        if (fault.access_denied)
                return respond_error(t, c, 403, "Sender", "AccessDenied",
                                     "Not authorized to perform sts:AssumeRoleWithWebIdentity");

        cJSON *claims = isempty(token) ? NULL : jwt_claims(token);
        if (!claims)
                return respond_error(t, c, 400, "Sender", "InvalidIdentityToken",
                                     "Couldn't parse web identity token.");
        double jexp = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(claims, "exp"));
        if (jexp == jexp && jexp > 0 && (uint64_t)jexp * 1000000ULL <= now) {
                snprintf(msg, sizeof(msg),
                         "Token expired: current date/time %" PRIu64
                         " must be before the expiration date/time%" PRIu64,
                         (uint64_t)(now / 1000000u), (uint64_t)jexp);
                cJSON_Delete(claims);
                return respond_error(t, c, 400, "Sender", "ExpiredTokenException", msg);
        }
        const char *sub = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "sub"));
        const char *iss = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(claims, "iss"));
        cJSON *aud = cJSON_GetObjectItemCaseSensitive(claims, "aud");
        const char *audience = cJSON_IsArray(aud) ? cJSON_GetStringValue(cJSON_GetArrayItem(aud, 0))
                                                  : cJSON_GetStringValue(aud);

        if (fault.duration_cap > 0 && duration > fault.duration_cap)
                duration = fault.duration_cap;
        if (issue(t, now + (uint64_t)duration * 1000000ULL, &is) < 0) {
                cJSON_Delete(claims);
                return MHD_NO;
        }
        format_rfc3339(is.expires_usec / 1000000ULL * 1000000ULL, exp, sizeof(exp));
        request_id(t, rid);
        const char *role_name = strrchr(role, '/') + 1;
        const char *provider = iss ? (startswith(iss, "https://") ? iss + 8 : iss) : "sim.spotdrain.local";
        int r = buf_printf(&b, "<AssumeRoleWithWebIdentityResponse xmlns=\"" STS_XMLNS "\">\n"
                               "  <AssumeRoleWithWebIdentityResult>\n"
                               "    <SubjectFromWebIdentityToken>");
        if (r >= 0)
                r = xml_escape(&b, sub ? sub : "");
        if (r >= 0)
                r = buf_printf(&b, "</SubjectFromWebIdentityToken>\n    <Audience>");
        if (r >= 0)
                r = xml_escape(&b, audience ? audience : "sts.amazonaws.com");
        if (r >= 0)
                r = buf_printf(
                    &b, "</Audience>\n    <AssumedRoleUser>\n      <AssumedRoleId>AROASIMULATEDROLEID:");
        if (r >= 0)
                r = xml_escape(&b, session);
        if (r >= 0)
                r = buf_printf(&b, "</AssumedRoleId>\n      <Arn>arn:aws:sts::" SIM_STS_ACCOUNT
                                   ":assumed-role/");
        if (r >= 0)
                r = xml_escape(&b, role_name);
        if (r >= 0)
                r = buf_append(&b, "/", 1);
        if (r >= 0)
                r = xml_escape(&b, session);
        if (r >= 0)
                r = buf_printf(&b,
                               "</Arn>\n    </AssumedRoleUser>\n    <Provider>arn:aws:iam::" SIM_STS_ACCOUNT
                               ":oidc-provider/");
        if (r >= 0)
                r = xml_escape(&b, provider);
        if (r >= 0)
                r = buf_printf(
                    &b,
                    "</Provider>\n    <Credentials>\n      <AccessKeyId>%s</AccessKeyId>\n"
                    "      <SecretAccessKey>%s</SecretAccessKey>\n"
                    "      <SessionToken>%s</SessionToken>\n      <Expiration>%s</Expiration>\n"
                    "    </Credentials>\n  </AssumeRoleWithWebIdentityResult>\n  <ResponseMetadata>\n"
                    "    <RequestId>%s</RequestId>\n  </ResponseMetadata>\n"
                    "</AssumeRoleWithWebIdentityResponse>\n",
                    is.akid, is.secret, is.token, exp, rid);
        cJSON_Delete(claims);
        if (r < 0) {
                buf_free(&b);
                return MHD_NO;
        }
        ret = respond(c, 200, &b);
        buf_free(&b);
        return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls)
{
        struct sim_sts *t = cls;
        struct sts_req *rq = *con_cls;
        struct params p = { 0 };
        enum MHD_Result ret;

        if (!rq) {
                rq = calloc(1, sizeof(*rq));
                if (!rq)
                        return MHD_NO;
                *con_cls = rq;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                if (rq->body.len + *upload_data_size > STS_BODY_MAX)
                        rq->too_big = true;
                else if (buf_append(&rq->body, upload_data, *upload_data_size) < 0)
                        return MHD_NO;
                *upload_data_size = 0;
                return MHD_YES;
        }

        pthread_mutex_lock(&t->lock);
        t->stats.requests++;
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization") ||
            MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "X-Amz-Signature"))
                t->stats.signed_requests++;
        pthread_mutex_unlock(&t->lock);

        if (rq->too_big)
                return respond_error(t, c, 413, "Sender", "RequestEntityTooLarge", "Request body too large");
        if (streq(method, "POST")) {
                if (sim_aws_form_parse(rq->body.data ? rq->body.data : "", rq->body.len, form_param, &p) < 0)
                        return MHD_NO;
        } else if (streq(method, "GET")) {
                MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, &p);
        } else
                return respond_error(t, c, 405, "Sender", "InvalidHttpRequest",
                                     "Only GET and POST are supported");
        ret = answer(t, c, &p);
        params_free(&p);
        return ret;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
        struct sts_req *rq = *con_cls;
        if (!rq)
                return;
        buf_free(&rq->body);
        free(rq);
        *con_cls = NULL;
}

int sim_sts_start(struct sim *s, const char *host, struct sim_sts **ret)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        const union MHD_DaemonInfo *info;
        struct sim_sts *t;
        char addr[INET_ADDRSTRLEN];

        if (!ret)
                return -EINVAL;
        if (inet_pton(AF_INET, host ? host : "127.0.0.1", &sa.sin_addr) != 1)
                return -EINVAL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->sim = s;
        pthread_mutex_init(&t->lock, NULL);
        t->daemon = MHD_start_daemon(
            MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO, 0, NULL, NULL,
            handler, t, MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
            MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_END);
        if (!t->daemon) {
                sim_sts_stop(t);
                return -EADDRNOTAVAIL;
        }
        info = MHD_get_daemon_info(t->daemon, MHD_DAEMON_INFO_BIND_PORT);
        inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
        snprintf(t->url, sizeof(t->url), "http://%s:%u", addr, info ? info->port : 0);
        *ret = t;
        return 0;
}

struct sim_sts *sim_sts_stop(struct sim_sts *t)
{
        if (!t)
                return NULL;
        if (t->daemon)
                MHD_stop_daemon(t->daemon);
        for (size_t i = 0; i < t->n_issued; i++)
                issued_free(t->issued[i]);
        free(t->issued);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
}

const char *sim_sts_url(const struct sim_sts *t)
{
        return t ? t->url : NULL;
}

const char *sim_sts_secret_lookup(const char *access_key_id, void *userdata)
{
        struct sim_sts *t = userdata;
        const char *secret = NULL;
        uint64_t now;

        if (!t || !access_key_id)
                return NULL;
        if (streq(access_key_id, SIM_STS_ACCESS_KEY_ID))
                return SIM_STS_SECRET_ACCESS_KEY;
        now = sts_now(t);
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->n_issued; i++)
                if (streq(t->issued[i]->akid, access_key_id) && t->issued[i]->expires_usec > now) {
                        secret = t->issued[i]->secret;
                        break;
                }
        pthread_mutex_unlock(&t->lock);
        return secret;
}

bool sim_sts_session_token_valid(struct sim_sts *t, const char *access_key_id, const char *token)
{
        bool ok = false;

        if (!t || !access_key_id)
                return false;
        if (streq(access_key_id, SIM_STS_ACCESS_KEY_ID))
                return isempty(token);
        pthread_mutex_lock(&t->lock);
        for (size_t i = 0; i < t->n_issued; i++)
                if (streq(t->issued[i]->akid, access_key_id)) {
                        ok = streq(t->issued[i]->token, token);
                        break;
                }
        pthread_mutex_unlock(&t->lock);
        return ok;
}

int sim_sts_set_fault(struct sim_sts *t, const struct sim_sts_fault *f)
{
        if (!t || !f)
                return -EINVAL;
        pthread_mutex_lock(&t->lock);
        t->fault = *f;
        pthread_mutex_unlock(&t->lock);
        return 0;
}

void sim_sts_stats(struct sim_sts *t, struct sim_sts_stats *ret)
{
        pthread_mutex_lock(&t->lock);
        *ret = t->stats;
        pthread_mutex_unlock(&t->lock);
}
