"""Makes the identities the tier signs with in a moto server whose SigV4 check is still off, and prints them
as shell assignments. Run by lib.sh's moto_start with the venv's Python (boto3 comes with moto) before it
switches the check on; test-only.

With the check on, moto accepts only an access key its own IAM made: an IAM user's (AKIA...), or an assumed
role's (ASIA..., with the session token). Each identity gets a policy that allows every action, so that what
moto refuses is the signature, never a permission.

usage: bootstrap.py URL USER ROLE
"""

import json
import shlex
import sys

import boto3

ALLOW_ALL = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)


def main() -> int:
    url, user, role = sys.argv[1:4]
    iam = boto3.client(
        "iam",
        endpoint_url=url,
        region_name="us-east-1",
        # Not checked while the check is off; any pair does.
        aws_access_key_id="bootstrap",
        aws_secret_access_key="bootstrap",
    )
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="allow-all", PolicyDocument=ALLOW_ALL)
    key = iam.create_access_key(UserName=user)["AccessKey"]
    # The role a web identity (IRSA) assumes: trusted by an OIDC provider as EKS sets it up.
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {
                    "Federated": "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/TEST"
                },
                "Action": "sts:AssumeRoleWithWebIdentity",
            }
        ],
    }
    arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    iam.put_role_policy(RoleName=role, PolicyName="allow-all", PolicyDocument=ALLOW_ALL)
    for name, value in (
        ("AWS_ACCESS_KEY_ID", key["AccessKeyId"]),
        ("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"]),
        ("MOTO_ROLE_ARN", arn),
    ):
        print(f"{name}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
