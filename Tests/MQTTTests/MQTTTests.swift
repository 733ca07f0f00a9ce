// The MQTT integration tests live beside this file.
