/* Starts and stops the simulator's surfaces together; see surfaces.h. */
#include "sim/surfaces.h"

#include <stdio.h>

#include "sim/ec2_surface.h"
#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"

struct sim_surfaces {
        struct sim *sim;
        struct sim_server *k8s;
        struct sim_imds *imds;
        struct sim_sqs *sqs;
        struct sim_sts *sts;
        struct sim_ec2 *ec2;
};

struct sim_surfaces *sim_surfaces_stop(struct sim_surfaces *x)
{
        if (!x)
                return NULL;
        /* The AWS surfaces first: they may be waiting in long polls that the model wakes. */
        sim_sqs_stop(x->sqs);
        sim_ec2_stop(x->ec2);
        sim_sts_stop(x->sts);
        sim_imds_stop(x->imds);
        sim_server_stop(x->k8s);
        free(x);
        return NULL;
}

/* The host part of "HOST:PORT" or "[V6]:PORT"; the other listeners bind the same address. */
static char *listen_host(const char *listen)
{
        if (!listen)
                return strdup("127.0.0.1");
        if (listen[0] == '[') {
                const char *end = strchr(listen, ']');
                return end ? strndup(listen + 1, (size_t)(end - listen - 1)) : NULL;
        }
        const char *colon = strrchr(listen, ':');
        return colon ? strndup(listen, (size_t)(colon - listen)) : strdup(listen);
}

int sim_surfaces_start(struct sim *s, const struct sim_server_options *kopt, struct sim_surfaces **ret)
{
        _cleanup_free_ char *host = listen_host(kopt ? kopt->listen : NULL);
        struct sim_surfaces *x;
        int r;

        if (!host)
                return -ENOMEM;
        x = calloc(1, sizeof(*x));
        if (!x)
                return -ENOMEM;
        x->sim = s;
        r = kopt ? sim_server_start_with(s, kopt, &x->k8s) : sim_server_start(s, NULL, &x->k8s);
        if (r < 0)
                goto fail;
        r = sim_imds_start(s, host, &x->imds);
        if (r < 0) {
                log_debug_errno(r, "simulator: cannot start the IMDS surface");
                goto fail;
        }
        r = sim_sts_start(s, host, &x->sts);
        if (r < 0) {
                log_debug_errno(r, "simulator: cannot start the STS surface");
                goto fail;
        }
        r = sim_sqs_start(s, host, &x->sqs);
        if (r < 0) {
                log_debug_errno(r, "simulator: cannot start the SQS surface");
                goto fail;
        }
        r = sim_ec2_start(s, host, &x->ec2);
        if (r < 0) {
                log_debug_errno(r, "simulator: cannot start the EC2 surface");
                goto fail;
        }
        /* SQS and EC2 accept the credentials STS hands out (and the scenario's fixed key pair). */
        sim_sqs_use_sts(x->sqs, x->sts);
        sim_ec2_use_sts(x->ec2, x->sts);
        *ret = x;
        return 0;
fail:
        sim_surfaces_stop(x);
        return r;
}

const char *sim_surfaces_kubernetes_url(const struct sim_surfaces *x)
{
        return sim_server_url(x->k8s);
}

struct sim_server *sim_surfaces_kubernetes(const struct sim_surfaces *x)
{
        return x->k8s;
}

struct sim_imds *sim_surfaces_imds(const struct sim_surfaces *x)
{
        return x->imds;
}

struct sim_sqs *sim_surfaces_sqs(const struct sim_surfaces *x)
{
        return x->sqs;
}

struct sim_ec2 *sim_surfaces_ec2(const struct sim_surfaces *x)
{
        return x->ec2;
}

cJSON *sim_surfaces_endpoints(const struct sim_surfaces *x)
{
        cJSON *o = cJSON_CreateObject(), *by_node = cJSON_CreateObject();
        bool ok = o && by_node && cJSON_AddStringToObject(o, "kubernetes", sim_server_url(x->k8s));

        for (size_t i = 0; ok && i < sim_imds_count(x->imds); i++) {
                const char *url = sim_imds_url(x->imds, i);
                if (i == 0)
                        ok = cJSON_AddStringToObject(o, "imds", url) != NULL;
                sim_lock(x->sim);
                const char *name = sim_node_name(x->sim, i);
                ok = ok && name && cJSON_AddStringToObject(by_node, name, url);
                sim_unlock(x->sim);
        }
        if (ok) {
                cJSON_AddItemToObject(o, "imds_by_node", by_node);
                by_node = NULL;
                ok = cJSON_AddStringToObject(o, "sqs", sim_sqs_url(x->sqs)) &&
                     cJSON_AddStringToObject(o, "queue_url", sim_sqs_queue_url(x->sqs)) &&
                     cJSON_AddStringToObject(o, "sts", sim_sts_url(x->sts)) &&
                     cJSON_AddStringToObject(o, "ec2", sim_ec2_url(x->ec2)) &&
                     cJSON_AddStringToObject(o, "autoscaling", sim_ec2_url(x->ec2));
        }
        cJSON_Delete(by_node);
        if (!ok) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}
