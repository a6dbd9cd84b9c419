#!/usr/bin/python3
"""Issue 77: one 1 GiB HTTPS download from nginx offering HTTP/1.1 alone, interleaved in each
round between three daemons and curl: DAEMON_A as it runs by default, DAEMON_B with --http2 and
DAEMON_B by default (so a change of build and a change of protocol show apart), and
`curl --http1.1 -o` into the same tmpfs. Prints each one's wall times and medians.

    Benchmarks/https-ab.py DAEMON_A DAEMON_B [ROUNDS]
"""
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus.mainloop.glib  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    daemon_a, daemon_b = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="https-ab-")
    shm = tempfile.mkdtemp(prefix="https-ab-", dir="/dev/shm")
    nginx = bench.Nginx(work)
    services = {}
    try:
        nginx.file("t.bin", bench.GiB)
        for name, daemon, extra in (("A", daemon_a, []), ("B --http2", daemon_b, ["--http2"]), ("B", daemon_b, [])):
            bench.DAEMON = daemon
            services[name] = bench.Service(os.path.join(work, name.replace(" ", "")), ["--ca-file", nginx.ca, *extra])
        results = {name: [] for name in [*services, "curl"]}
        url = nginx.tls1_url("t.bin")
        target = os.path.join(shm, "t.bin")
        for _ in range(rounds):
            for name in results:
                if name == "curl":
                    wall, cpu, _ = bench.tool(["curl", "-sS", "--http1.1", "--cacert", nginx.ca, "-o", target, url])
                else:
                    wall, cpu, _, _ = services[name].download(url, target)
                os.unlink(target)
                results[name].append((wall, cpu))
        for name, values in results.items():
            print(f"{name:10} wall {' '.join(f'{w:.2f}' for w, _ in values)}  median {statistics.median(w for w, _ in values):.2f} s, "
                  f"CPU median {statistics.median(c for _, c in values):.2f} s")
    finally:
        for service in services.values():
            service.stop()
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
