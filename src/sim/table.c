/* meta.k8s.io/v1 Table output: what kubectl get prints, asked for with Accept: ...;as=Table. */
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>

#include "sim/server_internal.h"
#include "spotdrain/core.h"
#include "spotdrain/util.h"

/* ---- Table output (what kubectl get prints) ---- */

struct column {
        const char *name;
        const char *type;
        int priority; /* 1: only with -o wide */
};

static void format_age(uint64_t now, const char *created, char *buf, size_t len)
{
        uint64_t t;
        int64_t s;

        if (!created || parse_rfc3339(created, &t) < 0) {
                snprintf(buf, len, "<unknown>");
                return;
        }
        s = now > t ? (int64_t)((now - t) / 1000000) : 0;
        if (s < 120)
                snprintf(buf, len, "%" PRId64 "s", s);
        else if (s < 600 && s % 60)
                snprintf(buf, len, "%" PRId64 "m%" PRId64 "s", s / 60, s % 60);
        else if (s < 3 * 3600)
                snprintf(buf, len, "%" PRId64 "m", s / 60);
        else if (s < 8 * 3600 && (s / 60) % 60)
                snprintf(buf, len, "%" PRId64 "h%" PRId64 "m", s / 3600, (s / 60) % 60);
        else if (s < 48 * 3600)
                snprintf(buf, len, "%" PRId64 "h", s / 3600);
        else if (s < 8 * 86400 && (s / 3600) % 24)
                snprintf(buf, len, "%" PRId64 "d%" PRId64 "h", s / 86400, (s / 3600) % 24);
        else
                snprintf(buf, len, "%" PRId64 "d", s / 86400);
}

static const struct column node_columns[] = {
        { "Name", "string", 0 },           { "Status", "string", 0 },
        { "Roles", "string", 0 },          { "Age", "string", 0 },
        { "Version", "string", 0 },        { "Internal-IP", "string", 1 },
        { "External-IP", "string", 1 },    { "OS-Image", "string", 1 },
        { "Kernel-Version", "string", 1 }, { "Container-Runtime", "string", 1 },
};
static const struct column pod_columns[] = {
        { "Name", "string", 0 },
        { "Ready", "string", 0 },
        { "Status", "string", 0 },
        { "Restarts", "string", 0 },
        { "Age", "string", 0 },
        { "IP", "string", 1 },
        { "Node", "string", 1 },
        { "Nominated Node", "string", 1 },
        { "Readiness Gates", "string", 1 },
};
static const struct column pdb_columns[] = {
        { "Name", "string", 0 },
        { "Min Available", "string", 0 },
        { "Max Unavailable", "string", 0 },
        { "Allowed Disruptions", "integer", 0 },
        { "Age", "string", 0 },
};
static const struct column deployment_columns[] = {
        { "Name", "string", 0 },       { "Ready", "string", 0 }, { "Up-to-date", "integer", 0 },
        { "Available", "integer", 0 }, { "Age", "string", 0 },
};
static const struct column replicaset_columns[] = {
        { "Name", "string", 0 },   { "Desired", "integer", 0 }, { "Current", "integer", 0 },
        { "Ready", "integer", 0 }, { "Age", "string", 0 },
};
static const struct column statefulset_columns[] = {
        { "Name", "string", 0 },
        { "Ready", "string", 0 },
        { "Age", "string", 0 },
};
static const struct column daemonset_columns[] = {
        { "Name", "string", 0 },   { "Desired", "integer", 0 },    { "Current", "integer", 0 },
        { "Ready", "integer", 0 }, { "Up-to-date", "integer", 0 }, { "Available", "integer", 0 },
        { "Age", "string", 0 },
};
static const struct column namespace_columns[] = {
        { "Name", "string", 0 },
        { "Status", "string", 0 },
        { "Age", "string", 0 },
};
static const struct column event_columns[] = {
        { "Last Seen", "string", 0 }, { "Type", "string", 0 },    { "Reason", "string", 0 },
        { "Object", "string", 0 },    { "Message", "string", 0 }, { "Name", "string", 1 },
};
static const struct column lease_columns[] = {
        { "Name", "string", 0 },
        { "Holder", "string", 0 },
        { "Age", "string", 0 },
};

