/* The standard set of alert sinks; see alert_sinks.h. */
#include "spotdrain/alert_sinks.h"

#include <errno.h>

#include "spotdrain/alert.h"
#include "spotdrain/alert_webhook.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/metrics.h"
#include "spotdrain/service.h"

int alert_bus_add_standard_sinks(struct alert_bus *b, struct loop *l, struct kube_client *kube,
                                 struct metrics *m, const struct spotdrain_config *cfg,
                                 struct webhook_sink **ret_webhook)
{
        _cleanup_(webhook_sink_freep) struct webhook_sink *w = NULL;
        struct webhook_options wo;
        _cleanup_free_ char *error = NULL;
        int r;

        r = alert_bus_set_event_annotations(b, cfg->alerts.event_annotations, &error);
        if (r < 0)
                return log_error_errno(r, "%s", error ? error : "alerts.event_annotations: out of memory");
        r = alert_bus_add_log_sink(b);
        if (r >= 0 && kube)
                r = alert_bus_add_kube_event_sink(b, kube);
        if (r >= 0)
                r = metrics_alert_sink_add(b, m);
        if (r < 0)
                return r;

        r = webhook_options_from_config(cfg, &wo, &error);
        if (r == -ENOENT) {
                *ret_webhook = NULL;
                return 0;
        }
        if (r < 0)
                return log_error_reason(r, error, "alert webhook: bad configuration");
        wo.metrics = m;
        r = webhook_sink_new(l, &wo, &w);
        if (r < 0)
                return log_error_errno(r, "alert webhook: cannot set it up");
        r = webhook_sink_attach(w, b);
        if (r < 0)
                return r;
        *ret_webhook = TAKE_PTR(w);
        return 0;
}
