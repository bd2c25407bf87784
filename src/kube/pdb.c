/* PodDisruptionBudget arithmetic, as pkg/controller/disruption computes it. */
#include "spotdrain/pdb.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int intorstr_parse(const char *s, struct intorstr *ret)
{
        if (!s || !*s)
                return -EINVAL;
        size_t n = strlen(s);
        bool pct = s[n - 1] == '%';
        size_t digits = pct ? n - 1 : n;
        if (digits == 0 || digits > 9)
                return -EINVAL;
        long v = 0;
        for (size_t i = 0; i < digits; i++) {
                if (!isdigit((unsigned char)s[i]))
                        return -EINVAL;
                v = v * 10 + (s[i] - '0');
        }
        *ret = (struct intorstr){ .set = true, .percent = pct, .value = (int)v };
        return 0;
}

int intorstr_scaled(const struct intorstr *v, int total, bool round_up)
{
        if (!v->set)
                return 0;
        if (!v->percent)
                return v->value;
        long long num = (long long)v->value * total;
        long long r = round_up ? (num + 99) / 100 : num / 100;
        return r > INT_MAX ? INT_MAX : (int)r;
}

void pdb_expected(const struct pdb_spec *spec, int matching_pods, int expected_scale, int *ret_expected,
                  int *ret_desired_healthy)
{
        int expected = 0, desired = 0;
        if (spec->max_unavailable.set) {
                expected = expected_scale;
                int mu = intorstr_scaled(&spec->max_unavailable, expected, true);
                desired = expected - mu;
                if (desired < 0)
                        desired = 0;
        } else if (spec->min_available.set) {
                if (!spec->min_available.percent) {
                        expected = matching_pods;
                        desired = spec->min_available.value;
                } else {
                        expected = expected_scale;
                        desired = intorstr_scaled(&spec->min_available, expected, true);
                }
        }
        *ret_expected = expected;
        *ret_desired_healthy = desired;
}

int pdb_disruptions_allowed(int current_healthy, int desired_healthy, int expected)
{
        if (expected <= 0 || current_healthy - desired_healthy <= 0)
                return 0;
        return current_healthy - desired_healthy;
}
