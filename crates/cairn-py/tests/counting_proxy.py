"""A local HTTP proxy in front of an S3 endpoint that counts the bytes of
the objects it serves: what a reader fetched on the wire, measured outside
the code under test. Requests are forwarded unchanged (the Host header
included, so SigV4 signatures made for the proxy's address still hold).
With it, what a Parquet reader needs, from the file's own metadata, to
hold the count against."""

from __future__ import annotations

import http.client
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterable
from urllib.parse import urlsplit

#: pyarrow reads a Parquet file's last 64 KiB first, to get the footer in
#: one request.
FOOTER_READ = 64 * 1024


def needed_bytes(metadata: Any, size: int, row_groups: Iterable[int], columns: set) -> int:
    """The bytes a Parquet reader of ``columns`` in ``row_groups`` needs on
    the wire: those column chunks (their compressed sizes in ``metadata``,
    a ``pyarrow.parquet.FileMetaData``) and pyarrow's footer read of a file
    of ``size`` bytes."""
    chunks = 0
    for r in row_groups:
        group = metadata.row_group(r)
        for c in range(group.num_columns):
            if group.column(c).path_in_schema in columns:
                chunks += group.column(c).total_compressed_size
    return chunks + min(FOOTER_READ, size)


class CountingProxy:
    """``with CountingProxy(upstream) as proxy``: ``proxy.endpoint`` to give
    clients, ``proxy.get_bytes`` the response bytes of GETs so far,
    ``proxy.gets`` their number."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname, parts.port or 80)
        self.get_bytes = 0
        self.gets = 0
        #: Requests forwarded so far, by method (GET, PUT, HEAD, ...).
        self.requests: Counter = Counter()
        #: Each GET so far: (path and query, Range header or None, bytes).
        self.get_log: list = []
        #: Each request so far: (method, path and query, whether it copies
        #: an object: a PUT with ``x-amz-copy-source``).
        self.log: list = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def forward(self) -> None:
                chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
                if chunked:
                    body = self.read_chunked()
                else:
                    length = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    dropped = ("connection", "transfer-encoding") if chunked else ("connection",)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                    if chunked:
                        # Forwarded whole (AWS's C++ SDK, under pyarrow,
                        # streams uploads in HTTP chunks).
                        headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                with proxy._lock:
                    proxy.requests[self.command] += 1
                    proxy.log.append((self.command, self.path, "x-amz-copy-source" in self.headers))
                if self.command == "GET":
                    with proxy._lock:
                        proxy.get_bytes += len(data)
                        proxy.gets += 1
                        proxy.get_log.append((self.path, self.headers.get("Range"), len(data)))
                self.send_response(answer.status, answer.reason)
                # A HEAD's Content-Length is the object's size: kept as is.
                dropped = ("transfer-encoding", "connection")
                if self.command != "HEAD":
                    dropped += ("content-length",)
                for key, value in answer.getheaders():
                    if key.lower() not in dropped:
                        self.send_header(key, value)
                if self.command != "HEAD":
                    self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def read_chunked(self) -> bytes:
                body = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        # Trailers, then the blank line that ends them.
                        while self.rfile.readline().strip():
                            pass
                        return bytes(body)
                    body += self.rfile.read(size)
                    self.rfile.readline()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def reset(self) -> None:
        with self._lock:
            self.get_bytes = 0
            self.gets = 0
            self.requests = Counter()
            self.get_log = []
            self.log = []

    def __enter__(self) -> "CountingProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
