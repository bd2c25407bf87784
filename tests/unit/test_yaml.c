/* The YAML tree: values, positions, limits and errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static void test_tree(void **state)
{
        const char *doc =
            "name: seed\nnodes:\n  - {name: a, cpu: \"16\"}\n  - name: b\nbudget: 120\nflag: yes\nx: ~\n";
        _cleanup_(ynode_freep) struct ynode *t = NULL;
        assert_int_equal(yaml_load_string(doc, strlen(doc), "s.yaml", &t, NULL), 0);
        assert_string_equal(ynode_str(ynode_get(t, "name")), "seed");
        const struct ynode *nodes = ynode_get(t, "nodes");
        assert_int_equal(nodes->type, YNODE_SEQ);
        assert_int_equal(nodes->n_children, 2);
        assert_int_equal(nodes->line, 2);
        const struct ynode *cpu = ynode_get(&nodes->children[0], "cpu");
        assert_true(cpu->quoted);
        int64_t v;
        assert_int_not_equal(ynode_int(cpu, &v), 0);
        assert_int_equal(ynode_int(ynode_get(t, "budget"), &v), 0);
        assert_int_equal(v, 120);
        bool b;
        assert_int_equal(ynode_bool(ynode_get(t, "flag"), &b), 0);
        assert_true(b);
        assert_true(ynode_is_null(ynode_get(t, "x")));
        assert_true(ynode_is_null(ynode_get(t, "absent")));
        assert_int_equal(ynode_get(&nodes->children[1], "name")->line, 4);
}

static void test_errors(void **state)
{
        _cleanup_free_ char *err = NULL;
        struct ynode *t = NULL;
        const char *dup = "a: 1\nb: 2\na: 3\n";
        assert_int_equal(yaml_load_string(dup, strlen(dup), "d.yaml", &t, &err), -EINVAL);
        assert_non_null(strstr(err, "d.yaml:3:"));
        assert_non_null(strstr(err, "duplicate key 'a'"));
        free(err);
        err = NULL;
        const char *bad = "a: [1, 2\nb: 3\n";
        assert_int_equal(yaml_load_string(bad, strlen(bad), "b.yaml", &t, &err), -EINVAL);
        assert_non_null(strstr(err, "b.yaml:"));
        free(err);
        err = NULL;
        const char *alias = "a: &x 1\nb: *x\n";
        assert_int_equal(yaml_load_string(alias, strlen(alias), "al.yaml", &t, &err), -EINVAL);
        assert_non_null(strstr(err, "al.yaml:2:"));
        free(err);
        err = NULL;
        /* Nesting beyond the limit is refused, not a stack overflow. */
        struct buf deep = { 0 };
        for (int i = 0; i < YAML_MAX_DEPTH + 10; i++)
                assert_int_equal(buf_append(&deep, "[", 1), 0);
        assert_int_equal(yaml_load_string(deep.data, deep.len, "deep", &t, &err), -EINVAL);
        assert_non_null(strstr(err, "too deep"));
        buf_free(&deep);
        free(err);
        err = NULL;
        assert_int_equal(yaml_load_file("/nonexistent/x.yaml", 1024, &t, &err), -ENOENT);
        assert_non_null(strstr(err, "/nonexistent/x.yaml"));
}

static void test_empty(void **state)
{
        _cleanup_(ynode_freep) struct ynode *t = NULL;
        assert_int_equal(yaml_load_string("", 0, "e", &t, NULL), 0);
        assert_int_equal(t->type, YNODE_MAP);
        assert_int_equal(t->n_children, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_tree),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_empty),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
