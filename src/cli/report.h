/* cli/report: the timeline page of `simulate --report` and `drain --report` (docs/contracts.md §1). One
 * self-contained HTML file: inline SVG and CSS, no script, nothing fetched. Per node its notice, cordon,
 * deadline, last safe moment and each pod from its eviction or delete to gone (forced and killed marked);
 * per PDB its healthy count against desired; the alerts on the time axis; a legend. Times are seconds from
 * the report's origin (scenario seconds for simulate, the command's start for drain); NAN = never happened.
 * Every name and message is escaped: they come from the cluster. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "spotdrain/util.h"

struct report;

int report_new(const char *title, struct report **ret);
struct report *report_free(struct report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct report *, report_free);

/* last_safe_at: the drain's last safe moment (the deadline less the safety margin). */
int report_add_node(struct report *r, const char *name, double notice_at, double cordoned_at,
                    double deadline_at, double last_safe_at, double drained_at);

/* The deadline and drain end of a node added (NAN when none); -ENOENT when not added. */
int report_node_facts(const struct report *r, const char *name, double *ret_deadline, double *ret_drained);

enum {
        REPORT_POD_FORCED = 1 << 0, /* deleted around its PDB at its last safe moment */
        REPORT_POD_KILLED = 1 << 1, /* still running when its node went */
};
/* A pod of node: stop_at its eviction or delete, gone_at when it left the API, last_safe_at the latest
 * moment its graceful stop could start and still end before the deadline's margin, as the drain last planned
 * it before the pod went (NAN: unknown); pdb may be NULL. */
int report_add_pod(struct report *r, const char *node, const char *name, const char *pdb, double stop_at,
                   double gone_at, double last_safe_at, unsigned flags);

/* One observation of a PDB's status (in the order given; one equal to the last is dropped). Only the PDBs
 * of the pods added are drawn. */
int report_add_pdb_sample(struct report *r, const char *pdb, double at, int healthy, int desired);

int report_add_alert(struct report *r, const char *kind, const char *node, double at, const char *message);

/* The page (NULL on ENOMEM). */
char *report_render(const struct report *r);
/* Writes the page to path atomically. Returns 0 or a negative errno. */
int report_write(const struct report *r, const char *path);

/* ---- the recorder (report_rec.c): what a drain does, as the cluster shows it ----
 * Watches the pods (of node, or of every node when NULL) and the PDBs through c, and takes the alerts of
 * bus, from now until report_rec_finish(); times are seconds since origin_usec (engine clock). The bus keeps
 * calling the recorder: free it only after the bus. */
struct kube_client;
struct alert_bus;
struct loop;
struct drain_exec;
struct report_rec;
int report_rec_start(struct report *r, struct kube_client *c, struct alert_bus *bus, const char *node,
                     uint64_t origin_usec, struct report_rec **ret);
/* Follows the plans of x too (borrowed; call report_rec_finish() before freeing it) for each pod's last
 * safe moment, looking at the latest plans every 200 ms on loop l. */
int report_rec_follow(struct report_rec *rec, struct loop *l, struct drain_exec *x);
/* x is about to be freed (an engine replaced or stopped it): no longer followed. NULL-safe. */
void report_rec_unfollow(struct report_rec *rec, const struct drain_exec *x);
/* Lets the loop run until every pod seen stopping was seen gone too, at most bound_usec: the drain's own
 * watch may have seen its last pod go a moment before the recorder's. 0, or -ETIMEDOUT. */
int report_rec_settle(struct report_rec *rec, struct loop *l, uint64_t bound_usec);
/* Stops the watches and adds to the report (once; again does nothing) the pods of its nodes (add the nodes
 * first) that were evicted, deleted or killed, each with its PDB; a pod is killed when it was not gone
 * before its node's deadline, and the deadline passed or the node's drain did not end. */
int report_rec_finish(struct report_rec *rec);
struct report_rec *report_rec_free(struct report_rec *rec);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct report_rec *, report_rec_free);
