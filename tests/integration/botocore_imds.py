#!/usr/bin/python3
"""botocore's own IMDS code against the simulator's IMDS surface.

AWS_EC2_METADATA_SERVICE_ENDPOINT must point at the surface (botocore reads it through its session
configuration, as every SDK user gets it). Proves the token flow and the wire formats as a real AWS SDK
reads them: InstanceMetadataFetcher (PUT /latest/api/token, then GETs with the token) fetches the role
credentials, InstanceMetadataProvider turns them into botocore credentials, the session's default
credential chain (nothing else configured) ends up at the instance role, and the region fetcher reads
placement/availability-zone. The surface answers 401 to any GET without a valid token, so a pass means
every GET carried a token it had issued.
Exit 0 on success; prints what it checked.
"""
import datetime
import os
import sys

import botocore.credentials
import botocore.session
import botocore.utils


def main():
    endpoint = os.environ.get("AWS_EC2_METADATA_SERVICE_ENDPOINT")
    if not endpoint:
        print("AWS_EC2_METADATA_SERVICE_ENDPOINT is not set", file=sys.stderr)
        return 2
    expected_role = sys.argv[1] if len(sys.argv) > 1 else None
    expected_region = sys.argv[2] if len(sys.argv) > 2 else None

    session = botocore.session.Session()
    config = {"ec2_metadata_service_endpoint": session.get_config_variable("ec2_metadata_service_endpoint")}
    if config["ec2_metadata_service_endpoint"] != endpoint:
        print("botocore's session resolved the IMDS endpoint to %r" % config["ec2_metadata_service_endpoint"],
              file=sys.stderr)
        return 1
    fetcher = botocore.utils.InstanceMetadataFetcher(timeout=2, num_attempts=2, env=dict(os.environ),
                                                     config=config)
    creds = fetcher.retrieve_iam_role_credentials()
    if not creds:
        print("InstanceMetadataFetcher returned no credentials", file=sys.stderr)
        return 1
    for key in ("role_name", "access_key", "secret_key", "token", "expiry_time"):
        if not creds.get(key):
            print("credentials lack %s: %r" % (key, sorted(creds)), file=sys.stderr)
            return 1
    if expected_role and creds["role_name"] != expected_role:
        print("role %r, want %r" % (creds["role_name"], expected_role), file=sys.stderr)
        return 1
    expiry = datetime.datetime.strptime(creds["expiry_time"], "%Y-%m-%dT%H:%M:%SZ")
    if expiry <= datetime.datetime.utcnow():
        print("credentials already expired: %s" % creds["expiry_time"], file=sys.stderr)
        return 1
    print("fetcher: role %s, access key %s..., expires %s" % (creds["role_name"], creds["access_key"][:8],
                                                              creds["expiry_time"]))

    provider = botocore.credentials.InstanceMetadataProvider(iam_role_fetcher=fetcher)
    c = provider.load()
    if c is None or not c.access_key or not c.secret_key or not c.token:
        print("InstanceMetadataProvider loaded nothing", file=sys.stderr)
        return 1
    frozen = c.get_frozen_credentials()
    print("provider: method %s, access key %s..." % (c.method, frozen.access_key[:8]))

    chain = session.get_credentials()
    if chain is None or chain.method != "iam-role":
        print("the default credential chain found %r" % (chain and chain.method), file=sys.stderr)
        return 1
    print("session credential chain: method %s" % chain.method)

    region = botocore.utils.InstanceMetadataRegionFetcher(timeout=2, num_attempts=2, env=dict(os.environ),
                                                          config=config).retrieve_region()
    if expected_region and region != expected_region:
        print("region %r, want %r" % (region, expected_region), file=sys.stderr)
        return 1
    print("region fetcher: %s" % region)
    return 0


if __name__ == "__main__":
    sys.exit(main())
