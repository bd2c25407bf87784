/* ops: the service manager's side of a long-running front end (agent, controller): readiness, status and
 * the watchdog, through sd_notify. Every function is a no-op (returning 0) when not run by systemd
 * ($NOTIFY_SOCKET unset), so front ends call them unconditionally.
 *
 * The controller unit is Type=notify with WatchdogSec=: the front end calls ops_notify_ready() after its
 * first successful poll, ops_watchdog_start() once its loop exists (the loop then pings WATCHDOG=1 at half
 * the interval systemd asked for, so a wedged loop gets the service restarted), ops_notify_status()
 * whenever the set of current drains changes, and ops_notify_stopping() on SIGTERM. */
#pragma once

#include <stdint.h>

#include "spotdrain/util.h"

struct loop;
struct ops_watchdog;

/* Arms a real-time timer on the loop that sends WATCHDOG=1 every WATCHDOG_USEC / 2. *ret is NULL (and 0
 * returned) when systemd asked for no watchdog for this process. Free before the loop. */
int ops_watchdog_start(struct loop *l, struct ops_watchdog **ret);
struct ops_watchdog *ops_watchdog_free(struct ops_watchdog *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ops_watchdog *, ops_watchdog_free);
/* The interval between pings (usec); 0 for NULL. */
uint64_t ops_watchdog_interval(const struct ops_watchdog *w);

/* READY=1 with a STATUS= line. */
int ops_notify_ready(const char *status);
/* STATUS=... (one line: newlines are replaced by spaces), e.g. "draining 2 nodes: ip-10-0-1-2 (41 s left)".
 */
int ops_notify_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int ops_notify_stopping(void);
