#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"
#include "spotdrain/core.h"

struct rnode {
        char *name;
        double notice_at, cordoned_at, deadline_at, last_safe_at, drained_at;
};
struct rpod {
        char *node, *name, *pdb;
        double stop_at, gone_at, last_safe_at;
        unsigned flags;
};
struct rsample {
        double at;
        int healthy, desired;
};
struct rpdb {
        char *name;
        struct rsample *s;
        size_t n;
};
struct ralert {
        char *kind, *node, *message;
        double at;
};

struct report {
        char *title;
        struct rnode *nodes;
        size_t n_nodes;
        struct rpod *pods;
        size_t n_pods;
        struct rpdb *pdbs;
        size_t n_pdbs;
        struct ralert *alerts;
        size_t n_alerts;
};

int report_new(const char *title, struct report **ret)
{
        struct report *r = calloc(1, sizeof(*r));
        if (!r || !(r->title = strdup(title ?: "")))
                return report_free(r), -ENOMEM;
        *ret = r;
        return 0;
}

struct report *report_free(struct report *r)
{
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_nodes; i++)
                free(r->nodes[i].name);
        for (size_t i = 0; i < r->n_pods; i++) {
                free(r->pods[i].node);
                free(r->pods[i].name);
                free(r->pods[i].pdb);
        }
        for (size_t i = 0; i < r->n_pdbs; i++) {
                free(r->pdbs[i].name);
                free(r->pdbs[i].s);
        }
        for (size_t i = 0; i < r->n_alerts; i++) {
                free(r->alerts[i].kind);
                free(r->alerts[i].node);
                free(r->alerts[i].message);
        }
        free(r->nodes);
        free(r->pods);
        free(r->pdbs);
        free(r->alerts);
        free(r->title);
        free(r);
        return NULL;
}

/* Room for one more element of an array of n. */
static int grow(void **array, size_t n, size_t size)
{
        void *p = realloc(*array, (n + 1) * size);
        if (!p)
                return -ENOMEM;
        *array = p;
        return 0;
}

/* strdup that keeps NULL; false on ENOMEM. */
static bool dup_opt(char **dst, const char *s)
{
        *dst = s ? strdup(s) : NULL;
        return !s || *dst;
}

int report_add_node(struct report *r, const char *name, double notice_at, double cordoned_at,
                    double deadline_at, double last_safe_at, double drained_at)
{
        if (grow((void **)&r->nodes, r->n_nodes, sizeof(*r->nodes)) < 0)
                return -ENOMEM;
        struct rnode *n = &r->nodes[r->n_nodes];
        *n = (struct rnode){ .notice_at = notice_at,
                             .cordoned_at = cordoned_at,
                             .deadline_at = deadline_at,
                             .last_safe_at = last_safe_at,
                             .drained_at = drained_at };
        if (!dup_opt(&n->name, name ?: ""))
                return -ENOMEM;
        r->n_nodes++;
        return 0;
}

int report_node_facts(const struct report *r, const char *name, double *ret_deadline, double *ret_drained)
{
        for (size_t i = 0; i < r->n_nodes; i++)
                if (streq(r->nodes[i].name, name)) {
                        *ret_deadline = r->nodes[i].deadline_at;
                        *ret_drained = r->nodes[i].drained_at;
                        return 0;
                }
        return -ENOENT;
}

int report_add_pod(struct report *r, const char *node, const char *name, const char *pdb, double stop_at,
                   double gone_at, double last_safe_at, unsigned flags)
{
        if (grow((void **)&r->pods, r->n_pods, sizeof(*r->pods)) < 0)
                return -ENOMEM;
        struct rpod *p = &r->pods[r->n_pods];
        *p = (struct rpod){
                .stop_at = stop_at, .gone_at = gone_at, .last_safe_at = last_safe_at, .flags = flags
        };
        if (!dup_opt(&p->node, node ?: "") || !dup_opt(&p->name, name ?: "") || !dup_opt(&p->pdb, pdb)) {
                free(p->node);
                free(p->name);
                return -ENOMEM;
        }
        r->n_pods++;
        return 0;
}

