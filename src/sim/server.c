/* The simulator's Kubernetes API server (libmicrohttpd, one thread per connection so that watches can
 * block on the model's condition variable). Every request takes the model lock for its whole duration, so
 * the model sees one request at a time, exactly as its contract (model.h) asks. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>

#include "sim/model.h"
#include "sim/server.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define MAX_BODY               (4u * 1024u * 1024u)
#define TICK_MAX_USEC          (50 * 1000)
#define WATCH_POLL_USEC        (250 * 1000)
#define WATCH_BOOKMARK_US      (60 * 1000 * 1000)
#define WATCH_LAST_BOOKMARK_US (2 * 1000 * 1000)
#define WATCH_DEFAULT_SEC      1800

struct sim_http {
        struct MHD_Daemon *daemon;
        sim_http_handler_fn handler;
        void *userdata;
        uint16_t port;
        char *url;
        char *address; /* host:port */
};

struct sim_server {
        struct sim *sim;
        struct sim_http *http;
        pthread_t ticker;
        bool ticker_started;
        atomic_bool stopping;
        double error_rate;
        unsigned latency_ms;
        double watch_drop_rate, watch_gone_rate, throttle_rate;
        uint64_t rng; /* the fault draws' seed */
        /* The request being dispatched, and how many requests of each key (folded) came before; under the
         * model lock. */
        uint64_t req_key, req_n, req_count[1024];
        /* Faults injected so far (GET /sim/v1/faults), under the model lock. */
        uint64_t n_errors, n_throttled, n_watch_dropped, n_watch_gone, n_list_gone;
};

/* ---- the resources served ---- */

struct resource {
        const char *group; /* "" = core */
        const char *version;
        const char *name;
        const char *singular;
        const char *kind;
        bool namespaced;
        enum sim_kind sim_kind;
        const char *short_name;
        bool in_all; /* category "all" */
};

