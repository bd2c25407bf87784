/* libFuzzer target for the notice normalizer (src/aws/notice.c): every byte string must give either notices
 * that format cleanly or an error with a reason, without a crash, a leak or undefined behaviour.
 *
 * Build and run from the repository root, the fixtures as seed corpus (new inputs go to the first folder):
 *   clang -g -O1 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -fsanitize=fuzzer,address,undefined \
 *         fuzz/fuzz_notice.c src/aws/notice.c src/aws/sns.c src/core/util.c src/core/clock.c \
 *         $(pkg-config --cflags --libs libcjson) -lcrypto -lm -o build/fuzz_notice
 *   mkdir -p build/fuzz-corpus
 *   build/fuzz_notice -max_total_time=300 -max_len=8192 build/fuzz-corpus \
 *         ../shared/fixtures/eventbridge ../shared/fixtures/imds ../shared/fixtures/sqs
 *
 * Each input is also read as an SNS envelope (src/aws/sns.c). Each input is parsed as a queue body (detected
 * form, with and without an instance and region) and as each IMDS document, so the seeds need no option
 * bytes and every path sees every input.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/notice.h"
#include "spotdrain/sns.h"
#include "spotdrain/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const uint8_t *data, size_t size, const struct notice_parse_opts *opts)
{
        struct notice *v = NULL;
        size_t n = 0;
        char reason[256];
        int r = notice_parse(data, size, opts, &v, &n, reason, sizeof(reason));
        /* An error always explains itself and hands nothing back. */
        if (r < 0) {
                if (!reason[0] || v)
                        abort();
                return;
        }
        if ((n == 0) != (v == NULL))
                abort();
        for (size_t i = 0; i < n; i++) {
                /* A notice names a valid instance; only an IMDS document parsed without the caller's
                 * instance ID (event parse without --instance-id) leaves it out. */
                if (v[i].kind != NOTICE_ASG_TEST_NOTIFICATION &&
                    (v[i].instance_id[0] ? !notice_instance_id_valid(v[i].instance_id)
                                      : opts->instance_id || !streq(v[i].source, "imds")))
                        abort();
                /* The JSON line must be JSON, and name the kind. */
                char *s = NULL;
                if (notice_format_json(&v[i], &s) == 0) {
                        cJSON *back = cJSON_Parse(s);
                        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(back, "kind");
                        if (!cJSON_IsString(kind) ||
                            !streq(kind->valuestring, notice_kind_to_string(v[i].kind)))
                                abort();
                        cJSON_Delete(back);
                        free(s);
                }
                s = NULL;
                if (notice_format_human(&v[i], &s) == 0)
                        free(s);
        }
        free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static const char *const paths[] = {
                "spot/instance-action",
                "spot/termination-time",
                "events/recommendations/rebalance",
                "events/maintenance/scheduled",
                "events/maintenance/history",
                "autoscaling/target-lifecycle-state",
        };
        struct notice_parse_opts opts = { .now_usec = 1715682115000000ULL };
        one(data, size, &opts);
        opts.instance_id = "i-0abcd1234ef567890";
        opts.region = "us-east-1";
        opts.asg_deadline_usec = UINT64_MAX - 1; /* saturates instead of wrapping */
        one(data, size, &opts);
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
                opts.imds_path = paths[i];
                one(data, size, &opts);
        }

        /* The SNS envelope reader that controller.verify_sns_signature puts in front of the parser: either
         * every field a signature needs, or an answer why not (or that it is no SNS body). */
        struct sns_envelope e;
        char why[256] = "";
        int r = sns_envelope_parse((const char *)data, size, &e, why, sizeof(why));
        if (r == 0) {
                char *text = sns_canonical(&e);
                if (!text || !e.signature || !e.signing_cert_url)
                        abort();
                (void)sns_cert_url_allowed(e.signing_cert_url, "https://sns.us-east-1.amazonaws.com");
                free(text);
                sns_envelope_clear(&e);
        } else if (r != -ENOENT && r != -ENOMEM && !why[0])
                abort();

        /* The time parser on its own, on a NUL-terminated copy. */
        if (size < 128) {
                char buf[128];
                memcpy(buf, data, size);
                buf[size] = 0;
                uint64_t u;
                (void)notice_parse_time(buf, &u);
        }
        return 0;
}
