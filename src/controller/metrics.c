/* The controller's metric families, beside the controller that counts them: its queue, messages, notices,
 * drains and launch hooks, turned from the controller's totals into the registry's deltas
 * (controller_metrics_count()). */
#include "spotdrain/metrics.h"
#include "spotdrain/controller.h"
#include "spotdrain/core.h"

#define M_RECEIVES         "spotdrain_sqs_receives_total"
#define M_DELETED          "spotdrain_sqs_messages_deleted_total"
#define M_DELETE_FAILURES  "spotdrain_sqs_delete_failures_total"
#define M_EXTENSIONS       "spotdrain_sqs_visibility_extensions_total"
#define M_MALFORMED        "spotdrain_sqs_messages_malformed_total"
#define M_REJECTED         "spotdrain_sqs_messages_rejected_total"
#define M_IN_FLIGHT        "spotdrain_sqs_messages_in_flight"
#define M_UNREADABLE_TOTAL "spotdrain_queue_unreadable_total"
#define M_UNREADABLE       "spotdrain_queue_unreadable"
#define M_DUPLICATES       "spotdrain_notices_duplicate_total"
#define M_IGNORED          "spotdrain_notices_ignored_total"
#define M_SUPERSEDED       "spotdrain_notices_superseded_total"
#define M_DRAINS_STARTED   "spotdrain_drains_started_total"
#define M_DRAINS_RESUMED   "spotdrain_drains_resumed_total"
#define M_UNKNOWN_DROPPED  "spotdrain_unknown_instances_dropped_total"
#define M_DRAINING         "spotdrain_drains_in_progress"
#define M_LAUNCH_HOOKS     "spotdrain_launch_hooks_total"
#define M_LAUNCH_WAITING   "spotdrain_launch_hooks_waiting"

const struct metric_family_def controller_metric_families[] = {
        { M_RECEIVES, METRIC_COUNTER, "SQS ReceiveMessage calls answered.", {}, NULL, 0 },
        { M_DELETED, METRIC_COUNTER, "SQS messages deleted.", {}, NULL, 0 },
        { M_DELETE_FAILURES, METRIC_COUNTER, "SQS messages that could not be deleted.", {}, NULL, 0 },
        { M_EXTENSIONS,
          METRIC_COUNTER,
          "Visibility extensions of messages held during drains.",
          {},
          NULL,
          0 },
        { M_MALFORMED,
          METRIC_COUNTER,
          "Messages left in the queue unread, by reason: malformed (not JSON, a field missing or "
          "wrong), unrecognized (not a notice spotdrain knows), too-large, too-deep.",
          { "reason" },
          NULL,
          0 },
        { M_REJECTED,
          METRIC_COUNTER,
          "Well-formed messages left in the queue without acting on them, by reason: no-account, "
          "foreign-account, foreign-region, bad-signature (docs/security.md), no-node (not this cluster's), "
          "unmanaged (without controller.managed_tag).",
          { "reason" },
          NULL,
          0 },
        { M_IN_FLIGHT, METRIC_GAUGE, "Messages held while their drains run.", {}, NULL, 0 },
        { M_UNREADABLE_TOTAL, METRIC_COUNTER, "Times the queue turned unreadable.", {}, NULL, 0 },
        { M_UNREADABLE,
          METRIC_GAUGE,
          "1 while the queue is unreadable or not proven readable.",
          {},
          NULL,
          0 },
        { M_DUPLICATES, METRIC_COUNTER, "Duplicate notices absorbed.", {}, NULL, 0 },
        { M_SUPERSEDED,
          METRIC_COUNTER,
          "Notices not acted on because a later one for the same instance was handled first.",
          {},
          NULL,
          0 },
        { M_IGNORED,
          METRIC_COUNTER,
          "Notices whose kind's action is ignore (notices.KIND.action).",
          {},
          NULL,
          0 },
        { M_DRAINS_STARTED, METRIC_COUNTER, "Drains started (restarts included).", {}, NULL, 0 },
        { M_DRAINS_RESUMED, METRIC_COUNTER, "Drains carried on from a node annotation.", {}, NULL, 0 },
        { M_UNKNOWN_DROPPED,
          METRIC_COUNTER,
          "Notices whose instance never turned up as a node.",
          {},
          NULL,
          0 },
        { M_DRAINING, METRIC_GAUGE, "Drains under way.", {}, NULL, 0 },
        { M_LAUNCH_HOOKS,
          METRIC_COUNTER,
          "Auto Scaling launch lifecycle actions ended, by result: continue (the node was Ready), abandon "
          "(not Ready within controller.launch_ready_timeout_seconds), foreign (not this cluster's: left "
          "alone), gone (Auto Scaling held it no more), failed (its message comes back).",
          { "result" },
          NULL,
          0 },
        { M_LAUNCH_WAITING,
          METRIC_GAUGE,
          "Launch lifecycle actions waiting for their node to be Ready.",
          {},
          NULL,
          0 },
};
const size_t controller_n_metric_families = ARRAY_SIZE(controller_metric_families);

