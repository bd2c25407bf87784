/* Table-driven configuration: one parser per type, used alike for defaults, YAML, environment and --set, so
 * that every source accepts the same text and config_dump's output reads back. */
#include "spotdrain/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "spotdrain/core.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

#define CONFIG_FILE_MAX (1024u * 1024u)
#define USEC_PER_SEC    1000000ULL
#define USEC_PER_MSEC   1000ULL
#define NO_RANGE        .min = 1, .max = 0

static const struct config_enum_value log_formats[] = {
        { "auto", LOG_FORMAT_AUTO },
        { "text", LOG_FORMAT_TEXT },
        { "json", LOG_FORMAT_JSON },
        { "journal", LOG_FORMAT_JOURNAL },
        { NULL, 0 },
};

static const struct config_enum_value log_levels[] = {
        { "error", LOG_ERR }, { "warning", LOG_WARNING }, { "notice", LOG_NOTICE },
        { "info", LOG_INFO }, { "debug", LOG_DEBUG },     { NULL, 0 },
};

/* The values of enum webhook_format (alert_webhook.h), in its order. */
static const struct config_enum_value webhook_formats[] = {
        { "slack", 0 },
        { "json", 1 },
        { NULL, 0 },
};

static const struct config_enum_value drain_policies[] = {
        { "force", CONFIG_DRAIN_POLICY_FORCE },
        { "respect", CONFIG_DRAIN_POLICY_RESPECT },
        { NULL, 0 },
};

static const struct config_enum_value provision_modes[] = {
        { "fleet", CONFIG_PROVISION_FLEET },
        { "asg", CONFIG_PROVISION_ASG },
        { NULL, 0 },
};

#define OFF(f) offsetof(struct spotdrain_config, f)

