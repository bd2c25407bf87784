/* libFuzzer target for the simulator API server's request decoders (src/sim/server.c): label and field
 * selectors, continue tokens, and protobuf DeleteOptions bodies, on arbitrary bytes.
 *
 * The whole input is the protobuf body; its NUL-terminated copy is the selector and the continue token,
 * matched against a fixed pod (labels and fields a real selector would name).
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_sim_selectors/)
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char POD[] =
    "{\"metadata\":{\"name\":\"web-0\",\"namespace\":\"default\",\"labels\":{\"app\":\"web\","
    "\"tier\":\"front\",\"app.kubernetes.io/name\":\"web\",\"empty\":\"\"}},"
    "\"spec\":{\"nodeName\":\"n1\",\"schedulerName\":\"default-scheduler\"},"
    "\"status\":{\"phase\":\"Running\"}}";

static cJSON *pod;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!pod) {
                pod = cJSON_Parse(POD); /* kept for the process's life: built once */
                if (!pod)
                        abort();
        }
        int64_t grace = 0;
        char *uid = NULL;
        if (sim_protobuf_delete_options(data, size, &grace, &uid) == 0)
                free(uid);

        char *s = strndup((const char *)data, size);
        if (!s)
                return 0;
        const cJSON *labels =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(pod, "metadata"), "labels");
        int r = sim_label_selector_match(s, labels);
        if (r != 0 && r != 1 && r != -EINVAL)
                abort();
        (void)sim_label_selector_match(s, NULL);
        r = sim_field_selector_match(s, pod);
        if (r != 0 && r != 1 && r != -EINVAL)
                abort();

        uint64_t rv;
        size_t offset;
        if (sim_continue_decode(s, &rv, &offset) == 0) {
                /* A decoded token encodes back to one that decodes to the same place. */
                char *again = sim_continue_encode(rv, offset);
                uint64_t rv2;
                size_t off2;
                if (!again || sim_continue_decode(again, &rv2, &off2) != 0 || rv2 != rv || off2 != offset)
                        abort();
                free(again);
        }
        free(s);
        return 0;
}
