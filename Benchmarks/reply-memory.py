#!/usr/bin/python3
"""What kept upload replies cost the daemon's memory (issue 58, finding 3).

A private session bus, the given downloadsd (state in a scratch directory), and a threaded HTTP
server on 127.0.0.1 that answers every PUT with a 1 MiB body. It uploads a small file N times, waits
until every task has finished, and prints the daemon's RSS before, after,
and after a restart that restores the N finished tasks, with the database's size and a check
that the newest reply is whole (GetReply) and the oldest was dropped by the per-user budget.

    /usr/bin/python3 Benchmarks/reply-memory.py [.build/release/downloadsd] [--uploads 1000] [--protocol plain]
    (REPLY_KIB=N: replies of N KiB; KEEP_ALIVE=1: an HTTP/1.1 server keeping connections open)
"""
import argparse
import http.server
import os
import subprocess
import sys
import tempfile
import threading
import time

import dbus

NAME = "org.example.Downloads"
REPLY = bytes(range(256)) * int(os.environ.get("REPLY_KIB", "1024")) * 4  # 1 MiB unless REPLY_KIB says


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Answering(http.server.BaseHTTPRequestHandler):
    # HTTP/1.0 (answer and close) unless KEEP_ALIVE=1: 1 MiB replies over kept-alive connections
    # run into a connection leak of their own (see RESULTS.md, "Kept replies").
    protocol_version = "HTTP/1.1" if os.environ.get("KEEP_ALIVE") == "1" else "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_PUT(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(201)
        self.send_header("Content-Length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("daemon", nargs="?", default=".build/release/downloadsd")
    parser.add_argument("--uploads", type=int, default=1000)
    parser.add_argument("--protocol", default="auto", help="the uploads' protocol option (auto asks OPTIONS first)")
    args = parser.parse_args()
    daemon = os.path.abspath(args.daemon)
    if not os.access(daemon, os.X_OK):
        sys.exit("no %s: swift build -c release --product downloadsd" % daemon)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/inbox" % server.server_address[1]
    with tempfile.TemporaryDirectory() as scratch:
        state = os.path.join(scratch, "state")
        source = os.path.join(scratch, "form.json")
        with open(source, "wb") as f:
            f.write(b"{}" * 512 * int(os.environ.get("SOURCE_KIB", "1")))
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"], stdout=subprocess.PIPE, text=True)
        address = bus.stdout.readline().strip()

        def start_daemon():
            process = subprocess.Popen([daemon, "--address", address, "--state-dir", state, "--exit-idle-time", "0",
                                        "--no-desktop", "--log-level", os.environ.get("LOG_LEVEL", "warning")])
            connection = dbus.bus.BusConnection(address)
            for _ in range(500):
                if connection.name_has_owner(NAME):
                    break
                time.sleep(0.02)
            return process, connection

        process, connection = start_daemon()
        try:
            manager = dbus.Interface(connection.get_object(NAME, "/org/example/Downloads"), NAME)
            time.sleep(1)
            before = rss(process.pid)
            tasks = [str(manager.Upload(url, source, dbus.Dictionary({"protocol": args.protocol}, signature="sv"))) for _ in range(args.uploads)]

            def state_of(path):
                return str(connection.get_object(NAME, path).Get("org.example.Downloads.Task", "State",
                                                                 dbus_interface="org.freedesktop.DBus.Properties"))
            deadline = time.time() + 600
            for path in tasks:
                while state_of(path) not in ("finished", "failed") and time.time() < deadline:
                    time.sleep(0.05)
            time.sleep(1)
            after = rss(process.pid)

            def body_of(path):
                reply = connection.get_object(NAME, path).GetReply(dbus_interface="org.example.Downloads.Task")
                return int(reply[0]), len(reply[2])
            newest, oldest = body_of(tasks[-1]), body_of(tasks[0])
            process.terminate()
            process.wait()
            database = sum(os.path.getsize(os.path.join(state, name)) for name in os.listdir(state) if name.startswith("downloads"))
            process, connection = start_daemon()
            time.sleep(1)
            restored = rss(process.pid)
            print("uploads with a 1 MiB reply: %d" % len(tasks))
            print("daemon RSS before: %.1f MiB; after: %.1f MiB (+%.1f); after a restart restoring them: %.1f MiB"
                  % (before, after, after - before, restored))
            print("database files: %.1f MiB" % (database / 1048576))
            print("GetReply of the newest: status %d, %d bytes; of the oldest: status %d, %d bytes (0: dropped by the per-user budget)"
                  % (newest + oldest))
        finally:
            process.terminate()
            process.wait()
            bus.terminate()
            bus.wait()
            server.shutdown()


if __name__ == "__main__":
    main()
