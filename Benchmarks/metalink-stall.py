#!/usr/bin/python3
"""How long other calls wait while Starts carry large Metalink documents (issue 45, finding 7).

Starts a private session bus and the given downloadsd on it, then six Starts at once, each with a
valid ~1 MiB Metalink document (12,000 piece hashes; its URL goes nowhere), and ListTasks in a
loop beside them; prints the worst ListTasks latency. Run it twice or more: the machine is shared.

    Benchmarks/metalink-stall.py .build/release/downloadsd
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

import dbus


def document(n, count=12000):
    hashes = "".join("      <hash>%s</hash>\n" % os.urandom(32).hex() for _ in range(count))
    return ('<?xml version="1.0"?>\n<metalink xmlns="urn:ietf:params:xml:ns:metalink">\n  <file name="f%d.bin">\n'
            '    <size>%d</size>\n    <pieces length="16384" type="sha-256">\n%s    </pieces>\n'
            '    <url>http://127.0.0.1:9/f</url>\n  </file>\n</metalink>\n' % (n, count * 16384, hashes)).encode()


def main():
    daemon = sys.argv[1] if len(sys.argv) > 1 else ".build/release/downloadsd"
    with tempfile.TemporaryDirectory() as scratch:
        config = os.path.join(scratch, "bus.conf")
        with open(config, "w") as f:
            f.write('<busconfig><type>session</type><listen>unix:path=%s/bus</listen><auth>EXTERNAL</auth>'
                    '<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/>'
                    '<allow receive_sender="*"/></policy></busconfig>' % scratch)
        bus_daemon = subprocess.Popen(["dbus-daemon", "--config-file=" + config, "--nofork", "--print-address=1"],
                                      stdout=subprocess.PIPE, text=True)
        address = bus_daemon.stdout.readline().strip()
        env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=address)
        service = subprocess.Popen([daemon, "--address", address, "--state-dir", os.path.join(scratch, "state"), "--exit-idle-time", "0"],
                                   env=env, stderr=subprocess.DEVNULL)
        try:
            bus = dbus.bus.BusConnection(address)
            deadline = time.time() + 30
            while not bus.name_has_owner("org.example.Downloads"):
                if time.time() > deadline:
                    sys.exit("downloadsd did not take its name")
                time.sleep(0.05)
            manager = dbus.Interface(bus.get_object("org.example.Downloads", "/org/example/Downloads"), "org.example.Downloads")
            documents = [document(n) for n in range(6)]

            def start(n):
                own = dbus.bus.BusConnection(address)
                m = dbus.Interface(own.get_object("org.example.Downloads", "/org/example/Downloads"), "org.example.Downloads")
                m.Start("", os.path.join(scratch, "f%d" % n), {"metalink": dbus.ByteArray(documents[n])}, timeout=60)

            manager.ListTasks("")
            threads = [threading.Thread(target=start, args=(n,)) for n in range(6)]
            began = time.time()
            for thread in threads:
                thread.start()
            worst = 0.0
            while any(thread.is_alive() for thread in threads):
                asked = time.time()
                manager.ListTasks("")
                worst = max(worst, time.time() - asked)
            print("six Starts with %d-byte documents took %.2f s; worst ListTasks beside them %.3f s"
                  % (len(documents[0]), time.time() - began, worst))
        finally:
            service.terminate()
            service.wait()
            bus_daemon.terminate()
            bus_daemon.wait()


if __name__ == "__main__":
    main()
