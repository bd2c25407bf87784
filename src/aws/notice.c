/* aws/notice: every wire form of an interruption notice → struct notice (see include/spotdrain/notice.h). */
#include "spotdrain/notice.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "spotdrain/core.h"
#include "spotdrain/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* An EventBridge rule can feed SNS which feeds SQS; a second envelope is tolerated, a third is refused. */
#define SNS_DEPTH_MAX 2

#define ASG_TEST_NOTIFICATION "autoscaling:TEST_NOTIFICATION"
#define ASG_TERMINATING       "autoscaling:EC2_INSTANCE_TERMINATING"
#define ASG_LAUNCHING         "autoscaling:EC2_INSTANCE_LAUNCHING"

enum imds_doc {
        IMDS_NONE,
        IMDS_INSTANCE_ACTION,
        IMDS_TERMINATION_TIME,
        IMDS_REBALANCE,
        IMDS_SCHEDULED,
        IMDS_HISTORY,
        IMDS_TARGET_LIFECYCLE_STATE,
};

static const struct {
        const char *path;
        enum imds_doc doc;
} imds_paths[] = {
        { "spot/instance-action", IMDS_INSTANCE_ACTION },
        { "spot/termination-time", IMDS_TERMINATION_TIME },
        { "events/recommendations/rebalance", IMDS_REBALANCE },
        { "events/maintenance/scheduled", IMDS_SCHEDULED },
        { "events/maintenance/history", IMDS_HISTORY },
        { "autoscaling/target-lifecycle-state", IMDS_TARGET_LIFECYCLE_STATE },
};

static const char *const kind_names[_NOTICE_KIND_MAX] = {
        [NOTICE_SPOT_INTERRUPTION] = "spot-interruption",
        [NOTICE_REBALANCE_RECOMMENDATION] = "rebalance-recommendation",
        [NOTICE_SCHEDULED_CHANGE] = "scheduled-change",
        [NOTICE_STATE_CHANGE] = "state-change",
        [NOTICE_ASG_LIFECYCLE_TERMINATE] = "asg-lifecycle-terminate",
        [NOTICE_ASG_TEST_NOTIFICATION] = "asg-test-notification",
        [NOTICE_CAPACITY_RESERVATION_INTERRUPTION] = "capacity-reservation-interruption",
        [NOTICE_ASG_LIFECYCLE_LAUNCH] = "asg-lifecycle-launch",
};

struct ctx {
        const struct notice_parse_opts *opts;
        char *reason;
        size_t reason_size;
        const char *prefix; /* "SNS Message: " while inside an envelope */
        unsigned sns_depth;
        bool from_imds;
        uint64_t now;
        struct notice *items;
        size_t n, cap;
};

const char *notice_kind_to_string(enum notice_kind k)
{
        if ((unsigned)k >= _NOTICE_KIND_MAX)
                return NULL;
        return kind_names[k];
}

int notice_kind_from_string(const char *s)
{
        for (size_t i = 0; i < _NOTICE_KIND_MAX; i++)
                if (streq(s, kind_names[i]))
                        return (int)i;
        return -EINVAL;
}

