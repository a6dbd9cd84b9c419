#!/usr/bin/python3
"""A sandboxed app of the sandbox tests: run inside bubblewrap with its bus through
xdg-dbus-proxy, as Flatpak runs an app. Reads one JSON command per line on stdin and answers
one JSON line on stdout; hears the service's signals meanwhile (a GLib main loop), as an app
listening for Progress and Finished does.

Commands ({"op": ...}):
  startat   url, dir, name, options  -> StartAt with dir opened O_RDONLY|O_DIRECTORY
  startfile url, file, options       -> StartAt with file opened O_WRONLY|O_CREAT
  start     url, dest, options       -> Start (a path)
  uploadat  url, file, options       -> UploadAt with file opened O_RDONLY
  upload    url, source, options     -> Upload (a path)
  startgroupat dir, files [[url, name, options]], options -> StartGroupAt with dir opened
  call      path, iface, method, sig, args   -> any method; args as JSON
  get       path, prop               -> a Task property
  resume    blob (base64), options, dir (optional: destination_fd)
  resumegroup blob (base64), options, dir (optional: destination_fd) -> ResumeGroupWithData
  signals                            -> [[member, first argument as text, path], ...] heard so far
  agent     session, challenges, answer ({"user": …, "password": …} or none: default)
                                     -> exports /app (org.example.Downloads.Client) and registers it
  asked                              -> [[task, kind, realm], ...] HandleChallenge calls heard so far
Options are {"key": ["SIG", value]}: "s", "b", "u", "t", "ay" (base64).
Replies: {"ok": value} or {"error": dbus error name, "message": text}.
"""
import base64
import json
import os
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SystemBus() if os.environ.get("APP_BUS") == "system" else dbus.SessionBus()
NAME = "org.example.Downloads"


def manager():
    """The manager, looked up per call: a proxy bound to one unique name would die with the daemon
    (a restart, an activation); an app that outlives the service's restarts looks it up again."""
    return dbus.Interface(bus.get_object(NAME, "/org/example/Downloads", introspect=False), NAME)


heard = []


def on_signal(*args, **kwargs):
    member = kwargs.get("member", "")
    first = str(args[0]) if args else ""
    heard.append([member, first, kwargs.get("path", "")])


bus.add_signal_receiver(on_signal, dbus_interface=NAME, member_keyword="member", path_keyword="path")
bus.add_signal_receiver(on_signal, dbus_interface="org.freedesktop.DBus.Properties", signal_name="PropertiesChanged",
                        member_keyword="member", path_keyword="path")


def options(raw):
    result = dbus.Dictionary({}, signature="sv")
    for key, (sig, value) in (raw or {}).items():
        if sig == "s":
            result[key] = dbus.String(value, variant_level=1)
        elif sig == "b":
            result[key] = dbus.Boolean(value, variant_level=1)
        elif sig == "u":
            result[key] = dbus.UInt32(value, variant_level=1)
        elif sig == "t":
            result[key] = dbus.UInt64(value, variant_level=1)
        elif sig == "ay":
            result[key] = dbus.ByteArray(base64.b64decode(value), variant_level=1)
    return result


def plain(value):
    if isinstance(value, (dbus.ByteArray, bytes)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dbus.Array) and value.signature == "y":
        return base64.b64encode(bytes(bytearray(value))).decode()
    if isinstance(value, (list, tuple, dbus.Array, dbus.Struct)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, dbus.Boolean):
        return bool(value)
    if isinstance(value, (int, dbus.Byte)):
        return int(value)
    return str(value)


asked = []
agent = None


class Agent(dbus.service.Object):
    """The app's object for the service's calls: records each question and answers `answer`."""
    answer = ("default", {})

    @dbus.service.method("org.example.Downloads.Client", in_signature="osa{sv}", out_signature="sa{sv}")
    def HandleChallenge(self, task, kind, details):
        asked.append([str(task), str(kind), str(details.get("realm", ""))])
        disposition, answer = Agent.answer
        return (disposition, dbus.Dictionary({k: dbus.String(v, variant_level=1) for k, v in answer.items()}, signature="sv"))

    @dbus.service.method("org.example.Downloads.Client", in_signature="s", out_signature="")
    def HandleEventsForBackgroundSession(self, session):
        pass


