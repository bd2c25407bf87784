/* The drain record: what a drain writes on its node (SPOTDRAIN_ANNOTATION_DRAIN) for whoever comes after
 * it — a restarted agent or a new controller leader resuming it (dispatch_resume_recorded()), and the
 * agents of other nodes ordering their drains behind it (drain_peers_new()). */
#include <errno.h>
#include <stdlib.h>

#include "spotdrain/engine.h"
#include "spotdrain/keys.h"

char *drain_record_format(const char *kind, uint64_t deadline_usec, uint64_t started_usec,
                          const char *instance_id, const char *event_id, bool cordoned_before)
{
        char deadline[64], started[64];
        char *value = NULL;

        if (format_rfc3339_msec(deadline_usec, deadline, sizeof(deadline)) < 0 ||
            format_rfc3339_msec(started_usec, started, sizeof(started)) < 0)
                return NULL;
        cJSON *o = cJSON_CreateObject();
        if (o && cJSON_AddStringToObject(o, "kind", kind) &&
            cJSON_AddStringToObject(o, "deadline", deadline) &&
            cJSON_AddStringToObject(o, "started", started) &&
            (isempty(instance_id) || cJSON_AddStringToObject(o, "instance", instance_id)) &&
            (isempty(event_id) || cJSON_AddStringToObject(o, "event_id", event_id)) &&
            (!cordoned_before || cJSON_AddTrueToObject(o, "cordoned_before")))
                value = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        return value;
}

static const char *record_value(const cJSON *node)
{
        /* (The key has dots of its own: no kube_object_str() path.) */
        const cJSON *ann = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(node, "metadata"), "annotations");
        return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ann, SPOTDRAIN_ANNOTATION_DRAIN));
}

bool drain_record_is_for(const cJSON *node, const char *kind, const char *event_id)
{
        const char *value = record_value(node);
        cJSON *rec = value ? cJSON_Parse(value) : NULL;
        const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "kind")),
                   *e = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "event_id"));
        bool is = k && e && !isempty(event_id) && streq(k, kind) && streq(e, event_id);

        cJSON_Delete(rec);
        return is;
}

bool drain_record_cordoned_before(const cJSON *node)
{
        const char *value = record_value(node);
        cJSON *rec = value ? cJSON_Parse(value) : NULL;
        bool before = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "cordoned_before"));

        cJSON_Delete(rec);
        return before;
}

int drain_record_read(const cJSON *node, char **ret_kind, uint64_t *ret_deadline, char **ret_instance)
{
        const char *value = record_value(node);
        uint64_t deadline = 0;
        int r = 0;

        if (!value)
                return -ENOENT;
        cJSON *rec = cJSON_Parse(value);
        const char *kind = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "kind"));
        const char *instance = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "instance"));
        if (ret_instance)
                *ret_instance = NULL;
        if (!kind || parse_rfc3339(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rec, "deadline")),
                                   &deadline) < 0)
                r = -EBADMSG;
        else if (ret_kind && !(*ret_kind = strdup(kind)))
                r = -ENOMEM;
        else if (ret_instance && instance && !(*ret_instance = strdup(instance))) {
                r = -ENOMEM;
                if (ret_kind) {
                        free(*ret_kind);
                        *ret_kind = NULL;
                }
        }
        cJSON_Delete(rec);
        if (r >= 0 && ret_deadline)
                *ret_deadline = deadline;
        return r;
}
