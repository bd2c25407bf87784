/* libFuzzer target for the simulator's scenario loader and world builder (src/sim/scenario.c, model.c):
 * any file must load and build a world, or fail with a message, without a crash, a leak or undefined
 * behaviour. sim_new runs on the manual clock, so no thread and no timer is involved.
 *
 * The input goes into a memfd that sim_scenario_load() opens through /proc/self/fd.
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_scenario/)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim/model.h"
#include "spotdrain/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int fd = memfd_create("fuzz-scenario", MFD_CLOEXEC);
        if (fd < 0)
                return 0;
        const uint8_t *p = data;
        size_t left = size;
        while (left > 0) {
                ssize_t k = write(fd, p, left);
                if (k <= 0) {
                        close(fd);
                        return 0;
                }
                p += k;
                left -= (size_t)k;
        }
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);

        struct ynode *tree = NULL;
        char *err = NULL;
        int r = sim_scenario_load(path, &tree, &err);
        close(fd);
        if (r < 0) {
                /* A refusal says why and hands no tree back. */
                if (tree || !err || !*err)
                        abort();
                free(err);
                return 0;
        }
        free(err);
        err = NULL;

        const struct sim_options opt = { .time_scale = 1, .manual_clock = true };
        struct sim *s = NULL;
        r = sim_new(tree, &opt, &s, &err);
        if (r < 0 && s)
                abort();
        free(err);
        sim_free(s);
        ynode_free(tree);
        return 0;
}
