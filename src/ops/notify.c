/* sd_notify helpers: readiness, status, and the watchdog driven from the event loop. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "spotdrain/core.h"
#include "spotdrain/ops.h"

struct ops_watchdog {
        sd_event *event; /* a reference: the loop whose watchdog is on */
        uint64_t period_usec;
};

/* sd-event's own watchdog: the loop pings WATCHDOG=1 as part of its iterations (at once, then whenever half
 * to three quarters of the period have passed), so a loop stuck in a callback stops pinging and systemd
 * restarts the service. sd_event_set_watchdog() reads WATCHDOG_USEC and WATCHDOG_PID itself: a child that
 * inherited the environment does not ping for its parent. */
int ops_watchdog_start(struct loop *l, struct ops_watchdog **ret)
{
        struct ops_watchdog *w;
        uint64_t usec = 0;
        int r;

        r = sd_watchdog_enabled(false, &usec);
        if (r < 0)
                return r;
        if (r == 0 || usec == 0) {
                *ret = NULL;
                return 0;
        }
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        r = sd_event_set_watchdog(loop_event(l), true);
        if (r <= 0) {
                free(w);
                return r < 0 ? r : -EIO; /* the environment said yes a moment ago */
        }
        w->event = sd_event_ref(loop_event(l));
        w->period_usec = usec;
        *ret = w;
        return 0;
}

struct ops_watchdog *ops_watchdog_free(struct ops_watchdog *w)
{
        if (!w)
                return NULL;
        (void)sd_event_set_watchdog(w->event, false);
        sd_event_unref(w->event);
        free(w);
        return NULL;
}

uint64_t ops_watchdog_period(const struct ops_watchdog *w)
{
        return w ? w->period_usec : 0;
}

int ops_notify_ready(const char *status)
{
        int r = status ? sd_notifyf(false, "READY=1\nSTATUS=%s", status) : sd_notify(false, "READY=1");
        return r < 0 ? r : 0;
}

int ops_notify_status(const char *fmt, ...)
{
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0) {
                s = NULL;
                return -ENOMEM;
        }
        /* A newline would start another assignment in the notification. */
        for (char *p = s; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        r = sd_notifyf(false, "STATUS=%s", s);
        return r < 0 ? r : 0;
}

int ops_notify_stopping(void)
{
        int r = sd_notify(false, "STOPPING=1");
        return r < 0 ? r : 0;
}