/* Keys of one section stay together: config_dump nests them under one heading. */
static const struct config_item items[] = {
        { "log.format", CONFIG_ENUM, "auto", OFF(log_format),
          "log output: journal under systemd, text or JSON on stderr", log_formats, 0, NO_RANGE, false },
        { "log.level", CONFIG_ENUM, "info", OFF(log_level), "most verbose level logged", log_levels, 0,
          NO_RANGE, false },
        { "kubeconfig", CONFIG_STRING, NULL, OFF(kubeconfig),
          "kubeconfig file (unset: $KUBECONFIG, ~/.kube/config, else the in-cluster service account)", NULL,
          0, NO_RANGE, false },
        { "kube.context", CONFIG_STRING, NULL, OFF(kube_context),
          "kubeconfig context (unset: current-context)", NULL, 0, NO_RANGE, false },
        { "kube.qps", CONFIG_DOUBLE, "20", OFF(kube_qps), "Kubernetes API requests per second, sustained",
          NULL, 0, .min = 0.1, .max = 100000, false },
        { "kube.burst", CONFIG_INT, "40", OFF(kube_burst), "Kubernetes API requests allowed in a burst",
          NULL, 0, .min = 1, .max = 100000, false },
        { "metrics_listen", CONFIG_STRING, "0.0.0.0:9464", OFF(metrics_listen),
          "HOST:PORT serving /metrics, /healthz and /readyz", NULL, 0, NO_RANGE, false },
        { "node_name", CONFIG_STRING, NULL, OFF(node_name),
          "this node (agent; unset: $NODE_NAME, else from IMDS)", NULL, 0, NO_RANGE, false },
        { "drain.budget_seconds", CONFIG_DURATION, "120", OFF(drain_budget_usec),
          "time from notice to the instance's end when the notice sets no deadline", NULL, USEC_PER_SEC,
          .min = 1, .max = 86400, false },
        { "drain.safety_margin_seconds", CONFIG_DURATION, "5", OFF(drain_safety_margin_usec),
          "kept free before the deadline: pods must be gone this long before it", NULL, USEC_PER_SEC,
          .min = 0, .max = 3600, false },
        { "drain.policy", CONFIG_ENUM, "force", OFF(drain_policy),
          "force: delete a pod around its PDB at its last safe moment; respect: never go around a PDB",
          drain_policies, 0, NO_RANGE, false },
        { "drain.taint_key", CONFIG_STRING, "spotdrain.io/interruption", OFF(drain_taint_key),
          "NoSchedule taint put on a node being drained", NULL, 0, NO_RANGE, false },
        { "drain.ignore_daemonsets", CONFIG_BOOL, "true", OFF(drain_ignore_daemonsets),
          "leave DaemonSet pods on the node", NULL, 0, NO_RANGE, false },
        { "drain.delete_emptydir_data", CONFIG_BOOL, "true", OFF(drain_delete_emptydir_data),
          "evict pods with emptyDir volumes (their data dies with the node anyway)", NULL, 0, NO_RANGE,
          false },
        { "drain.default_startup_seconds", CONFIG_DURATION, "30", OFF(drain_default_startup_usec),
          "assumed creation-to-Ready time of a replacement when nothing was measured", NULL, USEC_PER_SEC,
          .min = 0, .max = 86400, false },
        { "drain.expected_shutdown_fraction", CONFIG_DOUBLE, "0.5", OFF(drain_expected_shutdown_fraction),
          "share of its grace period a pod is expected to take to stop while none of its siblings was seen "
          "stopping (the drain-infeasible verdict; forcing still allows the whole grace period)",
          NULL, 0, .min = 0.01, .max = 1, false },
        { "drain.eviction_retry_floor_ms", CONFIG_DURATION, "200", OFF(drain_eviction_retry_floor_usec),
          "shortest wait before retrying a 429 eviction when the cluster says nothing", NULL, USEC_PER_MSEC,
          .min = 1, .max = 60000, false },
        { "drain.critical_priority_classes", CONFIG_STRV, "system-cluster-critical,system-node-critical",
          OFF(drain_critical_priority_classes), "priority classes evicted last", NULL, 0, NO_RANGE, false },
        { "aws.region", CONFIG_STRING, NULL, OFF(aws_region),
          "AWS region (unset: $AWS_REGION, else from IMDS)", NULL, 0, NO_RANGE, false },
        { "aws.queue_url", CONFIG_STRING, NULL, OFF(aws_queue_url),
          "SQS queue of interruption events (controller)", NULL, 0, NO_RANGE, false },
        { "controller.first_visibility_seconds", CONFIG_DURATION, "10",
          OFF(controller_first_visibility_usec),
          "how long a received notice stays hidden until its drain is recorded on the node (then 60 s, "
          "renewed): a controller killed in between gets it back this soon",
          NULL, USEC_PER_SEC, .min = 2, .max = 60, false },
        { "imds.endpoint", CONFIG_STRING, NULL, OFF(imds_endpoint),
          "IMDS base URL (unset: $AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254)", NULL, 0,
          NO_RANGE, false },
        { "imds.poll_interval_seconds", CONFIG_DURATION, "0.5", OFF(imds_poll_interval_usec),
          "how often the agent asks IMDS for a notice", NULL, USEC_PER_SEC, .min = 0.05, .max = 60, false },
        { "imds.token_ttl_seconds", CONFIG_DURATION, "21600", OFF(imds_token_ttl_usec),
          "lifetime asked for an IMDSv2 token (renewed before it ends and after a 401)", NULL, USEC_PER_SEC,
          .min = 1, .max = 21600, false },
        { "imds.allow_v1", CONFIG_BOOL, "false", OFF(imds_allow_v1),
          "fall back to IMDSv1 (no token) when the token request fails", NULL, 0, NO_RANGE, false },
        { "agent.rebalance_revert_seconds", CONFIG_DURATION, "600", OFF(agent_rebalance_revert_usec),
          "remove the rebalance soft taint when no interruption follows within this time", NULL,
          USEC_PER_SEC, .min = 1, .max = 86400, false },
        { "agent.maintenance_lead_seconds", CONFIG_DURATION, "300", OFF(agent_maintenance_lead_usec),
          "drain this long before a scheduled maintenance starts", NULL, USEC_PER_SEC, .min = 0,
          .max = 86400, false },
        { "agent.asg_deadline_seconds", CONFIG_DURATION, "3600", OFF(agent_asg_deadline_usec),
          "deadline of an Auto Scaling termination (the lifecycle hook's heartbeat timeout)", NULL,
          USEC_PER_SEC, .min = 1, .max = 172800, false },
        { "alerts.webhook_url", CONFIG_STRING, NULL, OFF(alerts_webhook_url),
          "URL alerts are POSTed to (\"file:PATH\" reads it from a file; it often embeds a secret: "
          "check-config hides it)",
          NULL, 0, NO_RANGE, true },
        { "alerts.webhook_format", CONFIG_ENUM, "slack", OFF(alerts_webhook_format),
          "slack: {\"text\": ...}; json: every alert field", webhook_formats, 0, NO_RANGE, false },
        { "alerts.webhook_template", CONFIG_STRING, NULL, OFF(alerts_webhook_template),
          "message template ({{kind}}, {{node}}, {{message}}, ... see docs/operations.md)", NULL, 0,
          NO_RANGE, false },
        { "alerts.webhook_headers_file", CONFIG_STRING, NULL, OFF(alerts_webhook_headers_file),
          "file of \"Name: value\" header lines sent with every alert (e.g. Authorization)", NULL, 0,
          NO_RANGE, false },
        { "alerts.webhook_timeout_seconds", CONFIG_DURATION, "10", OFF(alerts_webhook_timeout_usec),
          "time allowed for one delivery attempt", NULL, USEC_PER_SEC, .min = 0.001, .max = 3600, false },
        { "alerts.webhook_max_attempts", CONFIG_INT, "5", OFF(alerts_webhook_max_attempts),
          "delivery attempts of one alert before giving up", NULL, 0, .min = 1, .max = 100, false },
        { "alerts.webhook_flush_seconds", CONFIG_DURATION, "5", OFF(alerts_webhook_flush_usec),
          "on exit (drain done, SIGTERM), how long to wait for alerts still being delivered to the webhook",
          NULL, USEC_PER_SEC, .min = 0, .max = 300, false },
        { "provision.enabled", CONFIG_BOOL, "false", OFF(provision_enabled),
          "start replacement capacity when a notice comes (rebalance recommendation first)", NULL, 0,
          NO_RANGE, false },
        { "provision.mode", CONFIG_ENUM, "fleet", OFF(provision_mode),
          "fleet: EC2 CreateFleet per bin of displaced pods; asg: raise the Auto Scaling group's desired "
          "capacity",
          provision_modes, 0, NO_RANGE, false },
        { "provision.endpoint", CONFIG_STRING, NULL, OFF(provision_endpoint),
          "EC2 and Auto Scaling endpoint (unset: $AWS_ENDPOINT_URL_EC2, $AWS_ENDPOINT_URL, else AWS's)",
          NULL, 0, NO_RANGE, false },
        { "provision.catalog", CONFIG_STRING, NULL, OFF(provision_catalog),
          "instance type catalog JSON (unset: $SPOTDRAIN_CATALOG, else the installed one)", NULL, 0,
          NO_RANGE, false },
        { "provision.launch_template", CONFIG_STRING, NULL, OFF(provision_launch_template),
          "launch template of the replacements (fleet mode): an lt-... id or a name", NULL, 0, NO_RANGE,
          false },
        { "provision.launch_template_version", CONFIG_STRING, NULL, OFF(provision_launch_template_version),
          "launch template version (unset: $Default)", NULL, 0, NO_RANGE, false },
        { "provision.asg_name", CONFIG_STRING, NULL, OFF(provision_asg_name),
          "Auto Scaling group whose desired capacity is raised (asg mode)", NULL, 0, NO_RANGE, false },
        { "provision.subnets", CONFIG_STRV, NULL, OFF(provision_subnets),
          "subnets replacements may use, each \"subnet-id=zone\"", NULL, 0, NO_RANGE, false },
        { "provision.families", CONFIG_STRV, NULL, OFF(provision_families),
          "instance families allowed (empty: any in the catalog)", NULL, 0, NO_RANGE, false },
        { "provision.sizes", CONFIG_STRV, NULL, OFF(provision_sizes),
          "instance sizes allowed, e.g. xlarge,2xlarge (empty: any)", NULL, 0, NO_RANGE, false },
        { "provision.architectures", CONFIG_STRV, "x86_64", OFF(provision_architectures),
          "architectures allowed (x86_64, arm64)", NULL, 0, NO_RANGE, false },
        { "provision.capacity_types", CONFIG_STRV, "spot,on-demand", OFF(provision_capacity_types),
          "capacity types allowed, spot first with on-demand as the fallback", NULL, 0, NO_RANGE, false },
        { "provision.triggers", CONFIG_STRV, "rebalance-recommendation,spot-interruption,scheduled-change",
          OFF(provision_triggers),
          "notice kinds that start a replacement (an interruption after a rebalance launches nothing more)",
          NULL, 0, NO_RANGE, false },
        { "provision.max_memory", CONFIG_STRING, NULL, OFF(provision_max_memory),
          "largest instance memory allowed, a quantity such as 72Gi (unset: no limit)", NULL, 0, NO_RANGE,
          false },
        { "provision.max_vcpus", CONFIG_INT, "0", OFF(provision_max_vcpus),
          "largest instance vCPU count allowed (0: no limit)", NULL, 0, .min = 0, .max = 100000, false },
        { "provision.vcpu_limit_per_window", CONFIG_INT, "0", OFF(provision_vcpu_limit_per_window),
          "vCPUs that may be launched per window (0: no limit)", NULL, 0, .min = 0, .max = 10000000, false },
        { "provision.vcpu_window_seconds", CONFIG_DURATION, "600", OFF(provision_vcpu_window_usec),
          "the window of provision.vcpu_limit_per_window", NULL, USEC_PER_SEC, .min = 1, .max = 86400,
          false },
        { "provision.ready_timeout_seconds", CONFIG_DURATION, "600", OFF(provision_ready_timeout_usec),
          "launch to Ready allowed before replacement-failed", NULL, USEC_PER_SEC, .min = 1, .max = 86400,
          false },
        { "provision.cluster_tag_key", CONFIG_STRING, NULL, OFF(provision_cluster_tag_key),
          "extra instance tag KEY=owned, e.g. kubernetes.io/cluster/NAME (unset: none)", NULL, 0, NO_RANGE,
          false },
};

