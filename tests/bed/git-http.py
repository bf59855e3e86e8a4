#!/usr/bin/env python3
"""Smart-HTTP git server for the test bed: hands each request to `git http-backend` (CGI).
Loopback only. Usage: git-http.py REPO_ROOT PORT. Serves fetch, protocol v2 and push."""
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ROOT, PORT = os.path.abspath(sys.argv[1]), int(sys.argv[2])


def read_body(handler):
    if handler.headers.get("Transfer-Encoding", "").lower() != "chunked":
        return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
    body = bytearray()
    while True:
        size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
            return bytes(body)
        body += handler.rfile.read(size)
        handler.rfile.readline()


class GitHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def handle_git(self):
        url = urlsplit(self.path)
        body = read_body(self)
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": ROOT,
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": url.path,
            "QUERY_STRING": url.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": self.client_address[0],
            "REMOTE_USER": "bed",
        }
        for name in ("Git-Protocol", "Content-Encoding", "Accept"):
            if name in self.headers:
                env["HTTP_" + name.upper().replace("-", "_")] = self.headers[name]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(sep)
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.split()[0])
            elif key:
                headers.append((key, value.strip()))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = handle_git

    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % (fmt % args))


ThreadingHTTPServer(("127.0.0.1", PORT), GitHandler).serve_forever()
