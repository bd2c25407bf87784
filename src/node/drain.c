/* The drain starter (node.h): the one way every mode turns "drain this node for this notice by then" into
 * a drain of the engine, with replacement capacity. */
#include <errno.h>

#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"

int node_drain_start(const struct node_drainer *d, const char *node, const struct notice *n,
                     uint64_t deadline_usec,
                     void (*done)(struct drain_exec *x, const struct drain_exec_result *r, void *userdata),
                     void *userdata, struct drain_exec **ret)
{
        struct drain_exec_options o = {};
        int r;

        if (!d || !d->kube || !node || !n || !ret)
                return -EINVAL;
        /* An interruption no rebalance recommendation announced, or a scheduled change: capacity is asked
         * for with the drain. */
        if (d->prov && (r = prov_frontend_request(d->prov, node, n)) < 0)
                log_warning_errno(r, "cannot request replacement capacity for %s", node);
        if (d->cfg)
                drain_exec_options_from_config(d->cfg, &o);
        o.node = node;
        o.kind = notice_kind_to_string(n->kind);
        o.instance_id = n->instance_id;
        o.event_id = n->event_id;
        o.notice_usec = n->notice_time;
        o.deadline_usec = deadline_usec;
        o.self_namespace = d->self_namespace;
        o.self_name = d->self_name;
        o.metrics = d->metrics;
        o.estimates = d->estimates;
        o.follow_peers = d->follow_peers;
        o.elbv2 = d->elbv2;
        if (d->shared_ledger) {
                if (!*d->shared_ledger &&
                    (r = drain_ledger_new(d->kube, o.retry_floor_usec, d->shared_ledger)) < 0)
                        log_debug_errno(r, "no shared drain ledger: each drain keeps its own");
                if (d->shared_estimates)
                        drain_ledger_use_shutdowns(*d->shared_ledger,
                                                   drain_estimates_store(d->shared_estimates));
                o.ledger = *d->shared_ledger;
        }
        return drain_exec_start(d->kube, d->bus, &o, done, userdata, ret);
}
