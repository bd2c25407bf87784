/* Test helper (not a unit test): a standalone simulated STS (src/sim/sts_surface.c) on the real clock.
 * Prints its URL on stdout, serves until SIGTERM or SIGINT. Used by tests/integration/aws_cli_sts.sh. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sim/sts_surface.h"

int main(int argc, char **argv)
{
        struct sim_sts *t = NULL;
        sigset_t set;
        int sig, r;

        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        sigprocmask(SIG_BLOCK, &set, NULL);
        r = sim_sts_start(NULL, argc > 1 ? argv[1] : NULL, &t);
        if (r < 0) {
                fprintf(stderr, "sts_sim: cannot start: %s\n", strerror(-r));
                return 1;
        }
        printf("%s\n", sim_sts_url(t));
        fflush(stdout);
        sigwait(&set, &sig);
        sim_sts_stop(t);
        return 0;
}