void controller_metrics_count(const struct controller *c, struct metrics *m, struct controller_stats *last)
{
        struct controller_stats st;

        controller_stats(c, &st);
        (void)metrics_counter_add_since(m, M_RECEIVES, st.receives, last->receives, NULL);
        (void)metrics_counter_add_since(m, M_DELETED, st.deleted, last->deleted, NULL);
        (void)metrics_counter_add_since(m, M_DELETE_FAILURES, st.delete_failures, last->delete_failures,
                                        NULL);
        (void)metrics_counter_add_since(m, M_EXTENSIONS, st.visibility_extends, last->visibility_extends,
                                        NULL);
        for (int k = 0; k < _CONTROLLER_MALFORMED_MAX; k++)
                (void)metrics_counter_add_since(m, M_MALFORMED, st.malformed[k], last->malformed[k],
                                                controller_malformed_label((enum controller_malformed)k),
                                                NULL);
        for (int k = CONTROLLER_REJECT_NO_ACCOUNT; k < _CONTROLLER_REJECT_MAX; k++)
                (void)metrics_counter_add_since(m, M_REJECTED, st.rejected[k], last->rejected[k],
                                                controller_reject_label((enum controller_reject)k), NULL);
        (void)metrics_counter_add_since(m, M_UNREADABLE_TOTAL, st.unreadable, last->unreadable, NULL);
        (void)metrics_counter_add_since(m, M_DUPLICATES, st.dispatch.duplicates, last->dispatch.duplicates,
                                        NULL);
        (void)metrics_counter_add_since(m, M_IGNORED, st.dispatch.ignored, last->dispatch.ignored, NULL);
        (void)metrics_counter_add_since(m, M_SUPERSEDED, st.superseded, last->superseded, NULL);
        (void)metrics_counter_add_since(m, M_DRAINS_STARTED, st.dispatch.drains, last->dispatch.drains,
                                        NULL);
        (void)metrics_counter_add_since(m, M_DRAINS_RESUMED, st.dispatch.resumed, last->dispatch.resumed,
                                        NULL);
        (void)metrics_counter_add_since(m, M_UNKNOWN_DROPPED, st.dispatch.unknown_dropped,
                                        last->dispatch.unknown_dropped, NULL);
        (void)metrics_counter_add_since(m, METRIC_QUEUE_RECEIVE_ERRORS, st.unreadable_failures,
                                        last->unreadable_failures, "unreadable", NULL);
        (void)metrics_counter_add_since(m, METRIC_QUEUE_RECEIVE_ERRORS,
                                        st.receive_failures - st.unreadable_failures,
                                        last->receive_failures - last->unreadable_failures, "other", NULL);
        (void)metrics_counter_add_since(m, METRIC_MESSAGES, st.messages, last->messages, "received", NULL);
        for (int k = 0; k < _NOTICE_KIND_MAX; k++)
                (void)metrics_counter_add_since(m, METRIC_NOTICES_RECEIVED, st.notice_counts[k],
                                                last->notice_counts[k],
                                                notice_kind_to_string((enum notice_kind)k), "sqs", NULL);
        (void)metrics_gauge_set(m, M_IN_FLIGHT, st.in_flight, NULL);
        (void)metrics_gauge_set(m, M_DRAINING, st.dispatch.draining, NULL);
        for (unsigned k = 0; k < CONTROLLER_LAUNCH_RESULTS; k++)
                (void)metrics_counter_add_since(m, M_LAUNCH_HOOKS, st.launch_results[k],
                                                last->launch_results[k], controller_launch_result_label(k),
                                                NULL);
        (void)metrics_gauge_set(m, M_LAUNCH_WAITING, st.launch_waiting, NULL);
        (void)metrics_gauge_set(m, M_UNREADABLE, controller_ready(c) ? 0 : 1, NULL);
        (void)metrics_gauge_set(m, METRIC_LEADER, st.leader ? 1 : 0, NULL);
        *last = st;
}
