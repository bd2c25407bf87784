/* The alerts' configuration keys (alerts.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/alert_webhook.h"
#include "spotdrain/config.h"

static const struct config_enum_value webhook_formats[] = {
        { "slack", WEBHOOK_FORMAT_SLACK },
        { "json", WEBHOOK_FORMAT_JSON },
        { NULL, 0 },
};

#define OFF(f) offsetof(struct alerts_settings, f)

static const struct config_item alerts_items[] = {
        { "alerts.webhook_url", CONFIG_STRING, NULL, OFF(webhook_url),
          "URL alerts are POSTed to (\"file:PATH\" reads it from a file; it often embeds a secret: "
          "check-config hides it)",
          NULL, 0, CONFIG_NO_RANGE, true },
        { "alerts.webhook_format", CONFIG_ENUM, "slack", OFF(webhook_format),
          "slack: {\"text\": ...}; json: every alert field", webhook_formats, 0, CONFIG_NO_RANGE, false },
        { "alerts.webhook_template", CONFIG_STRING, NULL, OFF(webhook_template),
          "message template ({{kind}}, {{node}}, {{message}}, ... see docs/operations.md)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "alerts.webhook_headers_file", CONFIG_STRING, NULL, OFF(webhook_headers_file),
          "file of \"Name: value\" header lines sent with every alert (e.g. Authorization)", NULL, 0,
          CONFIG_NO_RANGE, false },
        { "alerts.webhook_timeout_seconds", CONFIG_DURATION, "10", OFF(webhook_timeout_usec),
          "time allowed for one delivery attempt", NULL, CONFIG_SECONDS, .min = 0.001, .max = 3600, false },
        { "alerts.webhook_max_attempts", CONFIG_INT, "5", OFF(webhook_max_attempts),
          "delivery attempts of one alert before giving up", NULL, 0, .min = 1, .max = 100, false },
        { "alerts.webhook_flush_seconds", CONFIG_DURATION, "5", OFF(webhook_flush_usec),
          "on exit (drain done, SIGTERM), how long to wait for alerts still being delivered to the webhook",
          NULL, CONFIG_SECONDS, .min = 0, .max = 300, false },
        { "alerts.webhook_proxy", CONFIG_STRING, NULL, OFF(webhook_proxy),
          "proxy for the webhook alone (http://HOST:PORT, credentials allowed: check-config hides it), "
          "instead of HTTPS_PROXY/NO_PROXY",
          NULL, 0, CONFIG_NO_RANGE, true },
        { "alerts.event_annotations", CONFIG_STRING, NULL, OFF(event_annotations),
          "extra annotations on every Kubernetes Event, \"key=value,key=value\" (as NTH's "
          "kubernetesEventsExtraAnnotations)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "alerts.log_tail_lines", CONFIG_INT, "20", OFF(log_tail_lines),
          "post-mortem of a pod deleted at its last safe moment, or of a Job's or bare pod stopped: the "
          "last "
          "lines of each container's log kept with its alert (0: statuses only)",
          NULL, 0, .min = 0, .max = 1000, false },
        { "alerts.postmortem_dir", CONFIG_STRING, NULL, OFF(postmortem_dir),
          "directory the post-mortems are written to, one file per pod (docs/operations.md); unset: none",
          NULL, 0, CONFIG_NO_RANGE, false },
};

const struct config_section alerts_config_section = { "alerts", alerts_items, ARRAY_SIZE(alerts_items) };
