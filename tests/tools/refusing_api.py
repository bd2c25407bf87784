#!/usr/bin/env python3
"""A Kubernetes API server that never helps: what a one-shot command meets with a bad kubeconfig.

  refusing_api.py --mode unauthorized|silent|node-only --port-file FILE [--max-seconds N]

unauthorized: every request gets 401 with a metav1.Status, as kube-apiserver answers a token it does not
accept. silent: connections are accepted (the kernel's backlog) and never answered, as behind a firewall that
drops the replies. node-only: GET /api/v1/nodes/NAME answers a Ready node, every other request is held
unanswered (a server that fails after the first question). Listens on 127.0.0.1, port 0; writes the port to --port-file (a temporary name, then
renamed) once it accepts. Exits 0 on SIGTERM, or by itself after --max-seconds (default 120).

Python 3 standard library only."""

import argparse
import http.server
import json
import os
import signal
import socket
import sys
import threading


DONE = threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    mode = "unauthorized"

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answer(self):
        if self.mode == "node-only":
            path = self.path.split("?")[0]
            if self.command == "GET" and path.startswith("/api/v1/nodes/"):
                name = path.rsplit("/", 1)[1]
                self.send_json(200, {"kind": "Node", "apiVersion": "v1",
                                     "metadata": {"name": name, "resourceVersion": "1"},
                                     "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
            else:
                DONE.wait()  # held: no answer until the server stops
            return
        self.send_json(401, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "message": "Unauthorized", "reason": "Unauthorized", "code": 401})

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = answer

    def log_message(self, fmt, *args):
        sys.stderr.write("refusing_api: " + fmt % args + "\n")


def write_port(path, port):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["unauthorized", "silent", "node-only"], required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--max-seconds", type=float, default=120)
    a = ap.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: DONE.set())
    signal.signal(signal.SIGINT, lambda *_: DONE.set())
    if a.mode != "silent":
        Handler.mode = a.mode
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        srv.daemon_threads = True
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        port = srv.server_address[1]
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        s.listen(64)  # never accepted: a connect succeeds, no byte ever comes back
        port = s.getsockname()[1]
    write_port(a.port_file, port)
    DONE.wait(a.max_seconds)
    DONE.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
