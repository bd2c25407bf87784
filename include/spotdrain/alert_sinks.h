/* The alert sinks every front end wants, set up in one place from the configuration. */
#pragma once

struct alert_bus;
struct kube_client;
struct loop;
struct spotdrain_config;
struct webhook_sink;

/* Adds to b: the log (journal fields under systemd), Kubernetes Events on the node when kube is given, the
 * Prometheus counters (spotdrain_drains_total, ...), and the webhook when alerts.webhook_url is set. The
 * webhook sink is returned in *ret_webhook (NULL when none): it must be freed after the bus, so declare it
 * before the bus. */
int alert_bus_add_standard_sinks(struct alert_bus *b, struct loop *l, struct kube_client *kube,
                                 const struct spotdrain_config *cfg, struct webhook_sink **ret_webhook);
