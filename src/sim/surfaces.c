/* Starts and stops the simulator's surfaces together; see surfaces.h. */
#include "sim/surfaces.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "sim/ec2_surface.h"
#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/stop_wake.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"

/* ---- the AWS surfaces' error rates ----
 * The surfaces take their faults as counters ("the next N requests fail"). A driver thread turns the
 * scenario's rates into those counters: request k of a lane (SQS, STS, the IMDS of one node) fails when a
 * hash of the seed, the lane and k says so, and whenever a lane's next request is due to fail the driver
 * arms the counter with the run of failing requests that starts there. It looks every few milliseconds, so a
 * request that follows another within that time may miss its draw: the rate is a close approximation, the
 * choice deterministic. */

#define FAULT_POLL_NSEC (5 * 1000 * 1000L)
#define FAULT_HANG_USEC (2ULL * 1000 * 1000)
#define FAULT_RUN_MAX   16

enum fault_kind {
        FAULT_NONE,
        FAULT_ERROR,
        FAULT_HANG
};

struct fault_lane {
        double error_rate, hang_rate;
        uint64_t armed_until; /* requests below this index are covered by the counter last set */
};

struct sim_aws_faults {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool stopping;
        uint64_t seed;
        struct sim_imds *imds;
        struct sim_sqs *sqs;
        struct sim_sts *sts;
        struct sim_sqs_fault sqs_base; /* the other SQS faults, kept when the error counter changes */
        struct fault_lane sqs_lane, sts_lane;
        struct fault_lane *imds_lanes; /* one per node */
        size_t n_imds;
};

struct sim_surfaces {
        struct sim *sim;
        struct sim_server *k8s;
        struct sim_imds *imds;
        struct sim_sqs *sqs;
        struct sim_sts *sts;
        struct sim_ec2 *ec2;
        struct sim_aws_faults *faults;
};

static uint64_t fault_mix(uint64_t x)
{
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
}

static enum fault_kind fault_kind_of(const struct sim_aws_faults *d, const struct fault_lane *l,
                                     uint64_t lane, uint64_t k)
{
        double u = (double)(fault_mix(d->seed ^ fault_mix(lane * 0x9e3779b97f4a7c15ULL + k)) >> 11) /
                   (double)(1ULL << 53);
        if (u < l->error_rate)
                return FAULT_ERROR;
        if (u < l->error_rate + l->hang_rate)
                return FAULT_HANG;
        return FAULT_NONE;
}

/* The run of requests starting at index `requests` that fail the same way; 0 when that one does not fail. */
static unsigned fault_run(const struct sim_aws_faults *d, struct fault_lane *l, uint64_t lane,
                          uint64_t requests, enum fault_kind *ret_kind)
{
        unsigned n = 0;
        enum fault_kind k;

        if (requests < l->armed_until || (l->error_rate <= 0 && l->hang_rate <= 0))
                return 0;
        k = fault_kind_of(d, l, lane, requests);
        if (k == FAULT_NONE)
                return 0;
        while (n < FAULT_RUN_MAX && fault_kind_of(d, l, lane, requests + n) == k)
                n++;
        l->armed_until = requests + n;
        *ret_kind = k;
        return n;
}

static void fault_step(struct sim_aws_faults *d)
{
        enum fault_kind k = FAULT_NONE;
        unsigned n;

        if (d->sqs) {
                struct sim_sqs_stats st;
                if (sim_sqs_stats(d->sqs, &st) >= 0 &&
                    (n = fault_run(d, &d->sqs_lane, 1, st.requests, &k))) {
                        struct sim_sqs_fault f = d->sqs_base;
                        f.error_500 = n;
                        sim_sqs_set_fault(d->sqs, &f);
                }
        }
        if (d->sts) {
                struct sim_sts_stats st;
                sim_sts_stats(d->sts, &st);
                if ((n = fault_run(d, &d->sts_lane, 2, st.requests, &k)))
                        sim_sts_set_fault(d->sts, &(struct sim_sts_fault){ .error_500 = n });
        }
        for (size_t i = 0; i < d->n_imds; i++) {
                struct sim_imds_stats st;
                if (sim_imds_stats(d->imds, i, &st) < 0 ||
                    !(n = fault_run(d, &d->imds_lanes[i], 16 + i, st.requests, &k)))
                        continue;
                struct sim_imds_fault f = { .hang_usec = FAULT_HANG_USEC };
                if (k == FAULT_HANG)
                        f.hang = n;
                else
                        f.error_500 = n;
                sim_imds_set_fault(d->imds, i, &f);
        }
}

