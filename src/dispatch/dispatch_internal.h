/* Shared by the files of the dispatcher (dispatch.c and the parts carved out of it): its state, the drains
 * of its nodes, and the calls between its parts. Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spotdrain/core.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"

#define SEC             UINT64_C(1000000)
#define DEDUPE_KEY_SIZE (NOTICE_ID_SIZE + NOTICE_INSTANCE_ID_SIZE + NOTICE_STATE_SIZE + 2)

struct index_entry {
        char *node;
        char instance[NOTICE_INSTANCE_ID_SIZE];
};

enum dnode_state {
        DNODE_REBALANCED,
        DNODE_DRAINING,
        DNODE_FINISHED,
};

struct dnode {
        struct dispatch *d;
        char *name;
        enum dnode_state state;
        struct notice notice; /* the notice that drives the drain (or the rebalance) */
        uint64_t deadline;
        uint64_t since; /* state entered (engine clock) */
        uint64_t *tickets;
        size_t n_tickets;
        struct notice *asg; /* lifecycle actions to heartbeat and complete */
        size_t n_asg;
        struct timer *heartbeat;
        uint64_t asg_since, last_beat; /* first lifecycle action taken, last heartbeat (engine clock) */
        struct timer *revert;          /* rebalanced: the soft taint's removal */
        bool soft_tainted;
        bool cordoned; /* by a notice whose action is cordon */
        bool firm;     /* a notice other than a scheduled change drives or joined the drain */
        bool resumed;  /* the drain was resumed from its record (an earlier controller's) */
};

/* An active scheduled change not due yet. */
struct sched {
        struct dispatch *d;
        char *node;
        struct notice notice;
        struct timer *due;
};

/* A reboot that completed, its node not Ready again yet. */
struct reboot {
        struct dispatch *d;
        char *node;
        struct notice notice;
        uint64_t since;
        struct timer *refresh;
};

struct unknown {
        struct dispatch *d;
        struct notice notice;
        uint64_t ticket;
        struct timer *expiry;
};

struct dispatch {
        struct loop *loop;
        struct dispatch_options o;
        struct dispatch_ops ops;
        void *userdata;

        struct index_entry *index;
        size_t n_index;
        struct dnode **nodes;
        size_t n_nodes;
        struct unknown **unknowns;
        size_t n_unknowns;
        struct sched **scheds;
        size_t n_scheds;
        struct reboot **reboots;
        size_t n_reboots;

        char (*dedupe)[DEDUPE_KEY_SIZE]; /* a ring of the most recent keys */
        size_t n_dedupe, dedupe_next;

        struct dispatch_stats stats;
};

/* table.c: the index, the node entries and the dedupe. */
struct index_entry *index_find_node(struct dispatch *d, const char *node);
void index_remove(struct dispatch *d, struct index_entry *e);
struct dnode *dnode_find(struct dispatch *d, const char *name);
void dnode_remove(struct dispatch *d, struct dnode *n);
struct dnode *dnode_add(struct dispatch *d, const char *name);
void dnode_purge(struct dispatch *d);
int dnode_add_ticket(struct dnode *n, uint64_t ticket);
void dedupe_key(const struct notice *n, char key[static DEDUPE_KEY_SIZE]);
bool dedupe_seen(const struct dispatch *d, const char *key);
void dedupe_add(struct dispatch *d, const char *key);

/* act.c: the actions of a known node's notice. */
bool scheduled_change_over(const struct notice *n);
enum dispatch_action kind_action(const struct dispatch *d, enum notice_kind k);
int dispatch_act(struct dispatch *d, const char *node, const struct notice *n, uint64_t deadline,
                 uint64_t ticket);
uint64_t dispatch_drain_deadline(const struct dispatch *d, const char *node, const struct notice *n,
                                 uint64_t now);

/* scheduled.c: scheduled changes and reboots. */
struct sched *sched_find(struct dispatch *d, const struct notice *n);
void sched_remove(struct dispatch *d, struct sched *s);
int sched_add(struct dispatch *d, const char *node, const struct notice *n, uint64_t due);
struct reboot *reboot_find(struct dispatch *d, const char *node);
void reboot_remove(struct dispatch *d, struct reboot *b);
void reboot_check(struct dispatch *d, const char *name, const cJSON *node);
int on_scheduled_over(struct dispatch *d, const char *node, const struct notice *n);
