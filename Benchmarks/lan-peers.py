#!/usr/bin/python3
"""Issue 78: a file from a machine of the local network that has it, against its origin alone.

Two network namespaces joined by a veth (machines A and B of one link), each with a system-type
dbus-daemon and an avahi-daemon of its own (as Tests' AvahiRig). A's downloadsd (release build)
downloads a 1 GiB file from A's loopback with `share` into a tmpfs: A offers it by its SHA-256.
B's downloadsd (`--lan-peers fetch`) then downloads the same file into a tmpfs, its origin on
B's loopback limited to 20 MB/s (Tests/servers/lan_peer.py's origin mode, one pace for all its
connections), alternated ROUNDS times:

  origin alone     lan_peers false
  origin and peer  lan_peers true
  peer alone       lan_peers true, the URL's port closed (the origin unreachable)
  curl from A      curl -k of Passim's URL on A (the link's own speed: the reference for the peer)
  curl + sha-256   the same, then `openssl dgst -sha256` of the file: the same work as the
                   service's (every byte checked), the fair reference for "peer alone"

Start to Finished (the service's durable finish, fdatasync included; curl's time includes a
sync), B's daemon's CPU, and the bytes each source sent (`GetMetrics`' bytes_by_source). Needs
root, ip, dbus-daemon, avahi-daemon (make deps). Asserts nothing.

    Benchmarks/lan-peers.py [ROUNDS] [SIZE_MIB]
"""
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus  # noqa: E402
import dbus.mainloop.glib  # noqa: E402