static void *fault_thread(void *userdata)
{
        struct sim_aws_faults *d = userdata;

        pthread_mutex_lock(&d->lock);
        while (!d->stopping) {
                struct timespec ts;
                pthread_mutex_unlock(&d->lock);
                fault_step(d);
                pthread_mutex_lock(&d->lock);
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += FAULT_POLL_NSEC;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                while (!d->stopping && pthread_cond_timedwait(&d->cond, &d->lock, &ts) == 0)
                        ;
        }
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

struct sim_aws_faults *sim_aws_faults_stop(struct sim_aws_faults *d)
{
        if (!d)
                return NULL;
        sim_stop_wake(&d->lock, &d->cond, &d->stopping);
        pthread_join(d->thread, NULL);
        pthread_cond_destroy(&d->cond);
        pthread_mutex_destroy(&d->lock);
        free(d->imds_lanes);
        free(d);
        return NULL;
}

int sim_aws_faults_start(const struct sim_server_options *opt, struct sim_imds *imds, struct sim_sqs *sqs,
                         struct sim_sts *sts, struct sim_aws_faults **ret)
{
        struct sim_aws_faults *d;
        pthread_condattr_t attr;
        int r;

        *ret = NULL;
        if (sqs && (opt->sqs_duplicate_rate > 0 || opt->sqs_throttle_rate > 0)) {
                r = sim_sqs_set_fault(
                    sqs, &(struct sim_sqs_fault){ .duplicate_rate = opt->sqs_duplicate_rate,
                                                  .throttle_rate = opt->sqs_throttle_rate,
                                                  .seed = fault_mix(opt->seed ? opt->seed : 1) });
                if (r < 0)
                        return r;
        }
        if (opt->sqs_error_rate <= 0 && opt->sts_error_rate <= 0 && opt->imds_error_rate <= 0 &&
            opt->imds_timeout_rate <= 0)
                return 0;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->seed = fault_mix(opt->seed ? opt->seed : 1);
        d->sqs = sqs;
        d->sts = sts;
        d->imds = imds;
        d->sqs_base.duplicate_rate = opt->sqs_duplicate_rate;
        d->sqs_base.throttle_rate = opt->sqs_throttle_rate;
        d->sqs_base.seed = fault_mix(opt->seed ? opt->seed : 1);
        d->sqs_lane.error_rate = opt->sqs_error_rate;
        d->sts_lane.error_rate = opt->sts_error_rate;
        d->n_imds = imds ? sim_imds_count(imds) : 0;
        d->imds_lanes = calloc(d->n_imds ?: 1, sizeof(*d->imds_lanes));
        if (!d->imds_lanes) {
                free(d);
                return -ENOMEM;
        }
        for (size_t i = 0; i < d->n_imds; i++)
                d->imds_lanes[i] = (struct fault_lane){ .error_rate = opt->imds_error_rate,
                                                        .hang_rate = opt->imds_timeout_rate };
        pthread_mutex_init(&d->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&d->cond, &attr);
        pthread_condattr_destroy(&attr);
        r = -pthread_create(&d->thread, NULL, fault_thread, d);
        if (r < 0) {
                pthread_cond_destroy(&d->cond);
                pthread_mutex_destroy(&d->lock);
                free(d->imds_lanes);
                free(d);
                return r;
        }
        *ret = d;
        return 0;
}

struct sim_surfaces *sim_surfaces_stop(struct sim_surfaces *x)
{
        if (!x)
                return NULL;
        /* The fault driver first: it sets the surfaces' faults. Then the AWS surfaces: they may be waiting
         * in long polls that the model wakes. */
        sim_aws_faults_stop(x->faults);
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
        if (kopt && (r = sim_aws_faults_start(kopt, x->imds, x->sqs, x->sts, &x->faults)) < 0) {
                log_debug_errno(r, "simulator: cannot apply the scenario's faults");
                goto fail;
        }
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
                     cJSON_AddStringToObject(o, "autoscaling", sim_ec2_url(x->ec2)) &&
                     cJSON_AddStringToObject(o, "elbv2", sim_ec2_url(x->ec2));
        }
        cJSON_Delete(by_node);
        if (!ok) {
                cJSON_Delete(o);
                return NULL;
        }
        return o;
}