int report_add_pdb_sample(struct report *r, const char *pdb, double at, int healthy, int desired)
{
        struct rpdb *d = NULL;
        for (size_t i = 0; i < r->n_pdbs && !d; i++)
                if (streq(r->pdbs[i].name, pdb))
                        d = &r->pdbs[i];
        if (!d) {
                if (grow((void **)&r->pdbs, r->n_pdbs, sizeof(*r->pdbs)) < 0)
                        return -ENOMEM;
                d = &r->pdbs[r->n_pdbs];
                *d = (struct rpdb){ .name = strdup(pdb) };
                if (!d->name)
                        return -ENOMEM;
                r->n_pdbs++;
        }
        if (d->n > 0 && d->s[d->n - 1].healthy == healthy && d->s[d->n - 1].desired == desired)
                return 0;
        if (grow((void **)&d->s, d->n, sizeof(*d->s)) < 0)
                return -ENOMEM;
        d->s[d->n++] = (struct rsample){ .at = at, .healthy = healthy, .desired = desired };
        return 0;
}

int report_add_alert(struct report *r, const char *kind, const char *node, double at, const char *message)
{
        if (grow((void **)&r->alerts, r->n_alerts, sizeof(*r->alerts)) < 0)
                return -ENOMEM;
        struct ralert *a = &r->alerts[r->n_alerts];
        *a = (struct ralert){ .at = at };
        if (!dup_opt(&a->kind, kind ?: "") || !dup_opt(&a->node, node) ||
            !dup_opt(&a->message, message ?: "")) {
                free(a->kind);
                free(a->node);
                return -ENOMEM;
        }
        r->n_alerts++;
        return 0;
}

/* ---- rendering ---- */

/* The page under construction; the first error sticks and the rest is skipped. */
struct out {
        struct buf b;
        int error;
};

static void __attribute__((format(printf, 2, 3))) put(struct out *o, const char *fmt, ...)
{
        va_list ap;
        char small[512];

        if (o->error < 0)
                return;
        va_start(ap, fmt);
        int n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n < 0) {
                o->error = -EINVAL;
                return;
        }
        if ((size_t)n < sizeof(small)) {
                o->error = buf_append(&o->b, small, (size_t)n);
                return;
        }
        char *big = malloc((size_t)n + 1);
        if (!big) {
                o->error = -ENOMEM;
                return;
        }
        va_start(ap, fmt);
        vsnprintf(big, (size_t)n + 1, fmt, ap);
        va_end(ap);
        o->error = buf_append(&o->b, big, (size_t)n);
        free(big);
}

/* Text or an attribute value taken from the cluster: every character HTML gives a meaning is escaped. */
static void put_escaped(struct out *o, const char *s)
{
        for (; s && *s && o->error >= 0; s++) {
                switch (*s) {
                case '&':
                        put(o, "&amp;");
                        break;
                case '<':
                        put(o, "&lt;");
                        break;
                case '>':
                        put(o, "&gt;");
                        break;
                case '"':
                        put(o, "&quot;");
                        break;
                case '\'':
                        put(o, "&#39;");
                        break;
                default:
                        o->error = buf_append(&o->b, s, 1);
                }
        }
}

/* Geometry: a label column, then the time axis. */
#define WIDTH     1100.0
#define LABEL_W   280.0
#define PLOT_W    (WIDTH - LABEL_W - 20.0)
#define ROW_H     16.0
#define BAR_H     10.0
#define MIN_BAR_W 2.0
#define PDB_H     70.0

struct axis {
        double t0, t1;
};

static double x_of(const struct axis *a, double t)
{
        return LABEL_W + (t - a->t0) / (a->t1 - a->t0) * PLOT_W;
}

static void widen(struct axis *a, double t)
{
        if (isnan(t))
                return;
        a->t0 = fmin(a->t0, t);
        a->t1 = fmax(a->t1, t);
}

static struct axis make_axis(const struct report *r)
{
        struct axis a = { .t0 = INFINITY, .t1 = -INFINITY };
        for (size_t i = 0; i < r->n_nodes; i++) {
                widen(&a, r->nodes[i].notice_at);
                widen(&a, r->nodes[i].deadline_at);
                widen(&a, r->nodes[i].drained_at);
        }
        for (size_t i = 0; i < r->n_pods; i++) {
                widen(&a, r->pods[i].stop_at);
                widen(&a, r->pods[i].gone_at);
                widen(&a, r->pods[i].last_safe_at);
        }
        for (size_t i = 0; i < r->n_alerts; i++)
                widen(&a, r->alerts[i].at);
        if (!isfinite(a.t0))
                a = (struct axis){ 0, 1 };
        double pad = fmax((a.t1 - a.t0) * 0.03, 1);
        a.t0 = fmax(a.t0 - pad, fmin(a.t0, 0));
        a.t1 += pad;
        return a;
}

