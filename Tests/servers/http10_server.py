#!/usr/bin/python3
"""An HTTP/1.0 server as many are: Python's http.server, answering and closing. Used by the tests
of the rule for sending a request again (docs/behaviour.md). Every request is logged as one JSON
line (method, path, Content-Length, bytes it read, the Idempotency-Key) to LOG before it is answered.

Paths:
  /answer-and-close/...  201 with an empty body at once, without reading the body
  /read-then-answer/...  reads the whole body, then 201 with no Content-Length (ends by closing)
  /swallow-once/...      the first request to the path is read whole and closed without an answer;
                         later ones are read and answered 201 with a JSON body
  /big-reply/...         reads the whole body, then 201 with a 1 MiB body (Content-Length)
  /refuse-early/...      413 with a short body at once, without reading the body (a limit, as
                         nginx refuses); with keep-alive the connection stays open, unread
  /refuse-early-chunked/...  the same 413 with a chunked body (keep-alive only)
  /refuse-early-empty/...    the same 413 with an empty body (Content-Length: 0)
  /login/...             asks for a login: without `Authorization: Basic` of hal:9000, 401 with
                         `WWW-Authenticate: Basic realm="old server"` (the body read, no
                         Content-Length: ends by closing); with it, a GET is 1 MiB (no
                         Content-Length) and a PUT/POST is read, then 201
Usage: http10_server.py PORT LOG [keep-alive]   (keep-alive: HTTP/1.1, connections kept open)
"""
import base64
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LOG = int(sys.argv[1]), sys.argv[2]
KEEP_ALIVE = len(sys.argv) > 3 and sys.argv[3] == "keep-alive"
BIG = bytes(range(256)) * 4096
lock = threading.Lock()
seen = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1" if KEEP_ALIVE else "HTTP/1.0"

    def log_message(self, *args):
        pass

    def handle_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        mode = self.path.split("/")[1]
        read = 0
        if mode not in ("answer-and-close", "refuse-early", "refuse-early-chunked", "refuse-early-empty"):
            while read < length:
                chunk = self.rfile.read(min(65536, length - read))
                if not chunk:
                    break
                read += len(chunk)
        with lock:
            count = seen.get(self.path, 0) + 1
            seen[self.path] = count
            with open(LOG, "a") as log:
                log.write(json.dumps({"method": self.command, "path": self.path, "length": length, "read": read,
                                      "key": self.headers.get("Idempotency-Key")}) + "\n")
        if mode == "login" and self.headers.get("Authorization") != "Basic " + base64.b64encode(b"hal:9000").decode():
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="old server"')
            self.end_headers()
            self.wfile.write(b"who are you?\n")
            return
        if mode == "login" and self.command == "GET":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(BIG)
            return
        if mode == "swallow-once" and count == 1:
            # The request arrived whole; the answer is lost (the connection just closes).
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if mode in ("refuse-early", "refuse-early-chunked", "refuse-early-empty"):
            reason = b"" if mode == "refuse-early-empty" else b'{"error": "too large"}\n'
            self.send_response(413)
            self.send_header("Content-Type", "application/json")
            if mode != "refuse-early-chunked":
                self.send_header("Content-Length", str(len(reason)))
                self.end_headers()
                self.wfile.write(reason)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(reason), reason))
            self.wfile.flush()
            if KEEP_ALIVE:
                # The body stays unread on an open connection (the test stops the server).
                threading.Event().wait(120)
                self.close_connection = True
            return
        if mode == "big-reply":
            self.send_response(201)
            self.send_header("Content-Length", str(len(BIG)))
            self.end_headers()
            self.wfile.write(BIG)
            return
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        if KEEP_ALIVE:
            self.send_header("Content-Length", "17")
        self.end_headers()
        if mode != "answer-and-close":
            self.wfile.write(b'{"stored": true}\n')

    do_GET = do_POST = do_PUT = do_PATCH = handle_body


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