static const struct resource resources[] = {
        { "", "v1", "namespaces", "namespace", "Namespace", false, SIM_NAMESPACE, "ns", false },
        { "", "v1", "nodes", "node", "Node", false, SIM_NODE, "no", false },
        { "", "v1", "pods", "pod", "Pod", true, SIM_POD, "po", true },
        { "", "v1", "events", "event", "Event", true, SIM_EVENT, "ev", false },
        { "apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, SIM_DAEMONSET, "ds", true },
        { "apps", "v1", "deployments", "deployment", "Deployment", true, SIM_DEPLOYMENT, "deploy", true },
        { "apps", "v1", "replicasets", "replicaset", "ReplicaSet", true, SIM_REPLICASET, "rs", true },
        { "apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, SIM_STATEFULSET, "sts", true },
        { "policy", "v1", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true,
          SIM_PDB, "pdb", false },
        { "coordination.k8s.io", "v1", "leases", "lease", "Lease", true, SIM_LEASE, NULL, false },
        { "events.k8s.io", "v1", "events", "event", "Event", true, SIM_EVENT, "ev", false },
};

/* Subresources listed in discovery: drain looks for pods/eviction to decide between evicting and deleting.
 */
struct subresource {
        const char *group;
        const char *name;
        const char *kind;
        bool namespaced;
        const char *sub_group, *sub_version;
        bool create_only;
};

static const struct subresource subresources[] = {
        { "", "pods/eviction", "Eviction", true, "policy", "v1", true },
        { "", "pods/status", "Pod", true, NULL, NULL, false },
        { "", "nodes/status", "Node", false, NULL, NULL, false },
        { "apps", "deployments/status", "Deployment", true, NULL, NULL, false },
        { "policy", "poddisruptionbudgets/status", "PodDisruptionBudget", true, NULL, NULL, false },
};

static const char *const groups[] = { "apps", "policy", "coordination.k8s.io", "events.k8s.io" };

static const struct resource *resource_find(const char *group, const char *version, const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(resources); i++)
                if (streq(resources[i].group, group) && streq(resources[i].version, version) &&
                    streq(resources[i].name, name))
                        return &resources[i];
        return NULL;
}

static char *resource_api_version(const struct resource *r)
{
        return isempty(r->group) ? strdup(r->version) : strprintf("%s/%s", r->group, r->version);
}

static bool resource_is_events_v1(const struct resource *r)
{
        return streq(r->group, "events.k8s.io");
}

/* ---- JSON helpers ---- */

static const cJSON *json_path(const cJSON *obj, const char *dotted)
{
        char key[128];
        const char *p = dotted;

        while (obj && *p) {
                const char *dot = strchr(p, '.');
                size_t n = dot ? (size_t)(dot - p) : strlen(p);
                if (n >= sizeof(key))
                        return NULL;
                memcpy(key, p, n);
                key[n] = 0;
                obj = cJSON_GetObjectItemCaseSensitive(obj, key);
                p = dot ? dot + 1 : p + n;
        }
        return obj;
}

static const char *json_str(const cJSON *obj, const char *dotted)
{
        const cJSON *v = json_path(obj, dotted);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double json_num(const cJSON *obj, const char *dotted)
{
        const cJSON *v = json_path(obj, dotted);
        return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* Field value as a selector compares it: strings as they are, numbers and booleans as text, absent = "". */
static void json_field_text(const cJSON *v, char *buf, size_t len)
{
        if (cJSON_IsString(v))
                snprintf(buf, len, "%s", v->valuestring);
        else if (cJSON_IsNumber(v))
                snprintf(buf, len, "%.15g", v->valuedouble);
        else if (cJSON_IsTrue(v))
                snprintf(buf, len, "true");
        else if (cJSON_IsFalse(v))
                snprintf(buf, len, "false");
        else
                buf[0] = 0;
}

/* ---- label selectors ---- */

static const char *skip_space(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

static bool label_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
               c == '_' || c == '.' || c == '/';
}

/* Reads a key or value token into buf; returns the position after it. */
static const char *read_token(const char *p, char *buf, size_t len)
{
        size_t n = 0;
        p = skip_space(p);
        while (label_char(*p)) {
                if (n + 1 >= len)
                        return NULL;
                buf[n++] = *p++;
        }
        buf[n] = 0;
        return skip_space(p);
}

static const char *label_value(const cJSON *labels, const char *key)
{
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(labels, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Parses "(a, b, c)" and tells whether value is in the set. */
static const char *parse_set(const char *p, const char *value, bool *ret_in)
{
        char tok[256];
        bool in = false;

        p = skip_space(p);
        if (*p != '(')
                return NULL;
        p++;
        for (;;) {
                p = read_token(p, tok, sizeof(tok));
                if (!p)
                        return NULL;
                if (value && streq(tok, value))
                        in = true;
                if (*p == ',') {
                        p++;
                        continue;
                }
                if (*p == ')')
                        break;
                return NULL;
        }
        *ret_in = in;
        return p + 1;
}

int sim_label_selector_match(const char *selector, const cJSON *labels)
{
        const char *p = selector ? selector : "";
        bool match = true;

        for (;;) {
                char key[256], val[256];
                const char *v;
                bool in;

                p = skip_space(p);
                if (!*p)
                        break;
                if (*p == '!') {
                        p = read_token(p + 1, key, sizeof(key));
                        if (!p || !*key)
                                return -EINVAL;
                        if (label_value(labels, key))
                                match = false;
                } else {
                        p = read_token(p, key, sizeof(key));
                        if (!p || !*key)
                                return -EINVAL;
                        v = label_value(labels, key);
                        if (p[0] == '!' && p[1] == '=') {
                                p = read_token(p + 2, val, sizeof(val));
                                if (!p)
                                        return -EINVAL;
                                if (streq(v, val))
                                        match = false;
                        } else if (p[0] == '=') {
                                p = read_token(p + (p[1] == '=' ? 2 : 1), val, sizeof(val));
                                if (!p)
                                        return -EINVAL;
                                if (!streq(v, val))
                                        match = false;
                        } else if (startswith(p, "in") && !label_char(p[2])) {
                                p = parse_set(p + 2, v, &in);
                                if (!p)
                                        return -EINVAL;
                                if (!in)
                                        match = false;
                        } else if (startswith(p, "notin") && !label_char(p[5])) {
                                p = parse_set(p + 5, v, &in);
                                if (!p)
                                        return -EINVAL;
                                if (in)
                                        match = false;
                        } else if (!v)
                                match = false;
                }
                p = skip_space(p);
                if (*p == ',')
                        p++;
                else if (*p)
                        return -EINVAL;
        }
        return match;
}

int sim_field_selector_match(const char *selector, const cJSON *obj)
{
        const char *p = selector ? selector : "";
        bool match = true;

        while (*p) {
                char field[128], want[256], have[256];
                const char *end = strchr(p, ','), *op;
                size_t n = end ? (size_t)(end - p) : strlen(p);
                size_t flen, skip;
                bool negate;

                op = memchr(p, '=', n);
                if (!op || op == p)
                        return -EINVAL;
                negate = op[-1] == '!';
                flen = (size_t)(op - p) - (negate ? 1 : 0);
                skip = (!negate && (size_t)(op - p) + 1 < n && op[1] == '=') ? 2 : 1;
                if (flen == 0 || flen >= sizeof(field) || n - (size_t)(op - p) - skip >= sizeof(want))
                        return -EINVAL;
                memcpy(field, p, flen);
                field[flen] = 0;
                memcpy(want, op + skip, n - (size_t)(op - p) - skip);
                want[n - (size_t)(op - p) - skip] = 0;

                json_field_text(json_path(obj, field), have, sizeof(have));
                if (streq(have, want) == negate)
                        match = false;
                p += n;
                if (*p == ',')
                        p++;
        }
        return match;
}

/* ---- continue tokens: base64 of "RV:OFFSET" ---- */

char *sim_continue_encode(uint64_t rv, size_t offset)
{
        char raw[64];
        int n = snprintf(raw, sizeof(raw), "%" PRIu64 ":%zu", rv, offset);
        return base64_encode((const unsigned char *)raw, (size_t)n);
}

int sim_continue_decode(const char *token, uint64_t *ret_rv, size_t *ret_offset)
{
        _cleanup_free_ unsigned char *raw = NULL;
        _cleanup_free_ char *text = NULL;
        unsigned long long rv, off;
        size_t len;
        char tail;
        int r;

        if (isempty(token))
                return -EINVAL;
        r = base64_decode(token, strlen(token), &raw, &len);
        if (r < 0)
                return -EINVAL;
        text = strndup((const char *)raw, len);
        if (!text)
                return -ENOMEM;
        if (strlen(text) != len || sscanf(text, "%llu:%llu%c", &rv, &off, &tail) != 2)
                return -EINVAL;
        *ret_rv = rv;
        *ret_offset = off;
        return 0;
}

/* ---- protobuf DeleteOptions ---- */

static int pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *ret)
{
        uint64_t v = 0;
        for (unsigned shift = 0; shift < 64; shift += 7) {
                if (*p >= end)
                        return -EBADMSG;
                unsigned char b = *(*p)++;
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* Walks one message; for each length-delimited or varint field calls back with its number and value. */
struct pb_field {
        unsigned number;
        uint64_t varint;
        const unsigned char *data;
        size_t len;
};

static int pb_next(const unsigned char **p, const unsigned char *end, struct pb_field *f)
{
        uint64_t key, len;
        int r;

        r = pb_varint(p, end, &key);
        if (r < 0)
                return r;
        *f = (struct pb_field){ .number = (unsigned)(key >> 3) };
        switch (key & 7) {
        case 0:
                return pb_varint(p, end, &f->varint);
        case 1:
                if (end - *p < 8)
                        return -EBADMSG;
                *p += 8;
                return 0;
        case 2:
                r = pb_varint(p, end, &len);
                if (r < 0)
                        return r;
                if (len > (uint64_t)(end - *p))
                        return -EBADMSG;
                f->data = *p;
                f->len = (size_t)len;
                *p += len;
                return 0;
        case 5:
                if (end - *p < 4)
                        return -EBADMSG;
                *p += 4;
                return 0;
        default:
                return -EBADMSG;
        }
}

int sim_protobuf_delete_options(const void *data, size_t len, int64_t *ret_grace, char **ret_uid)
{
        const unsigned char *p = data, *end = p + len, *raw = NULL, *q, *qend;
        _cleanup_free_ char *uid = NULL;
        int64_t grace = -1;
        size_t raw_len = 0;
        struct pb_field f;
        int r;

        if (len < 4 || memcmp(p, "k8s\0", 4) != 0)
                return -EBADMSG;
        p += 4;
        /* runtime.Unknown: 1 typeMeta, 2 raw, 3 contentEncoding, 4 contentType */
        while (p < end) {
                r = pb_next(&p, end, &f);
                if (r < 0)
                        return r;
                if (f.number == 2 && f.data) {
                        raw = f.data;
                        raw_len = f.len;
                }
        }
        /* DeleteOptions: 1 gracePeriodSeconds, 2 preconditions { 1 uid, 2 resourceVersion } */
        for (q = raw, qend = raw ? raw + raw_len : NULL; q && q < qend;) {
                r = pb_next(&q, qend, &f);
                if (r < 0)
                        return r;
                if (f.number == 1 && !f.data)
                        grace = (int64_t)f.varint;
                else if (f.number == 2 && f.data) {
                        const unsigned char *c = f.data, *cend = f.data + f.len;
                        struct pb_field g;
                        while (c < cend) {
                                r = pb_next(&c, cend, &g);
                                if (r < 0)
                                        return r;
                                if (g.number == 1 && g.data) {
                                        free(uid);
                                        uid = strndup((const char *)g.data, g.len);
                                        if (!uid)
                                                return -ENOMEM;
                                }
                        }
                }
        }
        *ret_grace = grace;
        *ret_uid = TAKE_PTR(uid);
        return 0;
}

/* ---- events.k8s.io/v1 <-> core/v1 Event ---- */

static const char *const event_renames[][2] = {
        { "message", "note" },
        { "involvedObject", "regarding" },
        { "related", "related" },
        { "count", "deprecatedCount" },
        { "firstTimestamp", "deprecatedFirstTimestamp" },
        { "lastTimestamp", "deprecatedLastTimestamp" },
        { "source", "deprecatedSource" },
};

static void event_convert(cJSON *ev, bool to_events_v1)
{
        for (size_t i = 0; i < ARRAY_SIZE(event_renames); i++) {
                const char *from = event_renames[i][to_events_v1 ? 0 : 1];
                const char *to = event_renames[i][to_events_v1 ? 1 : 0];
                cJSON *v;
                if (streq(from, to))
                        continue;
                v = cJSON_DetachItemFromObjectCaseSensitive(ev, from);
                if (v) {
                        cJSON_DeleteItemFromObjectCaseSensitive(ev, to);
                        cJSON_AddItemToObject(ev, to, v);
                }
        }
        cJSON_DeleteItemFromObjectCaseSensitive(ev, "apiVersion");
        cJSON_AddStringToObject(ev, "apiVersion", to_events_v1 ? "events.k8s.io/v1" : "v1");
}

/* ---- responses ---- */

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned status, const char *type, char *text)
{
        struct MHD_Response *resp;
        enum MHD_Result ret;

        if (!text)
                return MHD_NO;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", type);
        MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
        ret = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* The answer of an API request, made while the model is locked, is serialised and sent once the lock is
 * released (a pod list of a large cluster takes longer to print than to build): dispatch() points this at
 * its own slot for the time it holds the lock. */
struct deferred_reply {
        struct MHD_Connection *c;
        unsigned status;
        cJSON *body;
        bool set;
};
static _Thread_local struct deferred_reply *deferred;

/* Sends and frees body. */
static enum MHD_Result reply_json(struct MHD_Connection *c, unsigned status, cJSON *body)
{
        char *text;

        if (!body)
                return MHD_NO;
        if (deferred && !deferred->set && deferred->c == c) {
                *deferred = (struct deferred_reply){ .c = c, .status = status, .body = body, .set = true };
                return MHD_YES;
        }
        text = cJSON_PrintUnformatted(body);
        cJSON_Delete(body);
        return reply_text(c, status, "application/json", text);
}

static cJSON *status_new(unsigned code, const char *reason, const char *message, const char *kind,
                         const char *name)
{
        cJSON *st = cJSON_CreateObject(), *details;

        if (!st)
                return NULL;
        cJSON_AddStringToObject(st, "kind", "Status");
        cJSON_AddStringToObject(st, "apiVersion", "v1");
        cJSON_AddObjectToObject(st, "metadata");
        cJSON_AddStringToObject(st, "status", "Failure");
        cJSON_AddStringToObject(st, "message", message ? message : "");
        cJSON_AddStringToObject(st, "reason", reason);
        if (kind || name) {
                details = cJSON_AddObjectToObject(st, "details");
                if (details && name)
                        cJSON_AddStringToObject(details, "name", name);
                if (details && kind)
                        cJSON_AddStringToObject(details, "kind", kind);
        }
        cJSON_AddNumberToObject(st, "code", code);
        return st;
}

static enum MHD_Result reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
                                    const char *message)
{
        return reply_json(c, code, status_new(code, reason, message, NULL, NULL));
}

static enum MHD_Result reply_not_found(struct MHD_Connection *c)
{
        return reply_status(c, MHD_HTTP_NOT_FOUND, "NotFound",
                            "the server could not find the requested resource");
}

static enum MHD_Result reply_errno(struct MHD_Connection *c, int r)
{
        _cleanup_free_ char *msg = strprintf("internal error: %s", strerror(-r));
        return reply_status(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError",
                            msg ? msg : "internal error");
}

/* ---- faults ---- */

/* The fault draws are a function of the seed, the request (method, path, watch or not), how many such
 * requests came before, and the fault: a client's n-th PATCH of a node meets the same fault on every run,
 * whatever its other requests do in parallel. */
enum fault_salt {
        FAULT_ERROR = 1,
        FAULT_THROTTLE,
        FAULT_WATCH_GONE,
        FAULT_LIST_GONE,
        FAULT_WATCH_DROP,
        FAULT_WATCH_DROP_WHEN,
};

static uint64_t fault_mix(uint64_t x)
{
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

/* Keys the request being dispatched (under the model lock, which the whole dispatch holds). */
static void fault_begin(struct sim_server *srv, const char *method, const char *url, bool watch)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = method; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ ' ') * 1099511628211ULL;
        for (const char *p = url; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ (watch ? 'w' : 'r')) * 1099511628211ULL;
        srv->req_key = h;
        srv->req_n = srv->req_count[h % ARRAY_SIZE(srv->req_count)]++;
}

/* Uniform in [0, 1) for this request and fault. */
static double fault_uniform(const struct sim_server *srv, enum fault_salt salt)
{
        uint64_t x = fault_mix(srv->rng ^ fault_mix(srv->req_key + fault_mix(srv->req_n * 64 + salt)));
        return (double)(x >> 11) / (double)(1ULL << 53);
}

/* Whether a fault of this rate hits the request being dispatched. */
static bool fault_draw(const struct sim_server *srv, double rate, enum fault_salt salt)
{
        return rate > 0 && fault_uniform(srv, salt) < rate;
}

/* A 429 as kube-apiserver's max-in-flight filter sends it: Retry-After tells the client when to come back.
 */
static enum MHD_Result reply_throttled(struct MHD_Connection *c)
{
        cJSON *st =
            status_new(429, "TooManyRequests", "Too many requests, please try again later.", NULL, NULL);
        char *text = st ? cJSON_PrintUnformatted(st) : NULL;
        struct MHD_Response *resp;
        enum MHD_Result ret;

        cJSON_Delete(st);
        if (!text)
                return MHD_NO;
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
        MHD_add_response_header(resp, "Retry-After", "1");
        ret = MHD_queue_response(c, 429, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* ---- discovery ---- */

static cJSON *discovery_versions(const struct sim_server *srv)
{
        cJSON *o = cJSON_CreateObject(), *vs, *cidrs, *cidr;

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "kind", "APIVersions");
        vs = cJSON_AddArrayToObject(o, "versions");
        cJSON_AddItemToArray(vs, cJSON_CreateString("v1"));
        cidrs = cJSON_AddArrayToObject(o, "serverAddressByClientCIDRs");
        cidr = cJSON_CreateObject();
        cJSON_AddStringToObject(cidr, "clientCIDR", "0.0.0.0/0");
        cJSON_AddStringToObject(cidr, "serverAddress", srv->http->address);
        cJSON_AddItemToArray(cidrs, cidr);
        return o;
}

static cJSON *discovery_group(const char *name)
{
        cJSON *g = cJSON_CreateObject(), *versions, *v, *pref;
        _cleanup_free_ char *gv = strprintf("%s/v1", name);

        if (!g || !gv) {
                cJSON_Delete(g);
                return NULL;
        }
        cJSON_AddStringToObject(g, "name", name);
        versions = cJSON_AddArrayToObject(g, "versions");
        v = cJSON_CreateObject();
        cJSON_AddStringToObject(v, "groupVersion", gv);
        cJSON_AddStringToObject(v, "version", "v1");
        cJSON_AddItemToArray(versions, v);
        pref = cJSON_AddObjectToObject(g, "preferredVersion");
        cJSON_AddStringToObject(pref, "groupVersion", gv);
        cJSON_AddStringToObject(pref, "version", "v1");
        return g;
}

static bool group_known(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                if (streq(groups[i], name))
                        return true;
        return false;
}

static cJSON *discovery_group_list(void)
{
        cJSON *o = cJSON_CreateObject(), *arr;

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "kind", "APIGroupList");
        cJSON_AddStringToObject(o, "apiVersion", "v1");
        arr = cJSON_AddArrayToObject(o, "groups");
        for (size_t i = 0; i < ARRAY_SIZE(groups); i++)
                cJSON_AddItemToArray(arr, discovery_group(groups[i]));
        return o;
}

static void add_verbs(cJSON *r, bool create_only, bool sub)
{
        static const char *const all[] = { "create", "delete", "deletecollection", "get",
                                           "list",   "patch",  "update",           "watch" };
        static const char *const subverbs[] = { "get", "patch", "update" };
        cJSON *verbs = cJSON_AddArrayToObject(r, "verbs");

        if (create_only)
                cJSON_AddItemToArray(verbs, cJSON_CreateString("create"));
        else if (sub)
                for (size_t i = 0; i < ARRAY_SIZE(subverbs); i++)
                        cJSON_AddItemToArray(verbs, cJSON_CreateString(subverbs[i]));
        else
                for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                        cJSON_AddItemToArray(verbs, cJSON_CreateString(all[i]));
}

static cJSON *discovery_resource_list(const char *group, const char *version)
{
        cJSON *o = cJSON_CreateObject(), *arr;
        _cleanup_free_ char *gv = isempty(group) ? strdup(version) : strprintf("%s/%s", group, version);
        bool any = false;

        if (!o || !gv) {
                cJSON_Delete(o);
                return NULL;
        }
        cJSON_AddStringToObject(o, "kind", "APIResourceList");
        cJSON_AddStringToObject(o, "apiVersion", "v1");
        cJSON_AddStringToObject(o, "groupVersion", gv);
        arr = cJSON_AddArrayToObject(o, "resources");
        for (size_t i = 0; i < ARRAY_SIZE(resources); i++) {
                const struct resource *res = &resources[i];
                cJSON *r;
                if (!streq(res->group, group) || !streq(res->version, version))
                        continue;
                any = true;
                r = cJSON_CreateObject();
                cJSON_AddStringToObject(r, "name", res->name);
                cJSON_AddStringToObject(r, "singularName", res->singular);
                cJSON_AddBoolToObject(r, "namespaced", res->namespaced);
                cJSON_AddStringToObject(r, "kind", res->kind);
                add_verbs(r, false, false);
                if (res->short_name) {
                        cJSON *sn = cJSON_AddArrayToObject(r, "shortNames");
                        cJSON_AddItemToArray(sn, cJSON_CreateString(res->short_name));
                }
                if (res->in_all) {
                        cJSON *cat = cJSON_AddArrayToObject(r, "categories");
                        cJSON_AddItemToArray(cat, cJSON_CreateString("all"));
                }
                cJSON_AddItemToArray(arr, r);
                for (size_t j = 0; j < ARRAY_SIZE(subresources); j++) {
                        const struct subresource *sub = &subresources[j];
                        size_t n = strlen(res->name);
                        if (!streq(sub->group, group) || strncmp(sub->name, res->name, n) != 0 ||
                            sub->name[n] != '/')
                                continue;
                        r = cJSON_CreateObject();
                        cJSON_AddStringToObject(r, "name", sub->name);
                        cJSON_AddStringToObject(r, "singularName", "");
                        cJSON_AddBoolToObject(r, "namespaced", sub->namespaced);
                        if (sub->sub_group) {
                                cJSON_AddStringToObject(r, "group", sub->sub_group);
                                cJSON_AddStringToObject(r, "version", sub->sub_version);
                        }
                        cJSON_AddStringToObject(r, "kind", sub->kind);
                        add_verbs(r, sub->create_only, true);
                        cJSON_AddItemToArray(arr, r);
                }
        }
        if (!any) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}

/* ---- Table output (what kubectl get prints) ---- */

struct column {
        const char *name;
        const char *type;
        int priority; /* 1: only with -o wide */
};

static void format_age(uint64_t now, const char *created, char *buf, size_t len)
{
        uint64_t t;
        int64_t s;

        if (!created || parse_rfc3339(created, &t) < 0) {
                snprintf(buf, len, "<unknown>");
                return;
        }
        s = now > t ? (int64_t)((now - t) / 1000000) : 0;
        if (s < 120)
                snprintf(buf, len, "%" PRId64 "s", s);
        else if (s < 600 && s % 60)
                snprintf(buf, len, "%" PRId64 "m%" PRId64 "s", s / 60, s % 60);
        else if (s < 3 * 3600)
                snprintf(buf, len, "%" PRId64 "m", s / 60);
        else if (s < 8 * 3600 && (s / 60) % 60)
                snprintf(buf, len, "%" PRId64 "h%" PRId64 "m", s / 3600, (s / 60) % 60);
        else if (s < 48 * 3600)
                snprintf(buf, len, "%" PRId64 "h", s / 3600);
        else if (s < 8 * 86400 && (s / 3600) % 24)
                snprintf(buf, len, "%" PRId64 "d%" PRId64 "h", s / 86400, (s / 3600) % 24);
        else
                snprintf(buf, len, "%" PRId64 "d", s / 86400);
}

static const struct column node_columns[] = {
        { "Name", "string", 0 },           { "Status", "string", 0 },
        { "Roles", "string", 0 },          { "Age", "string", 0 },
        { "Version", "string", 0 },        { "Internal-IP", "string", 1 },
        { "External-IP", "string", 1 },    { "OS-Image", "string", 1 },
        { "Kernel-Version", "string", 1 }, { "Container-Runtime", "string", 1 },
};
static const struct column pod_columns[] = {
        { "Name", "string", 0 },
        { "Ready", "string", 0 },
        { "Status", "string", 0 },
        { "Restarts", "string", 0 },
        { "Age", "string", 0 },
        { "IP", "string", 1 },
        { "Node", "string", 1 },
        { "Nominated Node", "string", 1 },
        { "Readiness Gates", "string", 1 },
};
static const struct column pdb_columns[] = {
        { "Name", "string", 0 },
        { "Min Available", "string", 0 },
        { "Max Unavailable", "string", 0 },
        { "Allowed Disruptions", "integer", 0 },
        { "Age", "string", 0 },
};
static const struct column deployment_columns[] = {
        { "Name", "string", 0 },       { "Ready", "string", 0 }, { "Up-to-date", "integer", 0 },
        { "Available", "integer", 0 }, { "Age", "string", 0 },
};
static const struct column replicaset_columns[] = {
        { "Name", "string", 0 },   { "Desired", "integer", 0 }, { "Current", "integer", 0 },
        { "Ready", "integer", 0 }, { "Age", "string", 0 },
};
static const struct column statefulset_columns[] = {
        { "Name", "string", 0 },
        { "Ready", "string", 0 },
        { "Age", "string", 0 },
};
static const struct column daemonset_columns[] = {
        { "Name", "string", 0 },   { "Desired", "integer", 0 },    { "Current", "integer", 0 },
        { "Ready", "integer", 0 }, { "Up-to-date", "integer", 0 }, { "Available", "integer", 0 },
        { "Age", "string", 0 },
};
static const struct column namespace_columns[] = {
        { "Name", "string", 0 },
        { "Status", "string", 0 },
        { "Age", "string", 0 },
};
static const struct column event_columns[] = {
        { "Last Seen", "string", 0 }, { "Type", "string", 0 },    { "Reason", "string", 0 },
        { "Object", "string", 0 },    { "Message", "string", 0 }, { "Name", "string", 1 },
};
static const struct column lease_columns[] = {
        { "Name", "string", 0 },
        { "Holder", "string", 0 },
        { "Age", "string", 0 },
};

static void table_columns(enum sim_kind k, const struct column **ret, size_t *ret_n)
{
#define COLS(a)                         \
        do {                            \
                *ret = a;               \
                *ret_n = ARRAY_SIZE(a); \
        } while (0)
        switch (k) {
        case SIM_NODE:
                COLS(node_columns);
                break;
        case SIM_POD:
                COLS(pod_columns);
                break;
        case SIM_PDB:
                COLS(pdb_columns);
                break;
        case SIM_DEPLOYMENT:
                COLS(deployment_columns);
                break;
        case SIM_REPLICASET:
                COLS(replicaset_columns);
                break;
        case SIM_STATEFULSET:
                COLS(statefulset_columns);
                break;
        case SIM_DAEMONSET:
                COLS(daemonset_columns);
                break;
        case SIM_NAMESPACE:
                COLS(namespace_columns);
                break;
        case SIM_EVENT:
                COLS(event_columns);
                break;
        default:
                COLS(lease_columns);
                break;
        }
#undef COLS
}

static void add_str(cJSON *cells, const char *s)
{
        cJSON_AddItemToArray(cells, cJSON_CreateString(isempty(s) ? "<none>" : s));
}

static void add_int(cJSON *cells, double v)
{
        cJSON_AddItemToArray(cells, cJSON_CreateNumber(v));
}

static void add_fmt(cJSON *cells, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_fmt(cJSON *cells, const char *fmt, ...)
{
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        cJSON_AddItemToArray(cells, cJSON_CreateString(buf));
}

static const char *intorstr_text(const cJSON *v, char *buf, size_t len)
{
        if (cJSON_IsString(v))
                return v->valuestring;
        if (cJSON_IsNumber(v)) {
                snprintf(buf, len, "%d", v->valueint);
                return buf;
        }
        return "N/A";
}

static const char *node_address(const cJSON *node, const char *type)
{
        const cJSON *a;
        cJSON_ArrayForEach (a, json_path(node, "status.addresses")) {
                if (streq(json_str(a, "type"), type))
                        return json_str(a, "address");
        }
        return NULL;
}

static void node_cells(const cJSON *o, const char *age, cJSON *cells)
{
        const cJSON *cond, *label;
        const char *ready = "Unknown";
        char status[64], roles[256] = "";

        cJSON_ArrayForEach (cond, json_path(o, "status.conditions")) {
                if (streq(json_str(cond, "type"), "Ready"))
                        ready = streq(json_str(cond, "status"), "True") ? "Ready" : "NotReady";
        }
        snprintf(status, sizeof(status), "%s%s", ready,
                 cJSON_IsTrue(json_path(o, "spec.unschedulable")) ? ",SchedulingDisabled" : "");
        cJSON_ArrayForEach (label, json_path(o, "metadata.labels")) {
                if (label->string && startswith(label->string, "node-role.kubernetes.io/")) {
                        size_t n = strlen(roles);
                        snprintf(roles + n, sizeof(roles) - n, "%s%s", n ? "," : "",
                                 label->string + strlen("node-role.kubernetes.io/"));
                }
        }
        add_str(cells, json_str(o, "metadata.name"));
        add_str(cells, status);
        add_str(cells, roles);
        add_str(cells, age);
        add_str(cells, json_str(o, "status.nodeInfo.kubeletVersion"));
        add_str(cells, node_address(o, "InternalIP"));
        add_str(cells, node_address(o, "ExternalIP"));
        add_str(cells, json_str(o, "status.nodeInfo.osImage"));
        add_str(cells, json_str(o, "status.nodeInfo.kernelVersion"));
        add_str(cells, json_str(o, "status.nodeInfo.containerRuntimeVersion"));
}

static void pod_cells(const cJSON *o, const char *age, cJSON *cells)
{
        const cJSON *cs, *containers = json_path(o, "spec.containers");
        const char *reason = json_str(o, "status.reason");
        int ready = 0, restarts = 0;

        if (isempty(reason))
                reason = json_str(o, "status.phase");
        cJSON_ArrayForEach (cs, json_path(o, "status.containerStatuses")) {
                const char *w = json_str(cs, "state.waiting.reason");
                const char *t = json_str(cs, "state.terminated.reason");
                restarts += (int)json_num(cs, "restartCount");
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "ready")))
                        ready++;
                if (!isempty(w))
                        reason = w;
                else if (!isempty(t))
                        reason = t;
        }
        if (json_path(o, "metadata.deletionTimestamp"))
                reason = "Terminating";
        add_str(cells, json_str(o, "metadata.name"));
        add_fmt(cells, "%d/%d", ready, cJSON_GetArraySize(containers));
        add_str(cells, isempty(reason) ? "Pending" : reason);
        add_fmt(cells, "%d", restarts);
        add_str(cells, age);
        add_str(cells, json_str(o, "status.podIP"));
        add_str(cells, json_str(o, "spec.nodeName"));
        add_str(cells, json_str(o, "status.nominatedNodeName"));
        add_str(cells, NULL);
}

static void event_cells(const cJSON *o, const char *age, cJSON *cells)
{
        /* core/v1 names, or the events.k8s.io/v1 ones when served from that group */
        const cJSON *about =
            json_path(o, "involvedObject") ? json_path(o, "involvedObject") : json_path(o, "regarding");
        const char *kind = json_str(about, "kind"), *name = json_str(about, "name");
        const char *message = json_str(o, "message") ? json_str(o, "message") : json_str(o, "note");
        char lower[64] = "";

        for (size_t i = 0; kind && kind[i] && i + 1 < sizeof(lower); i++)
                lower[i] = (char)((kind[i] >= 'A' && kind[i] <= 'Z') ? kind[i] - 'A' + 'a' : kind[i]);
        add_str(cells, age);
        add_str(cells, json_str(o, "type"));
        add_str(cells, json_str(o, "reason"));
        add_fmt(cells, "%s/%s", lower, name ? name : "");
        add_str(cells, message);
        add_str(cells, json_str(o, "metadata.name"));
}

static void table_cells(enum sim_kind k, const cJSON *o, const char *age, cJSON *cells)
{
        char b1[32], b2[32];
        const char *name = json_str(o, "metadata.name");

        switch (k) {
        case SIM_NODE:
                node_cells(o, age, cells);
                break;
        case SIM_POD:
                pod_cells(o, age, cells);
                break;
        case SIM_EVENT:
                event_cells(o, age, cells);
                break;
        case SIM_PDB:
                add_str(cells, name);
                add_str(cells, intorstr_text(json_path(o, "spec.minAvailable"), b1, sizeof(b1)));
                add_str(cells, intorstr_text(json_path(o, "spec.maxUnavailable"), b2, sizeof(b2)));
                add_int(cells, json_num(o, "status.disruptionsAllowed"));
                add_str(cells, age);
                break;
        case SIM_DEPLOYMENT:
                add_str(cells, name);
                add_fmt(cells, "%d/%d", (int)json_num(o, "status.readyReplicas"),
                        (int)json_num(o, "spec.replicas"));
                add_int(cells, json_num(o, "status.updatedReplicas"));
                add_int(cells, json_num(o, "status.availableReplicas"));
                add_str(cells, age);
                break;
        case SIM_REPLICASET:
                add_str(cells, name);
                add_int(cells, json_num(o, "spec.replicas"));
                add_int(cells, json_num(o, "status.replicas"));
                add_int(cells, json_num(o, "status.readyReplicas"));
                add_str(cells, age);
                break;
        case SIM_STATEFULSET:
                add_str(cells, name);
                add_fmt(cells, "%d/%d", (int)json_num(o, "status.readyReplicas"),
                        (int)json_num(o, "spec.replicas"));
                add_str(cells, age);
                break;
        case SIM_DAEMONSET:
                add_str(cells, name);
                add_int(cells, json_num(o, "status.desiredNumberScheduled"));
                add_int(cells, json_num(o, "status.currentNumberScheduled"));
                add_int(cells, json_num(o, "status.numberReady"));
                add_int(cells, json_num(o, "status.updatedNumberScheduled"));
                add_int(cells, json_num(o, "status.numberAvailable"));
                add_str(cells, age);
                break;
        case SIM_NAMESPACE:
                add_str(cells, name);
                add_str(cells, json_str(o, "status.phase") ? json_str(o, "status.phase") : "Active");
                add_str(cells, age);
                break;
        default:
                add_str(cells, name);
                add_str(cells, json_str(o, "spec.holderIdentity"));
                add_str(cells, age);
                break;
        }
}

/* What the Age column counts from: for events, when they last happened (LAST SEEN). */
static const char *age_stamp(enum sim_kind k, const cJSON *o)
{
        static const char *const event_stamps[] = { "lastTimestamp", "deprecatedLastTimestamp", "eventTime",
                                                    "series.lastObservedTime" };
        if (k == SIM_EVENT)
                for (size_t i = 0; i < ARRAY_SIZE(event_stamps); i++)
                        if (!isempty(json_str(o, event_stamps[i])))
                                return json_str(o, event_stamps[i]);
        return json_str(o, "metadata.creationTimestamp");
}

/* Builds a meta.k8s.io/v1 Table from items (not consumed). include: "None", "Object", or "Metadata". */
static cJSON *table_new(struct sim *s, enum sim_kind k, const cJSON *items, const char *include,
                        const cJSON *list_meta)
{
        cJSON *t = cJSON_CreateObject(), *defs, *rows;
        const struct column *cols;
        const cJSON *it;
        size_t ncols;
        uint64_t now = sim_wall_usec(s, sim_now(s));

        if (!t)
                return NULL;
        table_columns(k, &cols, &ncols);
        cJSON_AddStringToObject(t, "kind", "Table");
        cJSON_AddStringToObject(t, "apiVersion", "meta.k8s.io/v1");
        cJSON_AddItemToObject(t, "metadata",
                              list_meta ? cJSON_Duplicate(list_meta, true) : cJSON_CreateObject());
        defs = cJSON_AddArrayToObject(t, "columnDefinitions");
        for (size_t i = 0; i < ncols; i++) {
                cJSON *d = cJSON_CreateObject();
                cJSON_AddStringToObject(d, "name", cols[i].name);
                cJSON_AddStringToObject(d, "type", cols[i].type);
                cJSON_AddStringToObject(d, "format", i == 0 && streq(cols[i].name, "Name") ? "name" : "");
                cJSON_AddStringToObject(d, "description", "");
                cJSON_AddNumberToObject(d, "priority", cols[i].priority);
                cJSON_AddItemToArray(defs, d);
        }
        rows = cJSON_AddArrayToObject(t, "rows");
        cJSON_ArrayForEach (it, items) {
                cJSON *row = cJSON_CreateObject(), *cells;
                char age[32];
                format_age(now, age_stamp(k, it), age, sizeof(age));
                cells = cJSON_AddArrayToObject(row, "cells");
                table_cells(k, it, age, cells);
                if (streq(include, "Object"))
                        cJSON_AddItemToObject(row, "object", cJSON_Duplicate(it, true));
                else if (!streq(include, "None")) {
                        cJSON *pm = cJSON_CreateObject();
                        cJSON_AddStringToObject(pm, "kind", "PartialObjectMetadata");
                        cJSON_AddStringToObject(pm, "apiVersion", "meta.k8s.io/v1");
                        cJSON_AddItemToObject(
                            pm, "metadata",
                            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "metadata"), true));
                        cJSON_AddItemToObject(row, "object", pm);
                }
                cJSON_AddItemToArray(rows, row);
        }
        return t;
}

