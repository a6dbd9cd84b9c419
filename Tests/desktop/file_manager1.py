"""A desktop's file manager as far as "Show in folder" goes: org.freedesktop.FileManager1 on the
session bus (the interface Nautilus, Dolphin and Nemo implement), writing each call it gets as a
JSON line to the file named by its argument."""
import json
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
bus = dbus.SessionBus()
log = open(sys.argv[1], "a", buffering=1)
INTERFACE = "org.freedesktop.FileManager1"


class FileManager(dbus.service.Object):
    def record(self, method, uris, startup_id):
        log.write(json.dumps({"method": method, "uris": [str(u) for u in uris], "startup_id": str(startup_id)}) + "\n")

    @dbus.service.method(INTERFACE, in_signature="ass")
    def ShowItems(self, uris, startup_id):
        self.record("ShowItems", uris, startup_id)

    @dbus.service.method(INTERFACE, in_signature="ass")
    def ShowFolders(self, uris, startup_id):
        self.record("ShowFolders", uris, startup_id)

    @dbus.service.method(INTERFACE, in_signature="ass")
    def ShowItemProperties(self, uris, startup_id):
        self.record("ShowItemProperties", uris, startup_id)


name = dbus.service.BusName(INTERFACE, bus)
FileManager(bus, "/org/freedesktop/FileManager1")
GLib.MainLoop().run()
