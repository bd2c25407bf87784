/* aws/notice: the common type of every wire form: kind names, reasons, times, fields and JSON text. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

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

int notice_fail(struct ctx *c, int err, const char *fmt, ...)
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

struct quoted notice_quote(const char *in)
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
int notice_rfc3339_strict(const char *s, uint64_t *ret)
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
        if (notice_rfc3339_strict(s, &t) < 0 && parse_rfc1123(s, &t) < 0)
                return -EINVAL;
        *ret_usec = t;
        return 0;
}

uint64_t notice_add_sat(uint64_t a, uint64_t b)
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
int notice_set_field(struct ctx *c, char *dst, size_t size, const char *value, const char *where,
                     const char *what)
{
        size_t len = strlen(value);
        if (len >= size)
                return notice_fail(c, -EBADMSG, "%s: %s is longer than %zu bytes", where, what, size - 1);
        for (size_t i = 0; i < len; i++)
                if ((unsigned char)value[i] < 0x20 || value[i] == 0x7f)
                        return notice_fail(c, -EBADMSG, "%s: %s contains a control character", where, what);
        if (!utf8_valid((const unsigned char *)value))
                return notice_fail(c, -EBADMSG, "%s: %s is not valid UTF-8", where, what);
        memcpy(dst, value, len + 1);
        return 0;
}

const cJSON *notice_get(const cJSON *o, const char *key)
{
        return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* A string member; *ret = NULL when absent and optional. `path` names it in reasons ("detail.instance-id").
 */
int notice_get_str(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                   bool required, const char **ret)
{
        const cJSON *v = notice_get(o, key);
        if (!v || cJSON_IsNull(v)) {
                if (required)
                        return notice_fail(c, -EBADMSG, "%s without %s", where, path);
                *ret = NULL;
                return 0;
        }
        if (!cJSON_IsString(v) || !v->valuestring)
                return notice_fail(c, -EBADMSG, "%s: %s is not a string", where, path);
        if (required && !*v->valuestring)
                return notice_fail(c, -EBADMSG, "%s: %s is empty", where, path);
        *ret = v->valuestring;
        return 0;
}

int notice_get_time(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                    bool required, uint64_t *ret)
{
        const char *s;
        int r = notice_get_str(c, o, key, where, path, required, &s);
        if (r < 0)
                return r;
        if (!s) {
                *ret = 0;
                return 0;
        }
        if (notice_parse_time(s, ret) < 0)
                return notice_fail(c, -EBADMSG, "%s: %s '%s' is not a time", where, path, Q(s));
        return 0;
}

int notice_get_instance(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                        const char **ret)
{
        const char *s;
        int r = notice_get_str(c, o, key, where, path, true, &s);
        if (r < 0)
                return r;
        if (!notice_instance_id_valid(s))
                return notice_fail(c, -EBADMSG, "%s: %s '%s' is not an EC2 instance ID", where, path, Q(s));
        *ret = s;
        return 0;
}

int notice_push(struct ctx *c, enum notice_kind kind, struct notice **ret)
{
        if (c->n >= NOTICE_LIST_MAX)
                return notice_fail(c, -EMSGSIZE, "more than %d notices in one body", NOTICE_LIST_MAX);
        if (c->n == c->cap) {
                size_t cap = c->cap ? c->cap * 2 : 2;
                struct notice *a = realloc(c->items, cap * sizeof(*a));
                if (!a)
                        return notice_fail(c, -ENOMEM, "out of memory");
                c->items = a;
                c->cap = cap;
        }
        struct notice *n = &c->items[c->n++];
        memset(n, 0, sizeof(*n));
        n->kind = kind;
        *ret = n;
        return 0;
}

/* ---- JSON text ---- */

bool notice_is_ws(char ch)
{
        return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

int notice_parse_json(struct ctx *c, const char *text, size_t len, cJSON **ret)
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
                                return notice_fail(c, -ELOOP,
                                                   "JSON nested deeper than %d levels at byte %zu",
                                                   NOTICE_NESTING_MAX, i);
                } else if ((ch == '}' || ch == ']') && depth > 0) {
                        depth--;
                }
        }

        const char *end = NULL;
        cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, false);
        if (!root) {
                size_t pos = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
                return notice_fail(c, -EBADMSG, "not JSON at byte %zu", pos);
        }
        for (const char *p = end; p && p < text + len; p++)
                if (!notice_is_ws(*p)) {
                        cJSON_Delete(root);
                        return notice_fail(c, -EBADMSG, "not JSON at byte %zu (data after the JSON value)",
                                           (size_t)(p - text));
                }
        *ret = root;
        return 0;
}

const char *notice_json_type_name(const cJSON *v)
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

/* An optional account member (EventBridge `account`, Auto Scaling `AccountId`): twelve digits when given. */
int notice_get_account(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                       const char **ret)
{
        int r = notice_get_str(c, o, key, where, path, false, ret);
        if (r < 0 || !*ret)
                return r;
        if (!notice_account_valid(*ret))
                return notice_fail(c, -EBADMSG, "%s: %s '%s' is not a 12-digit account id", where, path,
                                   Q(*ret));
        return 0;
}

void notice_trim(const char **text, size_t *len)
{
        while (*len > 0 && notice_is_ws(**text))
                (*text)++, (*len)--;
        while (*len > 0 && notice_is_ws((*text)[*len - 1]))
                (*len)--;
}
