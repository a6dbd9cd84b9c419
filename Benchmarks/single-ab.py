#!/usr/bin/python3
"""Two builds' 1 GiB download into a tmpfs, alternated run by run against one nginx on
127.0.0.1, with `curl -o /dev/null` and `dd` into the same tmpfs as the limit (bench.py's
"single" section measures each build in a run of its own; this puts both in the same minutes,
each daemon started once and warm). Prints every run and the medians, with the CPU nginx spent
sending and how many of the machine's cores were busy meanwhile (/proc/stat): what the two
cores had left for the receiving side. Asserts nothing.

    Benchmarks/single-ab.py BEFORE_DAEMON AFTER_DAEMON [RUNS]
    e.g. Benchmarks/single-ab.py /tmp/bench-before-X/.build/release/downloadsd .build/release/downloadsd 9
"""
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus.mainloop.glib  # noqa: E402


def busy_cores():
    """(busy, all) jiffies of every core so far."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    builds = {"before": sys.argv[1], "after": sys.argv[2]}
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 9
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="single-ab-")
    shm = tempfile.mkdtemp(prefix="single-ab-", dir="/dev/shm")
    nginx = bench.Nginx(work)
    services = {}
    try:
        nginx.file("single.bin", bench.GiB)
        url = nginx.url("single.bin")
        for name, daemon in builds.items():
            bench.DAEMON = daemon
            services[name] = bench.Service(os.path.join(work, name))
        cases = [*builds, "curl -o /dev/null", "dd → tmpfs"]
        results = {case: [] for case in cases}
        target = os.path.join(shm, "file.bin")
        for run in range(runs):
            for case in cases:
                os.sync()
                sent, (busy, every) = nginx.cpu(), busy_cores()
                if case == "curl -o /dev/null":
                    wall, cpu, _ = bench.tool(["curl", "-sS", "-o", "/dev/null", url])
                elif case == "dd → tmpfs":
                    wall, cpu, _ = bench.tool(["dd", "if=/dev/zero", f"of={target}", "bs=1M", "count=1024", "status=none"])
                else:
                    wall, cpu, _, _ = services[case].download(url, target)
                if os.path.exists(target):
                    os.unlink(target)
                sent = nginx.cpu() - sent
                busy_now, every_now = busy_cores()
                cores = os.cpu_count() * (busy_now - busy) / max(1, every_now - every)
                results[case].append((wall, cpu, sent, cores))
                print(f"  run {run + 1}/{runs} {case:18} {wall:5.2f} s {cpu:5.2f} CPU s, nginx {sent:5.2f} CPU s, "
                      f"{cores:4.2f} cores busy", flush=True)
        for case, values in results.items():
            print(f"{case:18} median of {runs}: {statistics.median(v[0] for v in values):.2f} s, "
                  f"{statistics.median(v[1] for v in values):.2f} CPU s, nginx {statistics.median(v[2] for v in values):.2f} CPU s, "
                  f"{statistics.median(v[3] for v in values):.2f} of {os.cpu_count()} cores busy")
    finally:
        for service in services.values():
            service.stop()
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
