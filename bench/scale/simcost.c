/* Times the simulator model's operations on one scenario, in-process, on a manual clock (bench/scale, issue
 * 8 item 6): where `spotdrain sim serve` spends its time at a given cluster size. Not part of the library or
 * of any test; built by bench/scale/run against the build's libspotdrain.a.
 *
 * usage: simcost SCENARIO   prints one "name seconds" line per measured step, and the peak RSS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/model.h"
#include "sim/server.h"
#include "spotdrain/util.h"
#include "spotdrain/yaml.h"

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long status_kib(const char *key)
{
        char line[256];
        long v = -1;
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, strlen(key)) == 0)
                        v = strtol(line + strlen(key), NULL, 10);
        fclose(f);
        return v;
}

static double cpu_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu0;

/* Wall and CPU seconds since the step began (CPU: the machine is shared, the wall time is inflated). */
static void report(const char *what, double t0)
{
        printf("%-40s %10.4f s wall %10.4f s cpu\n", what, now_s() - t0, cpu_s() - cpu0);
        fflush(stdout);
}

static void count_change(const struct sim_change *c, void *userdata)
{
        (void)c;
        (*(size_t *)userdata)++;
}

int main(int argc, char **argv)
{
        struct ynode *tree = NULL;
        struct sim *s = NULL;
        char *err = NULL;
        double t;

        if (argc != 2) {
                fprintf(stderr, "usage: simcost SCENARIO\n");
                return 2;
        }
        t = now_s();
        cpu0 = cpu_s();
        if (sim_scenario_load(argv[1], &tree, &err) < 0) {
                fprintf(stderr, "simcost: %s\n", err ? err : "cannot load");
                return 1;
        }
        report("scenario load (yaml + validate)", t);
        struct sim_options o = { .manual_clock = true };
        t = now_s();
        cpu0 = cpu_s();
        if (sim_new(tree, &o, &s, &err) < 0) {
                fprintf(stderr, "simcost: %s\n", err ? err : "cannot build");
                return 1;
        }
        report("sim_new (world_build)", t);
        printf("%-40s %9.1f MiB\n", "RSS after sim_new", (double)status_kib("VmRSS:") / 1024.0);
        sim_lock(s);
        sim_start(s);

        const char *node = sim_node_name(s, 0);
        cJSON *obj = NULL;
        t = now_s();
        cpu0 = cpu_s();
        (void)sim_get(s, SIM_NODE, NULL, node, &obj);
        report("sim_get node, 1st (sim_begin: settle)", t);
        cJSON_Delete(obj);
        obj = NULL;
        t = now_s();
        cpu0 = cpu_s();
        (void)sim_get(s, SIM_NODE, NULL, node, &obj);
        report("sim_get node, steady (one settle)", t);
        cJSON_Delete(obj);

        cJSON *all = NULL;
        t = now_s();
        cpu0 = cpu_s();
        (void)sim_list(s, SIM_POD, NULL, &all);
        report("sim_list pods (settle + render all)", t);
        char fs[300];
        snprintf(fs, sizeof(fs), "spec.nodeName=%s", node);
        size_t kept = 0;
        t = now_s();
        cpu0 = cpu_s();
        const cJSON *it;
        cJSON_ArrayForEach (it, all)
                kept += sim_field_selector_match(fs, it) == 1;
        report("  field selector spec.nodeName over all", t);
        printf("%-40s %9zu of %d\n", "  pods kept", kept, cJSON_GetArraySize(all));
        t = now_s();
        cpu0 = cpu_s();
        char *text = cJSON_PrintUnformatted(all);
        report("  cJSON_PrintUnformatted of all pods", t);
        printf("%-40s %9.1f MiB\n", "  size", text ? (double)strlen(text) / 1048576.0 : 0.0);
        free(text);
        cJSON_Delete(all);

        /* What the server does for that selector now: the model keeps the node's pods before rendering. */
        struct sim_list_filter f = { .node_name = node };
        cJSON *some = NULL;
        t = now_s();
        cpu0 = cpu_s();
        (void)sim_list_filtered(s, SIM_POD, NULL, &f, &some);
        report("sim_list_filtered pods of one node", t);
        printf("%-40s %9d\n", "  pods kept", cJSON_GetArraySize(some));
        cJSON_Delete(some);

        cJSON *patch = cJSON_Parse("{\"spec\":{\"unschedulable\":true}}");
        struct sim_answer a = { 0 };
        t = now_s();
        cpu0 = cpu_s();
        (void)sim_patch(s, SIM_NODE, NULL, node, "application/strategic-merge-patch+json", patch, &a);
        report("sim_patch cordon (begin + settle)", t);
        printf("%-40s %9d\n", "  status", a.status);
        cJSON_Delete(a.body);
        cJSON_Delete(patch);

        /* Evict the first evictable pod on the node: replacement, first-fit scheduling, PDB recompute. */
        cJSON *pods = NULL;
        (void)sim_list(s, SIM_POD, NULL, &pods);
        const char *pns = NULL, *pname = NULL;
        cJSON_ArrayForEach (it, pods) {
                if (sim_field_selector_match(fs, it) != 1)
                        continue;
                const cJSON *md = cJSON_GetObjectItemCaseSensitive(it, "metadata");
                const char *ns = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "namespace"));
                if (ns && strcmp(ns, "kube-system") != 0) {
                        pns = ns;
                        pname = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, "name"));
                        break;
                }
        }
        if (pname) {
                cJSON *ev = cJSON_Parse("{\"apiVersion\":\"policy/v1\",\"kind\":\"Eviction\"}");
                struct sim_answer b = { 0 };
                t = now_s();
                cpu0 = cpu_s();
                (void)sim_evict(s, pns, pname, ev, "simcost", &b);
                report("sim_evict one pod (begin + settle)", t);
                printf("%-40s %9d\n", "  status", b.status);
                cJSON_Delete(b.body);
                cJSON_Delete(ev);
                /* The pod's exit falls due (shutdown <= 8 s; the first notice is at 10 s): the replacement
                 * is created and scheduled first-fit. */
                sim_set_now(s, 9);
                t = now_s();
                cpu0 = cpu_s();
                (void)sim_advance(s);
                report("sim_advance to t=9 (exit, replace, bind)", t);
        }
        cJSON_Delete(pods);

        size_t n = 0;
        t = now_s();
        cpu0 = cpu_s();
        (void)sim_changes_since(s, SIM_POD, "ns-0", sim_resource_version(s) - 1, count_change, &n);
        report("sim_changes_since (one watcher wake)", t);

        t = now_s();
        cpu0 = cpu_s();
        cJSON *res = sim_result(s);
        report("sim_result", t);
        cJSON_Delete(res);
        sim_unlock(s);
        printf("%-40s %9.1f MiB\n", "peak RSS (VmHWM)", (double)status_kib("VmHWM:") / 1024.0);
        sim_free(s);
        ynode_free(tree);
        return 0;
}