/* A tick every 1, 2, 5, 10, 20, ... s, about ten across. */
static double tick_step(const struct axis *a)
{
        double span = a->t1 - a->t0, step = 1;
        for (int i = 0; span / step > 12; i++)
                step *= (i % 3 == 1) ? 2.5 : 2;
        return step;
}

static void put_axis(struct out *o, const struct axis *a, double height)
{
        double step = tick_step(a);
        put(o, "<g class=\"axis\">");
        for (double t = ceil(a->t0 / step) * step; t <= a->t1; t += step) {
                double x = x_of(a, t);
                put(o, "<line class=\"tick\" x1=\"%.1f\" y1=\"14\" x2=\"%.1f\" y2=\"%.1f\"/>", x, x, height);
                put(o, "<text class=\"tick-label\" x=\"%.1f\" y=\"11\">%g s</text>", x, t);
        }
        put(o, "</g>\n");
}

/* A vertical line across the rows of a node at t, with a <title> for a tooltip. */
static void put_vline(struct out *o, const struct axis *a, const char *cls, const char *what, double t,
                      double y0, double y1)
{
        if (isnan(t))
                return;
        double x = x_of(a, t);
        put(o,
            "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"><title>%s at %.1f "
            "s</title></line>\n",
            cls, x, y0, x, y1, what, t);
}

static const char *pod_class(const struct rpod *p)
{
        if (p->flags & REPORT_POD_KILLED)
                return "pod-bar killed";
        if (p->flags & REPORT_POD_FORCED)
                return "pod-bar forced";
        return "pod-bar evicted";
}

