#ifndef GATTWAY_CDBUS_SHIM_H
#define GATTWAY_CDBUS_SHIM_H
// libdbus, imported whole. The DBus target adds what Swift cannot import from its macros
// (DBUS_TYPE_* are character-literal casts) as static inline functions below.
#include <dbus/dbus.h>
#endif
