#!/usr/bin/python3
"""Renders the interfaces of dbus/*.xml as the listing of org.example.Downloads(5), in the shape of
systemd's D-Bus man pages (org.freedesktop.login1(5)). The man page holds this output between its
BEGIN and END markers; ContractTests checks that it still does:

    data/man/dbus-interfaces.py            # prints the listing (roff)
"""
import os
import sys
import xml.etree.ElementTree as ElementTree

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OBJECTS = [
    ("/org/example/Downloads", "org.example.Downloads.xml", "org.example.Downloads"),
    ("/org/example/Downloads/tasks/<id>", "org.example.Downloads.Task.xml", "org.example.Downloads.Task"),
    ("/org/example/Downloads/groups/<id>", "org.example.Downloads.Group.xml", "org.example.Downloads.Group"),
    ("<the client's object>", "org.example.Downloads.Client.xml", "org.example.Downloads.Client"),
]


def escaped(text):
    # roff: a backslash is \e; a line starting with . or ' would be a request.
    return text.replace("\\", "\\e")


def render():
    out = []
    for path, filename, name in OBJECTS:
        tree = ElementTree.parse(os.path.join(ROOT, "dbus", filename))
        interface = next(i for i in tree.iter("interface") if i.get("name") == name)
        out.append(".SS \"%s\"" % name)
        out.append(".nf")
        out.append(".RS 4")
        out.append("node %s {" % escaped(path))
        out.append("  interface %s {" % name)
        sections = [("methods", "method"), ("signals", "signal"), ("properties", "property")]
        for title, tag in sections:
            members = interface.findall(tag)
            if not members:
                continue
            out.append("    %s:" % title)
            for member in members:
                if tag == "property":
                    const = any(a.get("value") == "const" for a in member.findall("annotation"))
                    out.append("      %sreadonly %s %s;" % ("@const " if const else "", member.get("type"), member.get("name")))
                    continue
                args = []
                for arg in member.findall("arg"):
                    direction = arg.get("direction") or "in"
                    args.append(("%s " % direction if tag == "method" else "") + "%s %s" % (arg.get("type"), arg.get("name")))
                if not args:
                    out.append("      %s();" % member.get("name"))
                    continue
                head = "      %s(" % member.get("name")
                pad = " " * len(head)
                out.append(head + args[0] + ("," if len(args) > 1 else ");"))
                for index, arg in enumerate(args[1:], 1):
                    out.append(pad + arg + ("," if index < len(args) - 1 else ");"))
        out.append("  };")
        out.append("};")
        out.append(".RE")
        out.append(".fi")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
