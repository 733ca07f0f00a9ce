internal import CMosquitto

/// An MQTT 5 reason code (MQTT 5 §2.4), as carried by CONNACK, PUBACK, PUBCOMP, SUBACK, UNSUBACK
/// and DISCONNECT. An open set: any byte is representable; the common ones have names.
///
/// MQTT 3.1.1 CONNACK return codes (1…5) are translated to their MQTT 5 equivalents by
/// ``init(connackV311:)`` so callers test one vocabulary whatever the protocol version.
public struct MQTTReasonCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Maps an MQTT 3.1.1 CONNACK return code to the MQTT 5 reason code with the same meaning.
    public init(connackV311 code: Int) {
        switch code {
        case 0: self = .success
        case 1: self = .unsupportedProtocolVersion
        case 2: self = .clientIdentifierNotValid
        case 3: self = .serverUnavailable
        case 4: self = .badUsernameOrPassword
        case 5: self = .notAuthorized
        default: self = .unspecifiedError
        }
    }

    /// True for codes below 0x80, which MQTT 5 defines as success.
    public var isSuccess: Bool { rawValue < 0x80 }

    /// The text of `mosquitto_reason_string`, e.g. "Not authorized".
    public var description: String {
        String(cString: mosquitto_reason_string(Int32(rawValue)))
    }

    public static let success = MQTTReasonCode(rawValue: 0)
    public static let noMatchingSubscribers = MQTTReasonCode(rawValue: 0x10)
    public static let unspecifiedError = MQTTReasonCode(rawValue: 0x80)
    public static let protocolError = MQTTReasonCode(rawValue: 0x82)
    public static let unsupportedProtocolVersion = MQTTReasonCode(rawValue: 0x84)
    public static let clientIdentifierNotValid = MQTTReasonCode(rawValue: 0x85)
    public static let badUsernameOrPassword = MQTTReasonCode(rawValue: 0x86)
    public static let notAuthorized = MQTTReasonCode(rawValue: 0x87)
    public static let serverUnavailable = MQTTReasonCode(rawValue: 0x88)
    public static let serverBusy = MQTTReasonCode(rawValue: 0x89)
    public static let banned = MQTTReasonCode(rawValue: 0x8A)
    public static let serverShuttingDown = MQTTReasonCode(rawValue: 0x8B)
    public static let topicFilterInvalid = MQTTReasonCode(rawValue: 0x8F)
    public static let topicNameInvalid = MQTTReasonCode(rawValue: 0x90)
    public static let quotaExceeded = MQTTReasonCode(rawValue: 0x97)
}
