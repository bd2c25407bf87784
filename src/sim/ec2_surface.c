/* The simulator's EC2 and Auto Scaling surface (query protocols, XML answers). */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "sim/aws_request.h"
#include "sim/ec2_internal.h"
#include "sim/ec2_surface.h"
#include "sim/elbv2.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "spotdrain/core.h"
#include "spotdrain/provision.h"
#include "spotdrain/util.h"

/* ---- authentication ---- */

static const char *default_lookup(const char *akid, void *userdata)
{
        return streq(akid, SIM_EC2_ACCESS_KEY_ID) ? SIM_EC2_SECRET_ACCESS_KEY : NULL;
}

/* ---- dispatch ---- */

static bool asg_action(const char *action)
{
        return streq(action, "DescribeAutoScalingGroups") || streq(action, "SetDesiredCapacity") ||
               streq(action, "CreateOrUpdateTags") || streq(action, "CompleteLifecycleAction") ||
               streq(action, "RecordLifecycleActionHeartbeat") || streq(action, "DescribeLifecycleHooks");
}

static int on_request(void *userdata, const struct sim_http_request *rq)
{
        struct sim_ec2 *e = userdata;
        struct answer a = { .status = 200 };
        cJSON *p = cJSON_CreateObject();
        const char *action;
        bool asg;
        int r;

        if (!p)
                return sim_http_reply(rq->connection, 500, "text/plain", strdup("out of memory"));
        if ((streq(rq->method, "POST") &&
             sim_aws_form_parse(rq->body, rq->body_len, sim_ec2_form_param, p) < 0) ||
            MHD_get_connection_values(rq->connection, MHD_GET_ARGUMENT_KIND, sim_ec2_collect_arg, p) < 0) {
                cJSON_Delete(p);
                return sim_http_reply(rq->connection, 500, "text/plain", strdup("out of memory"));
        }
        action = sim_ec2_param(p, "Action");
        asg = asg_action(action);
        bool elb = sim_elbv2_action(action);

        pthread_mutex_lock(&e->lock);
        e->stats.requests++;
        r = sim_aws_verify(rq,
                           elb   ? "elasticloadbalancing"
                           : asg ? "autoscaling"
                                 : "ec2",
                           e->lookup ? e->lookup : default_lookup, e->lookup ? e->lookup_userdata : NULL,
                           e->sts);
        if (r < 0) {
                e->stats.auth_failures++;
                if (r == -ENOMEM)
                        a.oom = true;
                else if (asg || elb)
                        sim_ec2_error_answer(
                            e, &a, 403, elb ? ELBV2_XMLNS : ASG_XMLNS,
                            r == -EACCES ? "SignatureDoesNotMatch" : "InvalidClientTokenId", "%s",
                            r == -EACCES ? "The request signature we calculated does not match the "
                                           "signature you provided."
                                         : "The security token included in the request is invalid.");
                else
                        ec2_error(
                            e, &a, 401, r == -EPERM ? "MissingAuthenticationToken" : "AuthFailure", "%s",
                            r == -EPERM ? "Request is missing Authentication Token"
                                        : "AWS was not able to validate the provided access credentials");
        } else if (!action)
                ec2_error(e, &a, 400, "MissingAction", "The request must contain the parameter Action");
        else if (elb) {
                char rid[37];
                sim_ec2_request_id(e, rid);
                sim_lock(e->sim);
                (void)sim_advance(e->sim);
                sim_count_request(e->sim);
                if (streq(action, "DeregisterTargets"))
                        sim_record_write(e->sim, "elbv2", action);
                if (sim_elbv2_answer(e->elbv2, e->sim, p, rid, &a.status, &a.body) < 0)
                        a.oom = true;
                sim_unlock(e->sim);
        } else if (e->fault.throttle > 0) {
                e->fault.throttle--;
                if (asg)
                        asg_error(e, &a, 400, "Throttling", "Rate exceeded");
                else
                        ec2_error(e, &a, 503, "RequestLimitExceeded", "Request limit exceeded.");
        } else if ((e->fault.unauthorized || streq(e->fault.deny_action, action)) && !asg)
                ec2_error(
                    e, &a, 403, "UnauthorizedOperation",
                    "You are not authorized to perform this operation. User: arn:aws:sts::%s:assumed-role/"
                    "spotdrain/sim is not authorized to perform: ec2:%s",
                    SIM_EC2_ACCOUNT, action);
        else {
                sim_lock(e->sim);
                (void)sim_advance(e->sim);
                sim_count_request(e->sim);
                if (strncmp(action, "Describe", strlen("Describe")) != 0)
                        sim_record_write(e->sim, asg ? "autoscaling" : "ec2", action);
                if (streq(action, "CreateFleet"))
                        sim_ec2_act_create_fleet(e, p, &a);
                else if (streq(action, "DescribeInstances"))
                        sim_ec2_act_describe_instances(e, p, &a);
                else if (streq(action, "DescribeInstanceTypes"))
                        sim_ec2_act_describe_types(e, p, &a);
                else if (streq(action, "TerminateInstances"))
                        sim_ec2_act_terminate(e, p, &a);
                else if (streq(action, "CreateTags"))
                        sim_ec2_act_create_tags(e, p, &a);
                else if (streq(action, "DescribeAutoScalingGroups"))
                        sim_ec2_act_describe_groups(e, p, &a);
                else if (streq(action, "SetDesiredCapacity"))
                        sim_ec2_act_set_desired(e, p, &a);
                else if (streq(action, "CreateOrUpdateTags"))
                        sim_ec2_act_tags(e, p, &a);
                else if (streq(action, "CompleteLifecycleAction") ||
                         streq(action, "RecordLifecycleActionHeartbeat"))
                        sim_ec2_act_lifecycle(e, p, &a, action, sim_aws_instance_role(rq));
                else if (streq(action, "DescribeLifecycleHooks"))
                        sim_ec2_act_describe_hooks(e, p, &a);
                else
                        ec2_error(e, &a, 400, "InvalidAction",
                                  "The action %s is not valid for this web service.", action);
                sim_unlock(e->sim);
        }
        pthread_mutex_unlock(&e->lock);
        log_debug("sim ec2: %s → %u", action ? action : "?", a.oom ? 500 : a.status);
        cJSON_Delete(p);
        if (a.oom || buf_append(&a.body, "", 1) < 0) {
                buf_free(&a.body);
                return sim_http_reply(rq->connection, 500, "text/plain", strdup("out of memory"));
        }
        return sim_http_reply(rq->connection, a.status, "text/xml;charset=UTF-8", a.body.data);
}