static const struct column hpa_columns[] = {
        { "Name", "string", 0 },    { "Reference", "string", 0 }, { "Targets", "string", 0 },
        { "MinPods", "string", 0 }, { "MaxPods", "integer", 0 },  { "Replicas", "integer", 0 },
        { "Age", "string", 0 },
};

static void table_columns(enum sim_kind k, const struct column **ret, size_t *ret_n)
{
#define COLS(a)                         \
        do {                            \
                *ret = a;               \
                *ret_n = ARRAY_SIZE(a); \
        } while (0)
        switch (k) {
        case SIM_NODE:
                COLS(node_columns);
                break;
        case SIM_POD:
                COLS(pod_columns);
                break;
        case SIM_PDB:
                COLS(pdb_columns);
                break;
        case SIM_DEPLOYMENT:
                COLS(deployment_columns);
                break;
        case SIM_REPLICASET:
                COLS(replicaset_columns);
                break;
        case SIM_STATEFULSET:
                COLS(statefulset_columns);
                break;
        case SIM_DAEMONSET:
                COLS(daemonset_columns);
                break;
        case SIM_NAMESPACE:
                COLS(namespace_columns);
                break;
        case SIM_EVENT:
                COLS(event_columns);
                break;
        case SIM_HPA:
                COLS(hpa_columns);
                break;
        default:
                COLS(lease_columns);
                break;
        }
#undef COLS
}

static void add_str(cJSON *cells, const char *s)
{
        cJSON_AddItemToArray(cells, cJSON_CreateString(isempty(s) ? "<none>" : s));
}

static void add_int(cJSON *cells, double v)
{
        cJSON_AddItemToArray(cells, cJSON_CreateNumber(v));
}

static void add_fmt(cJSON *cells, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_fmt(cJSON *cells, const char *fmt, ...)
{
        char buf[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        cJSON_AddItemToArray(cells, cJSON_CreateString(buf));
}

static const char *intorstr_text(const cJSON *v, char *buf, size_t len)
{
        if (cJSON_IsString(v))
                return v->valuestring;
        if (cJSON_IsNumber(v)) {
                snprintf(buf, len, "%d", v->valueint);
                return buf;
        }
        return "N/A";
}

static const char *node_address(const cJSON *node, const char *type)
{
        const cJSON *a;
        cJSON_ArrayForEach (a, sim_json_path(node, "status.addresses")) {
                if (streq(sim_json_str(a, "type"), type))
                        return sim_json_str(a, "address");
        }
        return NULL;
}

static void node_cells(const cJSON *o, const char *age, cJSON *cells)
{
        const cJSON *cond, *label;
        const char *ready = "Unknown";
        char status[64], roles[256] = "";

        cJSON_ArrayForEach (cond, sim_json_path(o, "status.conditions")) {
                if (streq(sim_json_str(cond, "type"), "Ready"))
                        ready = streq(sim_json_str(cond, "status"), "True") ? "Ready" : "NotReady";
        }
        snprintf(status, sizeof(status), "%s%s", ready,
                 cJSON_IsTrue(sim_json_path(o, "spec.unschedulable")) ? ",SchedulingDisabled" : "");
        cJSON_ArrayForEach (label, sim_json_path(o, "metadata.labels")) {
                if (label->string && startswith(label->string, "node-role.kubernetes.io/")) {
                        size_t n = strlen(roles);
                        snprintf(roles + n, sizeof(roles) - n, "%s%s", n ? "," : "",
                                 label->string + strlen("node-role.kubernetes.io/"));
                }
        }
        add_str(cells, sim_json_str(o, "metadata.name"));
        add_str(cells, status);
        add_str(cells, roles);
        add_str(cells, age);
        add_str(cells, sim_json_str(o, "status.nodeInfo.kubeletVersion"));
        add_str(cells, node_address(o, "InternalIP"));
        add_str(cells, node_address(o, "ExternalIP"));
        add_str(cells, sim_json_str(o, "status.nodeInfo.osImage"));
        add_str(cells, sim_json_str(o, "status.nodeInfo.kernelVersion"));
        add_str(cells, sim_json_str(o, "status.nodeInfo.containerRuntimeVersion"));
}

static void pod_cells(const cJSON *o, const char *age, cJSON *cells)
{
        const cJSON *cs, *containers = sim_json_path(o, "spec.containers");
        const char *reason = sim_json_str(o, "status.reason");
        int ready = 0, restarts = 0;

        if (isempty(reason))
                reason = sim_json_str(o, "status.phase");
        cJSON_ArrayForEach (cs, sim_json_path(o, "status.containerStatuses")) {
                const char *w = sim_json_str(cs, "state.waiting.reason");
                const char *t = sim_json_str(cs, "state.terminated.reason");
                restarts += (int)sim_json_num(cs, "restartCount");
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cs, "ready")))
                        ready++;
                if (!isempty(w))
                        reason = w;
                else if (!isempty(t))
                        reason = t;
        }
        if (sim_json_path(o, "metadata.deletionTimestamp"))
                reason = "Terminating";
        add_str(cells, sim_json_str(o, "metadata.name"));
        add_fmt(cells, "%d/%d", ready, cJSON_GetArraySize(containers));
        add_str(cells, isempty(reason) ? "Pending" : reason);
        add_fmt(cells, "%d", restarts);
        add_str(cells, age);
        add_str(cells, sim_json_str(o, "status.podIP"));
        add_str(cells, sim_json_str(o, "spec.nodeName"));
        add_str(cells, sim_json_str(o, "status.nominatedNodeName"));
        add_str(cells, NULL);
}

