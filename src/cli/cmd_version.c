/* spotdrain version */
#include <stdio.h>

#include "cli/cli.h"

int cmd_version(int argc, char **argv)
{
        printf("spotdrain %s\n", SPOTDRAIN_VERSION);
        return EXIT_OK;
}
