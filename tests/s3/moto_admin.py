"""Administrative S3 calls for the object store tests against moto's server
(tests/s3/moto.rs), made with botocore, outside the library under test.

    python moto_admin.py ENDPOINT

One process serves many calls: one request per line on stdin, a JSON object
such as {"op": "list", "bucket": "acq", "prefix": "a.zarr/"}; one answer per
request on stdout, a JSON line {"ok": VALUE} or {"error": "TEXT"}. The answer
to "get" is {"ok": N} followed by N raw bytes (the object), or {"ok": null}
when there is no such key. Ops:

    ping                          ListBuckets (the server answers S3 calls)
    create_bucket  bucket
    list           bucket prefix  keys under prefix, every page
    uploads        bucket         ListMultipartUploads: [[key, upload id]...]
    parts          bucket key upload_id   ListParts: the number of parts
    get            bucket key

The credentials are the environment's AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, given to the client as they are (no credential chain,
no instance metadata); the region is us-east-1, path-style addressing.
"""

import json
import os
import sys

import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError


def client(endpoint):
    session = botocore.session.get_session()
    return session.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(
            s3={"addressing_style": "path"},
            connect_timeout=5,
            read_timeout=60,
            # A server that is down is an error at once, not after backoff.
            retries={"total_max_attempts": 2, "mode": "standard"},
        ),
    )


def ping(s3, req):
    s3.list_buckets()
    return True


def create_bucket(s3, req):
    s3.create_bucket(Bucket=req["bucket"])
    return True


def list_keys(s3, req):
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=req["bucket"], Prefix=req.get("prefix", "")
    )
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def uploads(s3, req):
    pages = s3.get_paginator("list_multipart_uploads").paginate(Bucket=req["bucket"])
    return [[u["Key"], u["UploadId"]] for page in pages for u in page.get("Uploads", [])]


def parts(s3, req):
    """ListParts: how many parts an upload holds (0 once it is gone)."""
    try:
        pages = s3.get_paginator("list_parts").paginate(
            Bucket=req["bucket"], Key=req["key"], UploadId=req["upload_id"]
        )
        return sum(len(page.get("Parts", [])) for page in pages)
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") == "NoSuchUpload":
            return 0
        raise


def get(s3, req):
    try:
        answer = s3.get_object(Bucket=req["bucket"], Key=req["key"])
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
            return None
        raise
    return answer["Body"].read()


OPS = {
    "ping": ping,
    "create_bucket": create_bucket,
    "list": list_keys,
    "uploads": uploads,
    "parts": parts,
    "get": get,
}


def describe(e):
    """The server's answer when there was one: code, message, HTTP status."""
    if isinstance(e, ClientError):
        err = e.response.get("Error", {})
        meta = e.response.get("ResponseMetadata", {})
        return "{} ({}, HTTP {}): {}".format(
            e.operation_name,
            err.get("Code"),
            meta.get("HTTPStatusCode"),
            err.get("Message"),
        )
    return "{}: {}".format(type(e).__name__, e)


def main():
    s3 = client(sys.argv[1])
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        body = None
        try:
            req = json.loads(line)
            value = OPS[req["op"]](s3, req)
            if isinstance(value, bytes):
                body, value = value, len(value)
            answer = {"ok": value}
        except Exception as e:  # every failure goes back to the caller
            answer = {"error": describe(e)}
        out.write(json.dumps(answer).encode() + b"\n")
        if body is not None:
            out.write(body)
        out.flush()


if __name__ == "__main__":
    main()
