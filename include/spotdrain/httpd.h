/* httpd: the operations endpoint (libmicrohttpd, its own thread) on --metrics-listen:
 *   GET /metrics  the metrics registry given to httpd_start() (metrics.h), text/plain; version=0.0.4
 *   GET /healthz  200 while the process is alive and, when a loop is watched, the loop is turning
 *   GET /readyz   200 when every readiness check passes, else 503 listing the failing ones
 * Checks are registered by the front ends: "leader or standby known", "queue readable", "within the recent
 * error budget", ... They are called from the HTTP thread, with the server's lock held (so never two at
 * once), and must only read state that is safe to read from another thread; httpd_set_ready() is the easy
 * way for loop code to publish a condition. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "spotdrain/util.h"

/* The operations endpoint's configuration (metrics_listen). Its keys: ops_config_section (its settings.c).
 */
struct ops_settings {
        char *metrics_listen;
};
struct config_section;
extern const struct config_section ops_config_section;

struct loop;
struct httpd;
struct metrics;

/* "HOST:PORT" ("0.0.0.0:9464", "[::]:9464", ":9464" = any address; port 0 picks one). An IPv6 HOST is in
 * brackets; an IPv4 one may be ("[10.0.1.2]:9464"), so that "[$(HOST_IP)]:PORT" serves on a node's own
 * address of either family. "off" or "" serve
 * nothing: *ret is set to NULL and 0 returned, and every other function accepts the NULL server. -EINVAL
 * for a malformed address, -EADDRINUSE when it cannot be bound. /metrics renders m (borrowed: it must
 * outlive the server; NULL serves an empty exposition). */
#define HTTPD_DEFAULT_LISTEN "0.0.0.0:9464"
/* The address of such a HOST:PORT (numeric hosts only), for another server of the same rules (the
 * controller's admission webhook): 0 or -EINVAL. */
int httpd_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);
/* libmicrohttpd's own messages (a refused connection, a failed bind) as debug lines of the project's log,
 * after the server's name (cls, a static string): its MHD_OPTION_EXTERNAL_LOGGER. */
void httpd_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Queues body (malloc()ed, len bytes; taken even on failure) as the answer to c with status, Content-Type
 * type and headers (name, value pairs, NULL-terminated; NULL: none); libmicrohttpd sends it, leaves it out
 * for HEAD, and frees it. Returns MHD_YES, or MHD_NO (out of memory: libmicrohttpd closes the connection),
 * as an access handler does. For every libmicrohttpd server of the product (this one, the controller's
 * admission webhook). */
struct MHD_Connection;
int httpd_reply(struct MHD_Connection *c, unsigned status, const char *type, char *body, size_t len,
                const char *const *headers);
int httpd_start(const char *listen, struct metrics *m, struct httpd **ret);
/* Stops the server thread and releases the loop watch; call on the loop's thread before loop_free().
 * NULL-safe; returns NULL. */
struct httpd *httpd_free(struct httpd *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct httpd *, httpd_free);
/* The bound port (useful with port 0); 0 for the NULL server. */
uint16_t httpd_port(const struct httpd *h);

/* A readiness check: true when ready; otherwise may set *ret_reason to a static string shown in /readyz. */
typedef bool (*httpd_check_fn)(void *userdata, const char **ret_reason);
/* Adds a named check to /readyz (-EEXIST when the name is taken). Checks run in the order added. */
int httpd_add_ready_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata);
/* The same for /healthz (beside the loop watch): e.g. "IMDS answered within 30 s". */
int httpd_add_health_check(struct httpd *h, const char *name, httpd_check_fn fn, void *userdata);
/* Publishes a named readiness condition from any thread (added on first use, initially as given). reason
 * is copied; NULL when ready. */
int httpd_set_ready(struct httpd *h, const char *name, bool ready, const char *reason);

/* /healthz fails when the loop has not run a heartbeat timer for stall_usec of real time (0 = 30 s): a loop
 * stuck in a callback is not healthy even though the HTTP thread still answers. Arms a real-time timer on
 * the loop's sd-event; released by httpd_free(). */
int httpd_watch_loop(struct httpd *h, struct loop *l, uint64_t stall_usec);

/* ---- a recent error budget, for a readiness or health check ----
 * Counts outcomes in a sliding window of real time; within the budget while failures make up at most
 * max_failure_ratio of the outcomes in the window (or fewer than min_failures failed). Thread-safe. */
struct error_budget;
int error_budget_new(uint64_t window_usec, double max_failure_ratio, unsigned min_failures,
                     struct error_budget **ret);
struct error_budget *error_budget_free(struct error_budget *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct error_budget *, error_budget_free);
void error_budget_record(struct error_budget *e, bool ok);
/* At a given monotonic time (usec), for tests; error_budget_record() uses now_monotonic_usec(). */
void error_budget_record_at(struct error_budget *e, bool ok, uint64_t now_usec);
bool error_budget_ok_at(struct error_budget *e, uint64_t now_usec);
/* An httpd_check_fn over an error_budget (userdata). */
bool error_budget_check(void *userdata, const char **ret_reason);