static bool wants_table(struct MHD_Connection *c)
{
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        return accept && strstr(accept, "as=Table");
}

/* ---- request handling ---- */

struct api_path {
        const struct resource *res;
        const char *ns, *name, *sub;
};

static const char *arg(struct MHD_Connection *c, const char *key)
{
        return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

static bool arg_true(struct MHD_Connection *c, const char *key)
{
        const char *v = arg(c, key);
        return v && (streq(v, "true") || streq(v, "1"));
}

static const char *content_type(struct MHD_Connection *c, char *buf, size_t len)
{
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        size_t n;
        if (!ct)
                return "";
        n = strcspn(ct, ";");
        snprintf(buf, len, "%.*s", (int)n, ct);
        return buf;
}

static char *not_found_message(const struct api_path *ap)
{
        return strprintf("%s%s%s \"%s\" not found", ap->res->name, isempty(ap->res->group) ? "" : ".",
                         ap->res->group, ap->name);
}

/* Copies kept items of a list into the response, honouring limit and continue. */
/* The value V of a "spec.nodeName=V" (or "==") term of a field selector, into buf: the one field a list can
 * be narrowed by in the model (a node's pods). False when the selector has no such term. */
static bool selector_node_name(const char *fsel, char *buf, size_t len)
{
        static const char field[] = "spec.nodeName";
        for (const char *p = fsel; p && *p;) {
                size_t n = strcspn(p, ",");
                if (n > sizeof(field) - 1 && strncmp(p, field, sizeof(field) - 1) == 0) {
                        const char *v = p + sizeof(field) - 1;
                        if (*v == '=') {
                                v += v[1] == '=' ? 2 : 1;
                                size_t vl = n - (size_t)(v - p);
                                if (vl < len) {
                                        memcpy(buf, v, vl);
                                        buf[vl] = 0;
                                        return true;
                                }
                        }
                }
                p += n;
                if (*p == ',')
                        p++;
        }
        return false;
}

static bool labels_match_selector(const cJSON *labels, void *userdata)
{
        return sim_label_selector_match(userdata, labels) == 1;
}

/* A model-side pre-filter for a list with these selectors (the full selectors still apply to what it keeps).
 */
static void list_filter(const char *lsel, const char *fsel, char *node_buf, size_t node_len,
                        struct sim_list_filter *ret)
{
        *ret = (struct sim_list_filter){ 0 };
        if (selector_node_name(fsel, node_buf, node_len))
                ret->node_name = node_buf;
        if (!isempty(lsel)) {
                ret->labels = labels_match_selector;
                ret->userdata = (void *)lsel;
        }
}

static enum MHD_Result serve_list(struct sim_server *srv, struct MHD_Connection *c,
                                  const struct api_path *ap)
{
        struct sim *s = srv->sim;
        const char *lsel = arg(c, "labelSelector"), *fsel = arg(c, "fieldSelector");
        const char *limit_s = arg(c, "limit"), *cont = arg(c, "continue");
        cJSON *all = NULL, *kept, *it, *next, *meta, *list;
        uint64_t rv = sim_resource_version(s);
        size_t offset = 0, limit = 0, idx = 0, n_kept = 0;
        _cleanup_free_ char *api_version = NULL, *kind = NULL, *rvs = NULL;
        int r;

        if (sim_label_selector_match(lsel, NULL) < 0 || sim_field_selector_match(fsel, NULL) < 0)
                return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "unable to parse requirement");
        if (cont && sim_continue_decode(cont, &rv, &offset) < 0)
                return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid continue token");
        /* faults.watch_gone_rate: a list from a resourceVersion (or a continue token) the server no longer
         * has; "0" and none mean any version and are always served. */
        if ((cont || (!isempty(arg(c, "resourceVersion")) && !streq(arg(c, "resourceVersion"), "0"))) &&
            fault_draw(srv, srv->watch_gone_rate, FAULT_LIST_GONE)) {
                srv->n_list_gone++;
                return reply_status(
                    c, 410, "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter. "
                    "(simulated fault)");
        }
        if (limit_s) {
                char *end;
                unsigned long long l = strtoull(limit_s, &end, 10);
                if (*end)
                        return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid limit");
                limit = (size_t)l;
        }
        struct sim_list_filter filter;
        char node_buf[256];
        list_filter(lsel, fsel, node_buf, sizeof(node_buf), &filter);
        r = sim_list_filtered(s, ap->res->sim_kind, ap->ns, &filter, &all);
        if (r < 0)
                return reply_errno(c, r);
        kept = cJSON_CreateArray();
        list = cJSON_CreateObject();
        api_version = resource_api_version(ap->res);
        kind = strprintf("%sList", ap->res->kind);
        rvs = strprintf("%" PRIu64, rv);
        if (!kept || !list || !api_version || !kind || !rvs) {
                cJSON_Delete(all);
                cJSON_Delete(kept);
                cJSON_Delete(list);
                return MHD_NO;
        }
        for (it = all ? all->child : NULL; it; it = next) {
                next = it->next;
                if (sim_label_selector_match(lsel, json_path(it, "metadata.labels")) != 1 ||
                    sim_field_selector_match(fsel, it) != 1)
                        continue;
                if (idx++ < offset)
                        continue;
                if (limit && n_kept >= limit) {
                        _cleanup_free_ char *tok = sim_continue_encode(rv, idx - 1);
                        meta = cJSON_AddObjectToObject(list, "metadata");
                        cJSON_AddStringToObject(meta, "continue", tok ? tok : "");
                        break;
                }
                cJSON_DetachItemViaPointer(all, it);
                if (resource_is_events_v1(ap->res))
                        event_convert(it, true);
                cJSON_AddItemToArray(kept, it);
                n_kept++;
        }
        cJSON_Delete(all);
        meta = cJSON_GetObjectItemCaseSensitive(list, "metadata");
        if (!meta)
                meta = cJSON_AddObjectToObject(list, "metadata");
        cJSON_AddStringToObject(meta, "resourceVersion", rvs);
        if (wants_table(c)) {
                cJSON *t = table_new(s, ap->res->sim_kind, kept, arg(c, "includeObject"), meta);
                cJSON_Delete(kept);
                cJSON_Delete(list);
                return reply_json(c, MHD_HTTP_OK, t);
        }
        cJSON_AddStringToObject(list, "kind", kind);
        cJSON_AddStringToObject(list, "apiVersion", api_version);
        cJSON_AddItemToObject(list, "items", kept);
        return reply_json(c, MHD_HTTP_OK, list);
}

