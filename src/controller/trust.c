/* Which queue messages may make the controller act: see trust.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "controller/trust.h"
#include "spotdrain/util.h"

int trust_queue_account(const char *queue_url, char ret[NOTICE_ACCOUNT_SIZE])
{
        const char *p = queue_url ? strstr(queue_url, "://") : NULL;
        char id[NOTICE_ACCOUNT_SIZE];

        ret[0] = 0;
        if (!p)
                return -EINVAL;
        p = strchr(p + 3, '/');
        if (!p)
                return -EINVAL;
        p++;
        size_t len = strcspn(p, "/?#");
        if (len != NOTICE_ACCOUNT_SIZE - 1)
                return -EINVAL;
        memcpy(id, p, len);
        id[len] = 0;
        if (!notice_account_valid(id))
                return -EINVAL;
        memcpy(ret, id, sizeof(id));
        return 0;
}

static bool account_allowed(const struct trust_policy *p, const char *account)
{
        return (*p->queue_account && streq(account, p->queue_account)) ||
               strv_contains(p->allowed_accounts, account);
}

enum trust_verdict trust_check(const struct trust_policy *p, const struct notice *n, char *why,
                               size_t why_size)
{
        char scratch[1];

        if (!why || why_size == 0) {
                why = scratch;
                why_size = sizeof(scratch);
        }
        why[0] = 0;
        if (!*n->account) {
                snprintf(why, why_size, "the %s notice names no account", notice_kind_to_string(n->kind));
                return TRUST_NO_ACCOUNT;
        }
        if (!account_allowed(p, n->account)) {
                snprintf(why, why_size,
                         "the %s notice comes from account %s, not the queue's (%s) nor one of "
                         "controller.allowed_accounts",
                         notice_kind_to_string(n->kind), n->account,
                         *p->queue_account ? p->queue_account : "unknown");
                return TRUST_FOREIGN_ACCOUNT;
        }
        if (!isempty(p->region) && *n->region && !streq(n->region, p->region)) {
                snprintf(why, why_size, "the %s notice is for region %s, the cluster is in %s",
                         notice_kind_to_string(n->kind), n->region, p->region);
                return TRUST_FOREIGN_REGION;
        }
        return TRUST_OK;
}

const char *trust_verdict_label(enum trust_verdict v)
{
        static const char *const labels[_TRUST_VERDICT_MAX] = {
                [TRUST_OK] = "ok",
                [TRUST_NO_ACCOUNT] = "no-account",
                [TRUST_FOREIGN_ACCOUNT] = "foreign-account",
                [TRUST_FOREIGN_REGION] = "foreign-region",
        };
        return (unsigned)v < _TRUST_VERDICT_MAX ? labels[v] : NULL;
}

bool trust_limiter_allow(struct trust_limiter *l, const char *sender, int reason, uint64_t now_usec)
{
        struct trust_limiter_slot *oldest = &l->slots[0];
        char key[sizeof(oldest->sender)];

        snprintf(key, sizeof(key), "%s", sender ? sender : "");
        for (size_t i = 0; i < TRUST_LIMITER_SLOTS; i++) {
                struct trust_limiter_slot *s = &l->slots[i];
                if (s->last_usec && s->reason == reason && streq(s->sender, key)) {
                        if (now_usec - s->last_usec < TRUST_ALERT_INTERVAL_USEC)
                                return false;
                        s->last_usec = now_usec;
                        return true;
                }
                if (s->last_usec < oldest->last_usec)
                        oldest = s;
        }
        snprintf(oldest->sender, sizeof(oldest->sender), "%s", key);
        oldest->reason = reason;
        oldest->last_usec = now_usec ? now_usec : 1;
        return true;
}
