#ifndef GATTWAY_CMOSQUITTO_SHIM_H
#define GATTWAY_CMOSQUITTO_SHIM_H
// libmosquitto with its MQTT 5 property and reason-code constants.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
