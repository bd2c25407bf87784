/* The simulator's IMDS surface: per-node listeners answering as EC2's metadata service (IMDSv2 required). */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/stop_wake.h"
#include "spotdrain/core.h"
#include "spotdrain/imds.h"

#define TOKENS_MAX        64
#define TOKEN_RAW_BYTES   40
#define HANG_DEFAULT_USEC (5ULL * 1000000ULL)
#define CREDS_LIFE_USEC   (6ULL * 3600ULL * 1000000ULL)
#define MAINT_WINDOW_USEC (2ULL * 3600ULL * 1000000ULL)

/* Error bodies as IMDS sends them (fixtures/imds/error-*.html); clients must not parse them. */
static const char body_400[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                               "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" "
                               "\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n"
                               "<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n"
                               "   <head>\n      <title>400 - Bad Request</title>\n   </head>\n"
                               "   <body>\n      <h1>400 - Bad Request</h1>\n   </body>\n</html>\n";
static const char body_401[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                               "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\" "
                               "\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n"
                               "<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n"
                               "   <head>\n      <title>401 - Unauthorized</title>\n   </head>\n"
                               "   <body>\n      <h1>401 - Unauthorized</h1>\n   </body>\n</html>\n";
static const char body_404[] = "<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n"
                               "<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.0 Transitional//EN\"\n"
                               "\t\"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd\">\n"
                               "<html xmlns=\"http://www.w3.org/1999/xhtml\" xml:lang=\"en\" lang=\"en\">\n"
                               " <head>\n  <title>404 - Not Found</title>\n </head>\n"
                               " <body>\n  <h1>404 - Not Found</h1>\n </body>\n</html>\n";

struct imds_token {
        char value[TOKEN_RAW_BYTES * 2];
        uint64_t expires_mono;
};

struct imds_node {
        struct sim_imds *m;
        size_t index;
        char *name, *instance_id, *zone, *region, *instance_type, *life_cycle, *ip;
        char url[64];
        int listen_fd; /* bound and listening from the start; -1 once its daemon took it */
        struct MHD_Daemon *daemon;
        /* guarded by m->lock */
        struct imds_token tokens[TOKENS_MAX];
        size_t next_token;
        struct sim_imds_fault fault;
        struct sim_imds_stats stats;
};

struct sim_imds {
        struct sim *sim;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stopping;
        unsigned fault_gen; /* bumped by every sim_imds_set_fault: ends hangs and delays under way */
        size_t n;
        struct imds_node *nodes;
        /* The listeners wait for a first connection in one thread (waiter): a node's daemon, with its
         * thread per connection, starts then. A cluster's nodes cost one thread until their IMDS is used
         * (a controller-mode run uses none of 10,000). */
        pthread_t waiter;
        bool waiting;
        int epoll_fd, stop_fd;
};

struct answer {
        unsigned status;
        char *body; /* owned */
        const char *static_body;
        bool notice_path;
};

/* ---- facts of a node, read once at start ---- */

static const char *label(const cJSON *node, const char *key)
{
        const cJSON *labels =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "metadata"), "labels");
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(labels, key));
}

static const char *internal_ip(const cJSON *node)
{
        const cJSON *addrs =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(node, "status"), "addresses");
        const cJSON *a;
        cJSON_ArrayForEach (a, addrs)
                if (streq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "type")), "InternalIP"))
                        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(a, "address"));
        return NULL;
}

static int node_facts(struct sim *s, struct imds_node *n, size_t i)
{
        const char *name = sim_node_name(s, i), *zone = sim_node_zone(s, i), *ct, *it, *ip;
        cJSON *obj = NULL;
        size_t zl;

        (void)sim_get(s, SIM_NODE, NULL, name, &obj);
        ct = obj ? label(obj, "karpenter.sh/capacity-type") : NULL;
        it = obj ? label(obj, "node.kubernetes.io/instance-type") : NULL;
        ip = obj ? internal_ip(obj) : NULL;
        zone = zone ? zone : "us-east-1a";
        zl = strlen(zone);
        n->name = strdup(name ? name : "");
        n->instance_id = strdup(sim_node_instance_id(s, i) ? sim_node_instance_id(s, i) : "");
        n->zone = strdup(zone);
        /* The region is the zone without its letter (us-east-1a → us-east-1). */
        n->region = strndup(zone, zl > 1 && zone[zl - 1] >= 'a' && zone[zl - 1] <= 'z' ? zl - 1 : zl);
        n->instance_type = strdup(it ? it : "m5.large");
        n->life_cycle = strdup(streq(ct, "on-demand") ? "on-demand" : "spot");
        n->ip = strdup(ip ? ip : "10.0.0.10");
        cJSON_Delete(obj);
        if (!n->name || !n->instance_id || !n->zone || !n->region || !n->instance_type || !n->life_cycle ||
            !n->ip)
                return -ENOMEM;
        return 0;
}

