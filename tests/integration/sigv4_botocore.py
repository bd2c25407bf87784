#!/usr/bin/python3
"""botocore oracle for spotdrain's SigV4: generates N randomized requests from a fixed seed, signs each
with botocore's SigV4Auth (Debian python3-botocore), has spotdrain's signer (tests/tools/sigv4_sign) sign
the same requests, and requires identical Authorization headers.

Requests are what a client puts on the wire: the query is percent-encoded (botocore signs a URL's query as
written, spotdrain decodes and re-encodes it, so both agree on well-formed input); the path may carry raw
odd characters, '%', dot segments and repeated slashes (both encode and normalize it)."""
import base64
import datetime
import json
import random
import subprocess
import sys
import types
from urllib.parse import quote

import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

SEED = 20261130
PATH_CHARS = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
              + list(" !$&'()*+,;=:@%[]") + ["é", "ሴ", "😀", "ü"])
KEY_CHARS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~ !$&'()*+,;=:@/?%") + [
    "é", "ሴ", "😀"]
HEADER_NAMES = ["Content-Type", "X-Amz-Target", "X-Amz-Meta-Thing", "My-Header1", "x-custom", "X-CASE-Mixed",
                "Accept", "Content-Encoding", "User-Agent", "X-Amz-Date", "Cache-Control"]
HOSTS = ["sqs.us-east-1.amazonaws.com", "ec2.eu-west-3.amazonaws.com", "Example.AmazonAWS.com",
         "localhost:8443", "127.0.0.1:443", "sts.ap-southeast-2.amazonaws.com:443", "[::1]:9000",
         "us-west-2.queue.amazonaws.com", "10.0.0.1:80"]
SERVICES = ["sqs", "ec2", "sts", "autoscaling", "service", "execute-api"]
REGIONS = ["us-east-1", "eu-west-3", "ap-southeast-2", "us-gov-west-1", "cn-north-1"]


def rand_str(rng, chars, lo, hi):
    return "".join(rng.choice(chars) for _ in range(rng.randint(lo, hi)))


def rand_path(rng):
    segs = []
    for _ in range(rng.randint(0, 5)):
        r = rng.random()
        if r < 0.1:
            segs.append(".")
        elif r < 0.2:
            segs.append("..")
        elif r < 0.3:
            segs.append("")
        else:
            segs.append(rand_str(rng, PATH_CHARS, 1, 8))
    path = "/" + "/".join(segs)
    if rng.random() < 0.3:
        path += "/"
    return path


def rand_query(rng):
    if rng.random() < 0.25:
        return None
    pairs = []
    keys = [rand_str(rng, KEY_CHARS, 1, 6) for _ in range(rng.randint(1, 4))]
    for _ in range(rng.randint(0, 7)):
        key = rng.choice(keys)  # repeats
        r = rng.random()
        k = quote(key, safe="-_.~")
        if r < 0.15:
            pairs.append(k)  # no '='
        elif r < 0.3:
            pairs.append(k + "=")  # empty value
        else:
            pairs.append(k + "=" + quote(rand_str(rng, KEY_CHARS, 0, 10), safe="-_.~"))
    return "&".join(pairs)


def rand_header_value(rng):
    v = rand_str(rng, list("abcdefXYZ0123456789-_.:;/=+,\"'()") + [" ", " ", "  ", "\t"], 0, 20)
    if rng.random() < 0.3:
        v = "  " + v + "   "
    return v


def rand_request(rng):
    host = rng.choice(HOSTS)
    scheme = rng.choice(["https", "http"])
    path = rand_path(rng)
    query = rand_query(rng)
    url = f"{scheme}://{host}{path}"
    if query is not None:
        url += "?" + query
    elif url.endswith(" "):
        url += "x"  # urlsplit strips trailing blanks
    headers = []
    for _ in range(rng.randint(0, 6)):
        name = rng.choice(HEADER_NAMES)
        if rng.random() < 0.3:
            name = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in name)
        headers.append([name, rand_header_value(rng)])
    if rng.random() < 0.2:
        headers.append(["Host", host.upper() if rng.random() < 0.5 else host])
    r = rng.random()
    if r < 0.4:
        body = b""
    elif r < 0.7:
        body = ("Action=" + quote(rand_str(rng, KEY_CHARS, 1, 30), safe="")).encode()
    else:
        body = bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
    token = None
    if rng.random() < 0.5:
        token = rand_str(rng, list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="), 16, 400)
    return {
        "method": rng.choice(["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH"]),
        "url": url,
        "headers": headers,
        "body_b64": base64.b64encode(body).decode(),
        "region": rng.choice(REGIONS),
        "service": rng.choice(SERVICES),
        "time": rng.randint(1420070400, 1893456000),  # 2015..2030
        "akid": "AKIA" + rand_str(rng, list("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), 16, 16),
        "secret": rand_str(rng, list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"), 40, 40),
        "token": token,
    }


def botocore_sign(req):
    instant = datetime.datetime.utcfromtimestamp(req["time"])

    class Clock(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return instant

    # SigV4Auth reads datetime.datetime.utcnow(): pin it for this request only.
    botocore.auth.datetime = types.SimpleNamespace(datetime=Clock)
    try:
        aws = AWSRequest(method=req["method"], url=req["url"], data=base64.b64decode(req["body_b64"]))
        for name, value in req["headers"]:
            aws.headers[name] = value  # HTTPHeaders appends: repeated names stay repeated
        creds = Credentials(req["akid"], req["secret"], req["token"])
        botocore.auth.SigV4Auth(creds, req["service"], req["region"]).add_auth(aws)
        return aws.headers["Authorization"]
    finally:
        botocore.auth.datetime = datetime


def main():
    signer, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rng = random.Random(SEED)
    reqs = [rand_request(rng) for _ in range(count)]
    expected = [botocore_sign(r) for r in reqs]
    lines = "".join(json.dumps(r) + "\n" for r in reqs)
    out = subprocess.run([signer], input=lines.encode(), stdout=subprocess.PIPE, check=True).stdout.decode()
    got = out.split("\n")[:-1]
    same = sum(1 for a, b in zip(expected, got) if a == b)
    for i, (a, b) in enumerate(zip(expected, got)):
        if a != b:
            print(f"request {i} differs:\n  {json.dumps(reqs[i])}\n  botocore:  {a}\n  spotdrain: {b}")
            break
    print(f"botocore agreement: {same}/{count}")
    return 0 if same == count and len(got) == count else 1


if __name__ == "__main__":
    sys.exit(main())
