/* libFuzzer target for the YAML configuration loader (src/core/config.c over src/core/yaml.c): any file
 * must load or fail with a message, and a loaded configuration must dump to YAML that loads back.
 *
 * config.h has no in-memory loader, so the input goes into a memfd that config_load_file() opens through
 * /proc/self/fd. The same bytes are also tried as one --set assignment (config_set).
 *   make BUILD=build/fuzz fuzz FUZZ_SECONDS=60      (seeds: fuzz/seeds/fuzz_config/)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "spotdrain/config.h"
#include "spotdrain/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A memfd holding data; its path in ret_path. -1 when the kernel refuses (the input is then skipped). */
static int memfd_with(const void *data, size_t size, char ret_path[static 64])
{
        int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
        if (fd < 0)
                return -1;
        const uint8_t *p = data;
        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k <= 0) {
                        close(fd);
                        return -1;
                }
                p += k;
                size -= (size_t)k;
        }
        snprintf(ret_path, 64, "/proc/self/fd/%d", fd);
        return fd;
}

static void load_and_dump(const char *path)
{
        struct spotdrain_config *c = NULL;
        if (config_new(&c) < 0)
                abort();
        char *err = NULL;
        int r = config_load_file(c, path, &err);
        if (r < 0) {
                /* A refusal always says why. */
                if (!err || !*err)
                        abort();
                free(err);
                config_free(c);
                return;
        }
        free(err);
        char *dump = NULL;
        if (config_dump(c, &dump) == 0) {
                char p2[64];
                int fd = memfd_with(dump, strlen(dump), p2);
                if (fd >= 0) {
                        struct spotdrain_config *c2 = NULL;
                        char *err2 = NULL;
                        if (config_new(&c2) < 0)
                                abort();
                        /* The dump of a loaded configuration is itself a valid file. */
                        if (config_load_file(c2, p2, &err2) < 0) {
                                fprintf(stderr, "dump does not load back: %s\n%s", err2 ? err2 : "?", dump);
                                abort();
                        }
                        free(err2);
                        config_free(c2);
                        close(fd);
                }
                free(dump);
        }
        config_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char path[64];
        int fd = memfd_with(data, size, path);
        if (fd >= 0) {
                load_and_dump(path);
                close(fd);
        }

        /* One KEY=VALUE, NUL-terminated. */
        if (size < 4096) {
                char *s = strndup((const char *)data, size);
                struct spotdrain_config *c = NULL;
                if (s && config_new(&c) == 0) {
                        char *err = NULL;
                        (void)config_set(c, s, &err);
                        free(err);
                        config_free(c);
                }
                free(s);
        }
        return 0;
}
