"""The user's recently used files as GLib reads them: `list PATH` prints a JSON object of each
URI's MIME type and applications, `seed PATH URI APP MIME` adds an item as another app would.

GLib's own GBookmarkFile, called through ctypes: PyGObject 3.42 (Debian 12) cannot construct a
GLib.BookmarkFile ("struct cannot be created directly"), and a reader of our own would not say
what GTK's file chooser sees."""
import ctypes
import json
import sys

glib = ctypes.CDLL("libglib-2.0.so.0")
glib.g_bookmark_file_new.restype = ctypes.c_void_p
glib.g_bookmark_file_free.argtypes = [ctypes.c_void_p]
glib.g_bookmark_file_load_from_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
glib.g_bookmark_file_to_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
glib.g_bookmark_file_get_uris.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
glib.g_bookmark_file_get_uris.restype = ctypes.POINTER(ctypes.c_char_p)
glib.g_bookmark_file_get_mime_type.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
glib.g_bookmark_file_get_mime_type.restype = ctypes.c_char_p
glib.g_bookmark_file_get_applications.argtypes = [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p]
glib.g_bookmark_file_get_applications.restype = ctypes.POINTER(ctypes.c_char_p)
glib.g_bookmark_file_add_application.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p]
glib.g_bookmark_file_set_mime_type.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]


def strings(pointer, count):
    return [pointer[i].decode() for i in range(count)]


command, path = sys.argv[1], sys.argv[2].encode()
bookmarks = glib.g_bookmark_file_new()
loaded = glib.g_bookmark_file_load_from_file(bookmarks, path, None)
if command == "list":
    result = {}
    if loaded:
        count = ctypes.c_size_t()
        uris = strings(glib.g_bookmark_file_get_uris(bookmarks, ctypes.byref(count)), count.value)
        for uri in uris:
            mime = glib.g_bookmark_file_get_mime_type(bookmarks, uri.encode(), None)
            apps = ctypes.c_size_t()
            names = glib.g_bookmark_file_get_applications(bookmarks, uri.encode(), ctypes.byref(apps), None)
            result[uri] = [mime.decode() if mime else "", strings(names, apps.value) if names else []]
    print(json.dumps(result))
elif command == "seed":
    uri, app, mime = (a.encode() for a in sys.argv[3:6])
    glib.g_bookmark_file_add_application(bookmarks, uri, app, b"'" + app + b"' %u")
    glib.g_bookmark_file_set_mime_type(bookmarks, uri, mime)
    sys.exit(0 if glib.g_bookmark_file_to_file(bookmarks, path, None) else 1)