bool notice_instance_id_valid(const char *s)
{
        if (!s || s[0] != 'i' || s[1] != '-')
                return false;
        size_t n = 0;
        for (const char *p = s + 2; *p; p++, n++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return n >= 8 && n <= 17;
}

/* ---- reasons ---- */

static int fail(struct ctx *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(struct ctx *c, int err, const char *fmt, ...)
{
        if (!c->reason || c->reason_size == 0)
                return err;
        int k = snprintf(c->reason, c->reason_size, "%s", c->prefix ? c->prefix : "");
        if (k < 0 || (size_t)k >= c->reason_size)
                return err;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->reason + k, c->reason_size - (size_t)k, fmt, ap);
        va_end(ap);
        return err;
}

/* A recognized body with nothing to act on: 0 notices and the reason. */
#define ignore(c, ...) fail((c), 0, __VA_ARGS__)

/* Input quoted into a reason: at most 60 bytes, anything but printable ASCII shown as '?'. */
struct quoted {
        char s[72];
};
static struct quoted quote(const char *in)
{
        struct quoted q;
        size_t i = 0;
        for (; in && in[i] && i < 60; i++)
                q.s[i] = (in[i] >= 0x20 && in[i] < 0x7f) ? in[i] : '?';
        if (in && in[i])
                memcpy(q.s + i, "...", 3), i += 3;
        q.s[i] = 0;
        return q;
}
#define Q(str) (quote(str).s)

/* ---- times ---- */

static bool leap(int y)
{
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
        static const int d[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
        return m == 2 && leap(y) ? 29 : d[m - 1];
}

/* Reads exactly n digits. */
static bool digits(const char **p, int n, int *ret)
{
        int v = 0;
        for (int i = 0; i < n; i++) {
                char ch = (*p)[i];
                if (ch < '0' || ch > '9')
                        return false;
                v = v * 10 + (ch - '0');
        }
        *p += n;
        *ret = v;
        return true;
}

static bool expect(const char **p, char ch)
{
        if (**p != ch)
                return false;
        (*p)++;
        return true;
}

static int civil_to_usec(int y, int mon, int d, int h, int mi, int s, uint64_t *ret)
{
        if (y < 1970 || y > 9999 || mon < 1 || mon > 12 || d < 1 || d > days_in_month(y, mon) || h > 23 ||
            mi > 59 || s > 60)
                return -EINVAL;
        struct tm tm = {
                .tm_year = y - 1900, .tm_mon = mon - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi, .tm_sec = s
        };
        time_t t = timegm(&tm);
        if (t < 0)
                return -EINVAL;
        *ret = (uint64_t)t * 1000000ULL;
        return 0;
}

/* The shape parse_rfc3339() expects, checked first so it only ever sees well-formed strings. */
static int parse_rfc3339_strict(const char *s, uint64_t *ret)
{
        const char *p = s;
        int y, mon, d, h, mi, sec;
        if (!digits(&p, 4, &y) || !expect(&p, '-') || !digits(&p, 2, &mon) || !expect(&p, '-') ||
            !digits(&p, 2, &d) || !(expect(&p, 'T') || expect(&p, 't')) || !digits(&p, 2, &h) ||
            !expect(&p, ':') || !digits(&p, 2, &mi) || !expect(&p, ':') || !digits(&p, 2, &sec))
                return -EINVAL;
        uint64_t check;
        if (civil_to_usec(y, mon, d, h, mi, sec, &check) < 0)
                return -EINVAL;
        if (*p == '.') {
                p++;
                int nd = 0;
                while (*p >= '0' && *p <= '9' && nd < 9)
                        p++, nd++;
                if (nd == 0 || (*p >= '0' && *p <= '9'))
                        return -EINVAL;
        }
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                int oh, om;
                p++;
                if (!digits(&p, 2, &oh) || !expect(&p, ':') || !digits(&p, 2, &om) || oh > 23 || om > 59)
                        return -EINVAL;
        } else {
                return -EINVAL;
        }
        if (*p)
                return -EINVAL;
        return parse_rfc3339(s, ret);
}

/* "Tue, 28 May 2024 06:00:00 GMT" (RFC 1123) and "28 May 2024 06:00:00 GMT" (IMDS). */
static int parse_rfc1123(const char *s, uint64_t *ret)
{
        static const char *const wdays[] = { "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun" };
        static const char *const months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                              "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
        const char *p = s;
        for (size_t i = 0; i < ARRAY_SIZE(wdays); i++)
                if (strncmp(p, wdays[i], 3) == 0 && p[3] == ',' && p[4] == ' ') {
                        p += 5;
                        break;
                }
        int d, mon = 0, y, h, mi, sec;
        if (p[0] >= '0' && p[0] <= '9' && p[1] >= '0' && p[1] <= '9') {
                if (!digits(&p, 2, &d))
                        return -EINVAL;
        } else if (!digits(&p, 1, &d)) {
                return -EINVAL;
        }
        if (!expect(&p, ' '))
                return -EINVAL;
        for (size_t i = 0; i < ARRAY_SIZE(months); i++)
                if (strncmp(p, months[i], 3) == 0) {
                        mon = (int)i + 1;
                        p += 3;
                        break;
                }
        if (mon == 0 || !expect(&p, ' ') || !digits(&p, 4, &y) || !expect(&p, ' ') || !digits(&p, 2, &h) ||
            !expect(&p, ':') || !digits(&p, 2, &mi) || !expect(&p, ':') || !digits(&p, 2, &sec) ||
            !expect(&p, ' '))
                return -EINVAL;
        if (!streq(p, "GMT") && !streq(p, "UTC") && !streq(p, "+0000"))
                return -EINVAL;
        return civil_to_usec(y, mon, d, h, mi, sec, ret);
}

int notice_parse_time(const char *s, uint64_t *ret_usec)
{
        if (!s || !ret_usec)
                return -EINVAL;
        uint64_t t;
        if (parse_rfc3339_strict(s, &t) < 0 && parse_rfc1123(s, &t) < 0)
                return -EINVAL;
        *ret_usec = t;
        return 0;
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
        return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---- fields ---- */

static bool utf8_valid(const unsigned char *s)
{
        while (*s) {
                unsigned char ch = *s;
                size_t n = ch < 0x80             ? 0
                           : (ch & 0xe0) == 0xc0 ? 1
                           : (ch & 0xf0) == 0xe0 ? 2
                           : (ch & 0xf8) == 0xf0 ? 3
                                                 : 4;
                /* no stray continuation bytes, overlong 2-byte forms, or lead bytes beyond U+10FFFF */
                if (n == 4 || (n == 1 && ch < 0xc2) || ch > 0xf4)
                        return false;
                s++;
                for (size_t i = 0; i < n; i++, s++)
                        if ((*s & 0xc0) != 0x80)
                                return false;
        }
        return true;
}

/* Copies a value into a fixed notice field: refused when too long, holding control characters or bad UTF-8,
 * so every field is safe to print and to put in a label or an annotation. */
static int set_field(struct ctx *c, char *dst, size_t size, const char *value, const char *where,
                     const char *what)
{
        size_t len = strlen(value);
        if (len >= size)
                return fail(c, -EBADMSG, "%s: %s is longer than %zu bytes", where, what, size - 1);
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
                        return fail(c, -EBADMSG, "%s: %s contains a control character", where, what);
        if (!utf8_valid((const unsigned char *)value))
                return fail(c, -EBADMSG, "%s: %s is not valid UTF-8", where, what);
        memcpy(dst, value, len + 1);
        return 0;
}
#define SET(c, field, value, where, what) set_field((c), (field), sizeof(field), (value), (where), (what))

static const cJSON *get(const cJSON *o, const char *key)
{
        return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* A string member; *ret = NULL when absent and optional. `path` names it in reasons ("detail.instance-id").
 */
static int get_str(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                   bool required, const char **ret)
{
        const cJSON *v = get(o, key);
        if (!v || cJSON_IsNull(v)) {
                if (required)
                        return fail(c, -EBADMSG, "%s without %s", where, path);
                *ret = NULL;
                return 0;
        }
        if (!cJSON_IsString(v) || !v->valuestring)
                return fail(c, -EBADMSG, "%s: %s is not a string", where, path);
        if (required && !*v->valuestring)
                return fail(c, -EBADMSG, "%s: %s is empty", where, path);
        *ret = v->valuestring;
        return 0;
}

static int get_time(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                    bool required, uint64_t *ret)
{
        const char *s;
        int r = get_str(c, o, key, where, path, required, &s);
        if (r < 0)
                return r;
        if (!s) {
                *ret = 0;
                return 0;
        }
        if (notice_parse_time(s, ret) < 0)
                return fail(c, -EBADMSG, "%s: %s '%s' is not a time", where, path, Q(s));
        return 0;
}

static int get_instance(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                        const char **ret)
{
        const char *s;
        int r = get_str(c, o, key, where, path, true, &s);
        if (r < 0)
                return r;
        if (!notice_instance_id_valid(s))
                return fail(c, -EBADMSG, "%s: %s '%s' is not an EC2 instance ID", where, path, Q(s));
        *ret = s;
        return 0;
}

static int push(struct ctx *c, enum notice_kind kind, struct notice **ret)
{
        if (c->n >= NOTICE_LIST_MAX)
                return fail(c, -EMSGSIZE, "more than %d notices in one body", NOTICE_LIST_MAX);
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 2;
                struct notice *a = realloc(c->items, cap * sizeof(*a));
                if (!a)
                        return fail(c, -ENOMEM, "out of memory");
                c->items = a;
                c->cap = cap;
        }
        struct notice *n = &c->items[c->n++];
        memset(n, 0, sizeof(*n));
        n->kind = kind;
        *ret = n;
        return 0;
}

/* IMDS documents name no instance: it comes from the caller, and without one it is absent, as any field a
 * form lacks (the agent always knows its own). */
static int imds_push(struct ctx *c, enum notice_kind kind, struct notice **ret)
{
        int r = push(c, kind, ret);
        if (r < 0)
                return r;
        if (c->opts->instance_id)
                memcpy((*ret)->instance_id, c->opts->instance_id, strlen(c->opts->instance_id) + 1);
        return 0;
}

/* ---- JSON text ---- */

static bool is_ws(char ch)
{
        return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static int parse_json(struct ctx *c, const char *text, size_t len, cJSON **ret)
{
        /* cJSON recurses per level: bound the depth before it sees the text. */
        unsigned depth = 0;
        bool in_str = false, esc = false;
        for (size_t i = 0; i < len; i++) {
                char ch = text[i];
                if (in_str) {
                        if (esc)
                                esc = false;
                        else if (ch == '\\')
                                esc = true;
                        else if (ch == '"')
                                in_str = false;
                } else if (ch == '"') {
                        in_str = true;
                } else if (ch == '{' || ch == '[') {
                        if (++depth > NOTICE_NESTING_MAX)
                                return fail(c, -ELOOP, "JSON nested deeper than %d levels at byte %zu",
                                            NOTICE_NESTING_MAX, i);
                } else if ((ch == '}' || ch == ']') && depth > 0) {
                        depth--;
                }
        }

        const char *end = NULL;
        cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
        if (!root) {
                size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
                return fail(c, -EBADMSG, "not JSON at byte %zu", pos);
        }
        for (const char *p = end; p && p < text + len; p++)
                if (!is_ws(*p)) {
                        cJSON_Delete(root);
                        return fail(c, -EBADMSG, "not JSON at byte %zu (data after the JSON value)",
                                    (size_t)(p - text));
                }
        *ret = root;
        return 0;
}

static const char *json_type_name(const cJSON *v)
{
        if (cJSON_IsArray(v))
                return "array";
        if (cJSON_IsString(v))
                return "string";
        if (cJSON_IsNumber(v))
                return "number";
        if (cJSON_IsBool(v))
                return "boolean";
        if (cJSON_IsNull(v))
                return "null";
        return "object";
}

/* ---- IMDS documents ---- */

static int imds_instance_action(struct ctx *c, const cJSON *o)
{
        static const char where[] = "IMDS spot/instance-action document";
        const char *action;
        uint64_t t;
        int r = get_str(c, o, "action", where, "action", true, &action);
        if (r < 0)
                return r;
        if (!streq(action, "terminate") && !streq(action, "stop") && !streq(action, "hibernate"))
                return fail(c, -EBADMSG, "%s: unknown action '%s'", where, Q(action));
        r = get_time(c, o, "time", where, "time", true, &t);
        if (r < 0)
                return r;
        struct notice *n;
        r = imds_push(c, NOTICE_SPOT_INTERRUPTION, &n);
        if (r < 0)
                return r;
        n->notice_time = c->now;
        n->deadline = t;
        memcpy(n->action, action, strlen(action) + 1);
        snprintf(n->event_id, sizeof(n->event_id), "imds:spot/instance-action:%s:%s:%llu", n->instance_id,
                 action, (unsigned long long)(t / 1000000ULL));
        return 0;
}

static int imds_termination_time(struct ctx *c, const char *text)
{
        static const char where[] = "IMDS spot/termination-time document";
        uint64_t t;
        if (notice_parse_time(text, &t) < 0)
                return fail(c, -EBADMSG, "%s: '%s' is not a time", where, Q(text));
        struct notice *n;
        int r = imds_push(c, NOTICE_SPOT_INTERRUPTION, &n);
        if (r < 0)
                return r;
        n->notice_time = c->now;
        n->deadline = t;
        strcpy(n->action, "terminate");
        /* Same id as the instance-action document of the same interruption: either dedupes the other. */
        snprintf(n->event_id, sizeof(n->event_id), "imds:spot/instance-action:%s:terminate:%llu",
                 n->instance_id, (unsigned long long)(t / 1000000ULL));
        return 0;
}

static int imds_rebalance(struct ctx *c, const cJSON *o)
{
        static const char where[] = "IMDS events/recommendations/rebalance document";
        uint64_t t;
        int r = get_time(c, o, "noticeTime", where, "noticeTime", true, &t);
        if (r < 0)
                return r;
        struct notice *n;
        r = imds_push(c, NOTICE_REBALANCE_RECOMMENDATION, &n);
        if (r < 0)
                return r;
        n->notice_time = t;
        snprintf(n->event_id, sizeof(n->event_id), "imds:events/recommendations/rebalance:%s:%llu",
                 n->instance_id, (unsigned long long)(t / 1000000ULL));
        return 0;
}

static int imds_scheduled(struct ctx *c, const cJSON *a, const char *where)
{
        if (!cJSON_IsArray(a))
                return fail(c, -EBADMSG, "%s is a JSON %s, not an array", where, json_type_name(a));
        if (cJSON_GetArraySize(a) == 0)
                return ignore(c, "%s lists no events", where);
        const cJSON *e;
        cJSON_ArrayForEach (e, a) {
                if (!cJSON_IsObject(e))
                        return fail(c, -EBADMSG, "%s: an event is a JSON %s, not an object", where,
                                    json_type_name(e));
                const char *code, *id, *state;
                uint64_t start, end;
                int r = get_str(c, e, "Code", where, "Code", true, &code);
                if (r >= 0)
                        r = get_str(c, e, "EventId", where, "EventId", true, &id);
                if (r >= 0)
                        r = get_str(c, e, "State", where, "State", false, &state);
                if (r >= 0)
                        r = get_time(c, e, "NotBefore", where, "NotBefore", true, &start);
                if (r >= 0)
                        r = get_time(c, e, "NotAfter", where, "NotAfter", false, &end);
                if (r < 0)
                        return r;
                struct notice *n;
                r = imds_push(c, NOTICE_SCHEDULED_CHANGE, &n);
                if (r >= 0)
                        r = SET(c, n->action, code, where, "Code");
                if (r >= 0)
                        r = SET(c, n->event_id, id, where, "EventId");
                if (r >= 0)
                        r = SET(c, n->state, state ?: "active", where, "State");
                if (r < 0)
                        return r;
                n->notice_time = c->now;
                n->deadline = n->start_time = start;
                n->end_time = end;
        }
        return 0;
}

/* autoscaling/target-lifecycle-state values; a warm-pool instance being terminated may have joined the
 * cluster (Warmed:Running), so Warmed:Terminated drains too. */
static const struct {
        const char *name;
        bool terminate;
} lifecycle_states[] = {
        { "InService", false },        { "Pending", false },        { "Standby", false },
        { "Detached", false },         { "Terminated", true },      { "Warmed:Pending", false },
        { "Warmed:Running", false },   { "Warmed:Stopped", false }, { "Warmed:Hibernated", false },
        { "Warmed:Terminated", true },
};

static int lifecycle_state_lookup(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(lifecycle_states); i++)
                if (streq(s, lifecycle_states[i].name))
                        return (int)i;
        return -ENOENT;
}

static int imds_target_lifecycle_state(struct ctx *c, const char *state)
{
        static const char where[] = "IMDS autoscaling/target-lifecycle-state document";
        int i = lifecycle_state_lookup(state);
        if (i < 0)
                return fail(c, -EOPNOTSUPP, "%s: unknown state '%s'", where, Q(state));
        if (!lifecycle_states[i].terminate)
                return ignore(c, "target lifecycle state '%s': nothing to drain", state);
        struct notice *n;
        int r = imds_push(c, NOTICE_ASG_LIFECYCLE_TERMINATE, &n);
        if (r < 0)
                return r;
        n->notice_time = c->now;
        n->deadline = add_sat(c->now, c->opts->asg_deadline_usec ?: NOTICE_ASG_DEFAULT_DEADLINE_USEC);
        snprintf(n->event_id, sizeof(n->event_id), "imds:autoscaling/target-lifecycle-state:%s:%s",
                 n->instance_id, state);
        return 0;
}

/* ---- Auto Scaling ---- */

/* Field `index` (0 = "arn") of "arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE", copied into dst when it is
 * non-empty, shorter than size and made of [a-z0-9-] only; dst is left as it was otherwise. */
static void arn_field(const char *arn, int index, char *dst, size_t size)
{
        if (!startswith(arn, "arn:"))
                return;
        const char *p = arn;
        for (int i = 0; i < index; i++) {
                p = strchr(p, ':');
                if (!p)
                        return;
                p++;
        }
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : 0;
        if (len == 0 || len >= size)
                return;
        for (size_t i = 0; i < len; i++)
                if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-'))
                        return;
        memcpy(dst, p, len);
        dst[len] = 0;
}

bool notice_account_valid(const char *s)
{
        size_t i = 0;

        if (!s)
                return false;
        for (; s[i]; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return i == NOTICE_ACCOUNT_SIZE - 1;
}

/* "arn:aws:autoscaling:us-east-1:123456789012:..." → "123456789012"; dst unchanged when there is none. */
static void account_from_arn(const char *arn, char *dst)
{
        char id[NOTICE_ACCOUNT_SIZE] = "";

        arn_field(arn, 4, id, sizeof(id));
        if (notice_account_valid(id))
                memcpy(dst, id, sizeof(id));
}

/* An optional account member (EventBridge `account`, Auto Scaling `AccountId`): twelve digits when given. */
static int get_account(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                       const char **ret)
{
        int r = get_str(c, o, key, where, path, false, ret);
        if (r < 0 || !*ret)
                return r;
        if (!notice_account_valid(*ret))
                return fail(c, -EBADMSG, "%s: %s '%s' is not a 12-digit account id", where, path, Q(*ret));
        return 0;
}

/* The account an Auto Scaling message names (`AccountId`), over the one its group ARN gave. */
static int asg_account(struct ctx *c, const cJSON *o, const char *where, const char *pfx, struct notice *n)
{
        char path[64];
        const char *account;

        snprintf(path, sizeof(path), "%sAccountId", pfx);
        int r = get_account(c, o, "AccountId", where, path, &account);
        if (r >= 0 && account)
                memcpy(n->account, account, strlen(account) + 1);
        return r;
}

/* A lifecycle message: the `detail` of an EventBridge event (env_id/env_time set) or a message Auto Scaling
 * sent straight to the queue (or through SNS). */
static int asg_lifecycle(struct ctx *c, const cJSON *o, const char *where, const char *pfx,
                         const char *env_id, uint64_t env_time)
{
        char path[64];
        const char *transition, *event, *s;
        int r;

#define P(key) (snprintf(path, sizeof(path), "%s%s", pfx, key), path)
        r = get_str(c, o, "LifecycleTransition", where, P("LifecycleTransition"), false, &transition);
        if (r >= 0)
                r = get_str(c, o, "Event", where, P("Event"), false, &event);
        if (r < 0)
                return r;

        if (streq(event, ASG_TEST_NOTIFICATION) || streq(transition, ASG_TEST_NOTIFICATION)) {
                struct notice *n;
                uint64_t t = env_time;
                if (!env_time && (r = get_time(c, o, "Time", where, P("Time"), true, &t)) < 0)
                        return r;
                if (!env_id && (r = get_str(c, o, "RequestId", where, P("RequestId"), true, &env_id)) < 0)
                        return r;
                r = get_str(c, o, "AutoScalingGroupName", where, P("AutoScalingGroupName"), false, &s);
                if (r < 0)
                        return r;
                r = push(c, NOTICE_ASG_TEST_NOTIFICATION, &n);
                if (r >= 0)
                        r = SET(c, n->event_id, env_id, where, "id");
                if (r >= 0 && s)
                        r = SET(c, n->asg_name, s, where, P("AutoScalingGroupName"));
                if (r < 0)
                        return r;
                n->notice_time = t;
                const cJSON *arn = get(o, "AutoScalingGroupARN");
                if (cJSON_IsString(arn) && arn->valuestring) {
                        arn_field(arn->valuestring, 3, n->region, sizeof(n->region));
                        account_from_arn(arn->valuestring, n->account);
                }
                return asg_account(c, o, where, pfx, n);
        }
        if (!transition) {
                if (event)
                        return fail(c, -EOPNOTSUPP,
                                    "Auto Scaling notification '%s' is not a lifecycle hook message",
                                    Q(event));
                return fail(c, -EBADMSG, "%s without %s", where, P("LifecycleTransition"));
        }
        bool launching = streq(transition, ASG_LAUNCHING);
        if (!launching && !streq(transition, ASG_TERMINATING))
                return fail(c, -EOPNOTSUPP, "%s: unknown lifecycle transition '%s'", where, Q(transition));

        const char *iid, *hook, *group, *token;
        uint64_t t = env_time;
        r = get_instance(c, o, "EC2InstanceId", where, P("EC2InstanceId"), &iid);
        if (r >= 0)
                r = get_str(c, o, "LifecycleHookName", where, P("LifecycleHookName"), true, &hook);
        if (r >= 0)
                r = get_str(c, o, "AutoScalingGroupName", where, P("AutoScalingGroupName"), true, &group);
        if (r >= 0)
                r = get_str(c, o, "LifecycleActionToken", where, P("LifecycleActionToken"), true, &token);
        if (r >= 0 && !env_time)
                r = get_time(c, o, "Time", where, P("Time"), true, &t);
        if (r >= 0 && !env_id) {
                r = get_str(c, o, "RequestId", where, P("RequestId"), false, &env_id);
                if (r >= 0 && !env_id)
                        env_id = token;
        }
        if (r < 0)
                return r;

        struct notice *n;
        r = push(c, launching ? NOTICE_ASG_LIFECYCLE_LAUNCH : NOTICE_ASG_LIFECYCLE_TERMINATE, &n);
        if (r >= 0)
                r = SET(c, n->lifecycle_hook_name, hook, where, P("LifecycleHookName"));
        if (r >= 0)
                r = SET(c, n->asg_name, group, where, P("AutoScalingGroupName"));
        if (r >= 0)
                r = SET(c, n->lifecycle_action_token, token, where, P("LifecycleActionToken"));
        if (r >= 0)
                r = SET(c, n->event_id, env_id, where, "RequestId");
        if (r < 0)
                return r;
#undef P
        memcpy(n->instance_id, iid, strlen(iid) + 1);
        n->notice_time = t;
        /* A launching instance is not going anywhere: its hook's time is the controller's to manage. */
        if (!launching)
                n->deadline = add_sat(t, c->opts->asg_deadline_usec ?: NOTICE_ASG_DEFAULT_DEADLINE_USEC);
        return asg_account(c, o, where, pfx, n);
}

/* ---- EventBridge ---- */

struct envelope {
        const char *id, *source, *detail_type, *region, *account;
        uint64_t time;
        const cJSON *detail;
};

static int eb_simple(struct ctx *c, const struct envelope *e, enum notice_kind kind, struct notice **ret)
{
        static const char where[] = "EventBridge event";
        const char *iid;
        struct notice *n;
        int r = get_instance(c, e->detail, "instance-id", where, "detail.instance-id", &iid);
        if (r < 0)
                return r;
        r = push(c, kind, &n);
        if (r < 0)
                return r;
        memcpy(n->instance_id, iid, strlen(iid) + 1);
        n->notice_time = e->time;
        *ret = n;
        return 0;
}

/* A two-minute warning: the spot interruption and the Capacity Reservation interruption, whose details
 * both name the instance and its instance-action. */
static int eb_warning(struct ctx *c, const struct envelope *e, enum notice_kind kind, struct notice **ret)
{
        const char *action;
        struct notice *n;
        int r = get_str(c, e->detail, "instance-action", "EventBridge event", "detail.instance-action", true,
                        &action);
        if (r < 0)
                return r;
        if (!streq(action, "terminate") && !streq(action, "stop") && !streq(action, "hibernate"))
                return fail(c, -EBADMSG, "EventBridge event: unknown detail.instance-action '%s'",
                            Q(action));
        r = eb_simple(c, e, kind, &n);
        if (r < 0)
                return r;
        memcpy(n->action, action, strlen(action) + 1);
        n->deadline = add_sat(e->time, NOTICE_SPOT_WARNING_USEC);
        *ret = n;
        return 0;
}

static int eb_spot(struct ctx *c, const struct envelope *e)
{
        struct notice *n;
        return eb_warning(c, e, NOTICE_SPOT_INTERRUPTION, &n);
}

/* The Capacity Reservation's warning says when the instance goes (detail.instance-termination-time); the
 * dispatcher still holds it to two minutes from the event, as a spot warning's. */
static int eb_capacity_reservation(struct ctx *c, const struct envelope *e)
{
        struct notice *n;
        uint64_t end;
        int r = get_time(c, e->detail, "instance-termination-time", "EventBridge event",
                         "detail.instance-termination-time", false, &end);
        if (r >= 0)
                r = eb_warning(c, e, NOTICE_CAPACITY_RESERVATION_INTERRUPTION, &n);
        if (r < 0)
                return r;
        if (end)
                n->deadline = end;
        return 0;
}

static int eb_state_change(struct ctx *c, const struct envelope *e)
{
        static const char *const going[] = { "stopping", "stopped", "shutting-down", "terminated" };
        const char *state;
        struct notice *n;
        int r = get_str(c, e->detail, "state", "EventBridge event", "detail.state", true, &state);
        if (r < 0)
                return r;
        if (streq(state, "pending") || streq(state, "running"))
                return ignore(c, "instance state change to '%s': nothing to drain", state);
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(going); i++)
                known = known || streq(state, going[i]);
        if (!known)
                return fail(c, -EBADMSG, "EventBridge event: unknown detail.state '%s'", Q(state));
        r = eb_simple(c, e, NOTICE_STATE_CHANGE, &n);
        if (r < 0)
                return r;
        memcpy(n->action, state, strlen(state) + 1);
        /* The instance is already on its way down: the deadline has passed. */
        n->deadline = e->time;
        return 0;
}

static bool seen_instance(const struct ctx *c, size_t first, const char *iid)
{
        for (size_t i = first; i < c->n; i++)
                if (streq(c->items[i].instance_id, iid))
                        return true;
        return false;
}

static int eb_health(struct ctx *c, const struct envelope *e, const cJSON *root)
{
        static const char where[] = "AWS Health event";
        const char *service, *category, *code, *status, *region, *arn;
        uint64_t start, end;
        int r = get_str(c, e->detail, "service", where, "detail.service", true, &service);
        if (r >= 0)
                r = get_str(c, e->detail, "eventTypeCategory", where, "detail.eventTypeCategory", true,
                            &category);
        if (r < 0)
                return r;
        if (!streq(service, "EC2") || !streq(category, "scheduledChange"))
                return ignore(
                    c, "AWS Health event for service '%s', category '%s': not an EC2 scheduled change",
                    Q(service), Q(category));
        r = get_str(c, e->detail, "eventTypeCode", where, "detail.eventTypeCode", true, &code);
        if (r >= 0)
                r = get_str(c, e->detail, "statusCode", where, "detail.statusCode", false, &status);
        if (r >= 0)
                r = get_str(c, e->detail, "eventRegion", where, "detail.eventRegion", false, &region);
        if (r >= 0)
                r = get_time(c, e->detail, "startTime", where, "detail.startTime", true, &start);
        if (r >= 0)
                r = get_time(c, e->detail, "endTime", where, "detail.endTime", false, &end);
        if (r >= 0)
                r = get_str(c, e->detail, "eventArn", where, "detail.eventArn", false, &arn);
        if (r < 0)
                return r;
        /* One Health event sends a message at each change of its status (upcoming, then closed or
         * canceled), each with an EventBridge id of its own: the event is the last part of its eventArn,
         * so that its end finds the drain its start began. */
        const char *event = arn ? strrchr(arn, '/') : NULL;
        if (event && (!event[1] || strlen(event + 1) >= NOTICE_ID_SIZE))
                event = NULL;

        /* Instances are the affected entities; `resources` holds the same ids and stands in when the
         * entities name none. Entities that are not instances (the account, a volume) are skipped. */
        size_t first = c->n;
        for (int pass = 0; pass < 2 && c->n == first; pass++) {
                const char *name = pass == 0 ? "detail.affectedEntities" : "resources";
                const cJSON *list = pass == 0 ? get(e->detail, "affectedEntities") : get(root, "resources");
                if (!list || cJSON_IsNull(list))
                        continue;
                if (!cJSON_IsArray(list))
                        return fail(c, -EBADMSG, "%s: %s is not an array", where, name);
                const cJSON *item;
                cJSON_ArrayForEach (item, list) {
                        const cJSON *v = pass == 0 ? get(item, "entityValue") : item;
                        if (!cJSON_IsString(v) || !notice_instance_id_valid(v->valuestring) ||
                            seen_instance(c, first, v->valuestring))
                                continue;
                        struct notice *n;
                        r = push(c, NOTICE_SCHEDULED_CHANGE, &n);
                        if (r >= 0)
                                r = SET(c, n->action, code, where, "detail.eventTypeCode");
                        if (r >= 0 && status)
                                r = SET(c, n->state, status, where, "detail.statusCode");
                        if (r >= 0 && region)
                                r = SET(c, n->region, region, where, "detail.eventRegion");
                        if (r >= 0 && event)
                                r = SET(c, n->event_id, event + 1, where, "detail.eventArn");
                        if (r < 0)
                                return r;
                        memcpy(n->instance_id, v->valuestring, strlen(v->valuestring) + 1);
                        n->notice_time = e->time;
                        n->deadline = n->start_time = start;
                        n->end_time = end;
                }
        }
        if (c->n == first)
                return fail(c, -EBADMSG, "%s names no EC2 instance (detail.affectedEntities, resources)",
                            where);
        return 0;
}

static int eventbridge(struct ctx *c, const cJSON *root)
{
        static const char where[] = "EventBridge event";
        struct envelope e = { 0 };
        int r = get_str(c, root, "detail-type", where, "detail-type", true, &e.detail_type);
        if (r >= 0)
                r = get_str(c, root, "source", where, "source", true, &e.source);
        if (r >= 0)
                r = get_str(c, root, "id", where, "id", true, &e.id);
        if (r >= 0)
                r = get_str(c, root, "region", where, "region", false, &e.region);
        if (r >= 0)
                r = get_account(c, root, "account", where, "account", &e.account);
        if (r >= 0)
                r = get_time(c, root, "time", where, "time", true, &e.time);
        if (r < 0)
                return r;
        e.detail = get(root, "detail");
        if (!cJSON_IsObject(e.detail))
                return fail(c, -EBADMSG, "%s %s detail", where, e.detail ? "with a non-object" : "without");

        size_t first = c->n;
        if (streq(e.source, "aws.ec2") && streq(e.detail_type, "EC2 Spot Instance Interruption Warning"))
                r = eb_spot(c, &e);
        else if (streq(e.source, "aws.ec2") &&
                 streq(e.detail_type, "EC2 Capacity Reservation Instance Interruption Warning"))
                r = eb_capacity_reservation(c, &e);
        else if (streq(e.source, "aws.ec2") &&
                 streq(e.detail_type, "EC2 Instance Rebalance Recommendation")) {
                struct notice *n;
                r = eb_simple(c, &e, NOTICE_REBALANCE_RECOMMENDATION, &n);
        } else if (streq(e.source, "aws.ec2") &&
                   streq(e.detail_type, "EC2 Instance State-change Notification"))
                r = eb_state_change(c, &e);
        else if (streq(e.source, "aws.health") && streq(e.detail_type, "AWS Health Event"))
                r = eb_health(c, &e, root);
        else if (streq(e.source, "aws.autoscaling") &&
                 streq(e.detail_type, "EC2 Instance-terminate Lifecycle Action"))
                r = asg_lifecycle(c, e.detail, where, "detail.", e.id, e.time);
        else if (streq(e.source, "aws.autoscaling") &&
                 streq(e.detail_type, "EC2 Instance-launch Lifecycle Action"))
                r = asg_lifecycle(c, e.detail, where, "detail.", e.id, e.time);
        else
                return fail(c, -EOPNOTSUPP, "unknown detail-type '%s' from source '%s'", Q(e.detail_type),
                            Q(e.source));
        if (r < 0)
                return r;

        for (size_t i = first; i < c->n; i++) {
                struct notice *n = &c->items[i];
                if (!*n->event_id)
                        r = SET(c, n->event_id, e.id, where, "id");
                if (r >= 0 && !*n->region && e.region)
                        r = SET(c, n->region, e.region, where, "region");
                if (r >= 0 && e.account) /* the event's own account, over what its detail says */
                        memcpy(n->account, e.account, strlen(e.account) + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- dispatch ---- */

static int parse_text(struct ctx *c, const char *text, size_t len);

static int sns(struct ctx *c, const cJSON *root, const char *type)
{
        if (streq(type, "SubscriptionConfirmation") || streq(type, "UnsubscribeConfirmation"))
                return ignore(c, "SNS %s: not a notice (confirm the subscription through its SubscribeURL)",
                              type);
        if (c->sns_depth >= SNS_DEPTH_MAX)
                return fail(c, -ELOOP, "SNS envelopes nested more than %d deep", SNS_DEPTH_MAX);
        const cJSON *m = get(root, "Message");
        if (!cJSON_IsString(m) || !m->valuestring)
                return fail(c, -EBADMSG, "SNS notification without a Message string");
        c->sns_depth++;
        c->prefix = "SNS Message: ";
        return parse_text(c, m->valuestring, strlen(m->valuestring));
}

static int dispatch(struct ctx *c, const cJSON *root)
{
        if (cJSON_IsArray(root))
                return imds_scheduled(c, root, "IMDS events/maintenance/scheduled document");
        if (!cJSON_IsObject(root))
                return fail(c, -EBADMSG, "a JSON %s, not an object", json_type_name(root));

        const cJSON *type = get(root, "Type");
        if (cJSON_IsString(type) && (get(root, "TopicArn") || get(root, "MessageId")))
                return sns(c, root, type->valuestring);
        if (get(root, "detail-type"))
                return eventbridge(c, root);
        if (get(root, "LifecycleTransition") || get(root, "Event"))
                return asg_lifecycle(c, root, "Auto Scaling message", "", NULL, 0);
        if (get(root, "Messages"))
                return fail(c, -EOPNOTSUPP,
                            "a whole SQS ReceiveMessage answer: pass one message Body at a time");
        if (get(root, "action") && get(root, "time"))
                return imds_instance_action(c, root);
        if (get(root, "noticeTime"))
                return imds_rebalance(c, root);
        return fail(c, -EOPNOTSUPP,
                    "unrecognized JSON object: no detail-type, Auto Scaling LifecycleTransition/Event, SNS "
                    "envelope or IMDS fields");
}

static void trim(const char **text, size_t *len)
{
        while (*len > 0 && is_ws(**text))
                (*text)++, (*len)--;
        while (*len > 0 && is_ws((*text)[*len - 1]))
                (*len)--;
}

/* A body in any form, IMDS text documents detected only where unambiguous. */
static int parse_text(struct ctx *c, const char *text, size_t len)
{
        const char *t = text;
        size_t tlen = len;
        trim(&t, &tlen);
        if (tlen == 0)
                return fail(c, -EBADMSG, "empty body");
        if (*t != '{' && *t != '[' && tlen < 64 && !memchr(t, 0, tlen)) {
                char word[64];
                uint64_t usec;
                memcpy(word, t, tlen);
                word[tlen] = 0;
                if (parse_rfc3339_strict(word, &usec) == 0) {
                        c->from_imds = true;
                        return imds_termination_time(c, word);
                }
                if (lifecycle_state_lookup(word) >= 0) {
                        c->from_imds = true;
                        return imds_target_lifecycle_state(c, word);
                }
        }
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r = parse_json(c, text, len, &root);
        if (r < 0)
                return r;
        if (cJSON_IsArray(root) || (!get(root, "detail-type") && !get(root, "Type") &&
                                    ((get(root, "action") && get(root, "time")) || get(root, "noticeTime"))))
                c->from_imds = true;
        return dispatch(c, root);
}

static int parse_imds(struct ctx *c, enum imds_doc doc, const char *path, const char *text, size_t len)
{
        c->from_imds = true;
        trim(&text, &len);
        if (memchr(text, 0, len))
                return fail(c, -EBADMSG, "IMDS %s document contains a NUL byte", path);
        if (doc == IMDS_TERMINATION_TIME || doc == IMDS_TARGET_LIFECYCLE_STATE) {
                if (len == 0)
                        return fail(c, -EBADMSG, "empty IMDS %s document", path);
                if (len >= 64)
                        return fail(c, -EBADMSG, "IMDS %s document of %zu bytes is too long", path, len);
                char word[64];
                memcpy(word, text, len);
                word[len] = 0;
                return doc == IMDS_TERMINATION_TIME ? imds_termination_time(c, word)
                                                    : imds_target_lifecycle_state(c, word);
        }
        /* An empty schedule is normal: IMDS may answer 200 with nothing, as it may answer 404. */
        if (len == 0 && (doc == IMDS_SCHEDULED || doc == IMDS_HISTORY))
                return ignore(c, "empty IMDS %s document: no events", path);
        if (len == 0)
                return fail(c, -EBADMSG, "empty IMDS %s document", path);

        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r = parse_json(c, text, len, &root);
        if (r < 0)
                return r;
        char where[96];
        snprintf(where, sizeof(where), "IMDS %s document", path);
        if (doc == IMDS_SCHEDULED || doc == IMDS_HISTORY)
                return imds_scheduled(c, root, where);
        if (!cJSON_IsObject(root))
                return fail(c, -EBADMSG, "%s is a JSON %s, not an object", where, json_type_name(root));
        return doc == IMDS_INSTANCE_ACTION ? imds_instance_action(c, root) : imds_rebalance(c, root);
}

static int imds_doc_from_path(const char *path, enum imds_doc *ret, const char **ret_name)
{
        if (startswith(path, "/"))
                path++;
        if (startswith(path, "latest/meta-data/"))
                path += strlen("latest/meta-data/");
        for (size_t i = 0; i < ARRAY_SIZE(imds_paths); i++)
                if (streq(path, imds_paths[i].path)) {
                        *ret = imds_paths[i].doc;
                        *ret_name = imds_paths[i].path;
                        return 0;
                }
        return -EINVAL;
}

static bool opt_valid(const char *s, size_t size)
{
        size_t len = strlen(s);
        if (len == 0 || len >= size)
                return false;
        for (size_t i = 0; i < len; i++)
                if (s[i] <= 0x20 || s[i] >= 0x7f)
                        return false;
        return true;
}

int notice_parse(const void *data, size_t len, const struct notice_parse_opts *opts, struct notice **ret,
                 size_t *ret_n, char *reason, size_t reason_size)
{
        static const struct notice_parse_opts no_opts = { 0 };
        struct ctx c = {
                .opts = opts ?: &no_opts,
                .reason = reason,
                .reason_size = reason_size,
        };
        if (reason && reason_size > 0)
                reason[0] = 0;
        if ((!data && len > 0) || !ret || !ret_n)
                return fail(&c, -EINVAL, "invalid arguments");
        if (len > NOTICE_BODY_MAX)
                return fail(&c, -EMSGSIZE, "body of %zu bytes is larger than the %u-byte limit", len,
                            NOTICE_BODY_MAX);
        if (c.opts->instance_id && !notice_instance_id_valid(c.opts->instance_id))
                return fail(&c, -EINVAL, "'%s' is not an EC2 instance ID", Q(c.opts->instance_id));
        if (c.opts->source && !opt_valid(c.opts->source, NOTICE_SOURCE_SIZE))
                return fail(&c, -EINVAL, "source must be 1 to %d printable ASCII bytes",
                            NOTICE_SOURCE_SIZE - 1);
        if (c.opts->region && !opt_valid(c.opts->region, NOTICE_REGION_SIZE))
                return fail(&c, -EINVAL, "region must be 1 to %d printable ASCII bytes",
                            NOTICE_REGION_SIZE - 1);
        enum imds_doc doc = IMDS_NONE;
        const char *imds_name = NULL;
        if (c.opts->imds_path && imds_doc_from_path(c.opts->imds_path, &doc, &imds_name) < 0)
                return fail(&c, -EINVAL, "unknown IMDS path '%s'", Q(c.opts->imds_path));
        c.now = c.opts->now_usec ?: clk_now();

        /* cJSON and the text forms want a NUL-terminated copy. */
        _cleanup_free_ char *text = malloc(len + 1);
        if (!text)
                return fail(&c, -ENOMEM, "out of memory");
        if (len > 0)
                memcpy(text, data, len);
        text[len] = 0;

        int r = doc != IMDS_NONE ? parse_imds(&c, doc, imds_name, text, len) : parse_text(&c, text, len);
        if (r < 0) {
                free(c.items);
                return r;
        }
        for (size_t i = 0; i < c.n; i++) {
                struct notice *n = &c.items[i];
                const char *source = c.opts->source ?: c.from_imds ? "imds" : "sqs";
                memcpy(n->source, source, strlen(source) + 1);
                if (!*n->region && c.opts->region)
                        memcpy(n->region, c.opts->region, strlen(c.opts->region) + 1);
        }
        if (c.n == 0) {
                free(c.items);
                c.items = NULL;
        }
        *ret = c.items;
        *ret_n = c.n;
        return 0;
}

/* ---- output ---- */

static int add_time(cJSON *o, const char *key, uint64_t usec, bool null_when_zero)
{
        char buf[32];
        if (usec == 0)
                return !null_when_zero || cJSON_AddNullToObject(o, key) ? 0 : -ENOMEM;
        if (format_rfc3339(usec, buf, sizeof(buf)) < 0)
                return -EINVAL;
        return cJSON_AddStringToObject(o, key, buf) ? 0 : -ENOMEM;
}

static int add_str(cJSON *o, const char *key, const char *value)
{
        if (!*value)
                return 0;
        return cJSON_AddStringToObject(o, key, value) ? 0 : -ENOMEM;
}

int notice_format_json(const struct notice *n, char **ret)
{
        const char *kind = notice_kind_to_string(n->kind);
        if (!kind)
                return -EINVAL;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!o)
                return -ENOMEM;
        int r = cJSON_AddStringToObject(o, "kind", kind) ? 0 : -ENOMEM;
        if (r >= 0)
                r = add_str(o, "instance_id", n->instance_id);
        if (r >= 0)
                r = add_str(o, "source", n->source);
        if (r >= 0)
                r = add_time(o, "notice_time", n->notice_time, true);
        if (r >= 0)
                r = add_time(o, "deadline", n->deadline, true);
        if (r >= 0)
                r = add_str(o, "action", n->action);
        if (r >= 0)
                r = add_str(o, "region", n->region);
        if (r >= 0)
                r = add_str(o, "account", n->account);
        if (r >= 0)
                r = add_str(o, "event_id", n->event_id);
        if (r >= 0)
                r = add_str(o, "asg_name", n->asg_name);
        if (r >= 0)
                r = add_str(o, "lifecycle_hook_name", n->lifecycle_hook_name);
        if (r >= 0)
                r = add_str(o, "lifecycle_action_token", n->lifecycle_action_token);
        if (r >= 0 && n->kind == NOTICE_SCHEDULED_CHANGE)
                r = add_time(o, "start_time", n->start_time, true);
        if (r >= 0 && n->kind == NOTICE_SCHEDULED_CHANGE)
                r = add_time(o, "end_time", n->end_time, false);
        if (r >= 0)
                r = add_str(o, "state", n->state);
        if (r < 0)
                return r;
        char *s = cJSON_PrintUnformatted(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int notice_format_human(const struct notice *n, char **ret)
{
        const char *kind = notice_kind_to_string(n->kind);
        if (!kind)
                return -EINVAL;
        char notice_time[32] = "?", deadline[32] = "none", start[32] = "", end[32] = "";
        (void)format_rfc3339(n->notice_time, notice_time, sizeof(notice_time));
        if (n->deadline)
                (void)format_rfc3339(n->deadline, deadline, sizeof(deadline));
        if (n->start_time)
                (void)format_rfc3339(n->start_time, start, sizeof(start));
        if (n->end_time)
                (void)format_rfc3339(n->end_time, end, sizeof(end));

        struct buf b = {};
        int r = buf_printf(&b, "%s %s", kind, *n->instance_id ? n->instance_id : "-");
        if (r >= 0 && *n->action)
                r = buf_printf(&b, " (%s)", n->action);
        if (r >= 0)
                r = buf_printf(&b, ": deadline %s, notice %s, via %s", deadline, notice_time, n->source);
        if (r >= 0 && *start)
                r = buf_printf(&b, ", window %s..%s", start, *end ? end : "?");
        if (r >= 0 && *n->state)
                r = buf_printf(&b, ", state %s", n->state);
        if (r >= 0 && *n->asg_name)
                r = buf_printf(&b, ", group %s", n->asg_name);
        if (r >= 0 && *n->lifecycle_hook_name)
                r = buf_printf(&b, ", hook %s", n->lifecycle_hook_name);
        if (r >= 0 && *n->region)
                r = buf_printf(&b, ", region %s", n->region);
        if (r >= 0 && *n->event_id)
                r = buf_printf(&b, ", event %s", n->event_id);
        if (r < 0) {
                buf_free(&b);
                return r;
        }
        *ret = b.data;
        return 0;
}
