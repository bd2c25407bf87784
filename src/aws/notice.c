/* aws/notice: every wire form of an interruption notice → struct notice (see include/spotdrain/notice.h): a
 * body to the parser of its form (notice_internal.h says which file holds which). */
#include "spotdrain/notice.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "notice_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- dispatch ---- */

static int parse_text(struct ctx *c, const char *text, size_t len);

/* Routes a JSON body to its form's parser. What goes to an IMDS document's parser came from IMDS (its
 * source, and a notice that names no instance only then): said here, where the form is decided, and nowhere
 * else. */
static int dispatch(struct ctx *c, const cJSON *root)
{
        if (cJSON_IsArray(root)) {
                c->from_imds = true;
                return notice_imds_scheduled(c, root, "IMDS events/maintenance/scheduled document");
        }
        if (!cJSON_IsObject(root))
                return notice_fail(c, -EBADMSG, "a JSON %s, not an object", notice_json_type_name(root));

        const cJSON *type = notice_get(root, "Type");
        if (cJSON_IsString(type) && (notice_get(root, "TopicArn") || notice_get(root, "MessageId"))) {
                const char *message;
                int r = notice_sns_unwrap(c, root, type->valuestring, &message);
                if (r < 0 || !message)
                        return r;
                return parse_text(c, message, strlen(message));
        }
        if (notice_get(root, "detail-type"))
                return notice_eventbridge(c, root);
        if (notice_get(root, "LifecycleTransition") || notice_get(root, "Event"))
                return notice_asg_lifecycle(c, root, "Auto Scaling message", "", NULL, 0);
        if (notice_get(root, "Messages"))
                return notice_fail(c, -EOPNOTSUPP,
                                   "a whole SQS ReceiveMessage answer: pass one message Body at a time");
        if (notice_get(root, "action") && notice_get(root, "time")) {
                c->from_imds = true;
                return notice_imds_instance_action(c, root);
        }
        if (notice_get(root, "noticeTime")) {
                c->from_imds = true;
                return notice_imds_rebalance(c, root);
        }
        return notice_fail(
            c, -EOPNOTSUPP,
            "unrecognized JSON object: no detail-type, Auto Scaling LifecycleTransition/Event, SNS "
            "envelope or IMDS fields");
}

/* A body in any form, IMDS text documents detected only where unambiguous. */
static int parse_text(struct ctx *c, const char *text, size_t len)
{
        const char *t = text;
        size_t tlen = len;
        notice_trim(&t, &tlen);
        if (tlen == 0)
                return notice_fail(c, -EBADMSG, "empty body");
        if (*t != '{' && *t != '[' && tlen < 64 && !memchr(t, 0, tlen)) {
                char word[64];
                uint64_t usec;
                memcpy(word, t, tlen);
                word[tlen] = 0;
                if (notice_rfc3339_strict(word, &usec) == 0) {
                        c->from_imds = true;
                        return notice_imds_termination_time(c, word);
                }
                if (notice_imds_lifecycle_state(word) >= 0) {
                        c->from_imds = true;
                        return notice_imds_target_lifecycle_state(c, word);
                }
        }
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int r = notice_parse_json(c, text, len, &root);
        if (r < 0)
                return r;
        return dispatch(c, root);
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
                return notice_fail(&c, -EINVAL, "invalid arguments");
        if (len > NOTICE_BODY_MAX)
                return notice_fail(&c, -EMSGSIZE, "body of %zu bytes is larger than the %u-byte limit", len,
                                   NOTICE_BODY_MAX);
        if (c.opts->instance_id && !notice_instance_id_valid(c.opts->instance_id))
                return notice_fail(&c, -EINVAL, "'%s' is not an EC2 instance ID", Q(c.opts->instance_id));
        if (c.opts->source && !opt_valid(c.opts->source, NOTICE_SOURCE_SIZE))
                return notice_fail(&c, -EINVAL, "source must be 1 to %d printable ASCII bytes",
                                   NOTICE_SOURCE_SIZE - 1);
        if (c.opts->region && !opt_valid(c.opts->region, NOTICE_REGION_SIZE))
                return notice_fail(&c, -EINVAL, "region must be 1 to %d printable ASCII bytes",
                                   NOTICE_REGION_SIZE - 1);
        enum imds_doc doc = IMDS_NONE;
        const char *imds_name = NULL;
        if (c.opts->imds_path && notice_imds_doc_from_path(c.opts->imds_path, &doc, &imds_name) < 0)
                return notice_fail(&c, -EINVAL, "unknown IMDS path '%s'", Q(c.opts->imds_path));
        c.now = c.opts->now_usec ?: clk_now();

        /* cJSON and the text forms want a NUL-terminated copy. */
        _cleanup_free_ char *text = malloc(len + 1);
        if (!text)
                return notice_fail(&c, -ENOMEM, "out of memory");
        if (len > 0)
                memcpy(text, data, len);
        text[len] = 0;

        int r =
            doc != IMDS_NONE ? notice_imds_parse(&c, doc, imds_name, text, len) : parse_text(&c, text, len);
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
