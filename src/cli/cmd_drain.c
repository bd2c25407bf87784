/* spotdrain drain NODE: the one-shot drain of a node (docs/contracts.md §1); plan and audit are in
 * cmd_plan.c and cmd_audit.c, their shared part in drain_cli.c. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "cli/drain_cli.h"
#include "cli/elbv2_sync.h"
#include "cli/help.h"
#include "cli/report.h"
#include "spotdrain/config.h"
#include "spotdrain/core.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/service.h"
#include "spotdrain/surge.h"
#include "spotdrain/term.h"

#define REFRESH_USEC USEC_PER_SEC

/* ---- drain ---- */

struct drain_run {
        struct drain_cli *d;
        struct drain_exec *x;
        struct timer *refresh;
        bool live;  /* the status block is redrawn in place (term.h) */
        bool color; /* and may be coloured */
        bool done;
        char *shown;          /* not live: the last plain status line printed */
        bool predicted_shown; /* a status line showed the first judgement's estimates */
        bool first_outlook;   /* the line being drawn shows them: the drain's first judgement */
};

static void on_done(struct drain_exec *x, const struct drain_exec_result *res, void *userdata)
{
        struct drain_run *run = userdata;
        run->done = true;
}

/* At most this many PDB lines under the first: the block must stay small enough to read at a glance. */
#define STATUS_PDB_LINES 8