static void event_cells(const cJSON *o, const char *age, cJSON *cells)
{
        /* core/v1 names, or the events.k8s.io/v1 ones when served from that group */
        const cJSON *about = sim_json_path(o, "involvedObject") ? sim_json_path(o, "involvedObject")
                                                                : sim_json_path(o, "regarding");
        const char *kind = sim_json_str(about, "kind"), *name = sim_json_str(about, "name");
        const char *message =
            sim_json_str(o, "message") ? sim_json_str(o, "message") : sim_json_str(o, "note");
        char lower[64] = "";

        for (size_t i = 0; kind && kind[i] && i + 1 < sizeof(lower); i++)
                lower[i] = (char)((kind[i] >= 'A' && kind[i] <= 'Z') ? kind[i] - 'A' + 'a' : kind[i]);
        add_str(cells, age);
        add_str(cells, sim_json_str(o, "type"));
        add_str(cells, sim_json_str(o, "reason"));
        add_fmt(cells, "%s/%s", lower, name ? name : "");
        add_str(cells, message);
        add_str(cells, sim_json_str(o, "metadata.name"));
}

static void table_cells(enum sim_kind k, const cJSON *o, const char *age, cJSON *cells)
{
        char b1[32], b2[32];
        const char *name = sim_json_str(o, "metadata.name");

        switch (k) {
        case SIM_NODE:
                node_cells(o, age, cells);
                break;
        case SIM_POD:
                pod_cells(o, age, cells);
                break;
        case SIM_EVENT:
                event_cells(o, age, cells);
                break;
        case SIM_PDB:
                add_str(cells, name);
                add_str(cells, intorstr_text(sim_json_path(o, "spec.minAvailable"), b1, sizeof(b1)));
                add_str(cells, intorstr_text(sim_json_path(o, "spec.maxUnavailable"), b2, sizeof(b2)));
                add_int(cells, sim_json_num(o, "status.disruptionsAllowed"));
                add_str(cells, age);
                break;
        case SIM_DEPLOYMENT:
                add_str(cells, name);
                add_fmt(cells, "%d/%d", (int)sim_json_num(o, "status.readyReplicas"),
                        (int)sim_json_num(o, "spec.replicas"));
                add_int(cells, sim_json_num(o, "status.updatedReplicas"));
                add_int(cells, sim_json_num(o, "status.availableReplicas"));
                add_str(cells, age);
                break;
        case SIM_REPLICASET:
                add_str(cells, name);
                add_int(cells, sim_json_num(o, "spec.replicas"));
                add_int(cells, sim_json_num(o, "status.replicas"));
                add_int(cells, sim_json_num(o, "status.readyReplicas"));
                add_str(cells, age);
                break;
        case SIM_STATEFULSET:
                add_str(cells, name);
                add_fmt(cells, "%d/%d", (int)sim_json_num(o, "status.readyReplicas"),
                        (int)sim_json_num(o, "spec.replicas"));
                add_str(cells, age);
                break;
        case SIM_DAEMONSET:
                add_str(cells, name);
                add_int(cells, sim_json_num(o, "status.desiredNumberScheduled"));
                add_int(cells, sim_json_num(o, "status.currentNumberScheduled"));
                add_int(cells, sim_json_num(o, "status.numberReady"));
                add_int(cells, sim_json_num(o, "status.updatedNumberScheduled"));
                add_int(cells, sim_json_num(o, "status.numberAvailable"));
                add_str(cells, age);
                break;
        case SIM_NAMESPACE:
                add_str(cells, name);
                add_str(cells, sim_json_str(o, "status.phase") ? sim_json_str(o, "status.phase") : "Active");
                add_str(cells, age);
                break;
        case SIM_HPA:
                add_str(cells, name);
                add_fmt(cells, "Deployment/%s", sim_json_str(o, "spec.scaleTargetRef.name"));
                add_str(cells, "cpu: <unknown>/80%"); /* the simulator has no metrics */
                add_fmt(cells, "%d", (int)sim_json_num(o, "spec.minReplicas"));
                add_int(cells, sim_json_num(o, "spec.maxReplicas"));
                add_int(cells, sim_json_num(o, "status.currentReplicas"));
                add_str(cells, age);
                break;
        default:
                add_str(cells, name);
                add_str(cells, sim_json_str(o, "spec.holderIdentity"));
                add_str(cells, age);
                break;
        }
}