union config_value {
        char *s;
        int64_t i;
        double d;
        bool b;
        uint64_t u;
        int e;
        char **v;
};

const struct config_item *config_items(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(items);
        return items;
}

const struct config_item *config_find(const char *key)
{
        for (size_t i = 0; i < ARRAY_SIZE(items); i++)
                if (streq(items[i].key, key))
                        return &items[i];
        return NULL;
}

/* True when some key lies below the dotted prefix. */
static bool config_has_section(const char *prefix)
{
        size_t l = strlen(prefix);
        for (size_t i = 0; i < ARRAY_SIZE(items); i++)
                if (!strncmp(items[i].key, prefix, l) && items[i].key[l] == '.')
                        return true;
        return false;
}

static void value_clear(const struct config_item *it, union config_value *v)
{
        if (it->type == CONFIG_STRING)
                free(v->s);
        else if (it->type == CONFIG_STRV)
                strv_free(v->v);
        memset(v, 0, sizeof(*v));
}

static void *field(struct spotdrain_config *c, const struct config_item *it)
{
        return (char *)c + it->offset;
}

static const void *cfield(const struct spotdrain_config *c, const struct config_item *it)
{
        return (const char *)c + it->offset;
}

/* Moves v into the field, freeing what was there. */
static void value_store(struct spotdrain_config *c, const struct config_item *it, union config_value *v)
{
        void *f = field(c, it);
        switch (it->type) {
        case CONFIG_STRING:
                free(*(char **)f);
                *(char **)f = TAKE_PTR(v->s);
                break;
        case CONFIG_STRV:
                strv_free(*(char ***)f);
                *(char ***)f = TAKE_PTR(v->v);
                break;
        case CONFIG_INT:
                *(int64_t *)f = v->i;
                break;
        case CONFIG_DOUBLE:
                *(double *)f = v->d;
                break;
        case CONFIG_BOOL:
                *(bool *)f = v->b;
                break;
        case CONFIG_DURATION:
                *(uint64_t *)f = v->u;
                break;
        case CONFIG_ENUM:
                *(int *)f = v->e;
                break;
        }
}

