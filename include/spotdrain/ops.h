/* ops: the service manager's side of a long-running front end (agent, controller): readiness, status and
 * the watchdog, through sd_notify. Every function is a no-op (returning 0) when not run by systemd
 * ($NOTIFY_SOCKET unset), so front ends call them unconditionally.
 *
 * Both units are Type=notify with WatchdogSec=: the front end calls ops_notify_ready() after its first
 * successful poll, ops_watchdog_start() once its loop exists (the loop then pings WATCHDOG=1 well within
 * the period systemd asked for, so a wedged loop gets the service restarted), ops_notify_status()
 * whenever the set of current drains changes, and ops_notify_stopping() on SIGTERM. */
#pragma once

#include <stdint.h>

#include "spotdrain/util.h"

struct loop;
struct ops_watchdog;

/* Turns on sd-event's watchdog for the loop (sd_event_set_watchdog()): the loop itself sends WATCHDOG=1 at
 * once and then whenever half to three quarters of WATCHDOG_USEC have passed. *ret is NULL (and 0 returned)
 * when systemd asked for no watchdog for this process. Free (which turns it off) before the loop. */
int ops_watchdog_start(struct loop *l, struct ops_watchdog **ret);
struct ops_watchdog *ops_watchdog_free(struct ops_watchdog *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ops_watchdog *, ops_watchdog_free);
/* The period systemd asked for (WATCHDOG_USEC); 0 for NULL. */
uint64_t ops_watchdog_period(const struct ops_watchdog *w);

/* READY=1 with a STATUS= line. */
int ops_notify_ready(const char *status);
/* STATUS=... (one line: newlines are replaced by spaces), e.g. "draining 2 nodes: ip-10-0-1-2 (41 s left)".
 */
int ops_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ops_notify_stopping(void);
