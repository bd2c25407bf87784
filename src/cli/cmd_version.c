/* spotdrain version */
#include <stdio.h>

#include "cli/cli.h"
#include "cli/help.h"
#include "spotdrain/core.h"

int cmd_version(int argc, char **argv)
{
        if (argc >= 2 && (streq(argv[1], "--help") || streq(argv[1], "-h")))
                return cli_help(stdout, "version");
        printf("spotdrain %s\n", SPOTDRAIN_VERSION);
        return EXIT_OK;
}
