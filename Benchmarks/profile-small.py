#!/usr/bin/python3
"""The profile driver of issue 24 (Benchmarks/RESULTS.md, "the profile driver"): one warm
downloadsd (release build, or DOWNLOADSD_BENCH_BINARY) on a private bus, the state directory on
disk, 1,000 × 64 KiB from nginx on 127.0.0.1 into a tmpfs with 64 Starts in flight, one tool
attached to the daemon while they run. Prints the wall time and the daemon's CPU per task, then
what the tool printed or where it wrote. Asserts nothing; run it alternated with another build.

    Benchmarks/profile-small.py stat     # perf stat: context switches, migrations, task clock
    Benchmarks/profile-small.py record   # perf record -g into ./profile-small.perf.data
    Benchmarks/profile-small.py futex    # perf record of futex calls with their stacks; prints their count a task by kind of thread
    Benchmarks/profile-small.py strace   # strace -c -f: system calls counted per kind
    Benchmarks/profile-small.py none     # no tool: the figures alone
    Benchmarks/profile-small.py record --group   # the 1,000 as one StartGroup instead of 64 Starts in flight
    Benchmarks/profile-small.py none --disk      # the files onto the disk (/var/tmp) instead of a tmpfs

Extra daemon arguments after `--` (e.g. `-- --log-level warning`).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import dbus.mainloop.glib  # noqa: E402

TOOLS = {
    "stat": ["perf", "stat", "-e", "context-switches,cpu-migrations,task-clock"],
    "record": ["perf", "record", "-g", "-o", "profile-small.perf.data"],
    "futex": ["perf", "record", "-e", "syscalls:sys_enter_futex", "-g", "-o", "profile-small.futex.data"],
    "strace": ["strace", "-c", "-f"],
    "none": None,
}


def main():
    arguments = sys.argv[1:]
    as_group = "--group" in arguments
    on_disk = "--disk" in arguments
    arguments = [a for a in arguments if a not in ("--group", "--disk")]
    extra = arguments[arguments.index("--") + 1:] if "--" in arguments else []
    mode = arguments[0] if arguments and arguments[0] != "--" else "stat"
    if mode not in TOOLS:
        sys.exit(f"usage: {sys.argv[0]} [{'|'.join(TOOLS)}] [-- daemon arguments]")
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    work = tempfile.mkdtemp(prefix="profile-small-")
    state = tempfile.mkdtemp(prefix="profile-small-state-", dir="/var/tmp")
    out = tempfile.mkdtemp(prefix="profile-small-out-", dir="/var/tmp" if on_disk else "/dev/shm")
    nginx = bench.Nginx(work)
    service = None
    try:
        names = [f"p{i}.bin" for i in range(1000)]
        for name in names:
            with open(os.path.join(nginx.www, name), "wb") as f:
                f.write(os.urandom(64 * 1024))
        service = bench.Service(state, ["--max-tasks-per-user", "5000", *extra])
        # Warm up: the first tasks pay for connections, caches and the pool's threads.
        bench.start_many(service, [(nginx.url(n), os.path.join(out, "warm-" + n)) for n in names[:50]])
        tool = None
        if TOOLS[mode]:
            tool = subprocess.Popen([*TOOLS[mode], "-p", str(service.daemon.pid)], stderr=None if mode in ("stat", "strace") else subprocess.DEVNULL)
            time.sleep(1)  # the tool attached
        cpu = service.cpu()
        jobs = [(nginx.url(n), os.path.join(out, n)) for n in names]
        wall = bench.start_group(service, jobs) if as_group else bench.start_many(service, jobs)
        used = service.cpu() - cpu
        print(f"1,000 tasks in {wall:.2f} s; daemon CPU {used / len(names) * 1000:.2f} ms per task", flush=True)
        if tool:
            tool.send_signal(2)
            tool.wait()
        if mode == "futex":
            print_futex_counts(len(names))
    finally:
        if service:
            service.stop()
        nginx.stop()
        for directory in (work, state, out):
            shutil.rmtree(directory, ignore_errors=True)


def print_futex_counts(tasks):
    """The futex calls recorded, a task, and by the kind of thread that made them: libdispatch's
    (its queues: a task's I/O queue, the delivery queue, BlockingWork), Swift's cooperative pool,
    NIO's event loops, the rest."""
    script = subprocess.run(
        ["perf", "script", "-i", "profile-small.futex.data", "-F", "comm"],
        capture_output=True, text=True, check=False)
    kinds = {}
    for line in script.stdout.splitlines():
        comm = line.strip()
        kind = ("dispatch queues" if "overcommit" in comm else "Swift's pool" if "default-qos" in comm
                else "NIO event loops" if comm.startswith("NIO-") else "other")
        kinds[kind] = kinds.get(kind, 0) + 1
    total = sum(kinds.values())
    print(f"{total} futex calls, {total / tasks:.1f} a task (the warm-up excluded, 1 s idle included)")
    for kind, count in sorted(kinds.items(), key=lambda item: -item[1]):
        print(f"  {kind}: {count / tasks:.1f} a task ({count * 100 / max(1, total):.0f} %)")


if __name__ == "__main__":
    main()
