/* libFuzzer target for the eviction webhook's AdmissionReview handling (src/controller/admission.c): any
 * bytes are a request body. Never a crash, a leak or undefined behaviour; the answer is either a refusal of
 * the body (-EINVAL with a reason) or an AdmissionReview v1 whose response carries the request's uid and a
 * boolean allowed, which is false only for an agent's eviction (an agent user, pods/eviction CREATE) and
 * true for a pod the lookup places on the token's node.
 *   make build/fuzz/fuzz_admission && build/fuzz/fuzz_admission CORPUS fuzz/seeds/fuzz_admission
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spotdrain/admission.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *agents[] = { "system:serviceaccount:spotdrain:agent", NULL };

/* Pods "on-NODE" are bound to NODE, "unbound" to none, "unsynced" makes the list incomplete; any other pod
 * is unknown. */
static int pod_node(void *userdata, const char *ns, const char *name, const char **ret_node)
{
        if (strcmp(name, "unsynced") == 0)
                return -EAGAIN;
        if (strcmp(name, "unbound") == 0) {
                *ret_node = NULL;
                return 1;
        }
        if (strncmp(name, "on-", 3) == 0) {
                *ret_node = name + 3;
                return 1;
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct admission_decision d;
        const char *error = NULL;
        char *json = NULL;
        cJSON *in, *out, *resp, *allowed;
        int r;

        r = admission_review((const char *)data, size, agents, pod_node, NULL, &json, &d, &error);
        if (r == -ENOMEM)
                return 0;
        if (r < 0) {
                if (r != -EINVAL || !error || json)
                        abort();
                return 0;
        }
        in = cJSON_ParseWithLength((const char *)data, size);
        out = cJSON_Parse(json);
        if (!in || !out)
                abort();
        resp = cJSON_GetObjectItemCaseSensitive(out, "response");
        allowed = cJSON_GetObjectItemCaseSensitive(resp, "allowed");
        if (!cJSON_IsBool(allowed) ||
            strcmp(cJSON_GetObjectItemCaseSensitive(resp, "uid")->valuestring,
                   cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(in, "request"), "uid")
                       ->valuestring) != 0)
                abort();
        if (cJSON_IsFalse(allowed) != (d.verdict == ADMISSION_DENIED))
                abort();
        if (d.verdict == ADMISSION_DENIED && d.deny == ADMISSION_DENY_NONE)
                abort();
        if (d.verdict == ADMISSION_ALLOWED && (d.node[0] == '\0' || strcmp(d.node, d.pod_node) != 0))
                abort();
        cJSON_Delete(in);
        cJSON_Delete(out);
        free(json);
        return 0;
}
