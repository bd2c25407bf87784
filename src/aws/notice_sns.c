/* aws/notice: SNS notifications, whose Message is a body of its own. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* An EventBridge rule can feed SNS which feeds SQS; a second envelope is tolerated, a third is refused. */
#define SNS_DEPTH_MAX 2

int notice_sns_unwrap(struct ctx *c, const cJSON *root, const char *type, const char **ret_message)
{
        *ret_message = NULL;
        if (streq(type, "SubscriptionConfirmation") || streq(type, "UnsubscribeConfirmation"))
                return ignore(c, "SNS %s: not a notice (confirm the subscription through its SubscribeURL)",
                              type);
        if (c->sns_depth >= SNS_DEPTH_MAX)
                return notice_fail(c, -ELOOP, "SNS envelopes nested more than %d deep", SNS_DEPTH_MAX);
        const cJSON *m = notice_get(root, "Message");
        if (!cJSON_IsString(m) || !m->valuestring)
                return notice_fail(c, -EBADMSG, "SNS notification without a Message string");
        c->sns_depth++;
        c->prefix = "SNS Message: ";
        *ret_message = m->valuestring;
        return 0;
}
