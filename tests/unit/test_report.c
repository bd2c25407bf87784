/* The --report page (cli/report.c): what it draws for what it is given, and that names from the cluster
 * cannot become markup. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli/report.h"

static size_t count(const char *hay, const char *needle)
{
        size_t n = 0;
        for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

static void test_draws_each_element(void **state)
{
        _cleanup_(report_freep) struct report *r = NULL;
        assert_int_equal(report_new("simulate t", &r), 0);
        assert_int_equal(report_add_node(r, "spot-a", 5, 5.2, 125, 120, 117), 0);
        assert_int_equal(report_add_pod(r, "spot-a", "shop/api-1", "shop/api", 6, 20, 60, 0), 0);
        assert_int_equal(
            report_add_pod(r, "spot-a", "shop/api-2", "shop/api", 107, 117, 107, REPORT_POD_FORCED), 0);
        assert_int_equal(report_add_pod(r, "spot-a", "batch/w-1", NULL, 6, NAN, NAN, REPORT_POD_KILLED), 0);
        /* Another node's pod is not this node's row. */
        assert_int_equal(report_add_pod(r, "od-1", "shop/api-3", "shop/api", 6, 7, NAN, 0), 0);
        assert_int_equal(report_add_pdb_sample(r, "shop/api", 0, 30, 29), 0);
        assert_int_equal(report_add_pdb_sample(r, "shop/api", 1, 30, 29), 0); /* unchanged: dropped */
        assert_int_equal(report_add_pdb_sample(r, "shop/api", 6, 29, 29), 0);
        /* A PDB none of the pods shown belongs to is not drawn. */
        assert_int_equal(report_add_pdb_sample(r, "other/x", 0, 3, 2), 0);
        assert_int_equal(report_add_alert(r, "drain-infeasible", "spot-a", 5.3, "cannot finish"), 0);
        assert_int_equal(report_add_alert(r, "queue-unreadable", NULL, 9, "no node"), 0);
        double deadline, drained;
        assert_int_equal(report_node_facts(r, "spot-a", &deadline, &drained), 0);
        assert_true(deadline == 125 && drained == 117);
        assert_int_equal(report_node_facts(r, "od-1", &deadline, &drained), -ENOENT);

        _cleanup_free_ char *html = report_render(r);
        assert_non_null(html);
        assert_int_equal(count(html, "<section class=\"node\""), 1);
        assert_int_equal(count(html, "<g class=\"pod\""), 3);
        assert_int_equal(count(html, "<rect class=\"pod-bar evicted\" x"), 1 + 1 /* legend */);
        assert_int_equal(count(html, "<rect class=\"pod-bar forced\" x"), 1 + 1);
        assert_int_equal(count(html, "<rect class=\"pod-bar killed\" x"), 1 + 1);
        assert_non_null(strstr(html, "never gone, killed"));
        /* The two pods with a last safe moment: one mark each, and the legend's. */
        assert_int_equal(count(html, "<path class=\"pod-last-safe\" d=\"M"), 2 + 1);
        assert_non_null(strstr(html, "last safe moment 60.0 s"));
        assert_int_equal(count(html, "<line class=\"deadline\" x1"), 1 + 1);
        assert_int_equal(count(html, "<line class=\"last-safe\" x1"), 1 + 1);
        /* The node's alert on its row; both in the table. */
        assert_int_equal(count(html, "<g class=\"alert\""), 1);
        assert_int_equal(count(html, "<tr class=\"alert-row\">"), 2);
        assert_int_equal(count(html, "<div class=\"pdb\" data-pdb=\"shop/api\""), 1);
        assert_null(strstr(html, "data-pdb=\"other/x\""));
        /* Two samples kept: four points of each step line. */
        const char *healthy = strstr(html, "<polyline class=\"pdb-healthy\" points=\"");
        assert_non_null(healthy);
        assert_int_equal(count(healthy, ",") - count(strchr(healthy, '>'), ","), 4);
        assert_int_equal(count(html, "<circle class=\"pdb-below\""), 0);
        assert_null(strstr(html, "<script"));
}

static void test_names_are_escaped(void **state)
{
        _cleanup_(report_freep) struct report *r = NULL;
        const char *evil = "x\"><script>alert('1')</script>&";
        assert_int_equal(report_new(evil, &r), 0);
        assert_int_equal(report_add_node(r, evil, 0, NAN, 10, 5, NAN), 0);
        assert_int_equal(report_add_pod(r, evil, evil, evil, 1, 2, NAN, 0), 0);
        assert_int_equal(report_add_pdb_sample(r, evil, 0, 1, 1), 0);
        assert_int_equal(report_add_alert(r, evil, evil, 1, evil), 0);
        _cleanup_free_ char *html = report_render(r);
        assert_non_null(html);
        assert_null(strstr(html, "<script"));
        assert_null(strstr(html, "alert('1')"));
        assert_null(strstr(html, "x\">"));
        assert_non_null(strstr(html, "x&quot;&gt;&lt;script&gt;alert(&#39;1&#39;)&lt;/script&gt;&amp;"));
        /* Never drained: said so, and no drained line. */
        assert_non_null(strstr(html, "not drained"));
        assert_int_equal(count(html, "<line class=\"drained\" x1"), 1 /* legend */);
}

static void test_empty_report(void **state)
{
        _cleanup_(report_freep) struct report *r = NULL;
        assert_int_equal(report_new(NULL, &r), 0);
        _cleanup_free_ char *html = report_render(r);
        assert_non_null(html);
        assert_non_null(strstr(html, "</html>"));
        assert_int_equal(count(html, "<section class=\"node\""), 0);
        assert_int_equal(report_write(r, "/nonexistent-dir/r.html"), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_draws_each_element),
                cmocka_unit_test(test_names_are_escaped),
                cmocka_unit_test(test_empty_report),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
