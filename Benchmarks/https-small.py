#!/usr/bin/python3
"""Issue 77: COUNT × 64 KiB over HTTPS, 64 Starts in flight, from nginx's server offering HTTP/2
(the daemon started with --http2, so it is taken) and from its server offering HTTP/1.1 alone,
each also through Benchmarks/delay-relay.py at 20 ms each way with --relay. A fresh daemon (release
build, or DOWNLOADSD_BENCH_BINARY) per case and round; prints wall time and daemon CPU.

    Benchmarks/https-small.py [COUNT] [ROUNDS] [--relay]
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus.mainloop.glib  # noqa: E402


def main():
    arguments = [a for a in sys.argv[1:] if a != "--relay"]
    count = int(arguments[0]) if arguments else 1000
    rounds = int(arguments[1]) if len(arguments) > 1 else 2
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="https-small-")
    nginx = bench.Nginx(work)
    relays = []
    try:
        names = [f"s{i}.bin" for i in range(count)]
        for name in names:
            with open(os.path.join(nginx.www, name), "wb") as f:
                f.write(os.urandom(64 * 1024))
        bases = {"HTTP/2": f"https://127.0.0.1:{nginx.tls_port}/", "HTTP/1.1": f"https://127.0.0.1:{nginx.tls1_port}/"}
        if "--relay" in sys.argv:
            for protocol, port in (("HTTP/2", nginx.tls_port), ("HTTP/1.1", nginx.tls1_port)):
                listen = bench.free_port()
                relay = subprocess.Popen([sys.executable, os.path.join(bench.ROOT, "Benchmarks/delay-relay.py"), str(listen), str(port), "20"],
                                         stdout=subprocess.PIPE, text=True)
                relays.append(relay)
                if relay.stdout.readline().strip() != "ready":
                    sys.exit("delay-relay.py did not start")
                bases[protocol + ", 40 ms"] = f"https://127.0.0.1:{listen}/"
        for run in range(rounds):
            for case, base in bases.items():
                out = tempfile.mkdtemp(prefix="https-small-", dir="/dev/shm")
                service = bench.Service(os.path.join(work, f"{len(relays)}-{run}-{case.replace('/', '').replace(' ', '')}"),
                                        ["--ca-file", nginx.ca, "--http2", "--max-tasks-per-user", str(count + 100)])
                try:
                    cpu = service.cpu()
                    wall = bench.start_many(service, [(base + name, os.path.join(out, name)) for name in names])
                    print(f"{case:16} round {run + 1}: {wall:6.2f} s, daemon CPU {service.cpu() - cpu:6.2f} s", flush=True)
                finally:
                    service.stop()
                    shutil.rmtree(out, ignore_errors=True)
    finally:
        for relay in relays:
            relay.kill()
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
