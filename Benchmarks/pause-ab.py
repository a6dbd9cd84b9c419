#!/usr/bin/python3
"""How long a running download stops while large calls are taken beside it, for two builds
alternated: each run starts a download from a server on 127.0.0.1 that sends 64 KiB every 4 ms
(about 16 MB/s, steady), reads the task's `BytesWritten` (what the event loop has handed to the
file's writer, counted as each part of the body arrives) every 2 ms over a connection of its own,
and after 3 s sends three StartGroups of 10,000 files (beginning a day ahead, as bench.py's `queued`
section does). Prints the largest time the count did not grow in the 2.5 s before the groups,
while they were taken and in the 2 s after, and the medians. A daemon whose event loops also run
the calls' work shows it as a longer pause while the groups are taken. Asserts nothing.

    Benchmarks/pause-ab.py BEFORE_DAEMON AFTER_DAEMON [RUNS]
"""
import http.server
import os
import shutil
import socketserver
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus  # noqa: E402
import dbus.mainloop.glib  # noqa: E402

CHUNK = 64 * 1024
CHUNKS = 6400


class SteadyHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(CHUNK * CHUNKS))
        self.end_headers()
        chunk = b"x" * CHUNK
        try:
            for _ in range(CHUNKS):
                self.wfile.write(chunk)
                time.sleep(0.004)
        except OSError:
            pass

    def log_message(self, *arguments):
        pass


def largest_pause(samples, start, end):
    """The longest time between two changes of the count within [start, end]."""
    changes = [t for (t, count), (_, before) in zip(samples[1:], samples) if count != before and start <= t <= end]
    return max((b - a for a, b in zip(changes, changes[1:])), default=0.0)


def one_run(binary, work, server):
    bench.DAEMON = binary
    out = tempfile.mkdtemp(prefix="pause-out-", dir="/dev/shm")
    service = bench.Service(os.path.join(work, "state-" + str(time.monotonic_ns())), ["--max-tasks-per-user", "100000"])
    try:
        manager = service.manager
        path = manager.Start(f"http://127.0.0.1:{server.server_address[1]}/steady.bin",
                             os.path.join(out, "steady.bin"), dbus.Dictionary({}, signature="sv"))
        samples, stop = [], threading.Event()
        watcher_bus = dbus.bus.BusConnection(service.address)
        properties = dbus.Interface(watcher_bus.get_object("org.example.Downloads", path),
                                    "org.freedesktop.DBus.Properties")

        def watch():
            while not stop.is_set():
                written = int(properties.Get("org.example.Downloads.Task", "BytesWritten"))
                samples.append((time.monotonic(), written))
                time.sleep(0.002)

        watcher = threading.Thread(target=watch)
        watcher.start()
        time.sleep(3)
        options = dbus.Dictionary({"earliest_begin": dbus.UInt64(int(time.time()) + 86400)}, signature="sv")
        queued = os.path.join(out, "queued")
        os.makedirs(queued)
        began = time.monotonic()
        for k in range(3):
            files = dbus.Array([dbus.Struct(("http://127.0.0.1:9/q.bin", os.path.join(queued, f"{k}-{i}.bin"),
                                             dbus.Dictionary({}, signature="sv")), signature="ssa{sv}")
                                for i in range(10_000)], signature="(ssa{sv})")
            manager.StartGroup(files, options, timeout=600)
        ended = time.monotonic()
        time.sleep(2)
        stop.set()
        watcher.join()
        watcher_bus.close()
        return (largest_pause(samples, began - 2.5, began), largest_pause(samples, began, ended),
                largest_pause(samples, ended, ended + 2), ended - began)
    finally:
        service.stop()
        shutil.rmtree(out, ignore_errors=True)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = {"before": sys.argv[1], "after": sys.argv[2]}
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="pause-ab-")
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), SteadyHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    results = {name: [] for name in builds}
    try:
        for run in range(runs):
            for name, binary in builds.items():
                before, during, after, taken = one_run(binary, work, server)
                results[name].append((before, during, after))
                print(f"{name} run {run + 1}: groups taken in {taken:.2f} s; largest pause before "
                      f"{before * 1000:.0f} ms, while taken {during * 1000:.0f} ms, after {after * 1000:.0f} ms",
                      flush=True)
        for name, rows in results.items():
            medians = [statistics.median(row[i] for row in rows) * 1000 for i in range(3)]
            print(f"{name}: medians before {medians[0]:.0f} ms, while taken {medians[1]:.0f} ms, "
                  f"after {medians[2]:.0f} ms")
    finally:
        server.shutdown()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
