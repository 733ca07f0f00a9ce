/// The delivery guarantee of an MQTT publish or subscription (MQTT 3.1.1 §4.3, MQTT 5 §4.3).
///
/// The raw value is the wire value, the `qos` argument of `mosquitto_publish`/`mosquitto_subscribe`.
public enum MQTTQoS: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    /// At most once: sent once, never acknowledged. A publish completes when libmosquitto has
    /// written it to the socket; it is lost if the connection drops before the broker reads it.
    case atMostOnce = 0
    /// At least once: resent until the broker answers PUBACK, so it may arrive more than once.
    /// A publish completes on PUBACK; if the connection drops first it is resent after reconnect.
    case atLeastOnce = 1
    /// Exactly once: the four-packet PUBLISH/PUBREC/PUBREL/PUBCOMP exchange.
    /// A publish completes on PUBCOMP.
    case exactlyOnce = 2

    public static func < (lhs: MQTTQoS, rhs: MQTTQoS) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String { "QoS \(rawValue)" }
}
