#!/usr/bin/python3
"""A machine of the local network offering one file by its SHA-256 on Passim's wire, as the
LAN peer tests need it to behave: well, or as an adversary. HTTPS with the certificate and key
given; `GET /NAME?sha256=HEX` for the file's own hash is served (ranges too), any other hash is
403, as Passim does. Every request is logged as one JSON line (path, its headers with lower-case
names, the Range) to LOG before it is answered.

Modes:
  good        HTTP/1.1, keep-alive, 200 or 206 for a range
  wrong       as good, every byte of the body inverted (a peer that lies)
  stall       the head of a 206, then nothing, the connection kept open
  status      answers ARG (403, 404...) with a short body
  redirect    302 to ARG
  hugeheader  a 1 MiB header line before the body
  http10      HTTP/1.0: the range with its Content-Range, then the connection closed
  passim      as good, but a second request from the same address for the hash is 403 (Passim's
              one request per hash an hour to each client, Range requests counted)
  origin      not a peer: the file's origin server, plain HTTP (CERT and KEY unused), any path,
              ranges and an ETag, at ARG bytes a second (a slow uplink)
Usage: lan_peer.py PORT CERT KEY FILE LOG MODE [ARG]   (run it in a namespace with `ip netns exec`)
"""
import hashlib
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PORT, CERT, KEY, FILE, LOG, MODE = sys.argv[1:7]
ARG = sys.argv[7] if len(sys.argv) > 7 else ""
with open(FILE, "rb") as f:
    DATA = f.read()
HASH = hashlib.sha256(DATA).hexdigest()
LOCK = threading.Lock()
ASKED = set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0" if MODE == "http10" else "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        parts = urlsplit(self.path)
        with LOCK, open(LOG, "a") as log:
            log.write(json.dumps({"path": parts.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                  "range": self.headers.get("Range")}) + "\n")
        hashes = parse_qs(parts.query).get("sha256", [])
        if MODE != "origin" and hashes != [HASH]:
            return self.short(403)
        if MODE == "passim":
            with LOCK:
                if (self.client_address[0], HASH) in ASKED:
                    return self.short(403)
                ASKED.add((self.client_address[0], HASH))
        if MODE == "status":
            return self.short(int(ARG))
        if MODE == "redirect":
            self.send_response(302)
            self.send_header("Location", ARG)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end = 0, len(DATA)
        ranged = self.headers.get("Range")
        if ranged and ranged.startswith("bytes="):
            first, _, last = ranged[6:].partition("-")
            start = int(first)
            end = min(len(DATA), int(last) + 1) if last else len(DATA)
        body = memoryview(DATA)[start:end]
        if MODE == "wrong":
            body = bytes(b ^ 0xFF for b in body)
        self.send_response(206 if ranged else 200)
        if ranged:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end - 1, len(DATA)))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        if MODE == "origin":
            self.send_header("ETag", '"%s"' % HASH[:16])
        if MODE == "hugeheader":
            self.send_header("X-Big", "a" * (1 << 20))
        self.end_headers()
        if MODE == "stall":
            self.wfile.flush()
            time.sleep(3600)
            return
        if MODE == "origin":
            rate, chunk = int(ARG), 65536
            begun = time.monotonic()
            for sent in range(0, len(body), chunk):
                self.wfile.write(body[sent:sent + chunk])
                ahead = (sent + chunk) / rate - (time.monotonic() - begun)
                if ahead > 0:
                    time.sleep(ahead)
            return
        self.wfile.write(body)

    def short(self, status):
        body = b"no\n"
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that hung up (a download's range taken back, a dropped peer): no traceback.
        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


server = Server(("127.0.0.1", int(PORT)), Handler)
if MODE != "origin":
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(CERT, KEY)
    server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
