#!/usr/bin/python3
"""Builds side by side on many transfers at once: 100 downloads of 10 MiB started together
(`--max-running 100`) into a tmpfs, a fresh daemon of each build per run, the builds alternated
run by run; prints each run's wall time, daemon CPU and peak RSS (VmHWM) and the medians. What a
change to how much a transfer reads or holds costs when a hundred hold it at once. Asserts nothing.

    Benchmarks/hundred-ab.py NAME=DAEMON[,NAME=DAEMON...] [RUNS]
    e.g. Benchmarks/hundred-ab.py before=/tmp/bench-before-X/.build/release/downloadsd,after=.build/release/downloadsd 3
"""
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

if len(sys.argv) < 2:
    sys.exit(__doc__)
bench.dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bins = dict(a.split("=", 1) for a in sys.argv[1].split(","))
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
work = tempfile.mkdtemp(prefix="hundred-")
shm = tempfile.mkdtemp(prefix="hundred-", dir="/dev/shm")
nginx = bench.Nginx(work)
nginx.file("hundred.bin", 10 * bench.MiB)
res = {k: [] for k in bins}
try:
    for run in range(runs):
        for name, path in bins.items():
            bench.DAEMON = path
            svc = bench.Service(os.path.join(work, f"{name}-{run}"), ["--max-running", "100", "--max-running-per-session", "100"])
            try:
                cpu, t = svc.cpu(), time.monotonic()
                paths = [svc.start(nginx.url("hundred.bin"), os.path.join(shm, f"h-{i}.bin")) for i in range(100)]
                svc.wait(paths)
                wall = time.monotonic() - t
                res[name].append((wall, svc.cpu() - cpu, svc.status("VmHWM")))
                print(f"  run {run + 1}/{runs} {name}: %.2f s, %.2f CPU s, peak RSS %.1f MiB" % res[name][-1], flush=True)
            finally:
                svc.stop()
                for f in os.listdir(shm):
                    os.unlink(os.path.join(shm, f))
finally:
    nginx.stop()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(shm, ignore_errors=True)
for k, v in res.items():
    print(f"{k} median of {runs}: %.2f s, %.2f CPU s, peak RSS %.1f MiB" % tuple(statistics.median(x[i] for x in v) for i in range(3)))
