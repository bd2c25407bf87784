/* libFuzzer target for the kubeconfig loader (src/kube/kubeconfig.c): any file must load or fail with a
 * message naming where, without a crash, a leak or undefined behaviour.
 *
 * Only kube_config_load_file() is called: never kube_config_token(), so an exec plugin named by an input
 * is parsed but never run. The input goes into a memfd opened through /proc/self/fd (relative paths in
 * it resolve against /proc/self/fd, and loading reads no other file).
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_kubeconfig/)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "spotdrain/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load(const char *path, const char *context)
{
        struct kube_config *c = NULL;
        char *err = NULL;
        int r = kube_config_load_file(path, context, &c, &err);
        if (r < 0) {
                if (c)
                        abort();
        } else if (!c || !c->server) {
                abort();
        }
        free(err);
        kube_config_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int fd = memfd_create("fuzz-kubeconfig", MFD_CLOEXEC);
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
        load(path, NULL);
        /* A named context takes the other path through the lookup (the seeds use "fuzz"). */
        load(path, "fuzz");
        close(fd);
        return 0;
}
