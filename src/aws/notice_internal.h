/* aws/notice: what the files of one notice parser share (private to src/aws).
 *
 * notice.c takes a body and hands it to the form it is in: notice_imds.c, notice_eventbridge.c, notice_asg.c
 * (also below EventBridge) and notice_sns.c (whose Message goes back to notice.c as a body of its own). Each
 * form fills `struct notice` through notice_fields.c; notice_format.c writes it out. */
#pragma once

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/notice.h"
#include "spotdrain/util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

enum imds_doc {
        IMDS_NONE,
        IMDS_INSTANCE_ACTION,
        IMDS_TERMINATION_TIME,
        IMDS_REBALANCE,
        IMDS_SCHEDULED,
        IMDS_HISTORY,
        IMDS_TARGET_LIFECYCLE_STATE,
};

struct ctx {
        const struct notice_parse_opts *opts;
        char *reason;
        size_t reason_size;
        const char *prefix; /* "SNS Message: " while inside an envelope */
        unsigned sns_depth;
        bool from_imds;
        uint64_t now;
        struct notice *items;
        size_t n, cap;
};

/* ---- reasons (notice_fields.c) ---- */

int notice_fail(struct ctx *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A recognized body with nothing to act on: 0 notices and the reason. */
#define ignore(c, ...) notice_fail((c), 0, __VA_ARGS__)

/* Input quoted into a reason: at most 60 bytes, anything but printable ASCII shown as '?'. */
struct quoted {
        char s[72];
};
struct quoted notice_quote(const char *in);
#define Q(str) (notice_quote(str).s)

/* ---- times ---- */

int notice_rfc3339_strict(const char *s, uint64_t *ret);
uint64_t notice_add_sat(uint64_t a, uint64_t b);

/* ---- fields ---- */

int notice_set_field(struct ctx *c, char *dst, size_t size, const char *value, const char *where,
                     const char *what);
#define SET(c, field, value, where, what) \
        notice_set_field((c), (field), sizeof(field), (value), (where), (what))
const cJSON *notice_get(const cJSON *o, const char *key);
int notice_get_str(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                   bool required, const char **ret);
int notice_get_time(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                    bool required, uint64_t *ret);
int notice_get_instance(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                        const char **ret);
int notice_get_account(struct ctx *c, const cJSON *o, const char *key, const char *where, const char *path,
                       const char **ret);
int notice_push(struct ctx *c, enum notice_kind kind, struct notice **ret);

/* ---- JSON text ---- */

bool notice_is_ws(char ch);
void notice_trim(const char **text, size_t *len);
int notice_parse_json(struct ctx *c, const char *text, size_t len, cJSON **ret);
const char *notice_json_type_name(const cJSON *v);

/* ---- the forms ---- */

/* notice_imds.c */
int notice_imds_instance_action(struct ctx *c, const cJSON *o);
int notice_imds_termination_time(struct ctx *c, const char *text);
int notice_imds_rebalance(struct ctx *c, const cJSON *o);
int notice_imds_scheduled(struct ctx *c, const cJSON *a, const char *where);
int notice_imds_lifecycle_state(const char *s);
int notice_imds_target_lifecycle_state(struct ctx *c, const char *state);
int notice_imds_parse(struct ctx *c, enum imds_doc doc, const char *path, const char *text, size_t len);
int notice_imds_doc_from_path(const char *path, enum imds_doc *ret, const char **ret_name);

/* notice_asg.c: a lifecycle message, the `detail` of an EventBridge event (env_id/env_time set) or a
 * message Auto Scaling sent straight to the queue (or through SNS). */
int notice_asg_lifecycle(struct ctx *c, const cJSON *o, const char *where, const char *pfx,
                         const char *env_id, uint64_t env_time);

/* notice_eventbridge.c */
int notice_eventbridge(struct ctx *c, const cJSON *root);

/* notice_sns.c: *ret_message is the notification's Message, to be parsed as a body of its own, or
 * NULL when there is nothing to parse (the reason says why). */
int notice_sns_unwrap(struct ctx *c, const cJSON *root, const char *type, const char **ret_message);
