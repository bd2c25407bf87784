/* The alert sinks every front end wants, set up in one place from the configuration. */
#pragma once

struct alert_bus;
struct kube_client;
struct loop;
struct metrics;
struct spotdrain_config;
struct webhook_sink;

/* Adds to b: the log (journal fields under systemd), Kubernetes Events on the node when kube is given, the
 * Prometheus counters (spotdrain_drains_total, ...) into m when it is given, and the webhook (counting its
 * deliveries into m) when alerts.webhook_url is set. m must outlive the bus and the webhook. The
 * webhook sink is returned in *ret_webhook (NULL when none): it must be freed after the bus, so declare it
 * before the bus. */
int alert_bus_add_standard_sinks(struct alert_bus *b, struct loop *l, struct kube_client *kube,
                                 struct metrics *m, const struct spotdrain_config *cfg,
                                 struct webhook_sink **ret_webhook);
