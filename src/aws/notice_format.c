/* aws/notice: a notice as JSON and as text. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

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