static void put_node(struct out *o, const struct report *r, const struct rnode *n, const struct axis *a)
{
        size_t n_pods = 0, n_alerts = 0;
        for (size_t i = 0; i < r->n_pods; i++)
                n_pods += streq(r->pods[i].node, n->name);
        for (size_t i = 0; i < r->n_alerts; i++)
                n_alerts += r->alerts[i].node && streq(r->alerts[i].node, n->name);

        /* Rows: the axis, the node's events, one per pod, the alerts. */
        double top = 20, pods_y = top + ROW_H * 1.5,
               alerts_y = pods_y + ROW_H * (double)n_pods + ROW_H * 0.5, height = alerts_y + ROW_H * 1.5;

        put(o, "<section class=\"node\" data-node=\"");
        put_escaped(o, n->name);
        put(o, "\">\n<h2>node ");
        put_escaped(o, n->name);
        put(o, "</h2>\n<p class=\"facts\">");
        if (!isnan(n->notice_at))
                put(o, "notice at %.1f s", n->notice_at);
        if (!isnan(n->cordoned_at))
                put(o, ", cordoned at %.1f s", n->cordoned_at);
        if (!isnan(n->deadline_at))
                put(o, ", deadline at %.1f s", n->deadline_at);
        if (!isnan(n->drained_at))
                put(o, ", drained at %.1f s", n->drained_at);
        else
                put(o, ", not drained");
        put(o, "; %zu pods shown, %zu alerts</p>\n", n_pods, n_alerts);
        put(o,
            "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"timeline of node ",
            WIDTH, height, WIDTH, height);
        put_escaped(o, n->name);
        put(o, "\">\n");
        put_axis(o, a, height);

        put(o, "<text class=\"row-label\" x=\"4\" y=\"%.1f\">node events</text>\n", top + ROW_H);
        if (!isnan(n->notice_at))
                put(o,
                    "<path class=\"notice\" d=\"M%.1f %.1f l5 -9 l-10 0 z\"><title>notice at %.1f "
                    "s</title></path>\n",
                    x_of(a, n->notice_at), top + ROW_H, n->notice_at);
        if (!isnan(n->cordoned_at))
                put(o,
                    "<rect class=\"cordon\" x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\"><title>cordoned "
                    "at "
                    "%.1f s</title></rect>\n",
                    x_of(a, n->cordoned_at) - 4, top + ROW_H - 8, n->cordoned_at);

        size_t row = 0;
        for (size_t i = 0; i < r->n_pods; i++) {
                const struct rpod *p = &r->pods[i];
                if (!streq(p->node, n->name))
                        continue;
                double y = pods_y + ROW_H * (double)row++;
                double from = isnan(p->stop_at) ? p->gone_at : p->stop_at,
                       to = isnan(p->gone_at) ? a->t1 : p->gone_at;
                if (isnan(from))
                        from = to;
                double x = x_of(a, from), w = fmax(x_of(a, to) - x, MIN_BAR_W);
                put(o, "<g class=\"pod\" data-pod=\"");
                put_escaped(o, p->name);
                put(o, "\"><text class=\"row-label\" x=\"4\" y=\"%.1f\">", y + BAR_H);
                put_escaped(o, p->name);
                put(o,
                    "</text><rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\"><title>",
                    pod_class(p), x, y + 1, w, BAR_H);
                put_escaped(o, p->name);
                if (p->pdb) {
                        put(o, " (PDB ");
                        put_escaped(o, p->pdb);
                        put(o, ")");
                }
                put(o, ": %s at %.1f s, ", p->flags & REPORT_POD_FORCED ? "deleted" : "evicted", from);
                if (isnan(p->gone_at))
                        put(o, "never gone");
                else
                        put(o, "gone at %.1f s", p->gone_at);
                put(o, "%s%s</title></rect>", p->flags & REPORT_POD_FORCED ? ", forced" : "",
                    p->flags & REPORT_POD_KILLED ? ", killed" : "");
                if (!isnan(p->last_safe_at))
                        put(o,
                            "<path class=\"pod-last-safe\" d=\"M%.1f %.1f l4 -5 l-8 0 z\"><title>last safe "
                            "moment "
                            "%.1f s</title></path>",
                            x_of(a, p->last_safe_at), y + 1, p->last_safe_at);
                put(o, "</g>\n");
        }

        put(o, "<text class=\"row-label\" x=\"4\" y=\"%.1f\">alerts</text>\n", alerts_y + ROW_H * 0.7);
        for (size_t i = 0; i < r->n_alerts; i++) {
                const struct ralert *al = &r->alerts[i];
                if (!al->node || !streq(al->node, n->name))
                        continue;
                put(o, "<g class=\"alert\" data-kind=\"");
                put_escaped(o, al->kind);
                put(o, "\"><path class=\"alert-marker\" d=\"M%.1f %.1f l6 6 l-6 6 l-6 -6 z\"><title>",
                    x_of(a, al->at), alerts_y);
                put_escaped(o, al->kind);
                put(o, " at %.1f s: ", al->at);
                put_escaped(o, al->message);
                put(o, "</title></path></g>\n");
        }

        put_vline(o, a, "last-safe", "last safe moment", n->last_safe_at, 14, height);
        put_vline(o, a, "deadline", "deadline", n->deadline_at, 14, height);
        put_vline(o, a, "drained", "drained", n->drained_at, 14, height);
        put(o, "</svg>\n</section>\n");
}

static int imax(int a, int b)
{
        return a > b ? a : b;
}

static int imin(int a, int b)
{
        return a < b ? a : b;
}

