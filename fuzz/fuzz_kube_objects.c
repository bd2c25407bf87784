/* libFuzzer target for the Kubernetes object readers (src/kube/kube_objects.c): pods, nodes, PDBs, label
 * selectors and leases out of any JSON, and the informers' pruning (kube_object_prune), without a crash, a
 * leak or undefined behaviour.
 *
 * The input is parsed as JSON; the object itself, its spec.selector and every element of its "items" (a
 * list answer) go through every reader, and each PDB's selector is matched against each pod's labels.
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_kube_objects/)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "spotdrain/kube.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void one(const cJSON *obj, const cJSON *other)
{
        struct kube_pod pod;
        struct kube_node node;
        struct kube_pdb pdb;
        struct kube_selector sel;
        struct kube_lease lease;
        memset(&pod, 0, sizeof(pod));
        memset(&node, 0, sizeof(node));
        memset(&pdb, 0, sizeof(pdb));
        memset(&sel, 0, sizeof(sel));
        memset(&lease, 0, sizeof(lease));

        bool have_pod = kube_pod_parse(obj, &pod) == 0;
        if (kube_node_parse(obj, &node) == 0)
                kube_node_clear(&node);
        if (kube_lease_parse(obj, &lease) == 0)
                kube_lease_clear(&lease);
        if (kube_selector_parse(obj, &sel) == 0) {
                (void)kube_selector_matches(&sel, pod.labels, pod.n_labels);
                kube_selector_clear(&sel);
        }
        if (kube_pdb_parse(obj, &pdb) == 0) {
                if (have_pod)
                        (void)kube_pdb_matches_pod(&pdb, &pod);
                (void)kube_selector_matches(&pdb.selector, pod.labels, pod.n_labels);
                kube_pdb_clear(&pdb);
        }
        /* Another item of the same list as the pod a selector is matched against. */
        if (other && kube_pdb_parse(other, &pdb) == 0) {
                if (have_pod)
                        (void)kube_pdb_matches_pod(&pdb, &pod);
                kube_pdb_clear(&pdb);
        }
        if (have_pod) {
                (void)kube_pod_annotation(&pod, "kubernetes.io/config.mirror");
                kube_pod_clear(&pod);
        }
        /* The informers' pruning (every path form: nested, whole subtree, array filter, malformed), and the
         * pod reader on what is left, as the drains read their pods. */
        static const char *const keep[] = { "metadata.labels",
                                            "spec",
                                            "status.conditions[type=Ready]",
                                            "status.conditions[type",
                                            "a..b",
                                            "x[=]",
                                            NULL };
        cJSON *pruned = kube_object_prune(obj, keep);
        if (pruned && kube_pod_parse(pruned, &pod) == 0)
                kube_pod_clear(&pod);
        cJSON_Delete(pruned);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        cJSON *root = cJSON_ParseWithLength((const char *)data, size);
        if (!root)
                return 0;
        one(root, NULL);
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(root, "spec");
        const cJSON *sel = cJSON_GetObjectItemCaseSensitive(spec, "selector");
        struct kube_selector s;
        memset(&s, 0, sizeof(s));
        if (sel && kube_selector_parse(sel, &s) == 0) {
                (void)kube_selector_matches(&s, NULL, 0);
                kube_selector_clear(&s);
        }
        const cJSON *items = kube_list_items(root);
        const cJSON *prev = NULL;
        const cJSON *it;
        cJSON_ArrayForEach (it, items) {
                one(it, prev);
                prev = it;
        }
        (void)kube_object_rv(root);
        (void)kube_object_str(root, "metadata.name");
        cJSON_Delete(root);
        return 0;
}
