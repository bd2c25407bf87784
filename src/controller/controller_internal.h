/* Shared by the files of the controller (controller.c and the parts carved out of it): the controller's
 * state, its held messages and drains, and the calls between its parts. Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "controller/launch.h"
#include "controller/managed.h"
#include "controller/quiet.h"
#include "controller/sns_gate.h"
#include "controller/trust.h"
#include "controller/volumes.h"
#include "spotdrain/alert.h"
#include "spotdrain/config.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"
#include "spotdrain/elbv2.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/node.h"
#include "spotdrain/notice.h"
#include "spotdrain/provision.h"
#include "spotdrain/service.h"
#include "spotdrain/sqs.h"
#include "spotdrain/surge.h"

#define SEC                      UINT64_C(1000000)
#define MAX_POLLS                32 /* controller.receivers' bound */
#define RETRY_VISIBILITY_SECONDS 10 /* a message whose notices could not be acted on comes back then */

struct controller;

struct poll_slot {
        struct controller *c;
        struct sqs_op *op;
        struct timer *retry;
        uint64_t failures_seen; /* the controller's failures when this poll was sent */
};

/* A message held while the drains of its notices run. */
struct cmsg {
        struct controller *c;
        uint64_t ticket;
        char *id, *handle;
        unsigned pending;
        int error;
        struct timer *extend;
        struct sqs_op *op;       /* visibility change in flight */
        uint64_t hidden_usec;    /* the visibility last set: the receive's, then each extension's */
        uint64_t extending_usec; /* the one the change in flight asks for */
        char **instances;        /* the instances of its pending notices, whose drains must be recorded */
        size_t n_instances;
        uint64_t sent_usec;                /* SentTimestamp; 0 = not sent */
        char account[NOTICE_ACCOUNT_SIZE]; /* the account its notices name (the sender, for alerts) */
        bool foreign;                      /* a notice of it is for an instance that is no node here */
};

struct pending_delete {
        char *id, *handle;
        unsigned attempts;
};

/* A visibility change waiting for its batch. */
struct pending_hide {
        char *handle;
        unsigned seconds;
};

/* The latest notice time handled for one instance and kind (and Health event, for scheduled changes). */
struct seq {
        char key[NOTICE_INSTANCE_ID_SIZE + NOTICE_ID_SIZE + 8];
        uint64_t notice_time, used;
};

struct controller {
        struct loop *loop;
        struct kube_client *kube;
        struct alert_bus *bus;
        const struct spotdrain_config *cfg;
        struct controller_options o;
        char *queue_url, *region, *sqs_endpoint, *asg_endpoint, *lease_namespace, *identity;

        struct sqs_client *sqs;
        struct asg_client *asg;
        struct elbv2_client *elbv2; /* drain.target_groups: the drains' target groups */
        struct asg_owners *owners;  /* controller.cluster_name's tag check; NULL when off */
        struct asg_hooks *hooks;    /* the hooks' HeartbeatTimeouts; NULL without an Auto Scaling client */
        struct dispatch *dispatch;
        struct leader *leader;
        struct kube_informer *nodes;
        struct prov_frontend *prov; /* NULL unless provision.enabled */

        uint64_t first_visibility_usec;
        struct poll_slot polls[MAX_POLLS];
        struct sqs_op *access_op;
        struct timer *access_timer;
        struct backoff backoff;
        unsigned failures_in_row;
        uint64_t failures; /* calls failed so far: a poll sent before the last one proves nothing now */
        bool unreadable, queue_ok, active, resume_pending, started;
        bool asg_warned;

        struct cmsg **msgs;
        size_t n_msgs;
        uint64_t next_ticket;

        struct pending_delete *deletes;
        size_t n_deletes;
        struct sqs_op *delete_op;
        struct pending_delete *deleting; /* the batch in flight */
        size_t n_deleting;
        struct timer *delete_timer;

        struct node_effects *effects; /* the dispatcher's effects: the drains and node actions */
        /* Shared by every drain: one PDB informer, PDB slots across nodes by earliest deadline. */
        struct drain_ledger *ledger;
        /* Stop and startup times learnt from every pod, kept in a ConfigMap; NULL without configuration. */
        struct drain_estimates *estimates;
        /* Deployments an earlier leader left raised (made on becoming leader, once the nodes are known). */
        struct drain_surge_sweep *surge_sweep;

