/* PDB arithmetic against the disruption controller's rules (pkg/controller/disruption). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spotdrain/pdb.h"

static struct pdb_spec spec(const char *min, const char *max)
{
        struct pdb_spec s = { 0 };
        if (min)
                assert_int_equal(intorstr_parse(min, &s.min_available), 0);
        if (max)
                assert_int_equal(intorstr_parse(max, &s.max_unavailable), 0);
        return s;
}

static void test_parse(void **state)
{
        struct intorstr v;
        assert_int_equal(intorstr_parse("25%", &v), 0);
        assert_true(v.percent);
        assert_int_equal(v.value, 25);
        assert_int_equal(intorstr_parse("3", &v), 0);
        assert_false(v.percent);
        assert_int_equal(v.value, 3);
        assert_int_not_equal(intorstr_parse("-1", &v), 0);
        assert_int_not_equal(intorstr_parse("10.5%", &v), 0);
        assert_int_not_equal(intorstr_parse("%", &v), 0);
        assert_int_not_equal(intorstr_parse("", &v), 0);
}

static void test_max_unavailable_int(void **state)
{
        struct pdb_spec s = spec(NULL, "1");
        int expected, desired;
        /* 30 replicas, matching pods irrelevant: expected = scale. */
        pdb_expected(&s, 29, 30, &expected, &desired);
        assert_int_equal(expected, 30);
        assert_int_equal(desired, 29);
        assert_int_equal(pdb_disruptions_allowed(30, desired, expected), 1);
        assert_int_equal(pdb_disruptions_allowed(29, desired, expected), 0);
}

static void test_max_unavailable_percent_rounds_up(void **state)
{
        struct pdb_spec s = spec(NULL, "25%");
        int expected, desired;
        /* 25% of 30 = 7.5 → 8 unavailable allowed → desired 22. */
        pdb_expected(&s, 30, 30, &expected, &desired);
        assert_int_equal(desired, 22);
        assert_int_equal(pdb_disruptions_allowed(30, desired, expected), 8);
        s = spec(NULL, "10%");
        pdb_expected(&s, 160, 160, &expected, &desired);
        assert_int_equal(desired, 144);
        /* 10% of 5 = 0.5 → 1. */
        pdb_expected(&s, 5, 5, &expected, &desired);
        assert_int_equal(desired, 4);
}

static void test_min_available(void **state)
{
        int expected, desired;
        struct pdb_spec s = spec("1", NULL);
        /* Integer minAvailable counts matching pods, not the scale. */
        pdb_expected(&s, 2, 5, &expected, &desired);
        assert_int_equal(expected, 2);
        assert_int_equal(desired, 1);
        s = spec("80%", NULL);
        /* 80% of 80 = 64; of 12 = 9.6 → 10 (rounded up). */
        pdb_expected(&s, 80, 80, &expected, &desired);
        assert_int_equal(desired, 64);
        pdb_expected(&s, 12, 12, &expected, &desired);
        assert_int_equal(desired, 10);
        s = spec("75%", NULL);
        pdb_expected(&s, 12, 12, &expected, &desired);
        assert_int_equal(desired, 9);
        assert_int_equal(pdb_disruptions_allowed(12, desired, expected), 3);
}

static void test_zero_and_overflow(void **state)
{
        int expected, desired;
        struct pdb_spec s = spec(NULL, "100%");
        pdb_expected(&s, 3, 3, &expected, &desired);
        assert_int_equal(desired, 0);
        assert_int_equal(pdb_disruptions_allowed(3, desired, expected), 3);
        s = spec(NULL, "5");
        pdb_expected(&s, 3, 3, &expected, &desired);
        assert_int_equal(desired, 0);
        /* No pods expected: nothing may be disrupted. */
        assert_int_equal(pdb_disruptions_allowed(4, 0, 0), 0);
        s = spec("0", NULL);
        pdb_expected(&s, 0, 0, &expected, &desired);
        assert_int_equal(pdb_disruptions_allowed(0, desired, expected), 0);
        /* Unhealthy pods reduce what may be disrupted, never below 0. */
        s = spec("3", NULL);
        pdb_expected(&s, 4, 4, &expected, &desired);
        assert_int_equal(pdb_disruptions_allowed(2, desired, expected), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_max_unavailable_int),
                cmocka_unit_test(test_max_unavailable_percent_rounds_up),
                cmocka_unit_test(test_min_available),
                cmocka_unit_test(test_zero_and_overflow),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