/* ---- life cycle ---- */

int sim_ec2_start(struct sim *s, const char *host, struct sim_ec2 **ret)
{
        _cleanup_free_ char *listen = NULL;
        struct sim_ec2 *e;
        const char *zone;
        size_t zl;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->sim = s;
        pthread_mutex_init(&e->lock, NULL);
        if (prov_catalog_load(NULL, &e->catalog, NULL) < 0)
                e->catalog = calloc(1, sizeof(*e->catalog));
        e->group_tags = cJSON_CreateObject();
        e->node_tags = cJSON_CreateObject();
        sim_lock(s);
        (void)sim_asg_group_name(s, &e->group);
        zone = sim_node_count(s) > 0 && sim_node_zone(s, 0) ? sim_node_zone(s, 0) : "us-east-1a";
        zl = strlen(zone);
        /* The region is the zone without its letter. */
        e->region = strndup(zone, zl > 1 && zone[zl - 1] >= 'a' && zone[zl - 1] <= 'z' ? zl - 1 : zl);
        e->desired = (int)sim_node_count(s);
        e->max = e->desired + ASG_HEADROOM;
        e->created_usec = sim_wall_usec(s, -3600);
        sim_unlock(s);
        host = host ? host : "127.0.0.1";
        listen = strchr(host, ':') && host[0] != '[' ? strprintf("[%s]:0", host) : strprintf("%s:0", host);
        if (!e->catalog || !e->group_tags || !e->node_tags || !e->group || !e->region || !listen ||
            sim_elbv2_new(&e->elbv2) < 0) {
                sim_ec2_stop(e);
                return -ENOMEM;
        }
        r = sim_http_start(listen, on_request, e, &e->http);
        if (r < 0) {
                sim_ec2_stop(e);
                return r;
        }
        *ret = e;
        return 0;
}

