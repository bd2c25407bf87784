/* sim: the simulator's interface for front ends (`spotdrain sim serve`, `spotdrain simulate`) and tests.
 *
 * The simulator is a program of its own inside spotdrain: it plays the Kubernetes API server (with its own
 * disruption-controller arithmetic), IMDS, SQS, EC2, Auto Scaling and STS (with its own SigV4 check), so
 * that it checks the product instead of repeating it; it calls none of the product's PDB or signing code.
 *
 *   sim_model.h         the world: scenario, objects and controllers, clock, change log, result
 *   sim_server.h        the Kubernetes API surface (HTTP on libmicrohttpd) over a model
 *   sim_surfaces.h      every surface of `sim serve` at once, with its endpoints
 *   sim_imds_surface.h  IMDS (IMDSv2 tokens, spot/instance-action, rebalance, scheduled events), per node
 *   sim_sqs_surface.h   SQS (JSON 1.0 and query protocols), the EventBridge notices of the scenario
 *   sim_ec2_surface.h   EC2 (CreateFleet, ...) and Auto Scaling
 *   sim_sts_surface.h   STS (AssumeRoleWithWebIdentity) and the container credential endpoints
 *   sim_sigv4_check.h   the simulator's SigV4 verification (tests use it as a second check of the signer)
 *   sim_disruption.h    the simulator's PDB arithmetic (tests compare it with the engine's)
 *
 * What the simulator's own files share and nothing else uses stays in src/sim/ (model_internal.h,
 * server_internal.h, aws_request.h, sqs_query.h, stop_wake.h). The surfaces and the result are described in
 * docs/contracts.md (§4, §5). */
#pragma once

#include "sim/disruption.h"
#include "sim/ec2_surface.h"
#include "sim/imds_surface.h"
#include "sim/model.h"
#include "sim/server.h"
#include "sim/sigv4_check.h"
#include "sim/sqs_surface.h"
#include "sim/sts_surface.h"
#include "sim/surfaces.h"