static enum MHD_Result serve_get(struct sim_server *srv, struct MHD_Connection *c, const struct api_path *ap)
{
        cJSON *obj = NULL;
        int r;

        r = sim_get(srv->sim, ap->res->sim_kind, ap->ns, ap->name, &obj);
        if (r == -ENOENT) {
                _cleanup_free_ char *msg = not_found_message(ap);
                return reply_json(c, MHD_HTTP_NOT_FOUND,
                                  status_new(MHD_HTTP_NOT_FOUND, "NotFound", msg, ap->res->name, ap->name));
        }
        if (r < 0)
                return reply_errno(c, r);
        if (resource_is_events_v1(ap->res))
                event_convert(obj, true);
        if (wants_table(c)) {
                cJSON *items = cJSON_CreateArray(), *t;
                cJSON_AddItemToArray(items, obj);
                t = table_new(srv->sim, ap->res->sim_kind, items, arg(c, "includeObject"), NULL);
                cJSON_Delete(items);
                return reply_json(c, MHD_HTTP_OK, t);
        }
        return reply_json(c, MHD_HTTP_OK, obj);
}

static enum MHD_Result reply_answer(struct MHD_Connection *c, struct sim_answer *a, bool events_v1)
{
        if (!a->body)
                return reply_errno(c, -ENOMEM);
        if (events_v1 && a->status < 300 && a->body)
                event_convert(a->body, true);
        return reply_json(c, (unsigned)a->status, a->body);
}

