/* Launching: CreateFleet, the capacity pools and the instances it starts. */
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

/* ---- launching ---- */

static bool pool_blocked(struct sim_ec2 *e, const char *type, const char *zone, const char *capacity)
{
        for (size_t i = 0; i < e->n_rules; i++) {
                const struct pool_rule *r = &e->rules[i];
                if ((!r->type || streq(r->type, type)) && (!r->zone || streq(r->zone, zone)) &&
                    (!r->capacity || streq(r->capacity, capacity)))
                        return true;
        }
        return false;
}

void sim_ec2_launched_clear(struct launched *l)
{
        free(l->id);
        free(l->type);
        free(l->zone);
        free(l->subnet);
        free(l->capacity);
        cJSON_Delete(l->tags);
}

/* Launches one instance into the model and records it. With the model's lock held. */
int sim_ec2_launch(struct sim_ec2 *e, const char *type, const char *zone, const char *subnet,
                   const char *capacity, const cJSON *tags, bool in_group, char **ret_id)
{
        _cleanup_free_ char *id = NULL;
        struct launched l = {};
        int r;

        if (e->n_inst >= MAX_INSTANCES)
                return -E2BIG;
        r = sim_launch_instance(e->sim, type, zone, capacity, &id);
        if (r < 0)
                return r;
        struct launched *v = realloc(e->inst, (e->n_inst + 1) * sizeof(*v));
        if (!v)
                return -ENOMEM;
        e->inst = v;
        l.id = strdup(id);
        l.type = strdup(type);
        l.zone = strdup(zone);
        l.subnet = subnet ? strdup(subnet) : NULL;
        l.capacity = strdup(capacity);
        l.tags = tags ? cJSON_Duplicate(tags, true) : cJSON_CreateObject();
        l.launch_usec = sim_wall_usec(e->sim, sim_now(e->sim));
        l.in_group = in_group;
        if (!l.id || !l.type || !l.zone || (subnet && !l.subnet) || !l.capacity || !l.tags) {
                sim_ec2_launched_clear(&l);
                return -ENOMEM;
        }
        e->inst[e->n_inst++] = l;
        e->stats.launched++;
        if (ret_id)
                *ret_id = TAKE_PTR(id);
        return 0;
}

struct override {
        const char *type, *subnet, *zone;
        double priority;
        unsigned index;
};

static int override_cmp(const void *a, const void *b)
{
        const struct override *x = a, *y = b;
        if (x->priority != y->priority)
                return x->priority < y->priority ? -1 : 1;
        return x->index < y->index ? -1 : (x->index > y->index);
}

static void render_overrides(struct answer *a, const cJSON *p, const struct override *o)
{
        const char *lt = "LaunchTemplateConfigs.1.LaunchTemplateSpecification";
        const char *id = sim_ec2_param(p, "%s.LaunchTemplateId", lt),
                   *name = sim_ec2_param(p, "%s.LaunchTemplateName", lt);
        const char *version = sim_ec2_param(p, "%s.Version", lt);

        sim_ec2_ans_printf(a, "<launchTemplateAndOverrides><launchTemplateSpecification>");
        if (id)
                sim_ec2_ans_elem(a, "launchTemplateId", id);
        if (name)
                sim_ec2_ans_elem(a, "launchTemplateName", name);
        /* EC2 answers the resolved version; the sim's templates only ever have version 1. */
        sim_ec2_ans_elem(a, "version", version && isdigit((unsigned char)version[0]) ? version : "1");
        sim_ec2_ans_printf(a, "</launchTemplateSpecification><overrides>");
        sim_ec2_ans_elem(a, "instanceType", o->type);
        if (o->subnet)
                sim_ec2_ans_elem(a, "subnetId", o->subnet);
        else
                sim_ec2_ans_elem(a, "availabilityZone", o->zone);
        sim_ec2_ans_printf(a, "</overrides></launchTemplateAndOverrides>");
}