/* ---- tokens (m->lock held) ---- */

static int token_issue(struct imds_node *n, unsigned ttl, char *ret, size_t len)
{
        unsigned char raw[TOKEN_RAW_BYTES];
        _cleanup_free_ char *b64 = NULL;
        struct imds_token *t;

        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return -EIO;
        b64 = base64_encode(raw, sizeof(raw));
        if (!b64)
                return -ENOMEM;
        if (strlen(b64) >= sizeof(t->value) || strlen(b64) >= len)
                return -ENOBUFS;
        if (n->fault.token_ttl_cap > 0 && ttl > n->fault.token_ttl_cap)
                ttl = n->fault.token_ttl_cap;
        t = &n->tokens[n->next_token++ % TOKENS_MAX];
        strcpy(t->value, b64);
        t->expires_mono = now_monotonic_usec() + (uint64_t)ttl * 1000000ULL;
        strcpy(ret, b64);
        n->stats.token_puts++;
        return 0;
}

/* Seconds left of a live token, or 0 when it is unknown or expired. */
static unsigned token_check(struct imds_node *n, const char *value)
{
        uint64_t now = now_monotonic_usec();
        if (isempty(value))
                return 0;
        for (size_t i = 0; i < TOKENS_MAX; i++) {
                struct imds_token *t = &n->tokens[i];
                if (t->value[0] && streq(t->value, value) && now < t->expires_mono)
                        return (unsigned)((t->expires_mono - now + 999999) / 1000000);
        }
        return 0;
}

/* ---- documents ---- */

static char *json_print(cJSON *o)
{
        char *text = o ? cJSON_PrintUnformatted(o) : NULL;
        cJSON_Delete(o);
        return text;
}

static char *rfc3339(uint64_t usec)
{
        char buf[32];
        if (format_rfc3339(usec, buf, sizeof(buf)) < 0)
                return NULL;
        return strdup(buf);
}

/* The node's current notice of a kind (sim lock held); false when none. */
static bool notice_of(struct sim *s, size_t i, const char *kind, double *ret_notice, double *ret_deadline)
{
        const char *k = NULL;
        if (sim_node_notice(s, i, &k, ret_notice, ret_deadline) < 0)
                return false;
        return streq(k, kind);
}

