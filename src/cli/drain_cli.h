/* Shared by the one-shot drain commands (drain, plan, audit): their options and state, their setup, and the
 * API reads they share. Not part of the public interface. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "cli/cli.h"
#include "spotdrain/config.h"
#include "spotdrain/engine.h"
#include "spotdrain/kube.h"
#include "spotdrain/service.h"
#include "spotdrain/surge.h"

#define USEC_PER_SEC UINT64_C(1000000)

struct drain_cli {
        const char *verb;
        struct cli_common common;
        const char *budget;
        const char *deadline;
        const char *policy;
        const char *node;
        const char *report; /* --report FILE.html */
        bool all_nodes;     /* audit: on-demand nodes too */

        struct spotdrain_config *cfg;
        struct service *svc;
        struct loop *loop;          /* the service's */
        struct kube_client *client; /* the service's */
        uint64_t now, deadline_usec;
        bool reported;         /* the failure was told in a sentence of its own */
        uint64_t sync_timeout; /* of each list; 0: drain_list_sync()'s */
        /* drain: no deadline was asked for nor found in a notice; the policy configured, for a notice's */
        bool no_deadline;
        enum drain_policy notice_policy;
        char *notice_kind, *notice_instance; /* the node's notice, from its drain record */
};

/* drain_cli.c: the arguments, the setup and the reads the verbs share. */
void drain_cli_done(struct drain_cli *d);
/* As each verb begins: its arguments, then logging, configuration, deadline and the services flags asks
 * for (none for a dry run). Returns -1 to go on, else an exit status (d is done then). */
int drain_cli_begin(struct drain_cli *d, int argc, char **argv, unsigned flags);
int drain_cli_api_first(struct drain_cli *d, const char *path, const char *node, cJSON **ret);
int drain_cli_list_sync(struct drain_cli *d, const char *path, const char *label_selector,
                        const char *field_selector, cJSON **ret);

/* How long a one-shot command waits for the API server's first answer (its retries included) before it
 * says that the server cannot be reached: well under the 5 s a person at a terminal should wait. */
#define REACH_TIMEOUT (4 * USEC_PER_SEC)
/* A drain without a deadline (neither --budget, --deadline nor a notice on the node) waits for its pods as
 * kubectl drain does: the plan is made against an end this far away, which nothing reaches. */
#define NO_DEADLINE_USEC (30 * 24 * 3600 * USEC_PER_SEC)

/* drain_cli.c: one node's plan as it stands now, and its printing. */
int drain_cli_plan_node(struct drain_cli *d, struct drain_plan **ret, struct drain_grade_result *ret_grade,
                        struct drain_room *ret_room);
int drain_cli_print_plan(struct drain_cli *d, const struct drain_plan *plan,
                         const struct drain_grade_result *g, const struct drain_room *room);
