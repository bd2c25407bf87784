/* spotdrain sim serve SCENARIO (placeholder until the simulator server lands) */
#include <stdio.h>

#include "cli/cli.h"

int cmd_sim(int argc, char **argv)
{
        fprintf(stderr, "spotdrain sim: not available in this build\n");
        return EXIT_ERROR;
}
