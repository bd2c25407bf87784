/* events.k8s.io/v1 Events are served from the core/v1 store: the field names differ. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- events.k8s.io/v1 <-> core/v1 Event ---- */

static const char *const event_renames[][2] = {
        { "message", "note" },
        { "involvedObject", "regarding" },
        { "related", "related" },
        { "count", "deprecatedCount" },
        { "firstTimestamp", "deprecatedFirstTimestamp" },
        { "lastTimestamp", "deprecatedLastTimestamp" },
        { "source", "deprecatedSource" },
};

void sim_event_convert(cJSON *ev, bool to_events_v1)
{
        for (size_t i = 0; i < ARRAY_SIZE(event_renames); i++) {
                const char *from = event_renames[i][to_events_v1 ? 0 : 1];
                const char *to = event_renames[i][to_events_v1 ? 1 : 0];
                cJSON *v;
                if (streq(from, to))
                        continue;
                v = cJSON_DetachItemFromObjectCaseSensitive(ev, from);
                if (v) {
                        cJSON_DeleteItemFromObjectCaseSensitive(ev, to);
                        cJSON_AddItemToObject(ev, to, v);
                }
        }
        cJSON_DeleteItemFromObjectCaseSensitive(ev, "apiVersion");
        cJSON_AddStringToObject(ev, "apiVersion", to_events_v1 ? "events.k8s.io/v1" : "v1");
}
