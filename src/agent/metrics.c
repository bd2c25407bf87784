/* The agent's metric families, beside the agent that counts them: its IMDS polls and actions, turned from
 * the agent's and its IMDS client's totals into the registry's deltas (agent_metrics_count()). */
#include "spotdrain/metrics.h"
#include "spotdrain/agent.h"
#include "spotdrain/core.h"
#include "spotdrain/imds.h"

#define METRIC_IMDS_POLLS          "spotdrain_imds_polls_total"
#define METRIC_IMDS_POLL_FAILURES  "spotdrain_imds_poll_failures_total"
#define METRIC_IMDS_REQUEST_ERRORS "spotdrain_imds_request_errors_total"
#define METRIC_IMDS_PARSE_ERRORS   "spotdrain_imds_parse_errors_total"
#define METRIC_IMDS_TOKEN_FAILURES "spotdrain_imds_token_failures_total"
#define METRIC_IMDS_LAST_SUCCESS   "spotdrain_imds_last_success_seconds"
#define METRIC_AGENT_ACTION_ERRORS "spotdrain_agent_action_errors_total"

const struct metric_family_def agent_metric_families[] = {
        { METRIC_IMDS_POLLS, METRIC_COUNTER, "Polls of the four IMDS notice paths.", {}, NULL, 0 },
        { METRIC_IMDS_POLL_FAILURES,
          METRIC_COUNTER,
          "Polls in which no IMDS notice path answered.",
          {},
          NULL,
          0 },
        { METRIC_IMDS_REQUEST_ERRORS,
          METRIC_COUNTER,
          "IMDS GETs that failed (404 is not a failure).",
          {},
          NULL,
          0 },
        { METRIC_IMDS_PARSE_ERRORS, METRIC_COUNTER, "IMDS documents that could not be read.", {}, NULL, 0 },
        { METRIC_IMDS_TOKEN_FAILURES, METRIC_COUNTER, "IMDSv2 token requests that failed.", {}, NULL, 0 },
        { METRIC_IMDS_LAST_SUCCESS,
          METRIC_GAUGE,
          "When IMDS last answered a poll (unix time).",
          {},
          NULL,
          0 },
        { METRIC_AGENT_ACTION_ERRORS, METRIC_COUNTER, "Agent actions that could not start.", {}, NULL, 0 },
};
const size_t agent_n_metric_families = ARRAY_SIZE(agent_metric_families);

bool agent_metrics_count(const struct agent *a, const struct imds_client *imds, struct metrics *m,
                         struct agent_metrics_last *last)
{
        struct agent_stats st;
        struct imds_stats is;

        agent_stats(a, &st);
        imds_client_stats(imds, &is);
        (void)metrics_counter_add_since(m, METRIC_IMDS_POLLS, st.ticks, last->agent.ticks, NULL);
        (void)metrics_counter_add_since(m, METRIC_IMDS_POLL_FAILURES, st.tick_errors,
                                        last->agent.tick_errors, NULL);
        (void)metrics_counter_add_since(m, METRIC_IMDS_REQUEST_ERRORS, st.path_errors,
                                        last->agent.path_errors, NULL);
        (void)metrics_counter_add_since(m, METRIC_IMDS_PARSE_ERRORS, st.parse_errors,
                                        last->agent.parse_errors, NULL);
        (void)metrics_counter_add_since(m, METRIC_AGENT_ACTION_ERRORS, st.action_errors,
                                        last->agent.action_errors, NULL);
        (void)metrics_counter_add_since(m, METRIC_IMDS_TOKEN_FAILURES, is.token_failures,
                                        last->imds.token_failures, NULL);
        for (int k = 0; k < _NOTICE_KIND_MAX; k++)
                (void)metrics_counter_add_since(m, METRIC_NOTICES_RECEIVED, st.notice_counts[k],
                                                last->agent.notice_counts[k],
                                                notice_kind_to_string((enum notice_kind)k), "imds", NULL);
        if (st.last_ok_usec)
                (void)metrics_gauge_set(m, METRIC_IMDS_LAST_SUCCESS, (double)st.last_ok_usec / 1e6, NULL);
        bool answered = st.tick_errors == last->agent.tick_errors;
        last->agent = st;
        last->imds = is;
        return answered;
}
