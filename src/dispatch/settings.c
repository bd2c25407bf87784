/* The dispatcher's configuration keys (notices.*): what a notice of each kind does, in every mode (the
 * agent, the controller and simulate share the one dispatcher). Listed with every other module's in
 * src/service/config_sections.c. */
#include <stddef.h>

#include "spotdrain/config.h"
#include "spotdrain/dispatch.h"
#include "spotdrain/service.h"

static const struct config_enum_value notice_actions[] = {
        { "drain", DISPATCH_ACTION_DRAIN },
        { "cordon", DISPATCH_ACTION_CORDON },
        { "taint", DISPATCH_ACTION_TAINT },
        { "ignore", DISPATCH_ACTION_IGNORE },
        { NULL, 0 },
};

/* A launch lifecycle action drains nothing: it is completed (once its node is Ready) or left alone. */
static const struct config_enum_value launch_actions[] = {
        { "complete", DISPATCH_ACTION_DRAIN },
        { "ignore", DISPATCH_ACTION_IGNORE },
        { NULL, 0 },
};

#define OFF(kind) offsetof(struct notices_settings, action[kind])
#define FIELD(f)  offsetof(struct notices_settings, f)

static const struct config_item notices_items[] = {
        { "notices.spot_interruption.action", CONFIG_ENUM, "drain", OFF(NOTICE_SPOT_INTERRUPTION),
          "a spot interruption warning: drain | cordon (no evictions) | taint (the soft taint) | ignore "
          "(counted, nothing done)",
          notice_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.rebalance_recommendation.action", CONFIG_ENUM, "taint",
          OFF(NOTICE_REBALANCE_RECOMMENDATION),
          "a rebalance recommendation: taint (soft taint and replacement, reverted when nothing follows) | "
          "drain (planned against two minutes) | cordon | ignore",
          notice_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.scheduled_change.action", CONFIG_ENUM, "drain", OFF(NOTICE_SCHEDULED_CHANGE),
          "a scheduled change (IMDS maintenance event, AWS Health), acted on maintenance_lead before it: "
          "drain | cordon | taint | ignore",
          notice_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.state_change.action", CONFIG_ENUM, "drain", OFF(NOTICE_STATE_CHANGE),
          "an instance state change (stopping, terminated...): drain | cordon | taint | ignore",
          notice_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.capacity_reservation_interruption.action", CONFIG_ENUM, "drain",
          OFF(NOTICE_CAPACITY_RESERVATION_INTERRUPTION),
          "an interruptible Capacity Reservation's instance interruption warning (two minutes, as a spot "
          "one): drain | cordon | taint | ignore",
          notice_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.asg_lifecycle.action", CONFIG_ENUM, "drain", OFF(NOTICE_ASG_LIFECYCLE_TERMINATE),
          "an Auto Scaling terminate lifecycle action: drain | cordon | taint (hook completed at once) | "
          "ignore (hook left to its timeout)",
          notice_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.asg_launch.action", CONFIG_ENUM, "complete", OFF(NOTICE_ASG_LIFECYCLE_LAUNCH),
          "an Auto Scaling launch lifecycle action (controller): complete (CONTINUE once the instance's "
          "node "
          "is Ready, ABANDON after controller.launch_ready_timeout_seconds) | ignore (hook left to its "
          "timeout and default result)",
          launch_actions, 0, CONFIG_NO_RANGE, false },
        { "notices.rebalance_revert_seconds", CONFIG_DURATION, STRINGIFY(DISPATCH_DEFAULT_REVERT_SECONDS),
          FIELD(rebalance_revert_usec),
          "remove the rebalance soft taint when no interruption follows within this time", NULL,
          CONFIG_SECONDS, .min = 1, .max = 86400, .old_key = "agent.rebalance_revert_seconds" },
        { "notices.maintenance_lead_seconds", CONFIG_DURATION,
          STRINGIFY(DISPATCH_DEFAULT_MAINTENANCE_LEAD_SECONDS), FIELD(maintenance_lead_usec),
          "drain this long before a scheduled maintenance starts", NULL, CONFIG_SECONDS, .min = 0,
          .max = 86400, .old_key = "agent.maintenance_lead_seconds" },
        { "notices.min_budget_seconds", CONFIG_DURATION, STRINGIFY(DISPATCH_DEFAULT_MIN_BUDGET_SECONDS),
          FIELD(min_budget_usec),
          "the least time a drain is planned against: a notice that arrives after its deadline or nearer "
          "to it (a backlog, a retry, a back-dated message) drains gracefully with this budget and says so",
          NULL, CONFIG_SECONDS, .min = 1, .max = 600, .old_key = "drain.min_budget_seconds" },
};

const struct config_section notices_config_section = { "notices", notices_items, ARRAY_SIZE(notices_items) };

const char *dispatch_cordon_only_unused(const struct spotdrain_config *cfg)
{
        if (!cfg || !cfg->drain.cordon_only)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(notices_items) && notices_items[i].type == CONFIG_ENUM; i++) {
                size_t k = (notices_items[i].offset - OFF(0)) / sizeof(int);
                int a = cfg->notices.action[k];
                if (a == DISPATCH_ACTION_DRAIN ||
                    (a == DISPATCH_ACTION_DEFAULT && k != NOTICE_REBALANCE_RECOMMENDATION))
                        return NULL;
        }
        return "drain.cordon_only is true but no notices.KIND.action is drain: it shapes drains only, so it "
               "changes nothing (a kind whose action is cordon is cordoned alone, without the taint, the "
               "exclude label or the post-mortems)";
}

void dispatch_actions_from_settings(const struct notices_settings *s, struct dispatch_options *o)
{
        for (size_t k = 0; k < _NOTICE_KIND_MAX; k++)
                if (s->action[k] > DISPATCH_ACTION_DEFAULT && s->action[k] < _DISPATCH_ACTION_MAX)
                        o->actions[k] = (enum dispatch_action)s->action[k];
}

void dispatch_options_from_config(const struct spotdrain_config *cfg, struct dispatch_options *o)
{
        if (!cfg)
                return;
        if (!o->rebalance_revert_usec)
                o->rebalance_revert_usec = cfg->notices.rebalance_revert_usec;
        if (!o->maintenance_lead_usec)
                o->maintenance_lead_usec = cfg->notices.maintenance_lead_usec;
        if (!o->min_budget_usec)
                o->min_budget_usec = cfg->notices.min_budget_usec;
        dispatch_actions_from_settings(&cfg->notices, o);
}
