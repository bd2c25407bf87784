/* At most one log line per (reason, sender) a minute; see quiet.h. */
#include <stdio.h>
#include <string.h>

#include "controller/quiet.h"
#include "spotdrain/util.h"

bool quiet_allow(struct quiet *q, const char *reason, const char *sender, uint64_t now_usec)
{
        struct quiet_slot *oldest = &q->slots[0];
        char r[sizeof(oldest->reason)], s[sizeof(oldest->sender)];

        snprintf(r, sizeof(r), "%s", reason ? reason : "");
        snprintf(s, sizeof(s), "%s", sender ? sender : "");
        for (size_t i = 0; i < QUIET_SLOTS; i++) {
                struct quiet_slot *x = &q->slots[i];
                if (x->since && streq(x->reason, r) && streq(x->sender, s)) {
                        if (now_usec - x->since < QUIET_INTERVAL_USEC) {
                                x->held++;
                                return false;
                        }
                        /* A minute ended with lines held back is told by quiet_flush() first. */
                        if (x->held > 0) {
                                x->held++;
                                return false;
                        }
                        x->since = now_usec ? now_usec : 1;
                        return true;
                }
                if (x->since < oldest->since)
                        oldest = x;
        }
        *oldest = (struct quiet_slot){ .since = now_usec ? now_usec : 1 };
        memcpy(oldest->reason, r, sizeof(r));
        memcpy(oldest->sender, s, sizeof(s));
        return true;
}

uint64_t quiet_flush(struct quiet *q, uint64_t now_usec, bool all, quiet_fn fn, void *userdata)
{
        uint64_t next = 0;

        for (size_t i = 0; i < QUIET_SLOTS; i++) {
                struct quiet_slot *x = &q->slots[i];
                if (!x->since || x->held == 0)
                        continue;
                if (all || now_usec - x->since >= QUIET_INTERVAL_USEC) {
                        fn(x->reason, x->sender, x->held, userdata);
                        x->held = 0;
                        x->since = now_usec ? now_usec : 1;
                        continue;
                }
                if (!next || x->since + QUIET_INTERVAL_USEC < next)
                        next = x->since + QUIET_INTERVAL_USEC;
        }
        return next;
}
