#!/usr/bin/python3
"""What a server's redirect URLs cost the daemon through GetMetrics (issue 75, finding 5).

A private session bus, the given downloadsd (state in a scratch directory), and a threaded HTTP
server on 127.0.0.1 whose /hop0 redirects ten times, each `Location` padded to 70 KB, before a
small body. It downloads N files through the chain, waits until every task has finished, and
prints the daemon's RSS before, after, after a restart that restores them and after every task
was cancelled (Cancel removes it), with the database's size and the longest URL GetMetrics gives.

    /usr/bin/python3 Benchmarks/metrics-memory.py [.build/release/downloadsd] [--tasks 999]
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
PAD = "a" * 70_000
BODY = bytes(range(256)) * 8


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Redirecting(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        hop = int(path[len("/hop"):]) if path.startswith("/hop") else 10
        if hop < 10:
            self.send_response(302)
            self.send_header("Location", "/hop%d?pad=%s" % (hop + 1, PAD))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("daemon", nargs="?", default=".build/release/downloadsd")
    parser.add_argument("--tasks", type=int, default=999)
    args = parser.parse_args()
    daemon = os.path.abspath(args.daemon)
    if not os.access(daemon, os.X_OK):
        sys.exit("no %s: swift build -c release --product downloadsd" % daemon)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/hop0" % server.server_address[1]
    with tempfile.TemporaryDirectory() as scratch:
        state = os.path.join(scratch, "state")
        files = os.path.join(scratch, "files")
        os.makedirs(files)
        bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address"], stdout=subprocess.PIPE,
                               text=True)
        address = bus.stdout.readline().strip()

        def start_daemon():
            process = subprocess.Popen([daemon, "--address", address, "--state-dir", state, "--exit-idle-time", "0",
                                        "--no-desktop", "--max-tasks-per-user", str(args.tasks + 10),
                                        "--log-level", "warning"])
            connection = dbus.bus.BusConnection(address)
            for _ in range(500):
                if connection.name_has_owner(NAME):
                    break
                time.sleep(0.02)
            return process, connection

        def state_of(connection, path):
            return str(connection.get_object(NAME, path).Get("org.example.Downloads.Task", "State",
                                                             dbus_interface="org.freedesktop.DBus.Properties"))

        process, connection = start_daemon()
        try:
            manager = dbus.Interface(connection.get_object(NAME, "/org/example/Downloads"), NAME)
            time.sleep(1)
            before = rss(process.pid)
            tasks = [str(manager.Start(url, os.path.join(files, "f%d" % i), dbus.Dictionary({}, signature="sv")))
                     for i in range(args.tasks)]
            deadline = time.time() + 900
            for path in tasks:
                while state_of(connection, path) not in ("finished", "failed") and time.time() < deadline:
                    time.sleep(0.05)
            time.sleep(1)
            after = rss(process.pid)
            _, transactions = connection.get_object(NAME, tasks[0]).GetMetrics(
                dbus_interface="org.example.Downloads.Task")
            longest = max(len(str(t.get("url", ""))) for t in transactions)
            process.terminate()
            process.wait()
            database = sum(os.path.getsize(os.path.join(state, name)) for name in os.listdir(state)
                           if name.startswith("downloads"))
            process, connection = start_daemon()
            manager = dbus.Interface(connection.get_object(NAME, "/org/example/Downloads"), NAME)
            time.sleep(1)
            restored = rss(process.pid)
            for path in tasks:
                manager.Cancel(dbus.ObjectPath(path))
            time.sleep(2)
            cancelled = rss(process.pid)
            print("tasks, each through 10 redirects of 70 KB: %d" % len(tasks))
            print("daemon RSS before: %.1f MiB; after: %.1f MiB (+%.1f); after a restart restoring them: %.1f MiB; "
                  "after they were cancelled: %.1f MiB" % (before, after, after - before, restored, cancelled))
            print("database files: %.1f MiB; the longest URL GetMetrics gives: %d bytes" % (database / 1048576, longest))
        finally:
            process.terminate()
            process.wait()
            bus.terminate()
            bus.wait()
            server.shutdown()


if __name__ == "__main__":
    main()
