#ifndef CDBUS_SHIM_H
#define CDBUS_SHIM_H

/*
 * libdbus-1 for Swift. Swift imports <dbus/dbus.h> directly; the helpers below exist only where it
 * cannot: the DBUS_TYPE_* character macros (Swift sees them as plain ints or not at all),
 * DBUS_ERROR_INIT, and the variadic calls. Everything here is prefixed cdbus_ / CDBUS_.
 */
#include <dbus/dbus.h>
#include <stdlib.h>
#include <string.h>

static const int CDBUS_TYPE_INVALID = DBUS_TYPE_INVALID;
static const int CDBUS_TYPE_BYTE = DBUS_TYPE_BYTE;
static const int CDBUS_TYPE_BOOLEAN = DBUS_TYPE_BOOLEAN;
static const int CDBUS_TYPE_INT16 = DBUS_TYPE_INT16;
static const int CDBUS_TYPE_UINT16 = DBUS_TYPE_UINT16;
static const int CDBUS_TYPE_INT32 = DBUS_TYPE_INT32;
static const int CDBUS_TYPE_UINT32 = DBUS_TYPE_UINT32;
static const int CDBUS_TYPE_INT64 = DBUS_TYPE_INT64;
static const int CDBUS_TYPE_UINT64 = DBUS_TYPE_UINT64;
static const int CDBUS_TYPE_DOUBLE = DBUS_TYPE_DOUBLE;
static const int CDBUS_TYPE_STRING = DBUS_TYPE_STRING;
static const int CDBUS_TYPE_OBJECT_PATH = DBUS_TYPE_OBJECT_PATH;
static const int CDBUS_TYPE_SIGNATURE = DBUS_TYPE_SIGNATURE;
static const int CDBUS_TYPE_UNIX_FD = DBUS_TYPE_UNIX_FD;
static const int CDBUS_TYPE_ARRAY = DBUS_TYPE_ARRAY;
static const int CDBUS_TYPE_VARIANT = DBUS_TYPE_VARIANT;
static const int CDBUS_TYPE_STRUCT = DBUS_TYPE_STRUCT;
static const int CDBUS_TYPE_DICT_ENTRY = DBUS_TYPE_DICT_ENTRY;

static const int CDBUS_MESSAGE_TYPE_METHOD_CALL = DBUS_MESSAGE_TYPE_METHOD_CALL;
static const int CDBUS_MESSAGE_TYPE_METHOD_RETURN = DBUS_MESSAGE_TYPE_METHOD_RETURN;
static const int CDBUS_MESSAGE_TYPE_ERROR = DBUS_MESSAGE_TYPE_ERROR;
static const int CDBUS_MESSAGE_TYPE_SIGNAL = DBUS_MESSAGE_TYPE_SIGNAL;

static const int CDBUS_TIMEOUT_INFINITE = DBUS_TIMEOUT_INFINITE;
static const int CDBUS_TIMEOUT_USE_DEFAULT = DBUS_TIMEOUT_USE_DEFAULT;

static const unsigned int CDBUS_WATCH_READABLE = DBUS_WATCH_READABLE;
static const unsigned int CDBUS_WATCH_WRITABLE = DBUS_WATCH_WRITABLE;
static const unsigned int CDBUS_WATCH_ERROR = DBUS_WATCH_ERROR;
static const unsigned int CDBUS_WATCH_HANGUP = DBUS_WATCH_HANGUP;

/* A heap-allocated, initialised DBusError (DBUS_ERROR_INIT is a macro Swift cannot use). */
static inline DBusError *cdbus_error_new(void) {
    DBusError *error = (DBusError *)malloc(sizeof(DBusError));
    if (error != NULL) {
        dbus_error_init(error);
    }
    return error;
}

static inline void cdbus_error_free(DBusError *error) {
    if (error != NULL) {
        dbus_error_free(error);
        free(error);
    }
}

static inline const char *cdbus_error_name(const DBusError *error) { return error->name; }
static inline const char *cdbus_error_message(const DBusError *error) { return error->message; }

/* dbus_message_get_args and friends are variadic; these are the one-argument cases we need. */
static inline dbus_bool_t cdbus_message_append_string(DBusMessage *message, const char *value) {
    return dbus_message_append_args(message, DBUS_TYPE_STRING, &value, DBUS_TYPE_INVALID);
}

#endif
