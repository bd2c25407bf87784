/* The Kubernetes client's configuration keys (kubeconfig, kube.*). Listed with
 * every other module's in src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/kube.h"

#define OFF(f) offsetof(struct kube_settings, f)

static const struct config_item kube_items[] = {
        { "kubeconfig", CONFIG_STRING, NULL, OFF(kubeconfig),
          "kubeconfig file (unset: $KUBECONFIG, ~/.kube/config, else the in-cluster service account)", NULL,
          0, CONFIG_NO_RANGE, false },
        { "kube.context", CONFIG_STRING, NULL, OFF(context), "kubeconfig context (unset: current-context)",
          NULL, 0, CONFIG_NO_RANGE, false },
        { "kube.qps", CONFIG_DOUBLE, "200", OFF(qps),
          "Kubernetes API requests per second, sustained: the cap (the client slows down on its own when "
          "the API server throttles it)",
          NULL, 0, .min = 0.1, .max = 100000, false },
        { "kube.burst", CONFIG_INT, "300", OFF(burst), "Kubernetes API requests allowed in a burst", NULL, 0,
          .min = 1, .max = 100000, false },
};

const struct config_section kube_config_section = { "kube", kube_items, ARRAY_SIZE(kube_items) };
