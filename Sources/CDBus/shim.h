#ifndef GATTWAY_CDBUS_SHIM_H
#define GATTWAY_CDBUS_SHIM_H
// libdbus, imported whole. The DBus target adds what Swift cannot import from its macros
// (DBUS_TYPE_* are character-literal casts, so the importer drops them) as static inline
// functions below. Nothing else lives here: all logic is in Swift.
#include <dbus/dbus.h>

static inline int gattway_dbus_type_invalid(void) { return DBUS_TYPE_INVALID; }
static inline int gattway_dbus_type_byte(void) { return DBUS_TYPE_BYTE; }
static inline int gattway_dbus_type_boolean(void) { return DBUS_TYPE_BOOLEAN; }
static inline int gattway_dbus_type_int16(void) { return DBUS_TYPE_INT16; }
static inline int gattway_dbus_type_uint16(void) { return DBUS_TYPE_UINT16; }
static inline int gattway_dbus_type_int32(void) { return DBUS_TYPE_INT32; }
static inline int gattway_dbus_type_uint32(void) { return DBUS_TYPE_UINT32; }
static inline int gattway_dbus_type_int64(void) { return DBUS_TYPE_INT64; }
static inline int gattway_dbus_type_uint64(void) { return DBUS_TYPE_UINT64; }
static inline int gattway_dbus_type_double(void) { return DBUS_TYPE_DOUBLE; }
static inline int gattway_dbus_type_string(void) { return DBUS_TYPE_STRING; }
static inline int gattway_dbus_type_object_path(void) { return DBUS_TYPE_OBJECT_PATH; }
static inline int gattway_dbus_type_signature(void) { return DBUS_TYPE_SIGNATURE; }
static inline int gattway_dbus_type_unix_fd(void) { return DBUS_TYPE_UNIX_FD; }
static inline int gattway_dbus_type_array(void) { return DBUS_TYPE_ARRAY; }
static inline int gattway_dbus_type_variant(void) { return DBUS_TYPE_VARIANT; }
static inline int gattway_dbus_type_struct(void) { return DBUS_TYPE_STRUCT; }
static inline int gattway_dbus_type_dict_entry(void) { return DBUS_TYPE_DICT_ENTRY; }

#endif
