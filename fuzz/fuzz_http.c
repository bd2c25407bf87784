/* libFuzzer target for the HTTP/1.1 client's answer parser (src/core/http.c: status line, header block,
 * interim answers, Content-Length, chunked coding with extensions and trailers, read-until-close): every byte
 * string is an answer that is complete, incomplete or an error, never a crash, a leak or undefined
 * behaviour. And it is the same answer however the network cuts it: each input is fed in one piece and again
 * cut at points derived from its bytes (one byte at a time when short), buffered and streamed, and the
 * outcome, status and decoded body must agree.
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_http/)
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <stdlib.h>

#include "core/http_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CUTS  512
#define MAX_BODY  4096 /* small, so that -EFBIG is reached too */
#define BYTEWISE  1024 /* inputs up to this are also fed a byte at a time */

/* The same outcome and status; the same body unless it failed (then what came before the failure depends
 * on where the pieces ended). */
static void same(int r0, const struct http_fuzz_result *a, int r1, const struct http_fuzz_result *b)
{
        if (r0 != r1 || a->status != b->status)
                abort();
        if (r0 >= 0 && (a->body != b->body || a->sum != b->sum))
                abort();
}

static void check(const char *p, size_t n, const size_t *cuts, size_t n_cuts, bool head)
{
        struct http_fuzz_result whole, cut, streamed;
        int r = http_fuzz_feed(p, n, NULL, 0, head, false, MAX_BODY, &whole);
        if (r > 1)
                abort();
        /* Complete answers have a status line's three digits; buffered bodies stay within the limit. */
        if (r == 1 && (whole.status < 100 || whole.status > 999))
                abort();
        if (whole.body > MAX_BODY || (head && r == 1 && whole.body != 0))
                abort();
        same(r, &whole, http_fuzz_feed(p, n, cuts, n_cuts, head, false, MAX_BODY, &cut), &cut);
        /* Streamed, a 2xx body has no limit: compare the answers that did not hit it. */
        int rs = http_fuzz_feed(p, n, cuts, n_cuts, head, true, MAX_BODY, &streamed);
        if (r != -EFBIG && rs != -EFBIG)
                same(r, &whole, rs, &streamed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *p = (const char *)data;
        size_t cuts[MAX_CUTS], n_cuts = 0;

        /* Cut points from the bytes themselves: steps of 1 to 16. */
        for (size_t off = 0; n_cuts < MAX_CUTS && off < size;) {
                off += 1 + data[off] % 16;
                if (off < size)
                        cuts[n_cuts++] = off;
        }
        for (int head = 0; head <= 1; head++) {
                check(p, size, cuts, n_cuts, head);
                if (size <= BYTEWISE) {
                        size_t each[BYTEWISE];
                        for (size_t i = 1; i < size; i++)
                                each[i - 1] = i;
                        struct http_fuzz_result a, b;
                        int r0 = http_fuzz_feed(p, size, NULL, 0, head, false, MAX_BODY, &a);
                        int r1 = http_fuzz_feed(p, size, each, size ? size - 1 : 0, head, false, MAX_BODY, &b);
                        same(r0, &a, r1, &b);
                }
        }
        return 0;
}