ROOT = bench.ROOT
ORIGIN_RATE = 20_000_000

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>system</type><listen>unix:path={socket}</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>
<allow receive_sender="*"/></policy></busconfig>
"""

AVAHI_CONFIG = """[server]
host-name={name}
use-ipv4=yes
use-ipv6=no
allow-interfaces={link}
[publish]
publish-hinfo=no
publish-workstation=no
"""


class Rig:
    """Machines A and B: namespaces, a veth, a system bus and an avahi-daemon each."""

    def __init__(self, work):
        self.work, self.processes = work, []
        tag = str(os.getpid() % 100000)
        prefix = f"10.78.{os.getpid() % 250}."
        self.hosts = {}
        try:
            for name, address, link in (("a", prefix + "1", "vb-a"), ("b", prefix + "2", "vb-b")):
                self.hosts[name] = {"ns": f"bench-{name}-{tag}", "address": address, "link": link,
                                    "bus": f"unix:path={work}/{name}.sock"}
            a, b = self.hosts["a"], self.hosts["b"]
            for host in (a, b):
                self.ip("netns", "add", host["ns"])
            self.ip("link", "add", a["link"], "netns", a["ns"], "type", "veth", "peer", "name", b["link"],
                    "netns", b["ns"])
            for name, host in self.hosts.items():
                self.ip("-n", host["ns"], "addr", "add", host["address"] + "/24", "dev", host["link"])
                self.ip("-n", host["ns"], "link", "set", host["link"], "up")
                self.ip("-n", host["ns"], "link", "set", "lo", "up")
                self.start(name, host)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def ip(*arguments):
        subprocess.run(["ip", *arguments], check=True)

    def run_in(self, name):
        return ["ip", "netns", "exec", self.hosts[name]["ns"]]

    def start(self, name, host):
        socket = host["bus"][len("unix:path="):]
        config = os.path.join(self.work, f"{name}.bus.conf")
        with open(config, "w") as f:
            f.write(BUS_CONFIG.format(socket=socket))
        self.processes.append(subprocess.Popen(
            self.run_in(name) + ["dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile"]))
        wait(lambda: os.path.exists(socket), "the bus of " + name)
        avahi = os.path.join(self.work, f"{name}.avahi.conf")
        with open(avahi, "w") as f:
            f.write(AVAHI_CONFIG.format(name=host["ns"], link=host["link"]))
        self.processes.append(subprocess.Popen(
            self.run_in(name) + ["sh", "-c", "mount -t tmpfs tmpfs /run && mkdir -p /run/avahi-daemon && exec "
                                 f"avahi-daemon -f {avahi} --no-drop-root --no-chroot --no-rlimits"],
            env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=host["bus"]), stderr=subprocess.DEVNULL))
        wait(lambda: b"int32 2" in subprocess.run(
            ["dbus-send", f"--bus={host['bus']}", "--print-reply", "--dest=org.freedesktop.Avahi", "/",
             "org.freedesktop.Avahi.Server.GetState"], capture_output=True).stdout, "avahi-daemon of " + name)

    def stop(self):
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
        for host in self.hosts.values():
            subprocess.run(["ip", "netns", "del", host["ns"]], stderr=subprocess.DEVNULL)


def wait(condition, what, seconds=20):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            sys.exit(what + " did not start")
        time.sleep(0.02)


def origin(rig, name, file, rate, work):
    """lan_peer.py's origin mode on `name`'s loopback: plain HTTP, ranges, an ETag, `rate` bytes/s."""
    port = bench.free_port()
    process = subprocess.Popen(rig.run_in(name) + [
        "/usr/bin/python3", os.path.join(ROOT, "Tests/servers/lan_peer.py"), str(port), "-", "-", file,
        os.path.join(work, f"origin-{name}.log"), "origin", str(rate)])
    wait(lambda: subprocess.run(rig.run_in(name) + ["curl", "-s", "-o", "/dev/null", "-r", "0-0",
                                                    f"http://127.0.0.1:{port}/x"]).returncode == 0,
         "the origin on " + name)
    return process, f"http://127.0.0.1:{port}"


def metrics(service, path):
    task = service.connection.get_object("org.example.Downloads", path)
    summary, _ = task.GetMetrics(dbus_interface="org.example.Downloads.Task")
    return {str(k): int(v) for k, v in summary.get("bytes_by_source", {}).items()}


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    size = (int(sys.argv[2]) if len(sys.argv) > 2 else 1024) * bench.MiB
    if os.geteuid() != 0:
        sys.exit("needs root: makes network namespaces")
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="lan-peers-")
    shm = tempfile.mkdtemp(prefix="lan-peers-", dir="/dev/shm")
    rig = services = None
    origins = []
    try:
        source = os.path.join(shm, "origin.bin")
        with open(source, "wb") as f:
            for block in range(size // bench.MiB):
                f.write(hashlib.sha256(str(block).encode()).digest() * (bench.MiB // 32))
        digest = hashlib.sha256()
        with open(source, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        sha256 = digest.hexdigest()
        rig = Rig(work)
        port = bench.free_port()
        a = bench.Service(os.path.join(work, "a"), ["--share-port", str(port), "--lan-peers", "share"],
                          prefix=rig.run_in("a"), environment={"DBUS_SYSTEM_BUS_ADDRESS": rig.hosts["a"]["bus"]})
        b = bench.Service(os.path.join(work, "b"), ["--lan-peers", "fetch"], prefix=rig.run_in("b"),
                          environment={"DBUS_SYSTEM_BUS_ADDRESS": rig.hosts["b"]["bus"]})
        services = [a, b]
        process, url_a = origin(rig, "a", source, 100 * size, work)
        origins.append(process)
        process, url_b = origin(rig, "b", source, ORIGIN_RATE, work)
        origins.append(process)
        shared = os.path.join(shm, "shared-on-a.bin")
        a.download(url_a + "/big.bin", shared, {"checksum": f"sha256:{sha256}", "share": True,
                                                "share_limit": dbus.UInt32(1000)})
        peer_url = f"https://{rig.hosts['a']['address']}:{port}/big.bin?sha256={sha256}"
        wait(lambda: subprocess.run(rig.run_in("b") + ["avahi-browse", "-rpt", f"_{sha256[:60]}._sub._cache._tcp"],
                                    env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=rig.hosts["b"]["bus"]),
                                    capture_output=True, text=True).stdout.count("\n=") > 0
             or False, "A's advert on B", seconds=30)
        closed = f"http://127.0.0.1:{bench.free_port()}"
        cases = {
            "origin alone": (url_b + "/big.bin", False),
            "origin and peer": (url_b + "/big.bin", True),
            "peer alone": (closed + "/big.bin", True),
            "curl from A": None,
            "curl + sha-256": "check",
        }
        results = {case: [] for case in cases}
        target = os.path.join(shm, "on-b.bin")
        print(f"{size // bench.MiB} MiB, origin at {ORIGIN_RATE / 1e6:.0f} MB/s, {rounds} round(s)", flush=True)
        for _ in range(rounds):
            for case, spec in cases.items():
                subprocess.run(["sync"])
                if spec is None or spec == "check":
                    started = time.monotonic()
                    subprocess.run(rig.run_in("b") + ["curl", "-sSk", "--http1.1", "-o", target, peer_url], check=True)
                    subprocess.run(["sync"])
                    if spec == "check":
                        out = subprocess.run(["openssl", "dgst", "-sha256", "-r", target], capture_output=True,
                                             text=True, check=True).stdout
                        if not out.startswith(sha256):
                            sys.exit("curl + sha-256: the file does not match")
                    wall, cpu, sources = time.monotonic() - started, float("nan"), {"peer": size}
                else:
                    url, peers = spec
                    cpu = b.cpu()
                    started = time.monotonic()
                    path = b.start(url, target, {"checksum": f"sha256:{sha256}", "lan_peers": peers})
                    b.wait([path])
                    wall, cpu = time.monotonic() - started, b.cpu() - cpu
                    sources = metrics(b, path)
                if os.path.getsize(target) != size:
                    sys.exit(f"{case}: {os.path.getsize(target)} bytes")
                os.unlink(target)
                from_peer = sum(v for k, v in sources.items() if k.startswith("peer"))
                results[case].append((wall, cpu, from_peer / size))
                print(f"  {case:16} {wall:7.2f} s  {size / wall / 1e6:7.1f} MB/s  CPU {cpu:5.2f} s  "
                      f"from the peer {100 * from_peer / size:5.1f} %", flush=True)
        alone = statistics.median(w for w, _, _ in results["origin alone"])
        print(f"\nmedians of {rounds} round(s), {size // bench.MiB} MiB, origin at {ORIGIN_RATE / 1e6:.0f} MB/s:")
        print("| case | wall s | MB/s | vs origin alone | B's CPU s | from the peer |")
        print("|---|---|---|---|---|---|")
        for case, values in results.items():
            wall = statistics.median(w for w, _, _ in values)
            cpu = statistics.median(c for _, c, _ in values)
            share = statistics.median(p for _, _, p in values)
            print(f"| {case} | {wall:.2f} | {size / wall / 1e6:.1f} | {alone / wall:.1f}× faster | "
                  f"{'–' if cpu != cpu else f'{cpu:.2f}'} | {100 * share:.0f} % |")
    finally:
        for service in services or []:
            service.stop()
        for process in origins:
            process.terminate()
            process.wait()
        if rig:
            rig.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
