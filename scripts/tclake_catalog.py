"""A local stand-in for the TCLake catalog API (tccatalog, 2024-10-24) for
cairn's tests: it checks every request's TC3-HMAC-SHA256 signature with the
known key (its own implementation, Python's hmac/hashlib), answers
DescribeCatalog, DescribeVolume and DescribeCredentials from a JSON config,
and counts the calls. The COS data path is the tests' S3 server.

  tclake_catalog.py CONFIG_JSON
prints "PORT <n>" once listening on 127.0.0.1; exits when stdin closes.
GET /stats answers {"calls": {action: count}, "credentials": n} (unsigned).

CONFIG_JSON: {"sid", "sk", "catalogs": {name: "VOLUME"|"LAKEHOUSE"},
 "schemas": ["catalog/schema"], "volumes": {"c/s/v": {"location", "expiry_seconds"}},
 "errors": {catalog: {"Code", "Message"}}, "key", "secret"}
"""

import datetime
import hashlib
import hmac
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CONFIG = json.loads(sys.argv[1])
STATS = {"calls": {}, "credentials": 0}
LOCK = threading.Lock()


def expected_authorization(sid, sk, host, body, ts, content_type):
    date = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%d"
    )
    canonical = (
        f"POST\n/\n\ncontent-type:{content_type}\nhost:{host}\n\ncontent-type;host\n"
        + hashlib.sha256(body).hexdigest()
    )
    scope = f"{date}/tccatalog/tc3_request"
    to_sign = (
        f"TC3-HMAC-SHA256\n{ts}\n{scope}\n"
        + hashlib.sha256(canonical.encode()).hexdigest()
    )
    k = hmac.new(("TC3" + sk).encode(), date.encode(), hashlib.sha256).digest()
    k = hmac.new(k, b"tccatalog", hashlib.sha256).digest()
    k = hmac.new(k, b"tc3_request", hashlib.sha256).digest()
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"TC3-HMAC-SHA256 Credential={sid}/{scope}, SignedHeaders=content-type;host, Signature={sig}"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, payload):
        data = json.dumps(
            {"Response": dict(payload, RequestId=str(uuid.uuid4()))}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, code, message):
        self.answer({"Error": {"Code": code, "Message": message}})

    def do_GET(self):
        with LOCK:
            data = json.dumps(STATS).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        action = self.headers.get("X-TC-Action", "")
        with LOCK:
            STATS["calls"][action] = STATS["calls"].get(action, 0) + 1
        if self.headers.get("X-TC-Version") != "2024-10-24":
            return self.error(
                "InvalidParameter.Version", "X-TC-Version must be 2024-10-24"
            )
        try:
            ts = int(self.headers.get("X-TC-Timestamp", ""))
        except ValueError:
            return self.error("MissingParameter", "X-TC-Timestamp is missing")
        if abs(time.time() - ts) > 300:
            return self.error(
                "AuthFailure.SignatureExpire", "the request is more than 5 minutes old"
            )
        auth = self.headers.get("Authorization", "")
        if f"Credential={CONFIG['sid']}/" not in auth:
            return self.error(
                "AuthFailure.SecretIdNotFound", "the SecretId is not found"
            )
        want = expected_authorization(
            CONFIG["sid"],
            CONFIG["sk"],
            self.headers.get("Host", ""),
            body,
            ts,
            self.headers.get("Content-Type", ""),
        )
        if not hmac.compare_digest(auth, want):
            return self.error(
                "AuthFailure.SignatureFailure",
                "the provided credentials could not be validated",
            )
        try:
            params = json.loads(body)
        except ValueError:
            return self.error("InvalidParameter", "the body is not JSON")
        catalog = params.get("CatalogName", "")
        if catalog in CONFIG.get("errors", {}):
            e = CONFIG["errors"][catalog]
            return self.error(e["Code"], e["Message"])
        if catalog not in CONFIG["catalogs"]:
            return self.error(
                "ResourceNotFound.Catalog", f"catalog {catalog} does not exist"
            )
        if action == "DescribeCatalog":
            return self.answer(
                {"Catalog": {"Name": catalog, "Type": CONFIG["catalogs"][catalog]}}
            )
        schema = f"{catalog}/{params.get('SchemaName', '')}"
        if schema not in CONFIG["schemas"]:
            return self.error(
                "ResourceNotFound.Schema", f"schema {schema} does not exist"
            )
        name = f"{schema}/{params.get('VolumeName', '')}"
        volume = CONFIG["volumes"].get(name)
        if volume is None:
            return self.error(
                "ResourceNotFound.Volume", f"volume {name} does not exist"
            )
        if action == "DescribeVolume":
            return self.answer(
                {
                    "Volume": {
                        "Name": params["VolumeName"],
                        "Type": "EXTERNAL",
                        "StorageLocation": volume["location"],
                        "Comment": "",
                    }
                }
            )
        if action == "DescribeCredentials":
            with LOCK:
                STATS["credentials"] += 1
                n = STATS["credentials"]
            expires = int((time.time() + volume.get("expiry_seconds", 43200)) * 1000)
            info = [
                {"Key": "cos-access-key-id", "Value": CONFIG["key"]},
                {"Key": "cos-secret-access-key", "Value": CONFIG["secret"]},
                {"Key": "cos-security-token", "Value": f"token-{n}"},
            ]
            return self.answer(
                {"Credentials": [{"CredentialInfo": info, "ExpireTimeInMs": expires}]}
            )
        return self.error("InvalidAction", f"unknown action {action}")


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test process exits


if __name__ == "__main__":
    main()
