/* The scenario's faults on the Kubernetes API: which request meets which fault. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- faults ---- */

uint64_t sim_fault_mix(uint64_t x)
{
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

/* Keys the request being dispatched (under the model lock, which the whole dispatch holds). */
void sim_fault_begin(struct sim_server *srv, const char *method, const char *url, bool watch)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = method; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ ' ') * 1099511628211ULL;
        for (const char *p = url; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        h = (h ^ (watch ? 'w' : 'r')) * 1099511628211ULL;
        srv->req_key = h;
        srv->req_n = srv->req_count[h % ARRAY_SIZE(srv->req_count)]++;
}

/* Uniform in [0, 1) for this request and fault. */
double sim_fault_uniform(const struct sim_server *srv, enum fault_salt salt)
{
        uint64_t x =
            sim_fault_mix(srv->rng ^ sim_fault_mix(srv->req_key + sim_fault_mix(srv->req_n * 64 + salt)));
        return (double)(x >> 11) / (double)(1ULL << 53);
}

/* Whether a fault of this rate hits the request being dispatched. */
bool sim_fault_draw(const struct sim_server *srv, double rate, enum fault_salt salt)
{
        return rate > 0 && sim_fault_uniform(srv, salt) < rate;
}

/* A 429 as kube-apiserver's max-in-flight filter sends it: Retry-After tells the client when to come back.
 */
enum MHD_Result sim_reply_throttled(struct MHD_Connection *c)
{
        cJSON *st =
            sim_status_new(429, "TooManyRequests", "Too many requests, please try again later.", NULL, NULL);
        char *text = st ? cJSON_PrintUnformatted(st) : NULL;

        cJSON_Delete(st);
        return sim_reply_text_retry(c, 429, "application/json", text, "1");
}
