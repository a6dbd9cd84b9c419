#ifndef CGIO_SHIM_H
#define CGIO_SHIM_H
#include <gio/gio.h>
#include <glib-unix.h>

/// g_variant_new("(s)", s): a one-string tuple (Swift cannot call the variadic constructor).
static inline GVariant *cgio_tuple_string(const char *s) {
    GVariant *child = g_variant_new_string(s);
    return g_variant_new_tuple(&child, 1);
}
#endif
