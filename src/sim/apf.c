/* The API server's priority and fairness, as the simulator plays it: each client (its Authorization, the
 * user APF's flows are distinguished by) has a token bucket of the scenario's api_priority_fairness.qps and
 * burst, in real seconds; a resource request that finds its bucket empty is turned away before it runs,
 * exactly as kube-apiserver's filter does (filters/priority-and-fairness.go): 429, Retry-After, the
 * X-Kubernetes-PF-* headers naming the flow schema and priority level by UID, and a plain-text body. */
#include <microhttpd.h>
#include <stdio.h>
#include <string.h>

#include "sim/server_internal.h"
#include "spotdrain/util.h"

#define APF_BODY "Too many requests, please try again later.\n"
/* kube-apiserver's suggested default FlowSchema "global-default" and its priority level of that name. */
#define APF_FLOW_SCHEMA_UID    "6c1b1a4e-4a0f-4c4b-9e52-3f0a6b3c2d01"
#define APF_PRIORITY_LEVEL_UID "6c1b1a4e-4a0f-4c4b-9e52-3f0a6b3c2d02"

static uint64_t flow_hash(const char *user)
{
        uint64_t h = 1469598103934665603ULL;
        for (const char *p = user ? user : ""; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ULL;
        return h | 1; /* 0 marks a free slot */
}

/* The flow of this user: its slot, or a free one, or (a table full of other users) the least recently
 * seen one, taken over with a full bucket. */
static struct sim_apf_flow *flow_of(struct sim_server *srv, uint64_t h, uint64_t now)
{
        struct sim_apf_flow *oldest = &srv->apf_flows[0];
        for (size_t i = 0; i < ARRAY_SIZE(srv->apf_flows); i++) {
                struct sim_apf_flow *f = &srv->apf_flows[i];
                if (f->hash == h)
                        return f;
                if (f->hash == 0 || f->seen < oldest->seen)
                        oldest = f;
                if (f->hash == 0)
                        break;
        }
        *oldest = (struct sim_apf_flow){ .hash = h, .tokens = srv->apf_burst, .refilled = now };
        return oldest;
}

bool sim_apf_admit(struct sim_server *srv, struct MHD_Connection *c)
{
        if (srv->apf_qps <= 0)
                return true;
        uint64_t now = now_monotonic_usec();
        struct sim_apf_flow *f =
            flow_of(srv, flow_hash(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization")), now);
        f->seen = now;
        f->tokens += (double)(now - f->refilled) * srv->apf_qps / 1e6;
        if (f->tokens > srv->apf_burst)
                f->tokens = srv->apf_burst;
        f->refilled = now;
        if (f->tokens < 1) {
                srv->n_apf_rejected++;
                return false;
        }
        f->tokens -= 1;
        return true;
}

enum MHD_Result sim_reply_apf_rejected(const struct sim_server *srv, struct MHD_Connection *c)
{
        char retry[16];
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(strlen(APF_BODY), (void *)APF_BODY, MHD_RESPMEM_PERSISTENT);
        if (!resp)
                return MHD_NO;
        snprintf(retry, sizeof(retry), "%u", srv->apf_retry_after);
        MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(resp, "Retry-After", retry);
        MHD_add_response_header(resp, "X-Kubernetes-PF-FlowSchema-UID", APF_FLOW_SCHEMA_UID);
        MHD_add_response_header(resp, "X-Kubernetes-PF-PriorityLevel-UID", APF_PRIORITY_LEVEL_UID);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, resp);
        MHD_destroy_response(resp);
        return ret;
}