static cJSON *parse_body(const struct sim_http_request *rq)
{
        return rq->body_len ? cJSON_ParseWithLength(rq->body, rq->body_len) : NULL;
}

static const char *user_agent(struct MHD_Connection *c)
{
        const char *ua = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent");
        return ua ? ua : "";
}

static enum MHD_Result serve_delete_pod(struct sim_server *srv, struct MHD_Connection *c,
                                        const struct api_path *ap, const struct sim_http_request *rq)
{
        char ctbuf[128];
        const char *ct = content_type(c, ctbuf, sizeof(ctbuf)), *q = arg(c, "gracePeriodSeconds");
        _cleanup_free_ char *uid = NULL;
        struct sim_answer a = {};
        int64_t grace = -1;
        int r;

        if (q) {
                char *end;
                grace = strtoll(q, &end, 10);
                if (*end || grace < 0)
                        return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                            "invalid gracePeriodSeconds");
        }
        if (rq->body_len > 0) {
                if (streq(ct, "application/vnd.kubernetes.protobuf") ||
                    (rq->body_len >= 4 && memcmp(rq->body, "k8s\0", 4) == 0)) {
                        int64_t g;
                        r = sim_protobuf_delete_options(rq->body, rq->body_len, &g, &uid);
                        if (r < 0)
                                return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                                    "unable to decode DeleteOptions");
                        if (g >= 0)
                                grace = g;
                } else {
                        cJSON *opts = parse_body(rq);
                        const cJSON *g;
                        const char *u;
                        if (!opts)
                                return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                                    "unable to decode DeleteOptions");
                        g = cJSON_GetObjectItemCaseSensitive(opts, "gracePeriodSeconds");
                        if (cJSON_IsNumber(g))
                                grace = (int64_t)g->valuedouble;
                        u = json_str(opts, "preconditions.uid");
                        if (u)
                                uid = strdup(u);
                        cJSON_Delete(opts);
                        if (u && !uid)
                                return MHD_NO;
                }
        }
        r = sim_delete_pod(srv->sim, ap->ns, ap->name, grace, uid, user_agent(c), &a);
        if (r < 0)
                return reply_errno(c, r);
        return reply_answer(c, &a, false);
}

