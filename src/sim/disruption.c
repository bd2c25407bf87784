/* See disruption.h. The rounding is GetScaledValueFromIntOrPercent's: ceil(percent × total / 100), done
 * in integers. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "sim/disruption.h"

int sim_budget_parse(const char *s, struct intorstr *ret)
{
        size_t len, digits;
        int64_t v = 0;

        if (!s)
                return -EINVAL;
        len = strlen(s);
        digits = len > 0 && s[len - 1] == '%' ? len - 1 : len;
        if (digits == 0 || digits > 9)
                return -EINVAL;
        for (size_t i = 0; i < digits; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (s[i] - '0');
        }
        ret->set = true;
        ret->percent = digits != len;
        ret->value = (int)v;
        return 0;
}

/* The count an IntOrString stands for out of total, a percentage rounded up. */
static int scaled_up(const struct intorstr *v, int total)
{
        int64_t n;

        if (!v->percent)
                return v->value;
        n = ((int64_t)v->value * total + 99) / 100;
        return n > INT32_MAX ? INT32_MAX : (int)n;
}

void sim_budget_compute(const struct pdb_spec *spec, const struct sim_budget_pods *pods,
                        struct sim_budget_status *ret)
{
        bool uses_scale = false;

        *ret = (struct sim_budget_status){ .current = pods->healthy };
        if (spec->max_unavailable.set) {
                uses_scale = true;
                ret->expected = pods->scale;
                ret->desired = pods->scale - scaled_up(&spec->max_unavailable, pods->scale);
                if (ret->desired < 0)
                        ret->desired = 0;
        } else if (spec->min_available.set && spec->min_available.percent) {
                uses_scale = true;
                ret->expected = pods->scale;
                ret->desired = scaled_up(&spec->min_available, pods->scale);
        } else if (spec->min_available.set) {
                ret->expected = pods->matching;
                ret->desired = spec->min_available.value;
        }
        if (uses_scale && !pods->scale_known)
                return; /* the controller's sync fails: it writes 0 disruptions allowed */
        if (ret->expected > 0 && ret->current > ret->desired)
                ret->allowed = ret->current - ret->desired;
}

bool sim_budget_allows_unhealthy(const struct sim_budget_status *st, bool always_allow)
{
        return always_allow || (st->current >= st->desired && st->desired > 0);
}
