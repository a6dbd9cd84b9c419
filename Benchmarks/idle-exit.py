#!/usr/bin/python3
"""What the daemon costs at rest, and what exiting when idle costs the next caller (issue 50).

A private session bus whose service directory makes org.example.Downloads activatable (the given
downloadsd, state in a scratch directory, --exit-idle-time 2), a threaded HTTP server on
127.0.0.1 with one small file. It prints:

  * idle RSS and threads of the daemon, right after an activation with an empty state and with
    10,000 finished tasks restored: what staying resident costs (the daemon before issue 50);
  * the time from the daemon's exit to the answer of a re-activating ListTasks (the bus starting
    the process, the store read, every task restored, the name taken, the call answered), with
    an empty state and with the 10,000 tasks; as a reference, the same call to the running daemon.

    Benchmarks/idle-exit.py [.build/release/downloadsd] [--tasks 10000] [--runs 5]
"""
import argparse
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import dbus

NAME = "org.example.Downloads"


def rss_and_threads(pid):
    values = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            values[key] = value.strip()
    return int(values["VmRSS"].split()[0]) / 1024, int(values["Threads"])


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("daemon", nargs="?", default=os.environ.get("DOWNLOADSD_BENCH_BINARY", ".build/release/downloadsd"))
    parser.add_argument("--tasks", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    daemon = os.path.abspath(args.daemon)
    if not os.access(daemon, os.X_OK):
        sys.exit("no %s: swift build -c release --product downloadsd" % daemon)

    with tempfile.TemporaryDirectory() as scratch:
        services = os.path.join(scratch, "services")
        os.makedirs(services)
        web = os.path.join(scratch, "web")
        os.makedirs(web)
        with open(os.path.join(web, "small.bin"), "wb") as f:
            f.write(os.urandom(1024))
        with open(os.path.join(scratch, "bus.conf"), "w") as f:
            f.write('<busconfig><type>session</type><listen>unix:path=%s/bus</listen><auth>EXTERNAL</auth>'
                    '<servicedir>%s</servicedir>'
                    '<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>'
                    '<allow receive_sender="*"/></policy></busconfig>' % (scratch, services))
        with open(os.path.join(services, NAME + ".service"), "w") as f:
            f.write("[D-BUS Service]\nName=%s\nExec=%s --session --no-desktop --exit-idle-time 2 --max-tasks-per-user %d "
                    "--state-dir %s/state --log-level warning\n" % (NAME, daemon, args.tasks + 10, scratch))
        bus_daemon = subprocess.Popen(["dbus-daemon", "--config-file=" + os.path.join(scratch, "bus.conf"), "--nofork",
                                       "--print-address=1"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        address = bus_daemon.stdout.readline().strip()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Quiet(*a, directory=web))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = "http://127.0.0.1:%d/small.bin" % server.server_address[1]
        try:
            bus = dbus.bus.BusConnection(address)
            driver = dbus.Interface(bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus")

            def owner():
                try:
                    return driver.GetNameOwner(NAME)
                except dbus.DBusException:
                    return None

            def manager():
                return dbus.Interface(bus.get_object(NAME, "/org/example/Downloads"), NAME)

            def wait_for_exit():
                deadline = time.monotonic() + 600
                while owner() is not None:
                    if time.monotonic() > deadline:
                        sys.exit("the daemon did not exit when idle")
                    time.sleep(0.01)

            def reactivations(label, count):
                times = []
                for _ in range(args.runs):
                    wait_for_exit()
                    time.sleep(0.2)  # the process is gone, not only the name
                    started = time.monotonic()
                    listed = manager().ListTasks("", timeout=120)
                    times.append(time.monotonic() - started)
                    assert len(listed) == count, (len(listed), count)
                warm = []
                for _ in range(args.runs):
                    started = time.monotonic()
                    manager().ListTasks("", timeout=120)
                    warm.append(time.monotonic() - started)
                time.sleep(0.5)
                rss, threads = rss_and_threads(int(driver.GetConnectionUnixProcessID(owner())))
                print("%-28s exit to answer: median %.0f ms (min %.0f, max %.0f, %d runs); the same call running: %.1f ms; "
                      "idle RSS %.1f MiB, %d threads" % (label, statistics.median(times) * 1000, min(times) * 1000,
                                                        max(times) * 1000, len(times), statistics.median(warm) * 1000, rss, threads))

            manager().ListTasks("")
            reactivations("empty state:", 0)

            started = time.monotonic()
            os.makedirs(os.path.join(scratch, "files"))
            m = manager()
            for i in range(args.tasks):
                m.Start(url, os.path.join(scratch, "files", "f%05d.bin" % i), dbus.Dictionary({}, signature="sv"),
                        timeout=300)
            wait_for_exit()
            print("%d small downloads: %.1f s to start them and for the daemon to finish and exit" % (args.tasks, time.monotonic() - started))
            reactivations("%d finished tasks:" % args.tasks, args.tasks)
        finally:
            server.shutdown()
            pid = None
            try:
                pid = int(driver.GetConnectionUnixProcessID(owner()))
            except Exception:
                pass
            if pid:
                os.kill(pid, 15)
            bus_daemon.terminate()


if __name__ == "__main__":
    main()
