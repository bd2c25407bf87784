#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/model.h"
#include "sim/server.h"
#include "sim_fixture.h"
#include "spotdrain/core.h"
#include "spotdrain/kubeconfig.h"
#include "spotdrain/yaml.h"

void sim_fixture_write_file(char *path_template, const char *text)
{
        int fd = mkstemp(path_template);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

void sim_fixture_start(struct sim_fixture *f, const char *scenario, const struct sim_fixture_options *o)
{
        static const struct sim_fixture_options defaults = {};
        _cleanup_free_ char *error = NULL;
        double scale;

        if (!o)
                o = &defaults;
        scale = o->scale > 0 ? o->scale : 1;
        *f = (struct sim_fixture){};
        strcpy(f->sc_path, "/tmp/test-sim-scenario-XXXXXX");
        strcpy(f->kc_path, "/tmp/test-sim-kubeconfig-XXXXXX");
        sim_fixture_write_file(f->sc_path, scenario);
        if (sim_scenario_load(f->sc_path, &f->tree, &error) < 0)
                fail_msg("%s", error);
        if (sim_new(f->tree, &(struct sim_options){ .time_scale = scale, .manual_clock = o->manual_clock },
                    &f->sim, &error) < 0)
                fail_msg("%s", error);
        sim_lock(f->sim);
        sim_start(f->sim);
        sim_unlock(f->sim);
        if (o->scale_engine) {
                clk_set_scale(scale);
                f->scaled = true;
        }
        if (o->no_server)
                return;
        struct sim_server_options so = { 0 };
        if (o->faults)
                sim_server_options_from_scenario(f->tree, &so);
        assert_int_equal(sim_server_start_with(f->sim, &so, &f->srv), 0);
        if (!o->no_kubeconfig)
                sim_fixture_kubeconfig(f, NULL);
}

void sim_fixture_kubeconfig(struct sim_fixture *f, const char *url)
{
        _cleanup_free_ char *error = NULL,
                            *kc = sim_server_kubeconfig(url ? url : sim_server_url(f->srv), "test-token");
        assert_non_null(kc);
        sim_fixture_write_file(f->kc_path, kc);
        if (kube_config_load_file(f->kc_path, NULL, &f->kcfg, &error) < 0)
                fail_msg("%s", error);
}

void sim_fixture_stop(struct sim_fixture *f)
{
        kube_config_free(f->kcfg);
        sim_server_stop(f->srv);
        sim_free(f->sim);
        ynode_free(f->tree);
        if (f->scaled)
                clk_set_scale(1.0);
        /* A name still ending in XXXXXX was never made. */
        if (!strstr(f->sc_path, "XXXXXX"))
                unlink(f->sc_path);
        if (!strstr(f->kc_path, "XXXXXX"))
                unlink(f->kc_path);
        *f = (struct sim_fixture){};
}