static enum MHD_Result serve_write(struct sim_server *srv, struct MHD_Connection *c, const char *method,
                                   const struct api_path *ap, const struct sim_http_request *rq)
{
        struct sim *s = srv->sim;
        bool ev1 = resource_is_events_v1(ap->res);
        struct sim_answer a = {};
        cJSON *body;
        char ctbuf[128];
        int r;

        if (rq->body_too_large)
                return reply_status(c, MHD_HTTP_CONTENT_TOO_LARGE, "RequestEntityTooLarge",
                                    "the request body is too large");
        if (streq(method, "DELETE")) {
                if (ap->res->sim_kind == SIM_POD && ap->name && !ap->sub)
                        return serve_delete_pod(srv, c, ap, rq);
                return reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                    "the simulator does not delete this resource");
        }
        if (streq(method, "PATCH")) {
                const char *ct = content_type(c, ctbuf, sizeof(ctbuf));
                if (!ap->name)
                        return reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                            "PATCH needs an object");
                if (!streq(ct, "application/strategic-merge-patch+json") &&
                    !streq(ct, "application/merge-patch+json") && !streq(ct, "application/json-patch+json"))
                        return reply_status(
                            c, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType",
                            "the body of the request was in an unknown format - accepted media "
                            "types include: application/json-patch+json, "
                            "application/merge-patch+json, application/strategic-merge-patch+json");
                body = parse_body(rq);
                if (!body)
                        return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "the patch is not JSON");
                r = sim_patch(s, ap->res->sim_kind, ap->ns, ap->name, ct, body, &a);
                cJSON_Delete(body);
                if (r < 0)
                        return reply_errno(c, r);
                return reply_answer(c, &a, ev1);
        }
        body = parse_body(rq);
        if (!body)
                return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "the body is not JSON");
        if (streq(method, "POST") && ap->name && streq(ap->sub, "eviction") && ap->res->sim_kind == SIM_POD)
                r = sim_evict(s, ap->ns, ap->name, body, user_agent(c), &a);
        else if (ap->res->sim_kind != SIM_EVENT && ap->res->sim_kind != SIM_LEASE && !streq(method, "PUT")) {
                cJSON_Delete(body);
                return reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                    "the simulator does not create this resource");
        } else if (ap->sub || (ap->res->namespaced && !ap->ns)) {
                cJSON_Delete(body);
                return reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                                    "the server does not allow this method on the requested resource");
        } else {
                if (ev1)
                        event_convert(body, false);
                if (streq(method, "POST") && !ap->name)
                        r = sim_create(s, ap->res->sim_kind, ap->ns, body, &a);
                else if (streq(method, "PUT") && ap->name)
                        r = sim_replace(s, ap->res->sim_kind, ap->ns, ap->name, body, &a);
                else {
                        cJSON_Delete(body);
                        return reply_status(
                            c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
                }
        }
        cJSON_Delete(body);
        if (r < 0)
                return reply_errno(c, r);
        return reply_answer(c, &a, ev1);
}

/* ---- watch ---- */

struct watch {
        struct sim_server *srv;
        const struct resource *res;
        char *ns, *lsel, *fsel;
        uint64_t rv;
        uint64_t deadline;      /* monotonic usec */
        uint64_t next_bookmark; /* monotonic usec; 0 = none asked */
        int fd;
        bool ended;
        bool table;    /* kubectl get -w: each object as a one-row Table */
        char *include; /* includeObject of those tables */
        struct buf out;
        size_t out_pos;
        /* faults.watch_drop_rate: the stream ends after this many events or at this monotonic instant, as
         * when an apiserver restarts or a load balancer cuts an idle connection (0 = never) */
        unsigned drop_after_events;
        uint64_t drop_at;
        unsigned events;
};

static void watch_free(void *p)
{
        struct watch *w = p;
        if (!w)
                return;
        free(w->ns);
        free(w->lsel);
        free(w->fsel);
        free(w->include);
        buf_free(&w->out);
        free(w);
}

static void watch_emit(struct watch *w, const char *type, const cJSON *obj)
{
        _cleanup_free_ char *text = NULL;
        cJSON *copy = NULL;

        if (resource_is_events_v1(w->res) && !streq(type, "ERROR")) {
                copy = cJSON_Duplicate(obj, true);
                if (!copy)
                        return;
                event_convert(copy, true);
                obj = copy;
        }
        if (w->table && !streq(type, "ERROR")) {
                cJSON *items = cJSON_CreateArray(), *t = NULL;
                if (items && cJSON_AddItemReferenceToArray(items, (cJSON *)obj))
                        t = table_new(w->srv->sim, w->res->sim_kind, items, w->include, NULL);
                cJSON_Delete(items);
                text = t ? cJSON_PrintUnformatted(t) : NULL;
                cJSON_Delete(t);
        } else
                text = cJSON_PrintUnformatted(obj);
        cJSON_Delete(copy);
        if (text) {
                buf_printf(&w->out, "{\"type\":\"%s\",\"object\":%s}\n", type, text);
                w->events++;
        }
}

static bool watch_matches(const struct watch *w, const cJSON *obj)
{
        return sim_label_selector_match(w->lsel, json_path(obj, "metadata.labels")) == 1 &&
               sim_field_selector_match(w->fsel, obj) == 1;
}

static void watch_change(const struct sim_change *ch, void *userdata)
{
        struct watch *w = userdata;
        if (watch_matches(w, ch->object))
                watch_emit(w, ch->type, ch->object);
}

/* As kube-apiserver's watch cache: a bookmark every minute, and one shortly before the watch times out so
 * that the client can resume from it. */
static uint64_t watch_next_bookmark(const struct watch *w, uint64_t now)
{
        uint64_t t = now + WATCH_BOOKMARK_US;
        if (w->deadline > now + WATCH_LAST_BOOKMARK_US && w->deadline - WATCH_LAST_BOOKMARK_US < t)
                t = w->deadline - WATCH_LAST_BOOKMARK_US;
        return t;
}

static void watch_bookmark(struct watch *w, uint64_t rv)
{
        _cleanup_free_ char *api_version = resource_api_version(w->res);
        buf_printf(&w->out,
                   "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
                   "\"resourceVersion\":\"%" PRIu64 "\"}}}\n",
                   w->res->kind, api_version ? api_version : "v1", rv);
}

/* The client hung up: a watch with nothing to send would otherwise hold its thread until its timeout. */
static bool peer_gone(int fd)
{
        struct pollfd pfd = { .fd = fd, .events = POLLIN | POLLRDHUP };
        char b;

        if (fd < 0 || poll(&pfd, 1, 0) <= 0)
                return false;
        if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR))
                return true;
        return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

static ssize_t watch_read(void *cls, uint64_t pos, char *out, size_t max)
{
        struct watch *w = cls;
        struct sim *s = w->srv->sim;

        for (;;) {
                uint64_t now, store_rv, wait;
                int r;

                if (w->out_pos < w->out.len) {
                        size_t n = w->out.len - w->out_pos;
                        if (n > max)
                                n = max;
                        memcpy(out, w->out.data + w->out_pos, n);
                        w->out_pos += n;
                        return (ssize_t)n;
                }
                w->out.len = 0;
                w->out_pos = 0;
                if (w->ended || atomic_load(&w->srv->stopping))
                        return MHD_CONTENT_READER_END_OF_STREAM;
                if (peer_gone(w->fd))
                        return MHD_CONTENT_READER_END_WITH_ERROR;

                sim_lock(s);
                /* Runs what fell due, so that a watcher never spins waiting for the ticker to do it. */
                store_rv = sim_resource_version(s);
                sim_advance(s);
                if (sim_resource_version(s) != store_rv) {
                        sim_broadcast(s);
                        store_rv = sim_resource_version(s);
                }
                r = sim_changes_since(s, w->res->sim_kind, w->ns, w->rv, watch_change, w);
                if (r == -ESTALE) {
                        _cleanup_free_ char *msg = strprintf(
                            "too old resource version: %" PRIu64 " (%" PRIu64 ")", w->rv, store_rv);
                        cJSON *st = status_new(410, "Expired", msg, NULL, NULL);
                        if (st)
                                watch_emit(w, "ERROR", st);
                        cJSON_Delete(st);
                        w->ended = true;
                } else if (r < 0)
                        w->ended = true;
                else if (w->rv < store_rv)
                        w->rv = store_rv;
                now = now_monotonic_usec();
                if ((w->drop_after_events && w->events >= w->drop_after_events) ||
                    (w->drop_at && now >= w->drop_at))
                        w->ended = true;
                if (w->out.len == 0 && !w->ended) {
                        if (now >= w->deadline) {
                                w->ended = true;
                        } else if (w->next_bookmark && now >= w->next_bookmark) {
                                watch_bookmark(w, w->rv);
                                w->next_bookmark = watch_next_bookmark(w, now);
                        } else {
                                wait = w->deadline - now;
                                if (wait > WATCH_POLL_USEC)
                                        wait = WATCH_POLL_USEC;
                                if (w->drop_at && w->drop_at - now < wait)
                                        wait = w->drop_at - now;
                                sim_wait(s, store_rv, wait);
                        }
                }
                sim_unlock(s);
        }
}

