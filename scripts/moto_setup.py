"""Creates the test buckets in a fresh moto server.

Usage: moto_setup.py ENDPOINT KEY SECRET BUCKET [BUCKET...]

moto does not check signatures here: its checker rebuilds the canonical query
string from the raw URL, so it rejects valid SigV4 requests whose query holds
an unencoded '/', which OpenDAL sends on every prefixed listing. Signature
checks are covered on Garage.
"""

import sys

import boto3

endpoint, key, secret, buckets = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    aws_access_key_id=key,
    aws_secret_access_key=secret,
)
for bucket in buckets:
    s3.create_bucket(Bucket=bucket)