        unsigned ops_in_flight; /* fire-and-forget visibility changes (counted for a clean stop) */
        /* Visibility changes sent HIDE_CALLS batches at a time; held while a receive's messages are
         * handled, so that they go together. */
        struct pending_hide *hides;
        size_t n_hides;
        unsigned hide_calls;
        bool hold_hides;
        struct timer *stop_timer;
        uint64_t stop_started;
        void (*stop_done)(void *userdata);
        void *stop_userdata;

        struct trust_policy trust;
        struct trust_limiter limiter;
        struct quiet quiet; /* the lines about messages left in the queue */
        struct seq *seqs;   /* SEQ_SLOTS, allocated on first use */
        uint64_t seq_clock;
        struct timer *quiet_timer;
        struct sns_gate *sns;         /* controller.verify_sns_signature */
        struct ec2_client *ec2;       /* controller.managed_tag's lookups; NULL when off */
        struct managed_gate *managed; /* controller.managed_tag */
        /* Termination lifecycle actions until their completion is answered (lifecycle.c). */
        struct lc_wait **lc_waits;
        size_t n_lc_waits;
        /* Launch lifecycle actions waiting for their node to be Ready (controller/launch.h). */
        struct launch *launch;

        struct controller_stats stats;
};

/* A termination lifecycle action to complete: waiting for its node's VolumeAttachments (node, w), for its
 * group's ownership, or for the answer to its completion and the retries after it (lifecycle.c). */
struct lc_wait {
        struct controller *c;
        struct notice n;
        char *node; /* NULL: no node of this cluster known for the instance */
        struct volume_wait *w;
        struct backoff backoff;
        struct timer *retry;
};

/* queue.c: the SQS side of the held messages. */
void quiet_told(const char *reason, const char *sender, uint64_t held, void *userdata);
bool quiet_line(struct controller *c, const char *reason, const char *sender);
void queue_failed(struct controller *c, const struct sqs_result *res, const char *what);
void queue_ok(struct controller *c);
void flush_hides(struct controller *c);
void set_visibility(struct controller *c, const char *handle, uint64_t usec);
int queue_delete(struct controller *c, const char *id, const char *handle, unsigned attempts);
void pending_delete_clear(struct pending_delete *p);
struct cmsg *cmsg_find(struct controller *c, uint64_t ticket);
void cmsg_remove(struct controller *c, struct cmsg *m);
void arm_extend(struct cmsg *m, uint64_t usec);
void cmsg_finish(struct controller *c, struct cmsg *m);
void op_notice_seen(void *userdata, const char *node, const struct notice *n);
void cmsg_add_instance(struct cmsg *m, const char *instance_id);
void alert_rejected(struct controller *c, enum controller_reject why, const char *account,
                    const char *message_id, const char *text);

/* intake.c: the receivers, the access check and the gates of a message. */
void poll_all(struct controller *c);
void polls_cancel(struct controller *c);
void access_schedule(struct controller *c, uint64_t after);

/* lifecycle.c: the Auto Scaling lifecycle actions. */
void lifecycle_foreign(const struct notice *n, const char *cluster, int owned);
int op_lifecycle_heartbeat(void *userdata, const struct notice *n);
uint64_t op_lifecycle_interval(void *userdata, const struct notice *n);
uint64_t op_lifecycle_deadline(void *userdata, const struct notice *n);
void on_hooks_changed(void *userdata);
void lc_wait_remove(struct controller *c, struct lc_wait *lw);
int op_lifecycle_complete(void *userdata, const struct notice *n);

/* launch_ops.c: the launch lifecycle actions' glue. */
int launch_op_owned(void *userdata, const struct notice *n, uint64_t id);
int launch_op_call(void *userdata, const struct notice *n, const char *result, uint64_t id);
int launch_op_hook(void *userdata, const struct notice *n, uint64_t *ret_heartbeat_usec,
                   uint64_t *ret_global_usec);
const cJSON *launch_op_node_of(void *userdata, const char *instance_id);
void launch_op_finished(void *userdata, const struct notice *n, const char *node, enum launch_result r,
                        const char *why);
int op_lifecycle_launch(void *userdata, const struct notice *n, uint64_t ticket);

/* leadership.c: start, leadership, resume and stop. */
void on_leader_started(void *userdata);
void on_leader_stopped(void *userdata);
