/* spotdrain plan NODE: the plan a drain of the node would follow now, and its graded verdict
 * (docs/contracts.md §1). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli/drain_cli.h"
#include "cli/elbv2_sync.h"
#include "cli/help.h"
#include "cli/report.h"
#include "spotdrain/core.h"
#include "spotdrain/term.h"

int cmd_plan(int argc, char **argv)
{
        struct drain_cli d = { .verb = "plan" };
        _cleanup_(drain_plan_freep) struct drain_plan *plan = NULL;
        _cleanup_(drain_grade_result_clear) struct drain_grade_result grade = { 0 };
        struct drain_room room = { 0 };
        int r;

        r = drain_cli_begin(&d, argc, argv, 0);
        if (r >= 0)
                return r;
        r = drain_cli_plan_node(&d, &plan, &grade, &room);
        if (r >= 0)
                r = drain_cli_print_plan(&d, plan, &grade, &room);
        drain_cli_done(&d);
        if (r < 0) {
                if (!d.reported)
                        fprintf(stderr, "spotdrain plan: cannot plan the drain of %s: %s\n", d.node,
                                strerror(-r));
                return EXIT_ERROR;
        }
        /* At risk is no certainty: the exit status says infeasible only when it is. */
        return grade.grade == DRAIN_GRADE_INFEASIBLE ? EXIT_INFEASIBLE : EXIT_OK;
}
