/* What a request carries besides its path: query parameters and headers. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

const char *sim_arg(struct MHD_Connection *c, const char *key)
{
        return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

bool sim_arg_true(struct MHD_Connection *c, const char *key)
{
        const char *v = sim_arg(c, key);
        return v && (streq(v, "true") || streq(v, "1"));
}

const char *sim_content_type(struct MHD_Connection *c, char *buf, size_t len)
{
        const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
        size_t n;
        if (!ct)
                return "";
        n = strcspn(ct, ";");
        snprintf(buf, len, "%.*s", (int)n, ct);
        return buf;
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
