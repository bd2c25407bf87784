/* aws/notice: the IMDS documents (spot, rebalance, scheduled events, target lifecycle state). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

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

/* IMDS documents name no instance: it comes from the caller, and without one it is absent, as any field a
 * form lacks (the agent always knows its own). */
static int imds_push(struct ctx *c, enum notice_kind kind, struct notice **ret)
{
        int r = notice_push(c, kind, ret);
        if (r < 0)
                return r;
        if (c->opts->instance_id)
                memcpy((*ret)->instance_id, c->opts->instance_id, strlen(c->opts->instance_id) + 1);
        return 0;
}

/* ---- IMDS documents ---- */

int notice_imds_instance_action(struct ctx *c, const cJSON *o)
{
        static const char where[] = "IMDS spot/instance-action document";
        const char *action;
        uint64_t t;
        int r = notice_get_str(c, o, "action", where, "action", true, &action);
        if (r < 0)
                return r;
        if (!streq(action, "terminate") && !streq(action, "stop") && !streq(action, "hibernate"))
                return notice_fail(c, -EBADMSG, "%s: unknown action '%s'", where, Q(action));
        r = notice_get_time(c, o, "time", where, "time", true, &t);
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

int notice_imds_termination_time(struct ctx *c, const char *text)
{
        static const char where[] = "IMDS spot/termination-time document";
        uint64_t t;
        if (notice_parse_time(text, &t) < 0)
                return notice_fail(c, -EBADMSG, "%s: '%s' is not a time", where, Q(text));
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

int notice_imds_rebalance(struct ctx *c, const cJSON *o)
{
        static const char where[] = "IMDS events/recommendations/rebalance document";
        uint64_t t;
        int r = notice_get_time(c, o, "noticeTime", where, "noticeTime", true, &t);
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

int notice_imds_scheduled(struct ctx *c, const cJSON *a, const char *where)
{
        if (!cJSON_IsArray(a))
                return notice_fail(c, -EBADMSG, "%s is a JSON %s, not an array", where,
                                   notice_json_type_name(a));
        if (cJSON_GetArraySize(a) == 0)
                return ignore(c, "%s lists no events", where);
        const cJSON *e;
        cJSON_ArrayForEach (e, a) {
                if (!cJSON_IsObject(e))
                        return notice_fail(c, -EBADMSG, "%s: an event is a JSON %s, not an object", where,
                                           notice_json_type_name(e));
                const char *code, *id, *state;
                uint64_t start, end;
                int r = notice_get_str(c, e, "Code", where, "Code", true, &code);
                if (r >= 0)
                        r = notice_get_str(c, e, "EventId", where, "EventId", true, &id);
                if (r >= 0)
                        r = notice_get_str(c, e, "State", where, "State", false, &state);
                if (r >= 0)
                        r = notice_get_time(c, e, "NotBefore", where, "NotBefore", true, &start);
                if (r >= 0)
                        r = notice_get_time(c, e, "NotAfter", where, "NotAfter", false, &end);
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

int notice_imds_lifecycle_state(const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(lifecycle_states); i++)
                if (streq(s, lifecycle_states[i].name))
                        return (int)i;
        return -ENOENT;
}

int notice_imds_target_lifecycle_state(struct ctx *c, const char *state)
{
        static const char where[] = "IMDS autoscaling/target-lifecycle-state document";
        int i = notice_imds_lifecycle_state(state);
        if (i < 0)
                return notice_fail(c, -EOPNOTSUPP, "%s: unknown state '%s'", where, Q(state));
        if (!lifecycle_states[i].terminate)
                return ignore(c, "target lifecycle state '%s': nothing to drain", state);
        struct notice *n;
        int r = imds_push(c, NOTICE_ASG_LIFECYCLE_TERMINATE, &n);
        if (r < 0)
                return r;
        n->notice_time = c->now;
        n->deadline = notice_add_sat(c->now, c->opts->asg_deadline_usec ?: NOTICE_ASG_DEFAULT_DEADLINE_USEC);
        snprintf(n->event_id, sizeof(n->event_id), "imds:autoscaling/target-lifecycle-state:%s:%s",
                 n->instance_id, state);
        return 0;
}

int notice_imds_parse(struct ctx *c, enum imds_doc doc, const char *path, const char *text, size_t len)
{
        c->from_imds = true;
        notice_trim(&text, &len);
        if (memchr(text, 0, len))
                return notice_fail(c, -EBADMSG, "IMDS %s document contains a NUL byte", path);
        if (doc == IMDS_TERMINATION_TIME || doc == IMDS_TARGET_LIFECYCLE_STATE) {
                if (len == 0)
                        return notice_fail(c, -EBADMSG, "empty IMDS %s document", path);
                if (len >= 64)
                        return notice_fail(c, -EBADMSG, "IMDS %s document of %zu bytes is too long", path,
                                           len);
                char word[64];
                memcpy(word, text, len);
                word[len] = 0;
                return doc == IMDS_TERMINATION_TIME ? notice_imds_termination_time(c, word)
                                                    : notice_imds_target_lifecycle_state(c, word);
        }
        /* An empty schedule is normal: IMDS may answer 200 with nothing, as it may answer 404. */
        if (len == 0 && (doc == IMDS_SCHEDULED || doc == IMDS_HISTORY))
                return ignore(c, "empty IMDS %s document: no events", path);
        if (len == 0)
                return notice_fail(c, -EBADMSG, "empty IMDS %s document", path);

        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r = notice_parse_json(c, text, len, &root);
        if (r < 0)
                return r;
        char where[96];
        snprintf(where, sizeof(where), "IMDS %s document", path);
        if (doc == IMDS_SCHEDULED || doc == IMDS_HISTORY)
                return notice_imds_scheduled(c, root, where);
        if (!cJSON_IsObject(root))
                return notice_fail(c, -EBADMSG, "%s is a JSON %s, not an object", where,
                                   notice_json_type_name(root));
        return doc == IMDS_INSTANCE_ACTION ? notice_imds_instance_action(c, root)
                                           : notice_imds_rebalance(c, root);
}

int notice_imds_doc_from_path(const char *path, enum imds_doc *ret, const char **ret_name)
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
