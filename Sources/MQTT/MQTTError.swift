internal import CMosquitto

#if canImport(Glibc)
    import Glibc
#endif

/// Every failure of the `MQTT` module: a libmosquitto error, a broker's refusal, a TLS failure,
/// invalid configuration or input, or an operation cut short by the client's state.
///
/// ``description`` says what failed, why, and where possible what to do, e.g.
/// `connect to 127.0.0.1:1883 refused by the broker: Not authorized (reason 0x87); check the username and password`.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is; match on it, show ``description`` to people.
    public enum Kind: Sendable, Hashable {
        /// A libmosquitto call returned `MOSQ_ERR_*` (the raw value); see `mosquitto_strerror`.
        case library(Int32)
        /// The broker answered with a failing reason code (CONNACK, PUBACK/PUBREC, SUBACK,
        /// UNSUBACK or DISCONNECT).
        case refused(MQTTReasonCode)
        /// TLS could not be set up or the handshake failed (certificate not trusted, wrong host
        /// name, unreadable key…). The description carries OpenSSL's reason when libmosquitto logged one.
        case tls
        /// The configuration cannot work (bad URL, keepalive out of range, options that need MQTT 5…).
        case invalidConfiguration
        /// An argument was rejected before anything was sent (bad topic or topic filter).
        case invalidArgument
        /// The operation needs a connection and there is none (QoS 0 publish while disconnected).
        case notConnected
        /// The connection was lost before the operation completed (QoS 0 publish not yet written).
        case connectionLost
        /// The client was disconnected by ``MQTTClient/disconnect()`` before the operation completed.
        case closed
        /// A QoS 1/2 publish found ``MQTTConfiguration/maxQueued`` messages already waiting in the
        /// client (beyond the in-flight window or for a connection); it was not queued.
        case queueFull
    }

    public let kind: Kind
    /// Human-readable: what failed, why, and what to do.
    public let message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }

    /// The libmosquitto return code when ``kind`` is ``Kind/library(_:)``.
    public var libraryCode: Int32? {
        if case .library(let code) = kind { return code }
        return nil
    }

    /// The broker's reason code when ``kind`` is ``Kind/refused(_:)``.
    public var reasonCode: MQTTReasonCode? {
        if case .refused(let code) = kind { return code }
        return nil
    }
}

extension MQTTError {
    /// An error for libmosquitto return code `code` from `function`, with `mosquitto_strerror`'s
    /// text (and `errno`'s for `MOSQ_ERR_ERRNO`). TLS codes become ``Kind/tls``.
    static func library(_ code: Int32, _ function: String, detail: String? = nil) -> MQTTError {
        var text = String(cString: mosquitto_strerror(code))
        if code == Int32(MOSQ_ERR_ERRNO.rawValue) {
            let number = errno
            text = String(cString: strerror(number)) + " (errno \(number))"
        }
        let name = Self.codeName(code)
        var message = "\(function) failed: \(text) (\(name))"
        if let detail, !detail.isEmpty { message += ": \(detail)" }
        if code == Int32(MOSQ_ERR_TLS.rawValue) || code == Int32(MOSQ_ERR_TLS_HANDSHAKE.rawValue) {
            return MQTTError(.tls, message)
        }
        return MQTTError(.library(code), message)
    }

    private static func codeName(_ code: Int32) -> String {
        switch code {
        case Int32(MOSQ_ERR_NOMEM.rawValue): "MOSQ_ERR_NOMEM"
        case Int32(MOSQ_ERR_PROTOCOL.rawValue): "MOSQ_ERR_PROTOCOL"
        case Int32(MOSQ_ERR_INVAL.rawValue): "MOSQ_ERR_INVAL"
        case Int32(MOSQ_ERR_NO_CONN.rawValue): "MOSQ_ERR_NO_CONN"
        case Int32(MOSQ_ERR_CONN_REFUSED.rawValue): "MOSQ_ERR_CONN_REFUSED"
        case Int32(MOSQ_ERR_NOT_FOUND.rawValue): "MOSQ_ERR_NOT_FOUND"
        case Int32(MOSQ_ERR_CONN_LOST.rawValue): "MOSQ_ERR_CONN_LOST"
        case Int32(MOSQ_ERR_TLS.rawValue): "MOSQ_ERR_TLS"
        case Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue): "MOSQ_ERR_PAYLOAD_SIZE"
        case Int32(MOSQ_ERR_NOT_SUPPORTED.rawValue): "MOSQ_ERR_NOT_SUPPORTED"
        case Int32(MOSQ_ERR_ERRNO.rawValue): "MOSQ_ERR_ERRNO"
        case Int32(MOSQ_ERR_EAI.rawValue): "MOSQ_ERR_EAI"
        case Int32(MOSQ_ERR_MALFORMED_UTF8.rawValue): "MOSQ_ERR_MALFORMED_UTF8"
        case Int32(MOSQ_ERR_KEEPALIVE.rawValue): "MOSQ_ERR_KEEPALIVE"
        case Int32(MOSQ_ERR_LOOKUP.rawValue): "MOSQ_ERR_LOOKUP"
        case Int32(MOSQ_ERR_TLS_HANDSHAKE.rawValue): "MOSQ_ERR_TLS_HANDSHAKE"
        case Int32(MOSQ_ERR_OVERSIZE_PACKET.rawValue): "MOSQ_ERR_OVERSIZE_PACKET"
        default: "MOSQ_ERR \(code)"
        }
    }

    static func refused(_ reason: MQTTReasonCode, _ operation: String) -> MQTTError {
        var message = "\(operation) refused by the broker: \(reason) (reason 0x\(String(reason.rawValue, radix: 16)))"
        switch reason {
        case .notAuthorized, .badUsernameOrPassword:
            message += "; check the username and password, and the broker's ACL"
        case .clientIdentifierNotValid:
            message += "; choose another client id"
        case .unsupportedProtocolVersion:
            message += "; try the other protocol version (3.1.1 or 5)"
        default: break
        }
        return MQTTError(.refused(reason), message)
    }
}
