/* What a request carries besides its path: query parameters and headers. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* As kube-apiserver reads a query parameter (url.Values, then its first value): NULL when absent, "" for a
 * key given without "=" or with an empty value. */
const char *sim_arg(struct MHD_Connection *c, const char *key)
{
        const char *v = NULL;

        if (MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v, NULL) != MHD_YES)
                return NULL;
        return v ? v : "";
}

/* apimachinery's Convert_Slice_string_To_bool: only absence, "false" and "0" (any case) are false; any
 * other value, the empty one included ("?watch"), is true. */
bool sim_arg_true(struct MHD_Connection *c, const char *key)
{
        const char *v = sim_arg(c, key);
        return v && strcasecmp(v, "false") != 0 && !streq(v, "0");
}

/* Go's strconv.ParseInt(s, 10, 64): an optional sign and decimal digits, nothing else. */
int sim_parse_int64(const char *s, int64_t *ret)
{
        const char *d = s + (*s == '+' || *s == '-');
        char *end;
        long long v;

        if (*d < '0' || *d > '9')
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (*end)
                return -EINVAL;
        if (errno == ERANGE)
                return -ERANGE;
        *ret = v;
        return 0;
}

int sim_arg_int64(struct MHD_Connection *c, const char *key, int64_t *ret)
{
        const char *v = sim_arg(c, key);
        int r;

        if (!v)
                return 0;
        r = sim_parse_int64(v, ret);
        return r < 0 ? r : 1;
}

enum MHD_Result sim_reply_bad_int(struct MHD_Connection *c, const char *key)
{
        const char *v = sim_arg(c, key);
        int64_t ignored;
        _cleanup_free_ char *msg = strprintf(
            "strconv.ParseInt: parsing \"%s\": %s", v ? v : "",
            v && sim_parse_int64(v, &ignored) == -ERANGE ? "value out of range" : "invalid syntax");
        return sim_reply_status(c, MHD_HTTP_BAD_REQUEST, "BadRequest", msg ? msg : "invalid integer");
}

/* The media type of the body, lower case, without parameters (";charset=utf-8") and spaces; "" when the
 * request names none (kube-apiserver then decodes JSON). */
const char *sim_content_type(struct MHD_Connection *c, char *buf, size_t len)
{
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        size_t n = 0;

        if (!ct || len == 0)
                return "";
        while (*ct == ' ' || *ct == '\t')
                ct++;
        for (; ct[n] && ct[n] != ';' && ct[n] != ' ' && ct[n] != '\t' && n + 1 < len; n++)
                buf[n] = (char)tolower((unsigned char)ct[n]);
        buf[n] = 0;
        return buf;
}

bool sim_content_is_json(const char *media_type)
{
        return isempty(media_type) || streq(media_type, "application/json");
}

char *sim_not_found_message(const struct api_path *ap)
{
        return strprintf("%s%s%s \"%s\" not found", ap->res->name, isempty(ap->res->group) ? "" : ".",
                         ap->res->group, ap->name);
}

cJSON *sim_parse_body(const struct sim_http_request *rq)
{
        return rq->body_len ? cJSON_ParseWithLength(rq->body, rq->body_len) : NULL;
}

const char *sim_user_agent(struct MHD_Connection *c)
{
        const char *ua = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "User-Agent");
        return ua ? ua : "";
}