static enum MHD_Result serve_watch(struct sim_server *srv, struct MHD_Connection *c,
                                   const struct api_path *ap)
{
        struct sim *s = srv->sim;
        const char *rv_s = arg(c, "resourceVersion"), *timeout_s = arg(c, "timeoutSeconds");
        const union MHD_ConnectionInfo *ci;
        struct MHD_Response *resp;
        struct watch *w;
        enum MHD_Result ret;
        uint64_t timeout = WATCH_DEFAULT_SEC;

        if (sim_label_selector_match(arg(c, "labelSelector"), NULL) < 0 ||
            sim_field_selector_match(arg(c, "fieldSelector"), NULL) < 0)
                return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "unable to parse requirement");
        if (timeout_s) {
                char *end;
                timeout = strtoull(timeout_s, &end, 10);
                if (*end)
                        return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", "invalid timeoutSeconds");
                /* 0 asks for the server's default; clients never need more than a day */
                if (timeout == 0 || timeout > 86400)
                        timeout = timeout == 0 ? WATCH_DEFAULT_SEC : 86400;
        }
        w = calloc(1, sizeof(*w));
        if (!w)
                return MHD_NO;
        w->srv = srv;
        w->res = ap->res;
        w->fd = -1;
        w->ns = ap->ns ? strdup(ap->ns) : NULL;
        w->lsel = arg(c, "labelSelector") ? strdup(arg(c, "labelSelector")) : NULL;
        w->fsel = arg(c, "fieldSelector") ? strdup(arg(c, "fieldSelector")) : NULL;
        if (ap->name) {
                /* A watch on one object is a watch with a name field selector. */
                free(w->fsel);
                w->fsel = strprintf("metadata.name=%s", ap->name);
        }
        if ((ap->ns && !w->ns) || (arg(c, "labelSelector") && !w->lsel) ||
            ((ap->name || arg(c, "fieldSelector")) && !w->fsel)) {
                watch_free(w);
                return MHD_NO;
        }
        w->deadline = now_monotonic_usec() + timeout * 1000000;
        if (arg_true(c, "allowWatchBookmarks"))
                w->next_bookmark = watch_next_bookmark(w, now_monotonic_usec());
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                w->fd = ci->connect_fd;
        w->table = wants_table(c);
        w->include = arg(c, "includeObject") ? strdup(arg(c, "includeObject")) : NULL;
        if (arg(c, "includeObject") && !w->include) {
                watch_free(w);
                return MHD_NO;
        }

        if (isempty(rv_s) || streq(rv_s, "0")) {
                cJSON *items = NULL, *it;
                struct sim_list_filter filter;
                char node_buf[256];
                list_filter(w->lsel, w->fsel, node_buf, sizeof(node_buf), &filter);
                int r = sim_list_filtered(s, ap->res->sim_kind, ap->ns, &filter, &items);
                if (r < 0) {
                        watch_free(w);
                        return reply_errno(c, r);
                }
                cJSON_ArrayForEach (it, items) {
                        if (watch_matches(w, it))
                                watch_emit(w, "ADDED", it);
                }
                cJSON_Delete(items);
                w->rv = sim_resource_version(s);
        } else {
                char *end;
                w->rv = strtoull(rv_s, &end, 10);
                if (*end) {
                        watch_free(w);
                        return reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest",
                                            "invalid resourceVersion");
                }
                /* faults.watch_gone_rate: as when the watch cache no longer holds that version — a 200 whose
                 * only event is the 410 ERROR; the client must list again. */
                if (fault_draw(srv, srv->watch_gone_rate, FAULT_WATCH_GONE)) {
                        _cleanup_free_ char *msg = strprintf("too old resource version: %" PRIu64
                                                             " (%" PRIu64 ") (simulated fault)",
                                                             w->rv, sim_resource_version(s));
                        cJSON *st = status_new(410, "Expired", msg, NULL, NULL);
                        if (st)
                                watch_emit(w, "ERROR", st);
                        cJSON_Delete(st);
                        w->ended = true;
                        srv->n_watch_gone++;
                }
        }
        if (!w->ended && fault_draw(srv, srv->watch_drop_rate, FAULT_WATCH_DROP)) {
                uint64_t u = (uint64_t)(fault_uniform(srv, FAULT_WATCH_DROP_WHEN) * 1e6);
                w->drop_after_events = w->events + 1 + (unsigned)(u % 3);
                w->drop_at = now_monotonic_usec() + 200000 + (u % 1800) * 1000;
                srv->n_watch_dropped++;
        }
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, watch_read, w, watch_free);
        if (!resp) {
                watch_free(w);
                return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "application/json");
        MHD_add_response_header(resp, "Cache-Control", "no-cache, private");
        ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* ---- routing ---- */

