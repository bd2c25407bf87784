/* aws/notice: EventBridge events (EC2, Health, Auto Scaling). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

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
        int r = notice_get_instance(c, e->detail, "instance-id", where, "detail.instance-id", &iid);
        if (r < 0)
                return r;
        r = notice_push(c, kind, &n);
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
        int r = notice_get_str(c, e->detail, "instance-action", "EventBridge event",
                               "detail.instance-action", true, &action);
        if (r < 0)
                return r;
        if (!streq(action, "terminate") && !streq(action, "stop") && !streq(action, "hibernate"))
                return notice_fail(c, -EBADMSG, "EventBridge event: unknown detail.instance-action '%s'",
                                   Q(action));
        r = eb_simple(c, e, kind, &n);
        if (r < 0)
                return r;
        memcpy(n->action, action, strlen(action) + 1);
        n->deadline = notice_add_sat(e->time, NOTICE_SPOT_WARNING_USEC);
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
        int r = notice_get_time(c, e->detail, "instance-termination-time", "EventBridge event",
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
        int r = notice_get_str(c, e->detail, "state", "EventBridge event", "detail.state", true, &state);
        if (r < 0)
                return r;
        if (streq(state, "pending") || streq(state, "running"))
                return ignore(c, "instance state change to '%s': nothing to drain", state);
        bool known = false;
        for (size_t i = 0; i < ARRAY_SIZE(going); i++)
                known = known || streq(state, going[i]);
        if (!known)
                return notice_fail(c, -EBADMSG, "EventBridge event: unknown detail.state '%s'", Q(state));
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
        int r = notice_get_str(c, e->detail, "service", where, "detail.service", true, &service);
        if (r >= 0)
                r = notice_get_str(c, e->detail, "eventTypeCategory", where, "detail.eventTypeCategory",
                                   true, &category);
        if (r < 0)
                return r;
        if (!streq(service, "EC2") || !streq(category, "scheduledChange"))
                return ignore(
                    c, "AWS Health event for service '%s', category '%s': not an EC2 scheduled change",
                    Q(service), Q(category));
        r = notice_get_str(c, e->detail, "eventTypeCode", where, "detail.eventTypeCode", true, &code);
        if (r >= 0)
                r = notice_get_str(c, e->detail, "statusCode", where, "detail.statusCode", false, &status);
        if (r >= 0)
                r = notice_get_str(c, e->detail, "eventRegion", where, "detail.eventRegion", false, &region);
        if (r >= 0)
                r = notice_get_time(c, e->detail, "startTime", where, "detail.startTime", true, &start);
        if (r >= 0)
                r = notice_get_time(c, e->detail, "endTime", where, "detail.endTime", false, &end);
        if (r >= 0)
                r = notice_get_str(c, e->detail, "eventArn", where, "detail.eventArn", false, &arn);
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
                const cJSON *list =
                    pass == 0 ? notice_get(e->detail, "affectedEntities") : notice_get(root, "resources");
                if (!list || cJSON_IsNull(list))
                        continue;
                if (!cJSON_IsArray(list))
                        return notice_fail(c, -EBADMSG, "%s: %s is not an array", where, name);
                const cJSON *item;
                cJSON_ArrayForEach (item, list) {
                        const cJSON *v = pass == 0 ? notice_get(item, "entityValue") : item;
                        if (!cJSON_IsString(v) || !notice_instance_id_valid(v->valuestring) ||
                            seen_instance(c, first, v->valuestring))
                                continue;
                        struct notice *n;
                        r = notice_push(c, NOTICE_SCHEDULED_CHANGE, &n);
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
                return notice_fail(c, -EBADMSG,
                                   "%s names no EC2 instance (detail.affectedEntities, resources)", where);
        return 0;
}

int notice_eventbridge(struct ctx *c, const cJSON *root)
{
        static const char where[] = "EventBridge event";
        struct envelope e = { 0 };
        int r = notice_get_str(c, root, "detail-type", where, "detail-type", true, &e.detail_type);
        if (r >= 0)
                r = notice_get_str(c, root, "source", where, "source", true, &e.source);
        if (r >= 0)
                r = notice_get_str(c, root, "id", where, "id", true, &e.id);
        if (r >= 0)
                r = notice_get_str(c, root, "region", where, "region", false, &e.region);
        if (r >= 0)
                r = notice_get_account(c, root, "account", where, "account", &e.account);
        if (r >= 0)
                r = notice_get_time(c, root, "time", where, "time", true, &e.time);
        if (r < 0)
                return r;
        e.detail = notice_get(root, "detail");
        if (!cJSON_IsObject(e.detail))
                return notice_fail(c, -EBADMSG, "%s %s detail", where,
                                   e.detail ? "with a non-object" : "without");

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
                r = notice_asg_lifecycle(c, e.detail, where, "detail.", e.id, e.time);
        else if (streq(e.source, "aws.autoscaling") &&
                 streq(e.detail_type, "EC2 Instance-launch Lifecycle Action"))
                r = notice_asg_lifecycle(c, e.detail, where, "detail.", e.id, e.time);
        else
                return notice_fail(c, -EOPNOTSUPP, "unknown detail-type '%s' from source '%s'",
                                   Q(e.detail_type), Q(e.source));
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
