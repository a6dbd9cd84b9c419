#!/usr/bin/python3
"""Issue 79: apt through the service against apt's own http method, in the same run.

nginx on 127.0.0.1 serves a flat repository (dpkg-deb packages, apt-ftparchive indexes) of 40
small packages (64 KiB of payload each) and one of 200 MiB. Two apt roots of their own read it,
one with `deb [trusted=yes] http://…` (apt's http method), one with `deb [trusted=yes]
downloads+http://…` (the service's method, release build, speaking to downloadsd on a private
bus); each runs `apt-get update` once, then, alternated ROUNDS times, `apt-get download` of the 40
small packages and of the large one into a tmpfs, and of the 40 small ones again through
Benchmarks/delay-relay.py holding each chunk 10 ms each way (a mirror 20 ms away: a round trip per
request shows). Wall time; CPU of apt and its methods (its children, from getrusage) and, for the
service, the daemon's too. Asserts nothing.

    Benchmarks/apt-method.py [ROUNDS]
"""
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus.mainloop.glib  # noqa: E402

ROOT = bench.ROOT
METHOD = os.environ.get("DOWNLOADS_APT_METHOD_BENCH_BINARY") or os.path.join(ROOT, ".build/release/downloads-apt-method")
SMALL, LARGE = 40, 200 * bench.MiB
# One way, ms: Benchmarks/delay-relay.py in front of nginx for the "far" job.
DELAY = 10


def package(work, repo, name, size):
    tree = os.path.join(work, "pkg-" + name)
    os.makedirs(os.path.join(tree, "DEBIAN"))
    os.makedirs(os.path.join(tree, "usr/share", name))
    with open(os.path.join(tree, "DEBIAN/control"), "w") as f:
        f.write(f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: bench <b@example.org>\n"
                f"Description: a benchmark package\n")
    with open(os.path.join(tree, "usr/share", name, "payload"), "wb") as f:
        left = size
        while left > 0:
            block = os.urandom(min(left, 4 * bench.MiB))
            f.write(block)
            left -= len(block)
    # No compression: the payload is random, and the .deb's size is what is measured.
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Znone", "--build", tree,
                    os.path.join(repo, f"{name}_1.0_all.deb")], check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(tree)


def apt_root(work, name, sources, methods):
    root = os.path.join(work, name)
    for sub in ("etc/apt/sources.list.d", "etc/apt/preferences.d", "etc/apt/apt.conf.d", "var/lib/apt/lists/partial",
                "var/cache/apt/archives/partial", "var/lib/dpkg"):
        os.makedirs(os.path.join(root, sub))
    open(os.path.join(root, "var/lib/dpkg/status"), "w").close()
    with open(os.path.join(root, "etc/apt/sources.list"), "w") as f:
        f.write(sources)
    return ["apt-get", "-q", "-o", f"Dir={root}", "-o", f"Dir::State::status={root}/var/lib/dpkg/status",
            "-o", f"Dir::Bin::Methods={methods}", "-o", "Debug::NoLocking=1", "-o", "APT::Sandbox::User=root",
            "-o", "Acquire::Languages=none"]


def timed(command, cwd, environment, service=None):
    """wall s, CPU s of apt and its methods (and the daemon's, with `service`)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    daemon = service.cpu() if service else 0
    started = time.monotonic()
    subprocess.run(command, cwd=cwd, env=environment, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu + ((service.cpu() - daemon) if service else 0)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for binary in (bench.DAEMON, METHOD):
        if not os.access(binary, os.X_OK):
            sys.exit(f"no release build at {binary}: swift build -c release --product downloadsd --product downloads-apt-method")
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="apt-method-")
    shm = tempfile.mkdtemp(prefix="apt-method-", dir="/dev/shm")
    nginx = service = relay = None
    try:
        nginx = bench.Nginx(work)
        repo = os.path.join(nginx.www, "repo")
        os.makedirs(repo)
        small = [f"small{n:02d}" for n in range(SMALL)]
        for name in small:
            package(work, repo, name, 64 * 1024)
        package(work, repo, "large", LARGE)
        subprocess.run(["sh", "-c", "apt-ftparchive packages . > Packages && apt-ftparchive release . > Release"],
                       cwd=repo, check=True)
        methods = os.path.join(work, "methods")
        os.makedirs(methods)
        for name in os.listdir("/usr/lib/apt/methods"):
            os.symlink(os.path.join("/usr/lib/apt/methods", name), os.path.join(methods, name))
        for name in ("downloads", "downloads+http", "downloads+https"):
            os.symlink(METHOD, os.path.join(methods, name))
        service = bench.Service(os.path.join(work, "service"))
        environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=service.address)
        base = nginx.url("repo")
        listen = bench.free_port()
        relay = subprocess.Popen([sys.executable, os.path.join(ROOT, "Benchmarks/delay-relay.py"), str(listen),
                                  str(nginx.port), str(DELAY)], stdout=subprocess.PIPE, text=True)
        if relay.stdout.readline().strip() != "ready":
            sys.exit("delay-relay.py did not start")
        far = base.replace(f":{nginx.port}/", f":{listen}/")
        links = {}
        for link, url in (("near", base), ("far", far)):
            links[link] = {
                "apt's http": apt_root(work, f"http-{link}", f"deb [trusted=yes] {url} ./\n", methods),
                "the service": apt_root(work, f"service-{link}", f"deb [trusted=yes] downloads+{url} ./\n", methods),
            }
            for command in links[link].values():
                subprocess.run(command + ["update"], env=environment, check=True, stdout=subprocess.DEVNULL)
        jobs = (("40 small", small, "near"), (f"40 small, {2 * DELAY} ms round trip", small, "far"),
                ("200 MiB", ["large"], "near"))
        results = {(case, job): [] for case in links["near"] for job, _, _ in jobs}
        for _ in range(rounds):
            for job, names, link in jobs:
                for case, command in links[link].items():
                    target = os.path.join(shm, "into")
                    os.makedirs(target)
                    subprocess.run(["sync"])
                    wall, cpu = timed(command + ["download"] + names, target, environment,
                                      service if case == "the service" else None)
                    if len(os.listdir(target)) != len(names):
                        sys.exit(f"{case}: {len(os.listdir(target))} files of {len(names)}")
                    shutil.rmtree(target)
                    results[(case, job)].append((wall, cpu))
                    print(f"  {job:30} {case:12} {wall:6.2f} s  CPU {cpu:5.2f} s", flush=True)
        print(f"\nmedians of {rounds} round(s):")
        print("| job | apt's http: wall s, CPU s | the service: wall s, CPU s (apt, method, daemon) | time ratio | CPU ratio |")
        print("|---|---|---|---|---|")
        for job, _, _ in jobs:
            ours = [statistics.median(v) for v in zip(*results[("the service", job)])]
            theirs = [statistics.median(v) for v in zip(*results[("apt's http", job)])]
            print(f"| {job} | {theirs[0]:.2f}, {theirs[1]:.2f} | {ours[0]:.2f}, {ours[1]:.2f} | "
                  f"{ours[0] / theirs[0]:.2f}× | {ours[1] / theirs[1]:.2f}× |")
    finally:
        if relay:
            relay.terminate()
            relay.wait()
        if service:
            service.stop()
        if nginx:
            nginx.stop()
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)


if __name__ == "__main__":
    main()