static const char *unit_name(const struct config_item *it)
{
        return it->unit_usec == USEC_PER_MSEC ? "milliseconds" : "seconds";
}

/* What a value of the item's type looks like, for messages. */
static char *expected(const struct config_item *it)
{
        switch (it->type) {
        case CONFIG_STRING:
                return strdup("a string");
        case CONFIG_INT:
                return strdup("an integer");
        case CONFIG_DOUBLE:
                return strdup("a number");
        case CONFIG_BOOL:
                return strdup("true or false");
        case CONFIG_DURATION:
                return strprintf("a duration in %s", unit_name(it));
        case CONFIG_STRV:
                return strdup("a list of strings");
        case CONFIG_ENUM: {
                struct buf b = { 0 };
                for (const struct config_enum_value *e = it->enum_values; e->name; e++)
                        if (buf_printf(&b, "%s%s", e == it->enum_values ? "one of " : ", ", e->name) < 0) {
                                buf_free(&b);
                                return NULL;
                        }
                return b.data;
        }
        }
        return NULL;
}

static bool in_range(const struct config_item *it, double x)
{
        return it->min > it->max || (x >= it->min && x <= it->max);
}

static char *range_error(const struct config_item *it, const char *text)
{
        return strprintf("%s: '%s' is out of range [%g, %g]", it->key, text, it->min, it->max);
}