static void put_pdb(struct out *o, const struct rpdb *d, const struct axis *a)
{
        /* From a little below the lowest count, so that one pod less shows. */
        int top = 1, bottom = INT32_MAX;
        for (size_t i = 0; i < d->n; i++) {
                top = imax(top, imax(d->s[i].healthy, d->s[i].desired));
                bottom = imin(bottom, imin(d->s[i].healthy, d->s[i].desired));
        }
        bottom = imax(0, imin(bottom, top - 1) - 2);
        double y0 = 20, h = PDB_H - 10, height = y0 + h + 6;
#define Y_OF(v) (y0 + h - (double)((v)-bottom) / (double)(top - bottom) * h)

        put(o, "<div class=\"pdb\" data-pdb=\"");
        put_escaped(o, d->name);
        put(o,
            "\"><svg class=\"pdb-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" role=\"img\" aria-label=\"PDB ",
            WIDTH, height, WIDTH, height);
        put_escaped(o, d->name);
        put(o, "\">\n");
        put_axis(o, a, height);
        put(o, "<text class=\"row-label\" x=\"4\" y=\"%.1f\">", y0 + h / 2);
        put_escaped(o, d->name);
        put(o, "</text><text class=\"scale\" x=\"%.1f\" y=\"%.1f\">%d</text>", LABEL_W - 24, y0 + 8, top);
        put(o, "<text class=\"scale\" x=\"%.1f\" y=\"%.1f\">%d</text>\n", LABEL_W - 24, y0 + h, bottom);

        /* Healthy as steps; desired as it was at each moment. */
        put(o, "<polyline class=\"pdb-desired\" points=\"");
        for (size_t i = 0; i < d->n; i++) {
                double x = x_of(a, d->s[i].at), xn = i + 1 < d->n ? x_of(a, d->s[i + 1].at) : x_of(a, a->t1);
                put(o, "%.1f,%.1f %.1f,%.1f ", x, Y_OF(d->s[i].desired), xn, Y_OF(d->s[i].desired));
        }
        put(o, "\"/>\n<polyline class=\"pdb-healthy\" points=\"");
        for (size_t i = 0; i < d->n; i++) {
                double x = x_of(a, d->s[i].at), xn = i + 1 < d->n ? x_of(a, d->s[i + 1].at) : x_of(a, a->t1);
                put(o, "%.1f,%.1f %.1f,%.1f ", x, Y_OF(d->s[i].healthy), xn, Y_OF(d->s[i].healthy));
        }
        put(o, "\"><title>");
        put_escaped(o, d->name);
        put(o, ": healthy pods over time</title></polyline>\n");
        for (size_t i = 0; i < d->n; i++)
                if (d->s[i].healthy < d->s[i].desired)
                        put(o,
                            "<circle class=\"pdb-below\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"><title>%d healthy "
                            "of "
                            "%d desired at %.1f s</title></circle>\n",
                            x_of(a, d->s[i].at), Y_OF(d->s[i].healthy), d->s[i].healthy, d->s[i].desired,
                            d->s[i].at);
#undef Y_OF
        put(o, "</svg></div>\n");
}

static const char style[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fff}"
    "h1{font-size:20px}h2{font-size:16px;margin:18px 0 4px}"
    "svg{display:block;overflow:visible}"
    ".tick{stroke:#e3e3e3}.tick-label,.scale{font-size:10px;fill:#777}"
    ".row-label{font-size:11px;fill:#333}"
    ".pod-bar.evicted{fill:#4a7fc1}.pod-bar.forced{fill:#e08a1e}.pod-bar.killed{fill:#c0392b}"
    ".notice{fill:#6a3d9a}.cordon{fill:#555}"
    ".deadline{stroke:#c0392b;stroke-width:2}.last-safe{stroke:#e08a1e;stroke-width:1.5;stroke-dasharray:5 "
    "3}"
    ".drained{stroke:#2e8b57;stroke-width:1.5}.pod-last-safe{fill:#e08a1e;stroke:#7a4a0e}"
    ".alert-marker{fill:#d4a017;stroke:#6b5200}"
    ".pdb-healthy{fill:none;stroke:#4a7fc1;stroke-width:2}"
    ".pdb-desired{fill:none;stroke:#999;stroke-dasharray:4 3}.pdb-below{fill:#c0392b}"
    "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #eee;"
    "vertical-align:top}";

