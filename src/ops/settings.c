/* The operations endpoint's configuration key (metrics_listen). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/httpd.h"

#define OFF(f) offsetof(struct ops_settings, f)

static const struct config_item ops_items[] = {
        { "metrics_listen", CONFIG_STRING, "0.0.0.0:9464", OFF(metrics_listen),
          "HOST:PORT serving /metrics, /healthz and /readyz", NULL, 0, CONFIG_NO_RANGE, false },
};

const struct config_section ops_config_section = { "ops", ops_items, ARRAY_SIZE(ops_items) };
