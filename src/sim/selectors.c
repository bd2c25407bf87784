/* Label and field selectors as kube-apiserver applies them to a list or a watch, and the JSON paths
 * they read. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- JSON helpers ---- */

const cJSON *sim_json_path(const cJSON *obj, const char *dotted)
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

const char *sim_json_str(const cJSON *obj, const char *dotted)
{
        const cJSON *v = sim_json_path(obj, dotted);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

double sim_json_num(const cJSON *obj, const char *dotted)
{
        const cJSON *v = sim_json_path(obj, dotted);
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

                json_field_text(sim_json_path(obj, field), have, sizeof(have));
                if (streq(have, want) == negate)
                        match = false;
                p += n;
                if (*p == ',')
                        p++;
        }
        return match;
}

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
void sim_list_filter_for(const char *lsel, const char *fsel, char *node_buf, size_t node_len,
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