void sim_ec2_act_create_fleet(struct sim_ec2 *e, const cJSON *p, struct answer *a)
{
        const char *lt = "LaunchTemplateConfigs.1.LaunchTemplateSpecification";
        const char *token = sim_ec2_param(p, "ClientToken"), *type = sim_ec2_param(p, "Type");
        const char *target_s = sim_ec2_param(p, "TargetCapacitySpecification.TotalTargetCapacity");
        const char *capacity = sim_ec2_param(p, "TargetCapacitySpecification.DefaultTargetCapacityType");
        struct override ov[MAX_INDEX];
        size_t n_ov = 0;
        bool tried[MAX_INDEX] = {};
        char rid[37], fleet[64];
        long target;
        cJSON *tags = NULL;

        for (size_t i = 0; token && i < e->n_fleets; i++)
                if (streq(e->fleets[i].token, token)) {
                        /* The same ClientToken: the first answer again, nothing launched. */
                        if (buf_append(&a->body, e->fleets[i].xml, strlen(e->fleets[i].xml)) < 0)
                                a->oom = true;
                        e->stats.create_fleets++;
                        return;
                }
        if (type && !streq(type, "instant")) {
                ec2_error(e, a, 400, "InvalidParameterValue",
                          "The simulator supports only Type=instant fleets");
                return;
        }
        if (!type) {
                ec2_error(e, a, 400, "InvalidParameterValue",
                          "The simulator supports only Type=instant fleets (the default is maintain)");
                return;
        }
        if (!sim_ec2_param(p, "%s.LaunchTemplateId", lt) && !sim_ec2_param(p, "%s.LaunchTemplateName", lt)) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameter "
                          "LaunchTemplateConfigs.1.LaunchTemplateSpecification");
                return;
        }
        if (!target_s || !capacity) {
                ec2_error(e, a, 400, "MissingParameter",
                          "The request must contain the parameter TargetCapacitySpecification");
                return;
        }
        target = strtol(target_s, NULL, 10);
        if (target < 1 || target > MAX_TARGET ||
            (!streq(capacity, "spot") && !streq(capacity, "on-demand"))) {
                ec2_error(e, a, 400, "InvalidParameterValue", "Invalid TargetCapacitySpecification");
                return;
        }
        for (unsigned k = 1; k <= MAX_INDEX; k++) {
                const char *t = sim_ec2_param(p, "LaunchTemplateConfigs.1.Overrides.%u.InstanceType", k);
                const char *sn = sim_ec2_param(p, "LaunchTemplateConfigs.1.Overrides.%u.SubnetId", k);
                const char *z = sim_ec2_param(p, "LaunchTemplateConfigs.1.Overrides.%u.AvailabilityZone", k);
                const char *prio = sim_ec2_param(p, "LaunchTemplateConfigs.1.Overrides.%u.Priority", k);
                if (!t)
                        break;
                if (sn && !sim_ec2_zone_of_subnet(sn)) {
                        ec2_error(e, a, 400, "InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist",
                                  sn);
                        return;
                }
                ov[n_ov] = (struct override){ .type = t,
                                              .subnet = sn,
                                              .zone = sn ? sim_ec2_zone_of_subnet(sn) : z,
                                              .priority = prio ? strtod(prio, NULL) : 0,
                                              .index = k };
                if (!ov[n_ov].zone) {
                        ec2_error(e, a, 400, "MissingParameter",
                                  "Override %u names neither a subnet nor a zone", k);
                        return;
                }
                n_ov++;
        }
        if (n_ov == 0) {
                ec2_error(e, a, 400, "InvalidParameterValue",
                          "The simulator's launch templates name no instance type: give overrides");
                return;
        }
        if (streq(capacity, "on-demand"))
                qsort(ov, n_ov, sizeof(*ov), override_cmp);

        tags = cJSON_CreateObject();
        if (!tags) {
                a->oom = true;
                return;
        }
        for (unsigned s = 1; s <= MAX_INDEX; s++) {
                const char *rt = sim_ec2_param(p, "TagSpecification.%u.ResourceType", s);
                if (!rt)
                        break;
                if (!streq(rt, "instance"))
                        continue;
                for (unsigned k = 1; k <= MAX_INDEX; k++) {
                        const char *key = sim_ec2_param(p, "TagSpecification.%u.Tag.%u.Key", s, k);
                        const char *val = sim_ec2_param(p, "TagSpecification.%u.Tag.%u.Value", s, k);
                        if (!key)
                                break;
                        if (sim_ec2_param_set(tags, key, val ? val : "") < 0)
                                a->oom = true;
                }
        }

        /* Launch: each unit goes to the first pool with capacity. */
        struct answer ok = {}, errs = {};
        unsigned launched = 0;
        sim_ec2_request_id(e, rid);
        snprintf(fleet, sizeof(fleet), "fleet-%08x-%04x-4e3d-a5c7-%012" PRIx64,
                 (unsigned)(e->seq * 2654435761u), (unsigned)(e->seq & 0xffff), e->seq);
        for (long u = 0; u < target; u++) {
                bool done = false;
                for (size_t k = 0; k < n_ov && !done; k++) {
                        const struct override *o = &ov[k];
                        _cleanup_free_ char *id = NULL;
                        const char *code = NULL, *msg = NULL;
                        int r;
                        if (pool_blocked(e, o->type, o->zone, capacity)) {
                                code = "InsufficientInstanceCapacity";
                                msg =
                                    streq(capacity, "spot")
                                        ? "There is no Spot capacity available that matches your request."
                                        : "We currently do not have sufficient capacity in the Availability "
                                          "Zone you requested.";
                        } else if ((r = sim_ec2_launch(e, o->type, o->zone, o->subnet, capacity, tags, false,
                                                       &id)) < 0) {
                                if (r == -ENOMEM) {
                                        a->oom = true;
                                        break;
                                }
                                code = "Unsupported";
                                msg = "The requested configuration is currently not supported. Please check "
                                      "the "
                                      "documentation for supported configurations.";
                        }
                        if (code) {
                                if (!tried[k]) {
                                        tried[k] = true;
                                        sim_ec2_ans_printf(&errs, "<item>");
                                        render_overrides(&errs, p, o);
                                        sim_ec2_ans_printf(&errs, "<lifecycle>%s</lifecycle>", capacity);
                                        sim_ec2_ans_elem(&errs, "errorCode", code);
                                        sim_ec2_ans_elem(&errs, "errorMessage", msg);
                                        sim_ec2_ans_printf(&errs, "</item>");
                                }
                                continue;
                        }
                        done = true;
                        launched++;
                        sim_ec2_ans_printf(&ok, "<item>");
                        render_overrides(&ok, p, o);
                        sim_ec2_ans_printf(
                            &ok, "<lifecycle>%s</lifecycle><instanceIds><item>%s</item></instanceIds>",
                            capacity, id);
                        sim_ec2_ans_elem(&ok, "instanceType", o->type);
                        sim_ec2_ans_printf(&ok, "</item>");
                }
        }
        cJSON_Delete(tags);
        sim_ec2_ans_printf(a,
                           "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CreateFleetResponse xmlns=\"%s\">"
                           "<requestId>%s</requestId><fleetId>%s</fleetId>",
                           EC2_XMLNS, rid, fleet);
        if (errs.body.len > 0) {
                sim_ec2_ans_printf(a, "<errorSet>");
                if (buf_append(&a->body, errs.body.data, errs.body.len) < 0)
                        a->oom = true;
                sim_ec2_ans_printf(a, "</errorSet>");
        } else
                sim_ec2_ans_printf(a, "<errorSet/>");
        if (ok.body.len > 0) {
                sim_ec2_ans_printf(a, "<fleetInstanceSet>");
                if (buf_append(&a->body, ok.body.data, ok.body.len) < 0)
                        a->oom = true;
                sim_ec2_ans_printf(a, "</fleetInstanceSet>");
        } else
                sim_ec2_ans_printf(a, "<fleetInstanceSet/>");
        sim_ec2_ans_printf(a, "</CreateFleetResponse>");
        a->oom = a->oom || ok.oom || errs.oom;
        buf_free(&ok.body);
        buf_free(&errs.body);
        log_debug("sim ec2: CreateFleet %s: %u of %ld launched", token ? token : "(no token)", launched,
                  target);
        e->stats.create_fleets++;
        if (token && !a->oom && buf_append(&a->body, "", 1) == 0) {
                a->body.len--; /* keep the NUL out of the answer */
                struct fleet_answer *f = realloc(e->fleets, (e->n_fleets + 1) * sizeof(*f));
                if (f) {
                        e->fleets = f;
                        f[e->n_fleets].token = strdup(token);
                        f[e->n_fleets].xml = strdup(a->body.data);
                        if (f[e->n_fleets].token && f[e->n_fleets].xml)
                                e->n_fleets++;
                        else {
                                free(f[e->n_fleets].token);
                                free(f[e->n_fleets].xml);
                        }
                }
        }
}
