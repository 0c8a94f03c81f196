#!/usr/bin/env python3
"""A real S3-compatible server on loopback for barge's object-storage tests.

moto's server (Python's `moto`, in this machine's image; scripts/test.sh
checks it is there) with its IAM authentication on: every request after the
setup below is checked against a SigV4 signature recomputed by botocore from
the user's secret, so a wrong secret is refused (SignatureDoesNotMatch) and
an unknown key too (InvalidAccessKeyId).

Usage: s3_server.py BUCKET [BUCKET...]
Prints one line, `PORT ACCESS_KEY SECRET_KEY`, once the buckets exist and
authentication is on, then serves until stdin closes or it is signalled
(the test that started it owns it; no pid file, nothing left behind: moto
keeps everything in memory).

With S3_SERVER_LOG=FILE in the environment, each request's line and status
is appended to FILE as it is answered ('"PUT /BUCKET/KEY?partNumber=3&...
HTTP/1.1" 200 -'), for a test that counts what a client sent.
"""
import os
import sys

# Requests before authentication starts: create the user, its key, its
# policy, then the buckets. Must be set before moto is imported.
SETUP_ACTIONS = 3
buckets = sys.argv[1:] or ["barge-test"]
os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = str(SETUP_ACTIONS + len(buckets))
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

import json  # noqa: E402
import logging  # noqa: E402
import threading  # noqa: E402

import boto3  # noqa: E402
from botocore.config import Config  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.ERROR)
if os.environ.get("S3_SERVER_LOG"):
    requests_log = logging.FileHandler(os.environ["S3_SERVER_LOG"])
    requests_log.setFormatter(logging.Formatter("%(message)s"))
    logging.getLogger("werkzeug").addHandler(requests_log)
    logging.getLogger("werkzeug").setLevel(logging.INFO)


def main():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    setup = dict(endpoint_url=url, region_name="us-east-1",
                 aws_access_key_id="setup", aws_secret_access_key="setup")
    iam = boto3.client("iam", **setup)
    iam.create_user(UserName="barge")
    key = iam.create_access_key(UserName="barge")["AccessKey"]
    iam.put_user_policy(UserName="barge", PolicyName="s3", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    s3 = boto3.client("s3", **setup, config=Config(s3={"addressing_style": "path"}))
    for b in buckets:
        s3.create_bucket(Bucket=b)
    print(port, key["AccessKeyId"], key["SecretAccessKey"], flush=True)
    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    try:
        done.wait()
    except KeyboardInterrupt:
        pass
    server.stop()


if __name__ == "__main__":
    main()