static int split_list(const char *text, char ***ret)
{
        size_t n = 0;
        char **v = calloc(1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        const char *p = text;
        while (*p) {
                size_t l = strcspn(p, ",");
                const char *s = p, *e = p + l;
                while (s < e && isspace((unsigned char)*s))
                        s++;
                while (e > s && isspace((unsigned char)e[-1]))
                        e--;
                if (e > s) {
                        char **nv = realloc(v, (n + 2) * sizeof(char *));
                        if (!nv) {
                                strv_free(v);
                                return -ENOMEM;
                        }
                        v = nv;
                        v[n] = strndup(s, (size_t)(e - s));
                        if (!v[n]) {
                                strv_free(v);
                                return -ENOMEM;
                        }
                        v[++n] = NULL;
                }
                p += l;
                if (*p == ',')
                        p++;
        }
        *ret = v;
        return 0;
}

/* Parses text (NULL = unset) as the item's type. On a bad value returns -EINVAL with *ret_why "KEY: ...". */
static int value_parse(const struct config_item *it, const char *text, union config_value *ret,
                       char **ret_why)
{
        union config_value v = { 0 };
        bool unset = !text || !*text || streq(text, "null") || streq(text, "~");
        if (unset) {
                if (it->type == CONFIG_STRING) {
                        *ret = v;
                        return 0;
                }
                if (it->type == CONFIG_STRV) {
                        v.v = calloc(1, sizeof(char *));
                        if (!v.v)
                                return -ENOMEM;
                        *ret = v;
                        return 0;
                }
                _cleanup_free_ char *exp = expected(it);
                *ret_why = strprintf("%s: missing value (expected %s)", it->key, exp ? exp : "a value");
                return -EINVAL;
        }
        char *end = NULL;
        bool ok = false;
        switch (it->type) {
        case CONFIG_STRING:
                v.s = strdup(text);
                if (!v.s)
                        return -ENOMEM;
                ok = true;
                break;
        case CONFIG_STRV:
                if (split_list(text, &v.v) < 0)
                        return -ENOMEM;
                ok = true;
                break;
        case CONFIG_INT: {
                errno = 0;
                long long x = strtoll(text, &end, 10);
                ok = !errno && end != text && !*end;
                if (ok && !in_range(it, (double)x)) {
                        *ret_why = range_error(it, text);
                        return -ERANGE;
                }
                v.i = x;
                break;
        }
        case CONFIG_DOUBLE: {
                errno = 0;
                double x = strtod(text, &end);
                ok = !errno && end != text && !*end && isfinite(x);
                if (ok && !in_range(it, x)) {
                        *ret_why = range_error(it, text);
                        return -ERANGE;
                }
                v.d = x;
                break;
        }
        case CONFIG_BOOL:
                if (!strcasecmp(text, "true") || !strcasecmp(text, "yes") || !strcasecmp(text, "on") ||
                    streq(text, "1")) {
                        v.b = true;
                        ok = true;
                } else if (!strcasecmp(text, "false") || !strcasecmp(text, "no") ||
                           !strcasecmp(text, "off") || streq(text, "0")) {
                        v.b = false;
                        ok = true;
                }
                break;
        case CONFIG_DURATION: {
                errno = 0;
                double x = strtod(text, &end);
                uint64_t unit = it->unit_usec;
                if (!errno && end != text && isfinite(x)) {
                        if (streq(end, "ms"))
                                unit = USEC_PER_MSEC;
                        else if (streq(end, "s"))
                                unit = USEC_PER_SEC;
                        else if (streq(end, "m") || streq(end, "min"))
                                unit = 60 * USEC_PER_SEC;
                        else if (streq(end, "h"))
                                unit = 3600 * USEC_PER_SEC;
                        else if (*end)
                                break;
                        ok = x >= 0;
                }
                if (!ok)
                        break;
                double usec = x * (double)unit;
                if (!in_range(it, usec / (double)it->unit_usec) || usec > 1e15) {
                        *ret_why = range_error(it, text);
                        return -ERANGE;
                }
                v.u = (uint64_t)llround(usec);
                break;
        }
        case CONFIG_ENUM:
                for (const struct config_enum_value *e = it->enum_values; e->name; e++)
                        if (streq(e->name, text)) {
                                v.e = e->value;
                                ok = true;
                        }
                break;
        }
        if (!ok) {
                _cleanup_free_ char *exp = expected(it);
                *ret_why =
                    strprintf("%s: expected %s, got '%s'", it->key, exp ? exp : "another value", text);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int config_assign(struct spotdrain_config *c, const struct config_item *it, const char *text,
                         char **ret_why)
{
        union config_value v;
        int r = value_parse(it, text, &v, ret_why);
        if (r < 0)
                return r;
        value_store(c, it, &v);
        return 0;
}

struct spotdrain_config *config_free(struct spotdrain_config *c)
{
        if (!c)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
                if (items[i].type == CONFIG_STRING)
                        free(*(char **)field(c, &items[i]));
                else if (items[i].type == CONFIG_STRV)
                        strv_free(*(char ***)field(c, &items[i]));
        }
        free(c);
        return NULL;
}

int config_new(struct spotdrain_config **ret)
{
        _cleanup_(config_freep) struct spotdrain_config *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
                char *why = NULL;
                int r = config_assign(c, &items[i], items[i].def, &why);
                /* the defaults are this file's own: a failure here is a bug in the table */
                free(why);
                if (r < 0)
                        return r == -ENOMEM ? r : -EINVAL;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static int strv_copy(char **src, char ***ret)
{
        size_t n = 0;
        while (src && src[n])
                n++;
        char **v = calloc(n + 1, sizeof(char *));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                v[i] = strdup(src[i]);
                if (!v[i]) {
                        strv_free(v);
                        return -ENOMEM;
                }
        }
        *ret = v;
        return 0;
}

static int config_copy(const struct spotdrain_config *src, struct spotdrain_config **ret)
{
        _cleanup_(config_freep) struct spotdrain_config *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        /* scalars bytewise; the pointers are cleared first so that a failure half way frees only copies */
        *c = *src;
        for (size_t i = 0; i < ARRAY_SIZE(items); i++)
                if (items[i].type == CONFIG_STRING || items[i].type == CONFIG_STRV)
                        memset(field(c, &items[i]), 0, sizeof(void *));
        for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
                const struct config_item *it = &items[i];
                if (it->type == CONFIG_STRING) {
                        const char *str = *(char *const *)cfield(src, it);
                        if (str && !(*(char **)field(c, it) = strdup(str)))
                                return -ENOMEM;
                } else if (it->type == CONFIG_STRV) {
                        if (strv_copy(*(char **const *)cfield(src, it), (char ***)field(c, it)) < 0)
                                return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* Replaces dst's contents with src's and frees src. */
static void config_move(struct spotdrain_config *dst, struct spotdrain_config *src)
{
        struct spotdrain_config tmp = *dst;
        *dst = *src;
        *src = tmp;
        config_free(src);
}

static int fail(char **ret_error, int r, char *msg)
{
        if (ret_error && msg)
                *ret_error = msg;
        else
                free(msg);
        return r;
}

/* ---- YAML ---- */

struct cfile {
        const char *path;
        char *error;
};

static int cfile_fail(struct cfile *f, const struct ynode *at, char *msg)
{
        if (!msg)
                return -ENOMEM;
        f->error = strprintf("%s:%u: %s", f->path, at->line, msg);
        free(msg);
        return f->error ? -EINVAL : -ENOMEM;
}

static int cfile_apply_value(struct cfile *f, struct spotdrain_config *c, const struct config_item *it,
                             const struct ynode *n)
{
        union config_value v = { 0 };
        char *why = NULL;
        int r;
        if (n->type == YNODE_SEQ) {
                if (it->type != CONFIG_STRV) {
                        _cleanup_free_ char *exp = expected(it);
                        return cfile_fail(
                            f, n, strprintf("%s: expected %s, got a list", it->key, exp ? exp : "a scalar"));
                }
                size_t k = 0;
                v.v = calloc(n->n_children + 1, sizeof(char *));
                if (!v.v)
                        return -ENOMEM;
                YNODE_FOREACH (e, n) {
                        const char *s = ynode_str(e);
                        if (e->type != YNODE_SCALAR || !s) {
                                value_clear(it, &v);
                                return cfile_fail(f, e,
                                                  strprintf("%s: expected a list of strings", it->key));
                        }
                        v.v[k] = strdup(s);
                        if (!v.v[k++]) {
                                value_clear(it, &v);
                                return -ENOMEM;
                        }
                }
                value_store(c, it, &v);
                return 0;
        }
        if (n->type == YNODE_MAP) {
                _cleanup_free_ char *exp = expected(it);
                return cfile_fail(f, n,
                                  strprintf("%s: expected %s, got a map", it->key, exp ? exp : "a scalar"));
        }
        if (it->type == CONFIG_STRV && !ynode_is_null(n))
                /* a single string would be split on commas; a YAML file says lists as lists */
                return cfile_fail(f, n,
                                  strprintf("%s: expected a list of strings, got '%s'", it->key, n->value));
        r = value_parse(it, ynode_str(n), &v, &why);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return cfile_fail(f, n, why);
        value_store(c, it, &v);
        return 0;
}

static int cfile_apply_map(struct cfile *f, struct spotdrain_config *c, const struct ynode *map,
                           const char *prefix)
{
        YNODE_FOREACH (n, map) {
                _cleanup_free_ char *key = prefix ? strprintf("%s.%s", prefix, n->key) : strdup(n->key);
                if (!key)
                        return -ENOMEM;
                const struct config_item *it = config_find(key);
                int r;
                if (it)
                        r = cfile_apply_value(f, c, it, n);
                else if (n->type == YNODE_MAP && config_has_section(key))
                        r = cfile_apply_map(f, c, n, key);
                else
                        r = cfile_fail(f, n, strprintf("unknown key '%s'", key));
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_load_file(struct spotdrain_config *c, const char *path, char **ret_error)
{
        _cleanup_(ynode_freep) struct ynode *root = NULL;
        char *err = NULL;
        int r = yaml_load_file(path, CONFIG_FILE_MAX, &root, &err);
        if (r < 0)
                return fail(ret_error, r, err);
        struct cfile f = { .path = path };
        if (root->type != YNODE_MAP)
                return fail(ret_error, -EINVAL,
                            strprintf("%s:%u: expected a map of settings", path, root->line));
        struct spotdrain_config *copy = NULL;
        r = config_copy(c, &copy);
        if (r < 0)
                return r;
        r = cfile_apply_map(&f, copy, root, NULL);
        if (r < 0) {
                config_free(copy);
                return fail(ret_error, r, f.error);
        }
        config_move(c, copy);
        return 0;
}

/* ---- environment and --set ---- */

char *config_env_name(const char *key)
{
        char *s = strprintf("SPOTDRAIN_%s", key);
        if (!s)
                return NULL;
        for (char *p = s; *p; p++)
                *p = *p == '.' ? '_' : (char)toupper((unsigned char)*p);
        return s;
}

int config_load_env(struct spotdrain_config *c, char **ret_error)
{
        /* every value is checked before any is applied, so a bad variable leaves c as it was */
        struct spotdrain_config *copy = NULL;
        int r = config_copy(c, &copy);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
                _cleanup_free_ char *name = config_env_name(items[i].key);
                if (!name) {
                        config_free(copy);
                        return -ENOMEM;
                }
                const char *v = getenv(name);
                if (!v)
                        continue;
                char *why = NULL;
                r = config_assign(copy, &items[i], v, &why);
                if (r < 0) {
                        config_free(copy);
                        if (!why)
                                return r;
                        char *msg = strprintf("%s: %s", name, why);
                        free(why);
                        return fail(ret_error, r, msg);
                }
        }
        config_move(c, copy);
        return 0;
}

int config_set_value(struct spotdrain_config *c, const char *key, const char *value, char **ret_error)
{
        const struct config_item *it = config_find(key);
        if (!it)
                return fail(ret_error, -ENOENT, strprintf("unknown key '%s'", key));
        char *why = NULL;
        int r = config_assign(c, it, value, &why);
        if (r < 0)
                return fail(ret_error, r, why);
        return 0;
}

int config_set(struct spotdrain_config *c, const char *assignment, char **ret_error)
{
        const char *eq = strchr(assignment, '=');
        if (!eq)
                return fail(ret_error, -EINVAL, strprintf("--set %s: expected KEY=VALUE", assignment));
        _cleanup_free_ char *key = strndup(assignment, (size_t)(eq - assignment));
        if (!key)
                return -ENOMEM;
        char *why = NULL;
        int r = config_set_value(c, key, eq + 1, &why);
        if (r < 0) {
                char *msg = why ? strprintf("--set %s", why) : NULL;
                free(why);
                return fail(ret_error, r, msg);
        }
        return 0;
}

int config_load(const char *path, char *const *sets, struct spotdrain_config **ret, char **ret_error)
{
        _cleanup_(config_freep) struct spotdrain_config *c = NULL;
        int r = config_new(&c);
        if (r < 0)
                return fail(ret_error, r, strprintf("configuration defaults: %s", strerror(-r)));
        if (path) {
                r = config_load_file(c, path, ret_error);
                if (r < 0)
                        return r;
        }
        r = config_load_env(c, ret_error);
        if (r < 0)
                return r;
        for (char *const *s = sets; s && *s; s++) {
                r = config_set(c, *s, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- dump ---- */

static int dump_string(struct buf *b, const char *s)
{
        if (!s)
                return buf_printf(b, "null");
        if (buf_append(b, "\"", 1) < 0)
                return -ENOMEM;
        for (const char *p = s; *p; p++) {
                unsigned char ch = (unsigned char)*p;
                int r;
                if (ch == '"' || ch == '\\')
                        r = buf_printf(b, "\\%c", ch);
                else if (ch < 0x20 || ch == 0x7f)
                        r = buf_printf(b, "\\x%02x", ch);
                else
                        r = buf_append(b, p, 1);
                if (r < 0)
                        return -ENOMEM;
        }
        return buf_append(b, "\"", 1);
}

static int dump_value(struct buf *b, const struct spotdrain_config *c, const struct config_item *it)
{
        const void *f = cfield(c, it);
        switch (it->type) {
        case CONFIG_STRING: {
                const char *s = *(char *const *)f;
                return dump_string(b, it->secret && s ? "<hidden>" : s);
        }
        case CONFIG_INT:
                return buf_printf(b, "%" PRId64, *(const int64_t *)f);
        case CONFIG_DOUBLE:
                return buf_printf(b, "%.17g", *(const double *)f);
        case CONFIG_BOOL:
                return buf_printf(b, "%s", *(const bool *)f ? "true" : "false");
        case CONFIG_DURATION: {
                uint64_t u = *(const uint64_t *)f;
                if (u % it->unit_usec == 0)
                        return buf_printf(b, "%" PRIu64, u / it->unit_usec);
                return buf_printf(b, "%.17g", (double)u / (double)it->unit_usec);
        }
        case CONFIG_ENUM:
                for (const struct config_enum_value *e = it->enum_values; e->name; e++)
                        if (e->value == *(const int *)f)
                                return buf_printf(b, "%s", e->name);
                return buf_printf(b, "null");
        case CONFIG_STRV: {
                char *const *v = *(char **const *)f;
                if (buf_append(b, "[", 1) < 0)
                        return -ENOMEM;
                for (size_t i = 0; v && v[i]; i++)
                        if ((i > 0 && buf_append(b, ", ", 2) < 0) || dump_string(b, v[i]) < 0)
                                return -ENOMEM;
                return buf_append(b, "]", 1);
        }
        }
        return -EINVAL;
}

int config_dump(const struct spotdrain_config *c, char **ret)
{
        struct buf b = { 0 };
        const char *section = NULL;
        size_t section_len = 0;
        for (size_t i = 0; i < ARRAY_SIZE(items); i++) {
                const struct config_item *it = &items[i];
                const char *dot = strchr(it->key, '.');
                size_t sl = dot ? (size_t)(dot - it->key) : 0;
                int r = 0;
                if (sl > 0 && !(section && section_len == sl && !strncmp(section, it->key, sl)))
                        r = buf_printf(&b, "%.*s:\n", (int)sl, it->key);
                section = sl > 0 ? it->key : NULL;
                section_len = sl;
                if (r >= 0)
                        r = buf_printf(&b, "%s%s: ", sl > 0 ? "  " : "", sl > 0 ? dot + 1 : it->key);
                if (r >= 0)
                        r = dump_value(&b, c, it);
                if (r >= 0)
                        r = buf_printf(&b, "  # %s\n", it->description);
                if (r < 0) {
                        buf_free(&b);
                        return -ENOMEM;
                }
        }
        if (buf_append(&b, "", 1) < 0) {
                buf_free(&b);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}