static void put_legend(struct out *o)
{
        static const struct {
                const char *shape, *label;
        } items[] = {
                { "<rect class=\"pod-bar evicted\" x=\"0\" y=\"3\" width=\"22\" height=\"10\"/>",
                  "pod evicted, until gone" },
                { "<rect class=\"pod-bar forced\" x=\"0\" y=\"3\" width=\"22\" height=\"10\"/>",
                  "pod forced (deleted around its PDB at its last safe moment)" },
                { "<rect class=\"pod-bar killed\" x=\"0\" y=\"3\" width=\"22\" height=\"10\"/>",
                  "pod killed (still running when its node went)" },
                { "<path class=\"notice\" d=\"M11 13 l5 -9 l-10 0 z\"/>", "notice" },
                { "<rect class=\"cordon\" x=\"7\" y=\"4\" width=\"8\" height=\"8\"/>", "cordon" },
                { "<line class=\"deadline\" x1=\"11\" y1=\"0\" x2=\"11\" y2=\"16\"/>", "deadline" },
                { "<line class=\"last-safe\" x1=\"11\" y1=\"0\" x2=\"11\" y2=\"16\"/>",
                  "last safe moment (deadline less the safety margin)" },
                { "<path class=\"pod-last-safe\" d=\"M11 9 l4 -5 l-8 0 z\"/>",
                  "a pod's last safe moment, as the drain planned it (drain --report)" },
                { "<line class=\"drained\" x1=\"11\" y1=\"0\" x2=\"11\" y2=\"16\"/>", "drain finished" },
                { "<path class=\"alert-marker\" d=\"M11 2 l6 6 l-6 6 l-6 -6 z\"/>", "alert" },
                { "<line class=\"pdb-healthy\" x1=\"0\" y1=\"8\" x2=\"22\" y2=\"8\"/>",
                  "PDB: healthy pods" },
                { "<line class=\"pdb-desired\" x1=\"0\" y1=\"8\" x2=\"22\" y2=\"8\"/>",
                  "PDB: desired healthy" },
        };
        put(o, "<section class=\"legend\"><h2>Legend</h2>\n");
        for (size_t i = 0; i < ARRAY_SIZE(items); i++)
                put(o,
                    "<div class=\"legend-item\"><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"24\" "
                    "height=\"16\" style=\"display:inline-block;vertical-align:middle\">%s</svg> %s</div>\n",
                    items[i].shape, items[i].label);
        put(o, "</section>\n");
}

/* A PDB is drawn when a pod shown is one of its. */
static bool pdb_shown(const struct report *r, const char *pdb)
{
        for (size_t i = 0; i < r->n_pods; i++)
                if (r->pods[i].pdb && streq(r->pods[i].pdb, pdb))
                        return true;
        return false;
}

char *report_render(const struct report *r)
{
        struct out o = {};
        struct axis a = make_axis(r);

        put(&o, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>spotdrain: ");
        put_escaped(&o, r->title);
        put(&o, "</title>\n<style>%s</style>\n</head>\n<body>\n<h1>spotdrain timeline: ", style);
        put_escaped(&o, r->title);
        put(&o, "</h1>\n<p>Times in seconds. Hover an element for its details.</p>\n");
        for (size_t i = 0; i < r->n_nodes; i++)
                put_node(&o, r, &r->nodes[i], &a);
        size_t n_pdbs = 0;
        for (size_t i = 0; i < r->n_pdbs; i++)
                n_pdbs += pdb_shown(r, r->pdbs[i].name);
        if (n_pdbs > 0) {
                put(&o, "<section class=\"pdbs\"><h2>PodDisruptionBudgets: healthy against desired</h2>\n");
                for (size_t i = 0; i < r->n_pdbs; i++)
                        if (pdb_shown(r, r->pdbs[i].name))
                                put_pdb(&o, &r->pdbs[i], &a);
                put(&o, "</section>\n");
        }
        put(&o, "<section class=\"alerts\"><h2>Alerts</h2>\n<table><tr><th>at</th><th>kind</th><th>node</th>"
                "<th>message</th></tr>\n");
        for (size_t i = 0; i < r->n_alerts; i++) {
                put(&o, "<tr class=\"alert-row\"><td>%.1f s</td><td>", r->alerts[i].at);
                put_escaped(&o, r->alerts[i].kind);
                put(&o, "</td><td>");
                put_escaped(&o, r->alerts[i].node ?: "");
                put(&o, "</td><td>");
                put_escaped(&o, r->alerts[i].message);
                put(&o, "</td></tr>\n");
        }
        put(&o, "</table></section>\n");
        put_legend(&o);
        put(&o, "</body>\n</html>\n");
        if (o.error >= 0)
                o.error = buf_append(&o.b, "", 1);
        if (o.error < 0) {
                buf_free(&o.b);
                return NULL;
        }
        return o.b.data;
}

int report_write(const struct report *r, const char *path)
{
        _cleanup_free_ char *html = report_render(r);
        if (!html)
                return -ENOMEM;
        return write_file_atomic(path, html, strlen(html), 0644);
}
