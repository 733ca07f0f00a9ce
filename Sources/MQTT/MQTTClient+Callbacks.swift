internal import CMosquitto

/// libmosquitto's C callbacks. They run on the loop thread inside `mosquitto_loop_read`/`_write`
/// /`_misc`/`_publish` calls made by the actor, copy what they need out of libmosquitto's
/// buffers, and enter the actor with `assumeLoopIsolated` (EventLoop/LoopIsolated.swift); none blocks.
extension MQTTClient {
    static func installCallbacks(_ handle: Mosquitto) {
        mosquitto_connect_v5_callback_set(handle.raw) { _, userdata, reason, flags, properties in
            let receiveMaximum = PropertyList.receiveMaximum(properties)
            MQTTClient.client(userdata)?.assumeLoopIsolated {
                $0.connected(reason: reason, flags: flags, receiveMaximum: receiveMaximum)
            }
        }
        mosquitto_disconnect_v5_callback_set(handle.raw) { _, userdata, reason, _ in
            MQTTClient.client(userdata)?.assumeLoopIsolated { $0.disconnected(reason: reason) }
        }
        mosquitto_publish_v5_callback_set(handle.raw) { _, userdata, mid, reason, _ in
            MQTTClient.client(userdata)?.assumeLoopIsolated { $0.published(mid: mid, reason: reason) }
        }
        mosquitto_message_v5_callback_set(handle.raw) { _, userdata, message, properties in
            guard let message, let topic = message.pointee.topic else { return }
            let length = Int(max(0, message.pointee.payloadlen))
            let payload = message.pointee.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
            let copy = MQTTMessage(
                topic: String(cString: topic), payload: payload,
                qos: MQTTQoS(rawValue: Int(message.pointee.qos)) ?? .atMostOnce, retain: message.pointee.retain,
                properties: PropertyList.read(properties))
            MQTTClient.client(userdata)?.assumeLoopIsolated { $0.received(copy) }
        }
        mosquitto_subscribe_v5_callback_set(handle.raw) { _, userdata, mid, count, granted, _ in
            let codes = granted.map { Array(UnsafeBufferPointer(start: $0, count: Int(max(0, count)))) } ?? []
            MQTTClient.client(userdata)?.assumeLoopIsolated { $0.subscribed(mid: mid, granted: codes) }
        }
        mosquitto_unsubscribe_v5_callback_set(handle.raw) { _, userdata, mid, _ in
            MQTTClient.client(userdata)?.assumeLoopIsolated { $0.unsubscribed(mid: mid) }
        }
        setLogging(handle, true)
    }

    /// libmosquitto's log callback, for the error detail (TLS) of a failed connection attempt:
    /// on while connecting, off once connected. libmosquitto formats every log line — one per
    /// packet sent — before it calls the callback, whatever the level, so leaving it on would
    /// cost a `malloc` and a `vsnprintf` per publish.
    static func setLogging(_ handle: Mosquitto, _ on: Bool) {
        guard on else {
            mosquitto_log_callback_set(handle.raw, nil)
            return
        }
        mosquitto_log_callback_set(handle.raw) { _, userdata, level, text in
            guard level & Int32(MOSQ_LOG_ERR) != 0, let text else { return }
            let copy = String(cString: text)
            MQTTClient.client(userdata)?.assumeLoopIsolated { $0.logged(level: level, copy) }
        }
    }

    /// The client registered as libmosquitto user data. The pointer is unretained: the handle is
    /// destroyed in `tearDown()`/deinit before the client goes away, and callbacks only run
    /// inside calls the client makes.
    private static func client(_ userdata: UnsafeMutableRawPointer?) -> MQTTClient? {
        guard let userdata else { return nil }
        return Unmanaged<MQTTClient>.fromOpaque(userdata).takeUnretainedValue()
    }
}