/* What the Age column counts from: for events, when they last happened (LAST SEEN). */
static const char *age_stamp(enum sim_kind k, const cJSON *o)
{
        static const char *const event_stamps[] = { "lastTimestamp", "deprecatedLastTimestamp", "eventTime",
                                                    "series.lastObservedTime" };
        if (k == SIM_EVENT)
                for (size_t i = 0; i < ARRAY_SIZE(event_stamps); i++)
                        if (!isempty(sim_json_str(o, event_stamps[i])))
                                return sim_json_str(o, event_stamps[i]);
        return sim_json_str(o, "metadata.creationTimestamp");
}

/* Builds a meta.k8s.io/v1 Table from items (not consumed). include: "None", "Object", or "Metadata". */
cJSON *sim_table_new(struct sim *s, enum sim_kind k, const cJSON *items, const char *include,
                     const cJSON *list_meta)
{
        cJSON *t = cJSON_CreateObject(), *defs, *rows;
        const struct column *cols;
        const cJSON *it;
        size_t ncols;
        uint64_t now = sim_wall_usec(s, sim_now(s));

        if (!t)
                return NULL;
        table_columns(k, &cols, &ncols);
        cJSON_AddStringToObject(t, "kind", "Table");
        cJSON_AddStringToObject(t, "apiVersion", "meta.k8s.io/v1");
        cJSON_AddItemToObject(t, "metadata",
                              list_meta ? cJSON_Duplicate(list_meta, true) : cJSON_CreateObject());
        defs = cJSON_AddArrayToObject(t, "columnDefinitions");
        for (size_t i = 0; i < ncols; i++) {
                cJSON *d = cJSON_CreateObject();
                cJSON_AddStringToObject(d, "name", cols[i].name);
                cJSON_AddStringToObject(d, "type", cols[i].type);
                cJSON_AddStringToObject(d, "format", i == 0 && streq(cols[i].name, "Name") ? "name" : "");
                cJSON_AddStringToObject(d, "description", "");
                cJSON_AddNumberToObject(d, "priority", cols[i].priority);
                cJSON_AddItemToArray(defs, d);
        }
        rows = cJSON_AddArrayToObject(t, "rows");
        cJSON_ArrayForEach (it, items) {
                cJSON *row = cJSON_CreateObject(), *cells;
                char age[32];
                format_age(now, age_stamp(k, it), age, sizeof(age));
                cells = cJSON_AddArrayToObject(row, "cells");
                table_cells(k, it, age, cells);
                if (streq(include, "Object"))
                        cJSON_AddItemToObject(row, "object", cJSON_Duplicate(it, true));
                else if (!streq(include, "None")) {
                        cJSON *pm = cJSON_CreateObject();
                        cJSON_AddStringToObject(pm, "kind", "PartialObjectMetadata");
                        cJSON_AddStringToObject(pm, "apiVersion", "meta.k8s.io/v1");
                        cJSON_AddItemToObject(
                            pm, "metadata",
                            cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(it, "metadata"), true));
                        cJSON_AddItemToObject(row, "object", pm);
                }
                cJSON_AddItemToArray(rows, row);
        }
        return t;
}

bool sim_wants_table(struct MHD_Connection *c)
{
        const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
        return accept && strstr(accept, "as=Table");
}
