#!/usr/bin/python3
"""Issue 78: what serving a shared file costs. One 1 GiB file is downloaded by the service with
`share` (from nginx on 127.0.0.1 into a tmpfs), then fetched ROUNDS times as Passim's client does
(`curl -k https://127.0.0.1:PORT/NAME?sha256=H` into the same tmpfs) from the service's share
server, alternated with the same curl from nginx's HTTPS server of the same file (TLS 1.3,
HTTP/1.1): wall time, MB/s, the server's CPU (the daemon's; nginx's workers' from /proc), and
the curl's. Release build, or DOWNLOADSD_BENCH_BINARY.

    Benchmarks/share-serve.py [ROUNDS]
"""
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus  # noqa: E402
import dbus.mainloop.glib  # noqa: E402


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="share-serve-")
    shm = tempfile.mkdtemp(prefix="share-serve-", dir="/dev/shm")
    nginx = bench.Nginx(work)
    service = None
    try:
        nginx.file("big.bin", bench.GiB)
        digest = hashlib.sha256()
        with open(os.path.join(nginx.www, "big.bin"), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        sha256 = digest.hexdigest()
        port = bench.free_port()
        service = bench.Service(os.path.join(work, "state"), ["--share-port", str(port)])
        shared = os.path.join(shm, "big.bin")
        service.download(nginx.url("big.bin"), shared, {"checksum": f"sha256:{sha256}", "share": True,
                                                       "share_limit": dbus.UInt32(rounds + 1)})
        deadline = time.monotonic() + 10
        while not service.manager.ListShared() and time.monotonic() < deadline:
            time.sleep(0.02)
        cases = {"share server": f"https://127.0.0.1:{port}/big.bin?sha256={sha256}", "nginx": nginx.tls1_url("big.bin")}
        results = {case: [] for case in cases}
        target = os.path.join(shm, "fetched.bin")
        for _ in range(rounds):
            for case, url in cases.items():
                server_before = service.cpu() if case == "share server" else nginx.cpu()
                wall, cpu, _ = bench.tool(["curl", "-sSk", "--http1.1", "-o", target, url])
                server = (service.cpu() if case == "share server" else nginx.cpu()) - server_before
                if os.path.getsize(target) != bench.GiB:
                    sys.exit(f"{case}: {os.path.getsize(target)} bytes")
                os.unlink(target)
                results[case].append((wall, server, cpu))
                print(f"  {case:12} {wall:6.2f} s  server CPU {server:5.2f} s  curl CPU {cpu:5.2f} s", flush=True)
        for case, values in results.items():
            wall = statistics.median(v[0] for v in values)
            print(f"{case:12} median {wall:.2f} s ({bench.GiB / wall / 1e6:.0f} MB/s), server CPU "
                  f"{statistics.median(v[1] for v in values):.2f} s, curl CPU {statistics.median(v[2] for v in values):.2f} s")
        shares = service.manager.ListShared()
        print(f"downloads counted by the share server: {int(shares[0]['shares']) if shares else 'withdrawn (limit)'}")
    finally:
        if service:
            service.stop()
        nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