struct sim_ec2 *sim_ec2_stop(struct sim_ec2 *e)
{
        if (!e)
                return NULL;
        sim_http_stop(e->http);
        for (size_t i = 0; i < e->n_inst; i++)
                sim_ec2_launched_clear(&e->inst[i]);
        free(e->inst);
        for (size_t i = 0; i < e->n_fleets; i++) {
                free(e->fleets[i].token);
                free(e->fleets[i].xml);
        }
        free(e->fleets);
        sim_ec2_clear_no_capacity(e);
        for (size_t i = 0; i < e->n_terminated_nodes; i++)
                free(e->terminated_nodes[i]);
        free(e->terminated_nodes);
        prov_catalog_free(e->catalog);
        sim_elbv2_free(e->elbv2);
        cJSON_Delete(e->group_tags);
        cJSON_Delete(e->node_tags);
        free(e->group);
        free(e->region);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
}

const char *sim_ec2_url(const struct sim_ec2 *e)
{
        return sim_http_url(e->http);
}

const char *sim_ec2_group_name(const struct sim_ec2 *e)
{
        return e->group;
}

int sim_ec2_set_catalog(struct sim_ec2 *e, const struct prov_catalog *c)
{
        struct prov_catalog *n = calloc(1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++)
                if (prov_catalog_add(n, &c->types[i]) < 0) {
                        prov_catalog_free(n);
                        return -ENOMEM;
                }
        pthread_mutex_lock(&e->lock);
        prov_catalog_free(e->catalog);
        e->catalog = n;
        pthread_mutex_unlock(&e->lock);
        return 0;
}

void sim_ec2_set_secret_lookup(struct sim_ec2 *e, sigv4_secret_lookup_fn lookup, void *userdata)
{
        pthread_mutex_lock(&e->lock);
        e->lookup = lookup;
        e->lookup_userdata = userdata;
        e->sts = NULL;
        pthread_mutex_unlock(&e->lock);
}

void sim_ec2_use_sts(struct sim_ec2 *e, struct sim_sts *t)
{
        pthread_mutex_lock(&e->lock);
        e->lookup = t ? sim_sts_secret_lookup : NULL;
        e->lookup_userdata = t;
        e->sts = t;
        pthread_mutex_unlock(&e->lock);
}

int sim_ec2_set_no_capacity(struct sim_ec2 *e, const char *instance_type, const char *zone,
                            const char *capacity_type)
{
        struct pool_rule r = {};

        if ((instance_type && !(r.type = strdup(instance_type))) || (zone && !(r.zone = strdup(zone))) ||
            (capacity_type && !(r.capacity = strdup(capacity_type)))) {
                free(r.type);
                free(r.zone);
                return -ENOMEM;
        }
        pthread_mutex_lock(&e->lock);
        struct pool_rule *v = realloc(e->rules, (e->n_rules + 1) * sizeof(*v));
        if (v) {
                e->rules = v;
                e->rules[e->n_rules++] = r;
        }
        pthread_mutex_unlock(&e->lock);
        if (!v) {
                free(r.type);
                free(r.zone);
                free(r.capacity);
                return -ENOMEM;
        }
        return 0;
}

void sim_ec2_clear_no_capacity(struct sim_ec2 *e)
{
        pthread_mutex_lock(&e->lock);
        for (size_t i = 0; i < e->n_rules; i++) {
                free(e->rules[i].type);
                free(e->rules[i].zone);
                free(e->rules[i].capacity);
        }
        free(e->rules);
        e->rules = NULL;
        e->n_rules = 0;
        pthread_mutex_unlock(&e->lock);
}

void sim_ec2_set_fault(struct sim_ec2 *e, const struct sim_ec2_fault *f)
{
        pthread_mutex_lock(&e->lock);
        e->fault = *f;
        pthread_mutex_unlock(&e->lock);
}

void sim_ec2_stats(struct sim_ec2 *e, struct sim_ec2_stats *ret)
{
        pthread_mutex_lock(&e->lock);
        *ret = e->stats;
        pthread_mutex_unlock(&e->lock);
}

struct sim_elbv2 *sim_ec2_elbv2(struct sim_ec2 *e)
{
        return e->elbv2;
}