static int doc_instance_action(struct sim *s, size_t i, char **ret)
{
        double deadline;
        _cleanup_free_ char *t = NULL;
        cJSON *o;

        if (!notice_of(s, i, "spot-interruption", NULL, &deadline))
                return -ENOENT;
        t = rfc3339(sim_wall_usec(s, deadline));
        o = cJSON_CreateObject();
        if (!t || !o || !cJSON_AddStringToObject(o, "action", "terminate") ||
            !cJSON_AddStringToObject(o, "time", t)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        *ret = json_print(o);
        return *ret ? 0 : -ENOMEM;
}

static int doc_termination_time(struct sim *s, size_t i, char **ret)
{
        double deadline;
        if (!notice_of(s, i, "spot-interruption", NULL, &deadline))
                return -ENOENT;
        *ret = rfc3339(sim_wall_usec(s, deadline));
        return *ret ? 0 : -ENOMEM;
}

static int doc_rebalance(struct sim *s, size_t i, char **ret)
{
        double at = sim_node_rebalance_at(s, i);
        _cleanup_free_ char *t = NULL;
        cJSON *o;

        if (at < 0)
                return -ENOENT;
        t = rfc3339(sim_wall_usec(s, at));
        o = cJSON_CreateObject();
        if (!t || !o || !cJSON_AddStringToObject(o, "noticeTime", t)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        *ret = json_print(o);
        return *ret ? 0 : -ENOMEM;
}

/* events/maintenance/scheduled (history false) or .../history: the node's scheduled maintenance, active
 * until it completed (a reboot that is back), then only in the history, as State completed. */
static int doc_maintenance(struct sim *s, struct imds_node *n, bool history, char **ret)
{
        double deadline;
        char before[48], after[48], id[40];
        uint64_t start, h = 1469598103934665603ULL;
        const char *code;
        bool completed;
        cJSON *a = cJSON_CreateArray(), *e;

        if (!a)
                return -ENOMEM;
        if (notice_of(s, n->index, "scheduled-change", NULL, &deadline) &&
            sim_node_maintenance(s, n->index, &code, &completed) >= 0 && completed == history) {
                start = sim_wall_usec(s, deadline);
                /* A stable event id per instance (FNV-1a of the instance ID). */
                for (const char *p = n->instance_id; *p; p++)
                        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
                snprintf(id, sizeof(id), "instance-event-%017" PRIx64, (uint64_t)(h & 0xfffffffffffffffULL));
                if (sim_http_date(start, false, before, sizeof(before)) < 0 ||
                    sim_http_date(start + MAINT_WINDOW_USEC, false, after, sizeof(after)) < 0) {
                        cJSON_Delete(a);
                        return -EINVAL;
                }
                bool reboot = sim_maintenance_is_reboot(code);
                e = cJSON_CreateObject();
                if (!e || !cJSON_AddItemToArray(a, e) || !cJSON_AddStringToObject(e, "NotBefore", before) ||
                    !cJSON_AddStringToObject(e, "Code", code) ||
                    !cJSON_AddStringToObject(e, "Description",
                                             reboot ? "scheduled reboot"
                                                    : "The instance is running on degraded hardware") ||
                    !cJSON_AddStringToObject(e, "EventId", id) ||
                    !cJSON_AddStringToObject(e, "NotAfter", after) ||
                    !cJSON_AddStringToObject(e, "State", history ? "completed" : "active")) {
                        cJSON_Delete(a);
                        return -ENOMEM;
                }
        }
        *ret = json_print(a);
        return *ret ? 0 : -ENOMEM;
}

static int doc_credentials(struct sim *s, char **ret)
{
        uint64_t now = sim_wall_usec(s, sim_now(s));
        _cleanup_free_ char *updated = rfc3339(now), *expires = rfc3339(now + CREDS_LIFE_USEC);
        cJSON *o = cJSON_CreateObject();

        if (!updated || !expires || !o || !cJSON_AddStringToObject(o, "Code", "Success") ||
            !cJSON_AddStringToObject(o, "LastUpdated", updated) ||
            !cJSON_AddStringToObject(o, "Type", "AWS-HMAC") ||
            !cJSON_AddStringToObject(o, "AccessKeyId", SIM_IMDS_ACCESS_KEY_ID) ||
            !cJSON_AddStringToObject(o, "SecretAccessKey", SIM_IMDS_SECRET_ACCESS_KEY) ||
            !cJSON_AddStringToObject(o, "Token", SIM_IMDS_SESSION_TOKEN) ||
            !cJSON_AddStringToObject(o, "Expiration", expires)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        *ret = cJSON_Print(o);
        cJSON_Delete(o);
        return *ret ? 0 : -ENOMEM;
}

static int doc_iam_info(struct sim *s, char **ret)
{
        _cleanup_free_ char *updated = rfc3339(sim_wall_usec(s, sim_now(s)));
        cJSON *o = cJSON_CreateObject();

        if (!updated || !o || !cJSON_AddStringToObject(o, "Code", "Success") ||
            !cJSON_AddStringToObject(o, "LastUpdated", updated) ||
            !cJSON_AddStringToObject(o, "InstanceProfileArn",
                                     "arn:aws:iam::123456789012:instance-profile/" SIM_IMDS_ROLE) ||
            !cJSON_AddStringToObject(o, "InstanceProfileId", "AIPASIMULATEDPROFILE")) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        *ret = cJSON_Print(o);
        cJSON_Delete(o);
        return *ret ? 0 : -ENOMEM;
}

static int doc_identity(struct sim *s, struct imds_node *n, char **ret)
{
        _cleanup_free_ char *pending = rfc3339(sim_wall_usec(s, 0));
        cJSON *o = cJSON_CreateObject();

        if (!pending || !o || !cJSON_AddStringToObject(o, "accountId", "123456789012") ||
            !cJSON_AddStringToObject(o, "architecture", "x86_64") ||
            !cJSON_AddStringToObject(o, "availabilityZone", n->zone) ||
            !cJSON_AddStringToObject(o, "imageId", "ami-0c2b8ca1dad447f8a") ||
            !cJSON_AddStringToObject(o, "instanceId", n->instance_id) ||
            !cJSON_AddStringToObject(o, "instanceType", n->instance_type) ||
            !cJSON_AddStringToObject(o, "pendingTime", pending) ||
            !cJSON_AddStringToObject(o, "privateIp", n->ip) ||
            !cJSON_AddStringToObject(o, "region", n->region) ||
            !cJSON_AddStringToObject(o, "version", "2017-09-30")) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        *ret = cJSON_Print(o);
        cJSON_Delete(o);
        return *ret ? 0 : -ENOMEM;
}

static const char meta_listing[] = "ami-id\nautoscaling/\nevents/\niam/\ninstance-id\ninstance-life-cycle\n"
                                   "instance-type\nlocal-hostname\nlocal-ipv4\nplacement/\nspot/\ntags/";
/* Instance metadata tags (the instance's metadata options InstanceMetadataTags=enabled): the one tag Auto
 * Scaling puts on its instances. */
#define GROUP_TAG "aws:autoscaling:groupName"

/* The answer to GET path (below /latest/), from the model. */
static int document(struct imds_node *n, const char *path, struct answer *a)
{
        struct sim *s = n->m->sim;
        const char *fixed = NULL;
        char *text = NULL;
        int r = 0;

        if (startswith(path, "meta-data/")) {
                /* Leaf items answer with or without a trailing slash, as IMDS does (botocore asks for
                 * "placement/availability-zone/"). */
                _cleanup_free_ char *p = strdup(path + strlen("meta-data/"));
                size_t pl;

                if (!p)
                        return -ENOMEM;
                pl = strlen(p);
                while (pl > 0 && p[pl - 1] == '/')
                        p[--pl] = '\0';
                a->notice_path = streq(p, "spot/instance-action") || streq(p, "spot/termination-time") ||
                                 streq(p, "events/recommendations/rebalance") ||
                                 streq(p, "events/maintenance/scheduled") ||
                                 streq(p, "autoscaling/target-lifecycle-state");
                if (streq(p, ""))
                        fixed = meta_listing;
                else if (streq(p, "instance-id"))
                        fixed = n->instance_id;
                else if (streq(p, "local-hostname") || streq(p, "hostname"))
                        fixed = n->name;
                else if (streq(p, "local-ipv4"))
                        fixed = n->ip;
                else if (streq(p, "placement/availability-zone"))
                        fixed = n->zone;
                else if (streq(p, "placement/region"))
                        fixed = n->region;
                else if (streq(p, "instance-type"))
                        fixed = n->instance_type;
                else if (streq(p, "instance-life-cycle"))
                        fixed = n->life_cycle;
                else if (streq(p, "ami-id"))
                        fixed = "ami-0c2b8ca1dad447f8a";
                else if (streq(p, "iam/security-credentials"))
                        fixed = SIM_IMDS_ROLE;
                else if ((streq(p, "tags/instance") || streq(p, "tags/instance/" GROUP_TAG)) &&
                         sim_instance_metadata_tags(s))
                        r = streq(p, "tags/instance") ? ((text = strdup(GROUP_TAG)) ? 0 : -ENOMEM)
                                                      : sim_asg_group_name(s, &text);
                else {
                        sim_lock(s);
                        (void)sim_advance(s);
                        if (streq(p, "spot/instance-action"))
                                r = doc_instance_action(s, n->index, &text);
                        else if (streq(p, "spot/termination-time"))
                                r = doc_termination_time(s, n->index, &text);
                        else if (streq(p, "events/recommendations/rebalance"))
                                r = doc_rebalance(s, n->index, &text);
                        else if (streq(p, "events/maintenance/scheduled") ||
                                 streq(p, "events/maintenance/history"))
                                r = doc_maintenance(s, n, streq(p, "events/maintenance/history"), &text);
                        else if (streq(p, "autoscaling/target-lifecycle-state"))
                                fixed = notice_of(s, n->index, "asg-lifecycle-terminate", NULL, NULL)
                                            ? "Terminated"
                                            : "InService";
                        else if (streq(p, "iam/security-credentials/" SIM_IMDS_ROLE))
                                r = doc_credentials(s, &text);
                        else if (streq(p, "iam/info"))
                                r = doc_iam_info(s, &text);
                        else
                                r = -ENOENT;
                        sim_unlock(s);
                }
        } else if (streq(path, "dynamic/instance-identity/document")) {
                sim_lock(s);
                r = doc_identity(s, n, &text);
                sim_unlock(s);
        } else
                r = -ENOENT;

        if (r == -ENOENT) {
                a->status = MHD_HTTP_NOT_FOUND;
                a->static_body = body_404;
                return 0;
        }
        if (r < 0)
                return r;
        a->status = MHD_HTTP_OK;
        if (fixed)
                a->static_body = fixed;
        else
                a->body = text;
        return 0;
}

/* ---- HTTP ---- */

static enum MHD_Result send_answer(struct MHD_Connection *c, unsigned status, const char *body,
                                   const char *hdr_name, const char *hdr_value)
{
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;

        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/plain");
        MHD_add_response_header(resp, "Server", "EC2ws");
        if (hdr_name)
                MHD_add_response_header(resp, hdr_name, hdr_value);
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* Waits (m->lock held) up to usec, or until the surface stops or its faults change. */
static void wait_locked(struct sim_imds *m, uint64_t usec)
{
        unsigned gen = m->fault_gen;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (usec % 1000000ULL) * 1000ULL;
        ts.tv_sec += (time_t)(usec / 1000000ULL + ns / 1000000000ULL);
        ts.tv_nsec = (long)(ns % 1000000000ULL);
        while (!m->stopping && gen == m->fault_gen)
                if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) != 0)
                        break;
}

static bool parse_ttl(const char *s, unsigned *ret)
{
        char *end;
        unsigned long v;
        if (isempty(s) || *s < '0' || *s > '9')
                return false;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end || v < 1 || v > 21600)
                return false;
        *ret = (unsigned)v;
        return true;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls)
{
        static int started;
        struct imds_node *n = cls;
        struct sim_imds *m = n->m;
        const char *path;
        struct answer a = {};
        bool garbage = false;
        enum MHD_Result ret;
        int r;

        if (!*con_cls) {
                *con_cls = &started;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                *upload_data_size = 0; /* the token PUT carries no body worth reading */
                return MHD_YES;
        }

        pthread_mutex_lock(&m->lock);
        n->stats.requests++;
        if (n->fault.hang > 0) {
                uint64_t usec = n->fault.hang_usec ? n->fault.hang_usec : HANG_DEFAULT_USEC;
                n->fault.hang--;
                wait_locked(m, usec);
                pthread_mutex_unlock(&m->lock);
                return MHD_NO;
        }
        if (n->fault.delay_usec > 0)
                wait_locked(m, n->fault.delay_usec);
        if (n->fault.error_500 > 0) {
                n->fault.error_500--;
                pthread_mutex_unlock(&m->lock);
                return send_answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Internal Server Error", NULL, NULL);
        }

        if (!startswith(url, "/latest/")) {
                pthread_mutex_unlock(&m->lock);
                return send_answer(c, MHD_HTTP_NOT_FOUND, body_404, NULL, NULL);
        }
        path = url + strlen("/latest/");

        if (streq(method, "PUT")) {
                char token[TOKEN_RAW_BYTES * 2], ttl_text[16];
                unsigned ttl;

                if (!streq(path, "api/token")) {
                        pthread_mutex_unlock(&m->lock);
                        return send_answer(c, MHD_HTTP_FORBIDDEN, "Forbidden", NULL, NULL);
                }
                if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Forwarded-For") ||
                    n->fault.refuse_tokens > 0) {
                        if (n->fault.refuse_tokens > 0)
                                n->fault.refuse_tokens--;
                        pthread_mutex_unlock(&m->lock);
                        return send_answer(c, MHD_HTTP_FORBIDDEN, "Forbidden", NULL, NULL);
                }
                if (!parse_ttl(MHD_lookup_connection_value(c, MHD_HEADER_KIND, IMDS_TOKEN_TTL_HEADER),
                               &ttl)) {
                        pthread_mutex_unlock(&m->lock);
                        return send_answer(c, MHD_HTTP_BAD_REQUEST, body_400, NULL, NULL);
                }
                r = token_issue(n, ttl, token, sizeof(token));
                pthread_mutex_unlock(&m->lock);
                if (r < 0)
                        return send_answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Internal Server Error", NULL,
                                           NULL);
                snprintf(ttl_text, sizeof(ttl_text), "%u", ttl);
                ret = send_answer(c, MHD_HTTP_OK, token, IMDS_TOKEN_TTL_HEADER, ttl_text);
                explicit_bzero(token, sizeof(token));
                return ret;
        }
        if (!streq(method, "GET") && !streq(method, "HEAD")) {
                pthread_mutex_unlock(&m->lock);
                return send_answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed", NULL, NULL);
        }

        unsigned left = token_check(n, MHD_lookup_connection_value(c, MHD_HEADER_KIND, IMDS_TOKEN_HEADER));
        if (left == 0) {
                n->stats.unauthorized++;
                pthread_mutex_unlock(&m->lock);
                return send_answer(c, MHD_HTTP_UNAUTHORIZED, body_401, NULL, NULL);
        }
        pthread_mutex_unlock(&m->lock);

        r = document(n, path, &a);
        if (r < 0)
                return send_answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Internal Server Error", NULL, NULL);

        pthread_mutex_lock(&m->lock);
        if (a.notice_path) {
                n->stats.notice_gets++;
                if (a.status == MHD_HTTP_OK && n->fault.garbage > 0) {
                        n->fault.garbage--;
                        garbage = true;
                }
        }
        pthread_mutex_unlock(&m->lock);

        char ttl_text[16];
        snprintf(ttl_text, sizeof(ttl_text), "%u", left);
        ret = send_answer(c, a.status,
                          garbage  ? "{\"action\": \"termin"
                          : a.body ? a.body
                                   : a.static_body,
                          IMDS_TOKEN_TTL_HEADER, ttl_text);
        free(a.body);
        return ret;
}