def run(command):
    global agent
    op = command["op"]
    if op == "agent":
        # Exports /app and registers it for `session`'s questions of `challenges`; answers
        # `use` with `answer` (strings), or `default` without one.
        if agent is None:
            agent = Agent(bus, "/app")
        Agent.answer = ("use", command["answer"]) if command.get("answer") else ("default", {})
        registered = dbus.Dictionary({"challenges": dbus.Array(command["challenges"], signature="s", variant_level=1)},
                                     signature="sv")
        return manager().RegisterCompletionHandler(command["session"], dbus.ObjectPath("/app"), registered)
    if op == "asked":
        return asked
    if op == "startat":
        fd = os.open(command["dir"], os.O_RDONLY | os.O_DIRECTORY)
        try:
            return manager().StartAt(command["url"], dbus.types.UnixFd(fd), command.get("name", ""), options(command.get("options")))
        finally:
            os.close(fd)
    if op == "startfile":
        fd = os.open(command["file"], os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            return manager().StartAt(command["url"], dbus.types.UnixFd(fd), "", options(command.get("options")))
        finally:
            os.close(fd)
    if op == "startgroupat":
        fd = os.open(command["dir"], os.O_RDONLY | os.O_DIRECTORY)
        files = dbus.Array([dbus.Struct((url, name, options(opts)), signature="ssa{sv}") for url, name, opts in command["files"]],
                           signature="(ssa{sv})")
        try:
            return manager().StartGroupAt(dbus.types.UnixFd(fd), files, options(command.get("options")))
        finally:
            os.close(fd)
    if op == "start":
        return manager().Start(command["url"], command["dest"], options(command.get("options")))
    if op == "uploadat":
        fd = os.open(command["file"], os.O_RDONLY)
        try:
            return manager().UploadAt(command["url"], dbus.types.UnixFd(fd), options(command.get("options")))
        finally:
            os.close(fd)
    if op == "upload":
        return manager().Upload(command["url"], command["source"], options(command.get("options")))
    if op == "call":
        proxy = bus.get_object(NAME, command["path"], introspect=False)
        args = command.get("args", [])
        return proxy.get_dbus_method(command["method"], command["iface"])(*args, signature=command.get("sig", ""))
    if op == "get":
        proxy = bus.get_object(NAME, command["path"], introspect=False)
        return proxy.Get("org.example.Downloads.Task", command["prop"], dbus_interface="org.freedesktop.DBus.Properties")
    if op in ("resume", "resumegroup"):
        opts = options(command.get("options"))
        fd = None
        if "dir" in command:
            fd = os.open(command["dir"], os.O_RDONLY | os.O_DIRECTORY)
            opts["destination_fd"] = dbus.types.UnixFd(fd, variant_level=1)
        method = manager().ResumeWithData if op == "resume" else manager().ResumeGroupWithData
        try:
            return method(dbus.ByteArray(base64.b64decode(command["blob"])), opts)
        finally:
            if fd is not None:
                os.close(fd)
    if op == "signals":
        return heard
    if op == "exists":
        return os.path.lexists(command["path"])
    raise ValueError("unknown op " + op)


def on_line(source, condition):
    line = sys.stdin.readline()
    if not line:
        loop.quit()
        return False
    try:
        reply = {"ok": plain(run(json.loads(line)))}
    except dbus.exceptions.DBusException as error:
        reply = {"error": error.get_dbus_name(), "message": error.get_dbus_message()}
    except Exception as error:  # the test shows what went wrong
        reply = {"error": "app." + type(error).__name__, "message": str(error)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    return True


loop = GLib.MainLoop()
GLib.io_add_watch(sys.stdin, GLib.IO_IN | GLib.IO_HUP, on_line)
sys.stdout.write(json.dumps({"ready": bus.get_unique_name()}) + "\n")
sys.stdout.flush()
loop.run()