/* s with colour sgr (an SGR parameter string, "1;31") when colour is on. */
static int status_printf(struct buf *b, const struct drain_run *run, const char *sgr, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int status_printf(struct buf *b, const struct drain_run *run, const char *sgr, const char *fmt, ...)
{
        va_list ap;
        _cleanup_free_ char *text = NULL;
        va_start(ap, fmt);
        if (vasprintf(&text, fmt, ap) < 0)
                text = NULL;
        va_end(ap);
        if (!text)
                return -ENOMEM;
        if (run->color && sgr)
                return buf_printf(b, "\033[%sm%s\033[0m", sgr, text);
        return buf_printf(b, "%s", text);
}

/* The first status line: countdown, pods left, predicted finish, forced, predicted killed. */
static int status_head(const struct drain_run *run, uint64_t now, bool plain, struct buf *b)
{
        const struct drain_plan *plan = drain_exec_plan(run->x);
        const struct drain_plan_node *pn = drain_exec_plan_node(run->x);
        const struct drain_exec_result *res = drain_exec_result(run->x);
        int64_t left = (int64_t)run->d->deadline_usec - (int64_t)now;
        int64_t secs = left > 0 ? left / (int64_t)USEC_PER_SEC : 0;
        int r = buf_printf(b, "%s: ", run->d->node);

        /* A plain line is printed when something changed: the countdown, which always does, is left out. */
        if (r >= 0 && !plain && run->d->no_deadline)
                r = buf_printf(b, "no deadline");
        else if (r >= 0 && !plain)
                r = status_printf(b, run, secs < 30 ? "1;31" : "1", "%" PRIi64 " s to deadline", secs);
        if (r >= 0 && !plain)
                r = buf_printf(b, ", ");
        if (r < 0 || !plan)
                return r < 0 ? r : buf_printf(b, "planning");
        r = buf_printf(b, "%u pods left", drain_exec_pods_left(run->x, DRAIN_EXEC_ALL_PDBS));
        const struct drain_outlook *o = run->first_outlook ? &res->outlook_first : &res->outlook;
        /* Without a deadline the plan's "killed" at its far end are the pods a PDB holds: they wait. */
        if (run->d->no_deadline || !o->known) {
                if (r >= 0 && pn && pn->finish_usec != DRAIN_NEVER && !plain)
                        r = buf_printf(b, ", predicted finish in %.0f s",
                                       pn->finish_usec > now
                                           ? (double)(pn->finish_usec - now) / (double)USEC_PER_SEC
                                           : 0.0);
                if (r >= 0 && pn && pn->finish_usec == DRAIN_NEVER)
                        r = status_printf(b, run, "31", ", no finish predicted");
                if (r >= 0)
                        r = status_printf(b, run, res->forced > 0 ? "33" : NULL, ", %u forced", res->forced);
                if (r >= 0 && run->d->no_deadline)
                        r = buf_printf(b, ", %zu waiting for a PDB", pn ? pn->n_killed : (size_t)0);
                return r;
        }
        /* The pair of estimates of the latest grade (drain_exec_update_outlook), as plan, audit and the
         * alerts print it. */
        _cleanup_free_ char *text = drain_outlook_format(o);
        if (r >= 0)
                r = status_printf(b, run, res->forced > 0 ? "33" : NULL, ", %u forced", res->forced);
        if (r >= 0)
                r = status_printf(b, run,
                                  o->quick.n_killed + o->slow.n_killed > 0   ? "1;31"
                                  : o->quick.n_forced + o->slow.n_forced > 0 ? "33"
                                                                             : NULL,
                                  "; predicted: %s", text ? text : "no estimate");
        return r;
}

/* The live view: the head line, then pods left per PDB (the PDBs with pods left, and those without a PDB).
 * On a terminal it is redrawn in place under the log records; elsewhere a plain line whenever it changes. */
static void refresh(void *userdata)
{
        struct drain_run *run = userdata;
        const struct drain_plan *plan = drain_exec_plan(run->x);
        uint64_t now = clk_now();
        _cleanup_(buf_free) struct buf head = { 0 };
        char *lines[STATUS_PDB_LINES + 3] = { 0 };
        size_t n = 0, more = 0;

        run->refresh = NULL; /* released by the loop as it fired */
        if (run->done)
                return;
        /* The predicted counts as they change, from the drain's first judgement on: that one shown first. */
        /* The drain judges again as pods go, so by the first line (a second in, many in a faster world) its
         * latest outlook may already be a later one: the first line shows the first judgement's. */
        run->first_outlook = !run->predicted_shown && drain_exec_result(run->x)->outlook_first.known;
        if (run->predicted_shown)
                (void)drain_exec_update_outlook(run->x);
        else
                run->predicted_shown = run->first_outlook;
        if (status_head(run, now, !run->live, &head) < 0)
                goto again;
        if (!run->live) {
                /* A record in the log's own format (text or JSON lines, the journal), at each change. */
                if (!streq_ptr(run->shown, head.data)) {
                        free(run->shown);
                        run->shown = strdup(head.data);
                        log_full(LOG_INFO, 0, (const char *const[]){ "node", run->d->node, NULL }, "%s",
                                 head.data);
                }
                goto again;
        }
        lines[n++] = head.data;
        for (int i = -1; plan && i < (int)plan->n_pdbs; i++) {
                unsigned k = drain_exec_pods_left(run->x, i);
                if (k == 0)
                        continue;
                if (n > STATUS_PDB_LINES) {
                        more++;
                        continue;
                }
                lines[n++] = i < 0 ? strprintf("  without PDB: %u left", k)
                                   : strprintf("  PDB %s/%s: %u left", plan->pdbs[i].namespace,
                                               plan->pdbs[i].name, k);
        }
        if (more > 0)
                lines[n++] = strprintf("  and %zu more PDB%s with pods left", more, more == 1 ? "" : "s");
        term_status_set((const char *const *)lines, n);
        for (size_t i = 1; i < n; i++)
                free(lines[i]);
again:
        timer_start_in(run->d->loop, REFRESH_USEC, refresh, run, &run->refresh);
}

/* The summary at the end, under the result's sentence: one row for the node, one per PDB with pods left. */
static void print_summary(const struct drain_run *run, const struct drain_exec_result *res)
{
        const struct drain_plan *plan = drain_exec_plan(run->x);
        char left[16];

        if (res->pods_unseen)
                snprintf(left, sizeof(left), "unknown");
        else
                snprintf(left, sizeof(left), "%u", res->left);
        /* KILLED is what happened (killed with the node or at the end of a grace period), PREDICTED what the
         * first plan expected to be killed. */
        char predicted_forced[32], predicted_killed[32];
        const struct drain_outlook *o = &res->outlook_first;
        if (o->known) {
                snprintf(predicted_forced, sizeof(predicted_forced), "%zu / %zu", o->quick.n_forced,
                         o->slow.n_forced);
                snprintf(predicted_killed, sizeof(predicted_killed), "%zu / %zu", o->quick.n_killed,
                         o->slow.n_killed);
        } else {
                snprintf(predicted_forced, sizeof(predicted_forced), "-");
                snprintf(predicted_killed, sizeof(predicted_killed), "%u", res->killed_predicted);
        }
        printf("\n%-24s %-16s %8s %8s %7s %7s %7s %16s %16s\n", "NODE", "OUTCOME", "SECONDS", "EVICTED",
               "FORCED", "LEFT", "KILLED", "FORCED PREDICTED", "KILLED PREDICTED");
        printf("%-24s %-16s %8.1f %8u %7u %7s %7u %16s %16s\n", run->d->node,
               drain_exec_outcome_to_string(res->outcome),
               (double)(res->finished_usec - res->notice_usec) / (double)USEC_PER_SEC, res->evicted,
               res->forced, left, res->killed, predicted_forced, predicted_killed);
        if (o->known)
                printf("(predicted at the start: stops never seen taken at once / at their whole grace)\n");
        for (int i = -1; plan && i < (int)plan->n_pdbs; i++) {
                unsigned k = drain_exec_pods_left(run->x, i);
                _cleanup_free_ char *name =
                    i < 0 ? strdup("(no PDB)")
                          : strprintf("%s/%s", plan->pdbs[i].namespace, plan->pdbs[i].name);
                if (k > 0 && name)
                        printf("  %-22s %-16s %8s %8s %7s %7u\n", name, "left", "", "", "", k);
        }
}

static void print_result(const struct drain_run *run, const struct drain_exec_result *res)
{
        const struct drain_cli *d = run->d;
        char deadline[64] = "";
        format_rfc3339(d->deadline_usec, deadline, sizeof(deadline));
        if (!d->common.json) {
                printf("%s\n", res->message ? res->message : drain_exec_outcome_to_string(res->outcome));
                print_summary(run, res);
                return;
        }
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return;
        cJSON_AddStringToObject(o, "node", d->node);
        cJSON_AddStringToObject(o, "outcome", drain_exec_outcome_to_string(res->outcome));
        if (d->no_deadline)
                cJSON_AddNullToObject(o, "deadline");
        else
                cJSON_AddStringToObject(o, "deadline", deadline);
        cJSON_AddNumberToObject(o, "seconds",
                                (double)(res->finished_usec - res->notice_usec) / (double)USEC_PER_SEC);
        cJSON_AddNumberToObject(o, "evicted", res->evicted);
        cJSON_AddNumberToObject(o, "forced", res->forced);
        if (res->pods_unseen)
                cJSON_AddNullToObject(o, "left");
        else
                cJSON_AddNumberToObject(o, "left", res->left);
        cJSON_AddNumberToObject(o, "blocked", res->blocked);
        cJSON_AddNumberToObject(o, "multi_pdb", res->multi_pdb);
        cJSON_AddBoolToObject(o, "infeasible", res->infeasible);
        cJSON_AddBoolToObject(o, "at_risk", res->at_risk);
        cJSON_AddNumberToObject(o, "killed", res->killed);
        cJSON_AddNumberToObject(o, "killed_predicted", res->killed_predicted);
        if (res->predicted_finish_usec && res->predicted_finish_usec != DRAIN_NEVER)
                cJSON_AddNumberToObject(o, "predicted_seconds",
                                        (double)(res->predicted_finish_usec - res->started_usec) /
                                            (double)USEC_PER_SEC);
        else
                cJSON_AddNullToObject(o, "predicted_seconds");
        drain_outlook_to_json(&res->outlook_first, o, "estimates_at_start");
        cJSON_AddStringToObject(o, "message", res->message ? res->message : "");
        char *text = cJSON_Print(o);
        if (text)
                printf("%s\n", text);
        free(text);
        cJSON_Delete(o);
}

/* --report: the recorder watches the node's pods and the PDBs, and takes the alerts, from the notice on. */
static int report_start(struct drain_cli *d, struct report **ret, struct report_rec **ret_rec)
{
        _cleanup_free_ char *title = strprintf("drain %s", d->node);
        int r = title ? report_new(title, ret) : -ENOMEM;
        if (r >= 0)
                r = report_rec_start(*ret, d->client, service_alerts(d->svc), d->node, d->now, ret_rec);
        if (r < 0)
                log_error_errno(r, "cannot record the drain for the report");
        return r;
}

static double since_notice(const struct drain_cli *d, uint64_t usec)
{
        return usec ? ((double)usec - (double)d->now) / (double)USEC_PER_SEC : NAN;
}

/* The node's facts from the result, then the pods the recorder saw; the page goes to --report. */
static int report_finish(struct drain_cli *d, const struct drain_exec_result *res, struct report *rp,
                         struct report_rec *rec)
{
        double deadline = since_notice(d, d->deadline_usec);
        /* A drain that ended in time saw its last pod go: so will the recorder, in a moment. */
        if (res->outcome == DRAIN_EXEC_DRAINED)
                (void)report_rec_settle(rec, d->loop, 2 * USEC_PER_SEC);
        int r =
            report_add_node(rp, d->node, 0, since_notice(d, res->cordoned_usec), deadline,
                            deadline - (double)d->cfg->drain.safety_margin_usec / (double)USEC_PER_SEC,
                            res->outcome == DRAIN_EXEC_DRAINED ? since_notice(d, res->finished_usec) : NAN);
        /* The pair of estimates at the start, as the other surfaces print it, on the report's timeline. */
        if (r >= 0 && res->outlook_first.known) {
                _cleanup_free_ char *text = drain_outlook_format(&res->outlook_first);
                r = text
                        ? report_add_alert(rp, "estimates", d->node, since_notice(d, res->judged_usec), text)
                        : -ENOMEM;
        }
        if (r >= 0)
                r = report_rec_finish(rec);
        if (r >= 0)
                r = report_write(rp, d->report);
        if (r < 0)
                log_error_errno(r, "cannot write the report %s", d->report);
        return r;
}

/* Without --budget or --deadline, a node whose drain record names a notice (the agent's or the controller's)
 * is drained by that notice's deadline and the policy configured, as they would drain it; any other keeps no
 * deadline and respects every PDB (drain_cli_begin()). */
static void drain_target(struct drain_cli *d, const cJSON *node)
{
        _cleanup_free_ char *kind = NULL, *instance = NULL;
        uint64_t deadline;
        if (d->budget || d->deadline || drain_record_read(node, &kind, &deadline, &instance) < 0 ||
            streq(kind, "manual") || deadline <= d->now)
                return;
        d->no_deadline = false;
        d->deadline_usec = deadline;
        if (!d->policy)
                d->cfg->drain.policy = d->notice_policy;
        d->notice_kind = TAKE_PTR(kind);
        d->notice_instance = TAKE_PTR(instance);
}

/* Before it acts, the drain says in one line what it is about to do, as kubectl drain says
 * "node/NAME cordoned": the pods it moves, when it expects them gone, how many it expects to force. */
static void print_intent(const struct drain_cli *d, const struct drain_plan *plan,
                         const struct drain_grade_result *g)
{
        const struct drain_plan_node *pn = plan->n_nodes > 0 ? &plan->nodes[0] : NULL;
        FILE *f = d->common.json ? stderr : stdout;
        char when[96] = "never (a PDB lets none of them go)", deadline[64] = "";
        size_t to_go = pn ? pn->n_to_go : 0, forced = pn ? pn->n_forced : 0;
        /* Without a deadline, pods the plan sees killed at its far end are those no PDB lets go. */
        if (pn && d->no_deadline && pn->n_killed > 0)
                snprintf(when, sizeof(when), "never (%zu wait for a PDB that allows no disruption now)",
                         pn->n_killed);
        else if (pn && pn->finish_usec != DRAIN_NEVER)
                snprintf(when, sizeof(when), "in %.0f s",
                         pn->finish_usec > d->now ? (double)(pn->finish_usec - d->now) / (double)USEC_PER_SEC
                                                  : 0.0);
        format_rfc3339(d->deadline_usec, deadline, sizeof(deadline));
        /* With a deadline, the two estimates as every other surface prints them. */
        _cleanup_free_ char *outlook =
            !d->no_deadline && g->outlook.known ? drain_outlook_format(&g->outlook) : NULL;
        if (outlook)
                fprintf(f, "node/%s: %zu pod%s to move; %s; ", d->node, to_go, to_go == 1 ? "" : "s",
                        outlook);
        else
                fprintf(f, "node/%s: %zu pod%s to move, predicted finish %s, %zu expected forced; ", d->node,
                        to_go, to_go == 1 ? "" : "s", when, forced);
        if (d->no_deadline)
                fprintf(f,
                        "no deadline, every PDB respected (--budget or --deadline sets one, --policy force "
                        "deletes around the PDBs at the last safe moment)\n");
        else if (d->notice_kind)
                fprintf(f, "deadline %s of its %s notice, policy %s\n", deadline, d->notice_kind,
                        d->cfg->drain.policy == DRAIN_POLICY_RESPECT ? "respect" : "force");
        else
                fprintf(f, "deadline %s, policy %s\n", deadline,
                        d->cfg->drain.policy == DRAIN_POLICY_RESPECT ? "respect" : "force");
        fflush(f);
}

int cmd_drain(int argc, char **argv)
{
        struct drain_cli d = { .verb = "drain" };
        struct drain_run run = { .d = &d };
        int r, status;

        r = drain_cli_begin(&d, argc, argv, SERVICE_ALERTS | SERVICE_WEBHOOK);
        if (r >= 0)
                return r;
        /* The node, asked once with a short bound: a missing node or a server that cannot be reached is
         * told at once, not after the whole budget. Its notice, if any, gives the deadline. */
        _cleanup_free_ char *node_path = kube_path(NULL, "v1", NULL, "nodes", d.node, NULL);
        cJSON *node = NULL;
        if (!node_path || drain_cli_api_first(&d, node_path, d.node, &node) < 0) {
                if (!node_path)
                        fprintf(stderr, "spotdrain drain: %s\n", strerror(ENOMEM));
                drain_cli_done(&d);
                return EXIT_ERROR;
        }
        drain_target(&d, node);
        cJSON_Delete(node);
        {
                _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
                _cleanup_(drain_grade_result_clear) struct drain_grade_result grade = { 0 };
                struct drain_room room = { 0 };
                /* The line before the drain is told at once or not at all: the drain does not wait on a
                 * server that lists slowly, and finds its own way around one that fails. */
                if (!d.common.dry_run) {
                        uint64_t left = d.deadline_usec > clk_now() ? d.deadline_usec - clk_now() : 0;
                        d.sync_timeout = left / 10 < REACH_TIMEOUT ? left / 10 + 1 : REACH_TIMEOUT;
                }
                r = drain_cli_plan_node(&d, &plan, &grade, &room);
                d.sync_timeout = 0;
                /* The plan's tables show the far end it was made against: say that it is none. */
                if (r >= 0 && d.common.dry_run && d.no_deadline && !d.common.json)
                        printf("DEADLINE none: planned against one %.0f days away (--budget or --deadline "
                               "sets one)\n",
                               (double)NO_DEADLINE_USEC / (double)(24 * 3600 * USEC_PER_SEC));
                if (r >= 0 && d.common.dry_run)
                        r = drain_cli_print_plan(&d, plan, &grade, &room);
                else if (r >= 0)
                        print_intent(&d, plan, &grade);
                else if (!d.common.dry_run) {
                        log_warning_errno(r, "cannot plan the drain of %s before it starts; draining it",
                                          d.node);
                        d.reported = false;
                        r = 0;
                }
                if (r < 0 || d.common.dry_run) {
                        drain_cli_done(&d);
                        if (r >= 0)
                                return EXIT_OK;
                        if (!d.reported)
                                fprintf(stderr, "spotdrain drain: cannot plan the drain of %s: %s\n", d.node,
                                        strerror(-r));
                        return EXIT_ERROR;
                }
        }

        struct drain_exec_options o = { 0 };
        drain_exec_options_from_config(d.cfg, &o);
        o.node = d.node;
        o.kind = d.notice_kind ? d.notice_kind : "manual";
        o.instance_id = d.notice_instance;
        o.notice_usec = d.now;
        o.deadline_usec = d.deadline_usec;
        /* A notice's deadline is the instance's end; one of --budget or --deadline is the user's. */
        o.deadline_chosen = !d.notice_kind;
        o.no_deadline = d.no_deadline;
        _cleanup_(report_freep) struct report *rp = NULL;
        _cleanup_(report_rec_freep) struct report_rec *rec = NULL;
        r = d.report ? report_start(&d, &rp, &rec) : 0;
        if (r >= 0 && (r = drain_exec_start(d.client, service_alerts(d.svc), &o, on_done, &run, &run.x)) < 0)
                log_error_errno(r, "cannot start draining %s", d.node);
        if (r >= 0 && rec && (r = report_rec_follow(rec, d.loop, run.x)) < 0)
                log_error_errno(r, "cannot record the drain for the report");
        if (r < 0) {
                if (rec)
                        (void)report_rec_finish(rec);
                drain_exec_free(run.x);
                drain_cli_done(&d);
                return EXIT_ERROR;
        }
        run.live = term_status_start(STDERR_FILENO);
        run.color = run.live && term_color(STDERR_FILENO);
        refresh(&run);
        r = loop_run_until(d.loop, &run.done, UINT64_MAX);
        run.refresh = timer_cancel(run.refresh);
        term_status_stop();
        free(run.shown);
        if (r < 0) {
                log_error_errno(r, "drain of %s interrupted", d.node);
                status = EXIT_ERROR;
        } else {
                const struct drain_exec_result *res = drain_exec_result(run.x);
                print_result(&run, res);
                /* A pod killed is a drain that did not make it, as simulate counts it. */
                status = res->outcome == DRAIN_EXEC_ERROR ? EXIT_ERROR
                         : res->outcome == DRAIN_EXEC_DEADLINE_MISSED || res->killed > 0
                             ? EXIT_DEADLINE_MISSED
                             : EXIT_OK;
                if (rp && report_finish(&d, res, rp, rec) < 0 && status == EXIT_OK)
                        status = EXIT_ERROR;
        }
        if (rec)
                (void)report_rec_finish(rec); /* its watches, before the client goes */
        drain_exec_free(run.x);
        /* The alerts' Kubernetes Events and the webhook: drain-completed (or deadline-missed) was raised
         * just now. */
        service_flush(d.svc);
        drain_cli_done(&d);
        return status;
}