/* ---- life cycle ---- */

static void node_clear(struct imds_node *n)
{
        if (n->daemon)
                MHD_stop_daemon(n->daemon); /* closes the listening socket it was given */
        else if (n->listen_fd >= 0)
                close(n->listen_fd);
        n->listen_fd = -1;
        n->daemon = NULL;
        free(n->name);
        free(n->instance_id);
        free(n->zone);
        free(n->region);
        free(n->instance_type);
        free(n->life_cycle);
        free(n->ip);
        explicit_bzero(n->tokens, sizeof(n->tokens));
}

/* A node's daemon starts on its listener's first connection, and takes the listener over. */
static void start_daemon(struct imds_node *n)
{
        /* A thread per connection: a hung answer (fault) holds only its own connection. */
        n->daemon =
            MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO,
                             0, NULL, NULL, handler, n, MHD_OPTION_LISTEN_SOCKET, n->listen_fd,
                             MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
        if (n->daemon)
                n->listen_fd = -1;
        else
                fprintf(stderr, "sim: IMDS of %s: cannot serve %s\n", n->name, n->url);
}

static void *wait_first(void *userdata)
{
        struct sim_imds *m = userdata;
        struct epoll_event ev[64];
        for (;;) {
                int k = epoll_wait(m->epoll_fd, ev, 64, -1);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return NULL;
                for (int i = 0; i < k; i++) {
                        if (ev[i].data.u64 == UINT64_MAX)
                                return NULL;
                        struct imds_node *n = &m->nodes[ev[i].data.u64];
                        (void)epoll_ctl(m->epoll_fd, EPOLL_CTL_DEL, n->listen_fd, NULL);
                        start_daemon(n);
                }
        }
}

