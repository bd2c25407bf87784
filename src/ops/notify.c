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
        sd_event_source *timer;
        uint64_t interval_usec;
};

static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata)
{
        struct ops_watchdog *w = userdata;
        int r;

        r = sd_notify(false, "WATCHDOG=1");
        if (r < 0)
                log_debug_errno(r, "cannot ping the service manager's watchdog");
        if (sd_event_source_set_time_relative(s, w->interval_usec) >= 0)
                (void)sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

int ops_watchdog_start(struct loop *l, struct ops_watchdog **ret)
{
        struct ops_watchdog *w;
        uint64_t usec = 0;
        int r;

        /* Checks WATCHDOG_PID too: a child that inherited the environment must not ping for its parent. */
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
        w->interval_usec = usec / 2;
        r = sd_event_add_time_relative(loop_event(l), &w->timer, CLOCK_MONOTONIC, 0, w->interval_usec / 10,
                                       on_watchdog, w);
        if (r < 0) {
                free(w);
                return r;
        }
        (void)sd_event_source_set_description(w->timer, "watchdog");
        *ret = w;
        return 0;
}

struct ops_watchdog *ops_watchdog_free(struct ops_watchdog *w)
{
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->timer);
        free(w);
        return NULL;
}

uint64_t ops_watchdog_interval(const struct ops_watchdog *w)
{
        return w ? w->interval_usec : 0;
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