/* Splits the path into at most max segments (in place). Returns the count, or -1 for too many. */
static int split_path(char *path, char **segs, int max)
{
        int n = 0;
        char *save = NULL;
        for (char *t = strtok_r(path, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
                if (n == max)
                        return -1;
                segs[n++] = t;
        }
        return n;
}

static enum MHD_Result serve_api(struct sim_server *srv, struct MHD_Connection *c, const char *method,
                                 char **segs, int n, const struct sim_http_request *rq)
{
        const char *group, *version;
        struct api_path ap = {};
        char **rest;
        int rn;

        if (streq(segs[0], "api")) {
                if (n == 1)
                        return reply_json(c, MHD_HTTP_OK, discovery_versions(srv));
                group = "";
                version = segs[1];
                rest = segs + 2;
                rn = n - 2;
        } else {
                if (n == 1)
                        return reply_json(c, MHD_HTTP_OK, discovery_group_list());
                if (n == 2) {
                        cJSON *g;
                        if (!group_known(segs[1]))
                                return reply_not_found(c);
                        g = discovery_group(segs[1]);
                        cJSON_AddStringToObject(g, "kind", "APIGroup");
                        cJSON_AddStringToObject(g, "apiVersion", "v1");
                        return reply_json(c, MHD_HTTP_OK, g);
                }
                group = segs[1];
                version = segs[2];
                rest = segs + 3;
                rn = n - 3;
        }
        if (rn == 0) {
                cJSON *l = discovery_resource_list(group, version);
                return l ? reply_json(c, MHD_HTTP_OK, l) : reply_not_found(c);
        }
        if (streq(rest[0], "namespaces") && rn >= 3) {
                ap.ns = rest[1];
                rest += 2;
                rn -= 2;
        }
        if (rn > 3)
                return reply_not_found(c);
        ap.res = resource_find(group, version, rest[0]);
        if (!ap.res || (ap.ns && !ap.res->namespaced))
                return reply_not_found(c);
        ap.name = rn > 1 ? rest[1] : NULL;
        ap.sub = rn > 2 ? rest[2] : NULL;
        if (ap.sub &&
            !(streq(ap.sub, "status") || (streq(ap.sub, "eviction") && ap.res->sim_kind == SIM_POD)))
                return reply_not_found(c);

        if (streq(method, "GET")) {
                if (streq(ap.sub, "eviction"))
                        return reply_status(
                            c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
                if (arg_true(c, "watch"))
                        return serve_watch(srv, c, &ap);
                return ap.name ? serve_get(srv, c, &ap) : serve_list(srv, c, &ap);
        }
        if (streq(method, "POST") || streq(method, "PUT") || streq(method, "PATCH") ||
            streq(method, "DELETE"))
                return serve_write(srv, c, method, &ap, rq);
        return reply_status(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed",
                            "the server does not allow this method on the requested resource");
}

static enum MHD_Result serve_sim(struct sim_server *srv, struct MHD_Connection *c, const char *what)
{
        struct sim *s = srv->sim;
        cJSON *o;

        if (streq(what, "result"))
                return reply_json(c, MHD_HTTP_OK, sim_result(s));
        if (streq(what, "clock")) {
                o = cJSON_CreateObject();
                if (!o)
                        return MHD_NO;
                cJSON_AddNumberToObject(o, "now", sim_now(s));
                cJSON_AddBoolToObject(o, "finished", sim_finished(s));
                return reply_json(c, MHD_HTTP_OK, o);
        }
        if (streq(what, "faults")) {
                /* What the scenario's faults did to the Kubernetes API so far: tests check a fault fired. */
                o = cJSON_CreateObject();
                if (!o)
                        return MHD_NO;
                cJSON_AddNumberToObject(o, "api_errors", (double)srv->n_errors);
                cJSON_AddNumberToObject(o, "api_throttled", (double)srv->n_throttled);
                cJSON_AddNumberToObject(o, "watches_dropped", (double)srv->n_watch_dropped);
                cJSON_AddNumberToObject(o, "watches_gone", (double)srv->n_watch_gone);
                cJSON_AddNumberToObject(o, "lists_gone", (double)srv->n_list_gone);
                return reply_json(c, MHD_HTTP_OK, o);
        }
        return reply_not_found(c);
}

static enum MHD_Result serve_version(struct MHD_Connection *c)
{
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return MHD_NO;
        cJSON_AddStringToObject(o, "major", "1");
        cJSON_AddStringToObject(o, "minor", "30");
        cJSON_AddStringToObject(o, "gitVersion", "v1.30.0-spotdrain-sim");
        cJSON_AddStringToObject(o, "gitCommit", "0000000000000000000000000000000000000000");
        cJSON_AddStringToObject(o, "gitTreeState", "clean");
        cJSON_AddStringToObject(o, "buildDate", "2026-11-30T00:00:00Z");
        cJSON_AddStringToObject(o, "goVersion", "go1.22.0");
        cJSON_AddStringToObject(o, "compiler", "gc");
        cJSON_AddStringToObject(o, "platform", "linux/amd64");
        return reply_json(c, MHD_HTTP_OK, o);
}

static int dispatch(void *userdata, const struct sim_http_request *rq)
{
        struct sim_server *srv = userdata;
        struct sim *s = srv->sim;
        struct MHD_Connection *c = rq->connection;
        const char *url = rq->url, *method = rq->method;
        _cleanup_free_ char *path = strdup(url);
        char *segs[8];
        enum MHD_Result ret;
        uint64_t before;
        bool resource;
        int n;

        if (!path)
                return -ENOMEM;
        log_debug("sim api: %s %s", method, url);
        n = split_path(path, segs, (int)ARRAY_SIZE(segs));
        if (n == 1 && (streq(segs[0], "healthz") || streq(segs[0], "readyz") || streq(segs[0], "livez")))
                return reply_text(c, MHD_HTTP_OK, "text/plain", strdup("ok")) == MHD_YES ? 0 : -EIO;

        /* Discovery documents stay reliable: kubectl gives up on the first failed one, a real client retries
         * a failed resource request. */
        resource = n >= 1 && ((streq(segs[0], "api") && n >= 3) || (streq(segs[0], "apis") && n >= 4));
        if (resource && srv->latency_ms > 0) {
                struct timespec ts = { .tv_sec = srv->latency_ms / 1000,
                                       .tv_nsec = (long)(srv->latency_ms % 1000) * 1000000L };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }

        struct deferred_reply reply = { .c = c };
        sim_lock(s);
        deferred = &reply;
        before = sim_resource_version(s);
        sim_advance(s);
        if (n >= 1 && (streq(segs[0], "api") || streq(segs[0], "apis") || streq(segs[0], "version")))
                sim_count_request(s);
        if (resource)
                fault_begin(srv, method, url, arg_true(c, "watch"));
        if (resource && fault_draw(srv, srv->error_rate, FAULT_ERROR) && ++srv->n_errors)
                ret = reply_status(
                    c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError",
                    "an error on the server (\"simulated fault\") has prevented the request from "
                    "succeeding");
        else if (resource && !streq(segs[n - 1], "eviction") &&
                 fault_draw(srv, srv->throttle_rate, FAULT_THROTTLE) && ++srv->n_throttled)
                ret = reply_throttled(c);
        else if (n == 3 && streq(segs[0], "sim") && streq(segs[1], "v1") && streq(method, "GET"))
                ret = serve_sim(srv, c, segs[2]);
        else if (n == 1 && streq(segs[0], "version"))
                ret = serve_version(c);
        else if (n >= 1 && (streq(segs[0], "api") || streq(segs[0], "apis")))
                ret = serve_api(srv, c, method, segs, n, rq);
        else
                ret = reply_not_found(c);
        /* Writes and due actions wake the watchers and the ticker. */
        if (sim_resource_version(s) != before)
                sim_broadcast(s);
        deferred = NULL;
        sim_unlock(s);
        if (reply.set)
                ret = reply_json(c, reply.status, reply.body);
        return ret == MHD_YES ? 0 : -EIO;
}

/* ---- the generic listener ---- */

struct conn_state {
        struct buf body;
        bool too_big;
        bool started;
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size,
                                  void **con_cls)
{
        struct sim_http *h = cls;
        struct conn_state *st = *con_cls;
        struct sim_http_request rq;

        if (!st) {
                st = calloc(1, sizeof(*st));
                if (!st)
                        return MHD_NO;
                *con_cls = st;
                return MHD_YES;
        }
        if (*upload_size > 0) {
                if (st->body.len + *upload_size > MAX_BODY)
                        st->too_big = true;
                else if (buf_append(&st->body, upload, *upload_size) < 0)
                        return MHD_NO;
                *upload_size = 0;
                return MHD_YES;
        }
        if (st->started)
                return MHD_YES;
        st->started = true;
        rq = (struct sim_http_request){
                .connection = c,
                .method = method,
                .url = url,
                .body = st->body.data ? st->body.data : "",
                .body_len = st->body.len,
                .body_too_large = st->too_big,
        };
        return h->handler(h->userdata, &rq) < 0 ? MHD_NO : MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
        struct conn_state *st = *con_cls;
        if (!st)
                return;
        buf_free(&st->body);
        free(st);
        *con_cls = NULL;
}

/* Headers and body leave in one segment instead of waiting on Nagle for the client's delayed ACK. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
        const union MHD_ConnectionInfo *ci;
        int one = 1;

        if (toe != MHD_CONNECTION_NOTIFY_STARTED)
                return;
        ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
                (void)setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- the ticker: runs timed actions as they fall due ---- */

static void *ticker_main(void *p)
{
        struct sim_server *srv = p;
        struct sim *s = srv->sim;

        sim_lock(s);
        while (!atomic_load(&srv->stopping)) {
                uint64_t before = sim_resource_version(s), wait = TICK_MAX_USEC;
                double next = sim_advance(s), scale = sim_time_scale(s);

                if (sim_resource_version(s) != before)
                        sim_broadcast(s);
                if (next >= 0 && scale > 0) {
                        double dt = (next - sim_now(s)) / scale * 1e6;
                        if (dt < (double)wait)
                                wait = dt < 1000 ? 1000 : (uint64_t)dt;
                }
                sim_wait(s, sim_resource_version(s), wait);
        }
        sim_unlock(s);
        return NULL;
}

/* ---- life cycle ---- */

static int parse_listen(const char *listen, struct sockaddr_storage *ret_sa, socklen_t *ret_len,
                        char **ret_host)
{
        _cleanup_free_ char *copy = strdup(listen);
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
        struct addrinfo *res = NULL;
        char *host, *port, *colon;

        if (!copy)
                return -ENOMEM;
        colon = strrchr(copy, ':');
        if (!colon)
                return -EINVAL;
        *colon = 0;
        host = copy;
        port = colon + 1;
        if (host[0] == '[') {
                size_t n = strlen(host);
                if (n < 2 || host[n - 1] != ']')
                        return -EINVAL;
                host[n - 1] = 0;
                host++;
        }
        if (streq(host, "localhost") || isempty(host))
                host = "127.0.0.1";
        if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
                return -EINVAL;
        memcpy(ret_sa, res->ai_addr, res->ai_addrlen);
        *ret_len = res->ai_addrlen;
        freeaddrinfo(res);
        /* The URL must reach the server: a wildcard address is reached through loopback. */
        if (streq(host, "0.0.0.0"))
                host = "127.0.0.1";
        else if (streq(host, "::"))
                host = "::1";
        *ret_host = strchr(host, ':') ? strprintf("[%s]", host) : strdup(host);
        return *ret_host ? 0 : -ENOMEM;
}

int sim_http_start(const char *listen, sim_http_handler_fn handler, void *userdata, struct sim_http **ret)
{
        struct sim_http *h;
        struct sockaddr_storage sa = {};
        socklen_t sa_len = 0;
        _cleanup_free_ char *host = NULL;
        const union MHD_DaemonInfo *di;
        unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
        int r;

        r = parse_listen(listen ? listen : "127.0.0.1:0", &sa, &sa_len, &host);
        if (r < 0)
                return r;
        if (sa.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->handler = handler;
        h->userdata = userdata;
        errno = 0;
        h->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, &sa,
                                     MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
                                     MHD_OPTION_NOTIFY_CONNECTION, on_connection, h, MHD_OPTION_END);
        if (!h->daemon) {
                r = errno > 0 ? -errno : -EADDRNOTAVAIL;
                free(h);
                return r;
        }
        di = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
        h->port = di ? di->port : 0;
        h->url = strprintf("http://%s:%u", host, h->port);
        h->address = strprintf("%s:%u", host, h->port);
        if (!h->url || !h->address || h->port == 0) {
                sim_http_stop(h);
                return -ENOMEM;
        }
        *ret = h;
        return 0;
}

struct sim_http *sim_http_stop(struct sim_http *h)
{
        if (!h)
                return NULL;
        if (h->daemon)
                MHD_stop_daemon(h->daemon);
        free(h->url);
        free(h->address);
        free(h);
        return NULL;
}

const char *sim_http_url(const struct sim_http *h)
{
        return h->url;
}

uint16_t sim_http_port(const struct sim_http *h)
{
        return h->port;
}

int sim_http_reply(struct MHD_Connection *c, unsigned status, const char *content_type, char *body)
{
        return reply_text(c, status, content_type, body) == MHD_YES ? 0 : -EIO;
}

int sim_http_reply_json(struct MHD_Connection *c, unsigned status, cJSON *body)
{
        return reply_json(c, status, body) == MHD_YES ? 0 : -EIO;
}

void sim_server_options_from_scenario(const struct ynode *scenario, struct sim_server_options *opt)
{
        const struct ynode *faults = ynode_get(scenario, "faults");
        double rate = 0;
        int64_t latency = 0, seed = 0;

        if (ynode_double(ynode_get(faults, "api_error_rate"), &rate) >= 0 && rate >= 0 && rate <= 1)
                opt->api_error_rate = rate;
        if (ynode_int(ynode_get(faults, "api_latency_ms"), &latency) >= 0 && latency >= 0 &&
            latency <= 600000)
                opt->api_latency_ms = (unsigned)latency;
        if (ynode_int(ynode_get(scenario, "seed"), &seed) >= 0)
                opt->seed = (uint64_t)seed;
        static const struct {
                const char *key;
                size_t offset;
        } rates[] = {
                { "watch_drop_rate", offsetof(struct sim_server_options, watch_drop_rate) },
                { "watch_gone_rate", offsetof(struct sim_server_options, watch_gone_rate) },
                { "api_throttle_rate", offsetof(struct sim_server_options, api_throttle_rate) },
                { "sqs_error_rate", offsetof(struct sim_server_options, sqs_error_rate) },
                { "sqs_duplicate_rate", offsetof(struct sim_server_options, sqs_duplicate_rate) },
                { "sqs_throttle_rate", offsetof(struct sim_server_options, sqs_throttle_rate) },
                { "imds_error_rate", offsetof(struct sim_server_options, imds_error_rate) },
                { "imds_timeout_rate", offsetof(struct sim_server_options, imds_timeout_rate) },
                { "sts_error_rate", offsetof(struct sim_server_options, sts_error_rate) },
        };
        for (size_t i = 0; i < ARRAY_SIZE(rates); i++)
                if (ynode_double(ynode_get(faults, rates[i].key), &rate) >= 0 && rate >= 0 && rate <= 1)
                        *(double *)(void *)((char *)opt + rates[i].offset) = rate;
}

int sim_server_start_with(struct sim *s, const struct sim_server_options *opt, struct sim_server **ret)
{
        struct sim_server *srv;
        int r;

        srv = calloc(1, sizeof(*srv));
        if (!srv)
                return -ENOMEM;
        srv->sim = s;
        srv->error_rate = opt->api_error_rate;
        srv->latency_ms = opt->api_latency_ms;
        srv->watch_drop_rate = opt->watch_drop_rate;
        srv->watch_gone_rate = opt->watch_gone_rate;
        srv->throttle_rate = opt->api_throttle_rate;
        srv->rng = fault_mix(opt->seed ? opt->seed : 1);
        atomic_init(&srv->stopping, false);
        r = sim_http_start(opt->listen, dispatch, srv, &srv->http);
        if (r < 0) {
                free(srv);
                return r;
        }
        r = pthread_create(&srv->ticker, NULL, ticker_main, srv);
        if (r != 0) {
                sim_server_stop(srv);
                return -r;
        }
        srv->ticker_started = true;
        *ret = srv;
        return 0;
}

int sim_server_start(struct sim *s, const char *listen, struct sim_server **ret)
{
        const struct sim_server_options opt = { .listen = listen };
        return sim_server_start_with(s, &opt, ret);
}

struct sim_server *sim_server_stop(struct sim_server *srv)
{
        if (!srv)
                return NULL;
        /* Watches and the ticker see the flag at their next wake-up; the broadcast makes that now. */
        atomic_store(&srv->stopping, true);
        sim_lock(srv->sim);
        sim_broadcast(srv->sim);
        sim_unlock(srv->sim);
        if (srv->ticker_started)
                pthread_join(srv->ticker, NULL);
        sim_http_stop(srv->http);
        free(srv);
        return NULL;
}

const char *sim_server_url(const struct sim_server *srv)
{
        return sim_http_url(srv->http);
}

uint16_t sim_server_port(const struct sim_server *srv)
{
        return sim_http_port(srv->http);
}

char *sim_server_kubeconfig(const char *url, const char *token)
{
        return strprintf("apiVersion: v1\n"
                         "kind: Config\n"
                         "clusters:\n"
                         "- name: spotdrain-sim\n"
                         "  cluster:\n"
                         "    server: %s\n"
                         "contexts:\n"
                         "- name: spotdrain-sim\n"
                         "  context:\n"
                         "    cluster: spotdrain-sim\n"
                         "    user: spotdrain-sim\n"
                         "    namespace: default\n"
                         "current-context: spotdrain-sim\n"
                         "users:\n"
                         "- name: spotdrain-sim\n"
                         "  user:\n"
                         "    token: %s\n"
                         "preferences: {}\n",
                         url, token);
}