int sim_imds_start(struct sim *s, const char *host, struct sim_imds **ret)
{
        struct sockaddr_in sa = { .sin_family = AF_INET };
        struct sim_imds *m;
        size_t count;
        int r = 0;

        if (!s || !ret)
                return -EINVAL;
        if (inet_pton(AF_INET, host ? host : "127.0.0.1", &sa.sin_addr) != 1)
                return -EINVAL;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->sim = s;
        m->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        m->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (m->epoll_fd < 0 || m->stop_fd < 0 ||
            epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, m->stop_fd,
                      &(struct epoll_event){ .events = EPOLLIN, .data.u64 = UINT64_MAX }) < 0) {
                if (m->epoll_fd >= 0)
                        close(m->epoll_fd);
                if (m->stop_fd >= 0)
                        close(m->stop_fd);
                free(m);
                return -errno;
        }
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_mutex_init(&m->lock, NULL);
        pthread_cond_init(&m->cond, &ca);
        pthread_condattr_destroy(&ca);

        sim_lock(s);
        count = sim_node_count(s);
        m->nodes = calloc(count ? count : 1, sizeof(*m->nodes));
        if (!m->nodes)
                r = -ENOMEM;
        for (size_t i = 0; m->nodes && i < count; i++)
                m->nodes[i].listen_fd = -1;
        for (size_t i = 0; r == 0 && i < count; i++) {
                m->nodes[i].m = m;
                m->nodes[i].index = i;
                m->n = i + 1;
                r = node_facts(s, &m->nodes[i], i);
        }
        sim_unlock(s);

        for (size_t i = 0; r == 0 && i < m->n; i++) {
                struct imds_node *n = &m->nodes[i];
                struct sockaddr_in bound;
                socklen_t len = sizeof(bound);
                char addr[INET_ADDRSTRLEN];
                int one = 1;

                n->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (n->listen_fd < 0 ||
                    setsockopt(n->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
                    bind(n->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
                    listen(n->listen_fd, 64) < 0 ||
                    getsockname(n->listen_fd, (struct sockaddr *)&bound, &len) < 0) {
                        r = -EADDRNOTAVAIL;
                        break;
                }
                inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
                snprintf(n->url, sizeof(n->url), "http://%s:%u", addr, ntohs(bound.sin_port));
                if (epoll_ctl(m->epoll_fd, EPOLL_CTL_ADD, n->listen_fd,
                              &(struct epoll_event){ .events = EPOLLIN, .data.u64 = i }) < 0)
                        r = -errno;
        }
        if (r == 0) {
                r = -pthread_create(&m->waiter, NULL, wait_first, m);
                m->waiting = r == 0;
        }
        if (r < 0) {
                sim_imds_stop(m);
                return r;
        }
        *ret = m;
        return 0;
}

struct sim_imds *sim_imds_stop(struct sim_imds *m)
{
        if (!m)
                return NULL;
        sim_stop_wake(&m->lock, &m->cond, &m->stopping);
        if (m->waiting) {
                uint64_t one = 1;
                if (write(m->stop_fd, &one, sizeof(one)) == sizeof(one))
                        pthread_join(m->waiter, NULL);
                else
                        pthread_cancel(m->waiter), pthread_join(m->waiter, NULL);
        }
        close(m->epoll_fd);
        close(m->stop_fd);
        for (size_t i = 0; i < m->n; i++)
                node_clear(&m->nodes[i]);
        free(m->nodes);
        pthread_cond_destroy(&m->cond);
        pthread_mutex_destroy(&m->lock);
        free(m);
        return NULL;
}

size_t sim_imds_count(const struct sim_imds *m)
{
        return m ? m->n : 0;
}

const char *sim_imds_url(const struct sim_imds *m, size_t i)
{
        return m && i < m->n ? m->nodes[i].url : NULL;
}

const char *sim_imds_url_by_name(const struct sim_imds *m, const char *node)
{
        for (size_t i = 0; m && i < m->n; i++)
                if (streq(m->nodes[i].name, node))
                        return m->nodes[i].url;
        return NULL;
}

int sim_imds_set_fault(struct sim_imds *m, size_t i, const struct sim_imds_fault *f)
{
        if (!m || i >= m->n || !f)
                return -EINVAL;
        pthread_mutex_lock(&m->lock);
        m->nodes[i].fault = *f;
        if (f->expire_tokens) {
                explicit_bzero(m->nodes[i].tokens, sizeof(m->nodes[i].tokens));
                m->nodes[i].fault.expire_tokens = false;
        }
        m->fault_gen++;
        pthread_cond_broadcast(&m->cond);
        pthread_mutex_unlock(&m->lock);
        return 0;
}

int sim_imds_stats(struct sim_imds *m, size_t i, struct sim_imds_stats *ret)
{
        if (!m || i >= m->n || !ret)
                return -EINVAL;
        pthread_mutex_lock(&m->lock);
        *ret = m->nodes[i].stats;
        pthread_mutex_unlock(&m->lock);
        return 0;
}
