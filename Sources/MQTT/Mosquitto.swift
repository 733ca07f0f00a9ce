internal import CMosquitto

#if canImport(Glibc)
    import Glibc
#endif

/// Thin typed wrapper over one `struct mosquitto *`. Every call that returns a `MOSQ_ERR_*`
/// code goes through ``check(_:_:)``, the module's single choke point for libmosquitto return codes.
///
/// Not `Sendable`: owned by one ``MosquittoIO`` (of one ``MQTTClient``) and used only on its
/// event loop thread.
final class Mosquitto {
    let raw: OpaquePointer

    /// `mosquitto_lib_init`, run once per process before the first handle is made.
    private static let libraryInitialized: Bool = {
        mosquitto_lib_init()
        return true
    }()

    /// `mosquitto_new`.
    init(clientID: String, cleanSession: Bool) throws(MQTTError) {
        _ = Self.libraryInitialized
        let handle =
            clientID.isEmpty
            ? mosquitto_new(nil, cleanSession, nil)
            : mosquitto_new(clientID, cleanSession, nil)
        guard let handle else {
            throw MQTTError(
                .library(Int32(MOSQ_ERR_NOMEM.rawValue)),
                "mosquitto_new failed for client id \"\(clientID)\": errno \(errno)")
        }
        raw = handle
    }

    /// `mosquitto_destroy`: closes the socket and frees all state, including unacknowledged messages.
    deinit { mosquitto_destroy(raw) }

    /// Throws ``MQTTError`` for any return code other than `MOSQ_ERR_SUCCESS`.
    @inline(__always)
    static func check(_ rc: Int32, _ function: @autoclosure () -> String, detail: @autoclosure () -> String? = nil)
        throws(MQTTError)
    {
        if rc != 0 { throw MQTTError.library(rc, function(), detail: detail()) }
    }

    /// `mosquitto_int_option`.
    func setOption(_ option: mosq_opt_t, _ value: Int32, _ name: String) throws(MQTTError) {
        try Self.check(mosquitto_int_option(raw, option, value), "mosquitto_int_option(\(name), \(value))")
    }

    /// `mosquitto_user_data_set`.
    func setUserData(_ pointer: UnsafeMutableRawPointer?) { mosquitto_user_data_set(raw, pointer) }

    /// `mosquitto_username_pw_set`.
    func setCredentials(_ credentials: MQTTCredentials) throws(MQTTError) {
        try Self.check(
            mosquitto_username_pw_set(raw, credentials.username, credentials.password), "mosquitto_username_pw_set")
    }

    /// `mosquitto_will_set_v5` (properties only with MQTT 5).
    func setWill(_ will: MQTTMessage, version5: Bool) throws(MQTTError) {
        var properties = try version5 ? PropertyList(will.properties) : PropertyList()
        defer { properties.free() }
        guard let length = Int32(exactly: will.payload.count) else {
            throw MQTTError(.invalidArgument, "will payload of \(will.payload.count) bytes is longer than 2147483647")
        }
        let rc = will.payload.withUnsafeBytes { bytes in
            mosquitto_will_set_v5(
                raw, will.topic, length, bytes.baseAddress, Int32(will.qos.rawValue), will.retain, properties.head)
        }
        if rc == 0 { properties.head = nil }  // libmosquitto took ownership
        try Self.check(rc, "mosquitto_will_set_v5(\(will.topic))")
    }

    /// `mosquitto_tls_set`, `mosquitto_tls_opts_set`, `mosquitto_tls_insecure_set` and
    /// `MOSQ_OPT_TLS_USE_OS_CERTS` when no CA is given.
    func setTLS(_ tls: MQTTTLSConfiguration) throws(MQTTError) {
        if tls.caFile == nil && tls.caDirectory == nil {
            try setOption(MOSQ_OPT_TLS_USE_OS_CERTS, 1, "MOSQ_OPT_TLS_USE_OS_CERTS")
        } else {
            let rc = mosquitto_tls_set(raw, tls.caFile, tls.caDirectory, tls.certificateFile, tls.keyFile, nil)
            try Self.check(
                rc, "mosquitto_tls_set",
                detail:
                    "check that the CA, certificate and key files exist and are readable (ca \(tls.caFile ?? tls.caDirectory ?? "-"), cert \(tls.certificateFile ?? "-"), key \(tls.keyFile ?? "-"))"
            )
        }
        let verify: Int32 = tls.insecureSkipVerification ? 0 : 1  // SSL_VERIFY_NONE / SSL_VERIFY_PEER
        try Self.check(mosquitto_tls_opts_set(raw, verify, tls.version?.rawValue, nil), "mosquitto_tls_opts_set")
        if tls.insecureSkipVerification {
            try Self.check(mosquitto_tls_insecure_set(raw, true), "mosquitto_tls_insecure_set")
        }
    }

    /// Stores MQTT 5 CONNECT properties for every later connect without connecting.
    ///
    /// libmosquitto 2.0 has no asynchronous connect that takes properties, but
    /// `mosquitto_connect_bind_v5` copies its properties into the handle *before* validating the
    /// port, and `mosquitto_connect_bind_async`/`mosquitto_reconnect_async` send the stored ones.
    /// Calling it with port -1 therefore stores them and returns `MOSQ_ERR_INVAL` without
    /// touching the network. The session-expiry test checks this still works.
    func storeConnectProperties(_ properties: inout PropertyList) throws(MQTTError) {
        let rc = mosquitto_connect_bind_v5(raw, "localhost", -1, 60, nil, properties.head)
        guard rc == Int32(MOSQ_ERR_INVAL.rawValue) else {
            try Self.check(
                rc == 0 ? Int32(MOSQ_ERR_UNKNOWN.rawValue) : rc,
                "mosquitto_connect_bind_v5 (storing CONNECT properties)")
            return
        }
    }

    /// `mosquitto_connect_bind_async`: starts a non-blocking TCP connect and queues CONNECT.
    /// Name resolution (`getaddrinfo`) still blocks; use an IP address or a local name.
    func connectAsync(host: String, port: Int, keepAlive: Int, bindAddress: String?) throws(MQTTError) {
        try Self.check(
            mosquitto_connect_bind_async(raw, host, Int32(port), Int32(keepAlive), bindAddress),
            "connect to \(host):\(port) (mosquitto_connect_bind_async)",
            detail: "is a broker listening there?")
    }

    /// `mosquitto_socket`: the connection's file descriptor, or -1.
    var socket: Int32 { mosquitto_socket(raw) }

    /// `TCP_CORK` on the connection's socket (setsockopt): while set, what is written waits in
    /// the kernel and goes out in full segments when it is cleared. False when there is no
    /// socket or the option cannot be set.
    @discardableResult
    func cork(_ on: Bool) -> Bool {
        let fd = socket
        guard fd >= 0 else { return false }
        var value: Int32 = on ? 1 : 0
        return setsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size)) == 0
    }
    /// `mosquitto_want_write`: libmosquitto has bytes queued for the socket.
    var wantsWrite: Bool { mosquitto_want_write(raw) }
    /// `mosquitto_loop_read`: reads and handles available packets (callbacks run inside).
    func loopRead() -> Int32 { mosquitto_loop_read(raw, 1) }
    /// `mosquitto_loop_write`: writes queued packets as far as the socket accepts.
    func loopWrite() -> Int32 { mosquitto_loop_write(raw, 1) }
    /// `mosquitto_loop_misc`: keepalive pings and the keepalive timeout.
    func loopMisc() -> Int32 { mosquitto_loop_misc(raw) }

    /// `mosquitto_publish_v5`. Returns the message id and the return code; libmosquitto assigns
    /// the id (non-zero) only after validating the message, and for QoS 1/2 queues the message
    /// before writing it, so a non-zero code with a non-zero id means "queued, not yet written".
    func publish(_ message: MQTTMessage, properties: OpaquePointer?) -> (mid: Int32, rc: Int32) {
        var mid: Int32 = 0
        guard let length = Int32(exactly: message.payload.count) else {
            return (0, Int32(MOSQ_ERR_PAYLOAD_SIZE.rawValue))
        }
        // withCString hands over a native string's own storage; passing the String as the
        // argument would copy it into a new C array per publish.
        let rc = message.topic.withCString { topic in
            message.payload.withUnsafeBytes { bytes in
                mosquitto_publish_v5(
                    raw, &mid, topic, length, bytes.baseAddress, Int32(message.qos.rawValue), message.retain, properties
                )
            }
        }
        return (mid, rc)
    }

    /// `mosquitto_subscribe_v5`; returns the message id of the SUBSCRIBE. `retainAsPublished`
    /// sets `MQTT_SUB_OPT_RETAIN_AS_PUBLISHED` (MQTT 5 only: in 3.1.1 those bits are reserved).
    func subscribe(_ filter: String, qos: MQTTQoS, retainAsPublished: Bool = false) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        let options = retainAsPublished ? Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue) : 0
        try Self.check(
            mosquitto_subscribe_v5(raw, &mid, filter, Int32(qos.rawValue), options, nil),
            "mosquitto_subscribe_v5(\(filter))")
        return mid
    }

    /// `mosquitto_unsubscribe_v5`; returns the message id of the UNSUBSCRIBE.
    func unsubscribe(_ filter: String) throws(MQTTError) -> Int32 {
        var mid: Int32 = 0
        try Self.check(mosquitto_unsubscribe_v5(raw, &mid, filter, nil), "mosquitto_unsubscribe_v5(\(filter))")
        return mid
    }

    /// `mosquitto_disconnect_v5` with reason 0 (normal disconnection).
    func disconnect() -> Int32 { mosquitto_disconnect_v5(raw, 0, nil) }
}

/// An owned `mosquitto_property` list (`mosquitto_property_add_*` / `mosquitto_property_free_all`).
struct PropertyList {
    var head: OpaquePointer?

    init() {}

    /// Builds the PUBLISH/will properties of `properties`.
    init(_ properties: MQTTProperties) throws(MQTTError) {
        guard !properties.isEmpty else { return }
        do throws(MQTTError) {
            for pair in properties.userProperties {
                try Mosquitto.check(
                    mosquitto_property_add_string_pair(
                        &head, Int32(MQTT_PROP_USER_PROPERTY.rawValue), pair.name, pair.value),
                    "mosquitto_property_add_string_pair(user property \(pair.name))")
            }
            if let topic = properties.responseTopic {
                try add(MQTT_PROP_RESPONSE_TOPIC, string: topic, "response topic")
            }
            if let data = properties.correlationData {
                guard data.count <= Int(UInt16.max) else {
                    throw MQTTError(.invalidArgument, "correlation data of \(data.count) bytes is longer than 65535")
                }
                let rc = data.withUnsafeBytes {
                    mosquitto_property_add_binary(
                        &head, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), $0.baseAddress, UInt16($0.count))
                }
                try Mosquitto.check(rc, "mosquitto_property_add_binary(correlation data)")
            }
            if let expiry = properties.messageExpiryInterval {
                try add(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, int32: expiry, "message expiry interval")
            }
            if let type = properties.contentType {
                try add(MQTT_PROP_CONTENT_TYPE, string: type, "content type")
            }
            if let utf8 = properties.payloadIsUTF8 {
                try Mosquitto.check(
                    mosquitto_property_add_byte(
                        &head, Int32(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR.rawValue), utf8 ? 1 : 0),
                    "mosquitto_property_add_byte(payload format indicator)")
            }
        } catch {
            free()
            throw error
        }
    }

    /// CONNECT properties: the session expiry interval and the maximum packet size, each when set.
    init(sessionExpiry: UInt32?, maximumPacketSize: UInt32?) throws(MQTTError) {
        do throws(MQTTError) {
            if let sessionExpiry {
                try add(MQTT_PROP_SESSION_EXPIRY_INTERVAL, int32: sessionExpiry, "session expiry interval")
            }
            if let maximumPacketSize {
                try add(MQTT_PROP_MAXIMUM_PACKET_SIZE, int32: maximumPacketSize, "maximum packet size")
            }
        } catch {
            free()
            throw error
        }
    }

    /// Adds a string property; `what` names it in the error.
    private mutating func add(_ property: mqtt5_property, string value: String, _ what: String) throws(MQTTError) {
        try Mosquitto.check(
            mosquitto_property_add_string(&head, Int32(property.rawValue), value),
            "mosquitto_property_add_string(\(what))")
    }

    /// Adds a four-byte integer property; `what` names it in the error.
    private mutating func add(_ property: mqtt5_property, int32 value: UInt32, _ what: String) throws(MQTTError) {
        try Mosquitto.check(
            mosquitto_property_add_int32(&head, Int32(property.rawValue), value),
            "mosquitto_property_add_int32(\(what))")
    }

    mutating func free() { mosquitto_property_free_all(&head) }

    /// Copies the PUBLISH properties gattway understands out of a received list.
    static func read(_ list: OpaquePointer?) -> MQTTProperties {
        var result = MQTTProperties()
        var cursor = list
        while let property = cursor {
            let identifier = mosquitto_property_identifier(property)
            switch identifier {
            case Int32(MQTT_PROP_USER_PROPERTY.rawValue):
                var name: UnsafeMutablePointer<CChar>?
                var value: UnsafeMutablePointer<CChar>?
                if mosquitto_property_read_string_pair(property, identifier, &name, &value, false) != nil, let name,
                    let value
                {
                    result.userProperties.append(MQTTUserProperty(String(cString: name), String(cString: value)))
                }
                Glibc.free(name)
                Glibc.free(value)
            case Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), Int32(MQTT_PROP_CONTENT_TYPE.rawValue):
                var value: UnsafeMutablePointer<CChar>?
                if mosquitto_property_read_string(property, identifier, &value, false) != nil, let value {
                    if identifier == Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue) {
                        result.responseTopic = String(cString: value)
                    } else {
                        result.contentType = String(cString: value)
                    }
                }
                Glibc.free(value)
            case Int32(MQTT_PROP_CORRELATION_DATA.rawValue):
                var value: UnsafeMutableRawPointer?
                var length: UInt16 = 0
                if mosquitto_property_read_binary(property, identifier, &value, &length, false) != nil {
                    result.correlationData =
                        value.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
                }
                Glibc.free(value)
            case Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue):
                var value: UInt32 = 0
                if mosquitto_property_read_int32(property, identifier, &value, false) != nil {
                    result.messageExpiryInterval = value
                }
            case Int32(MQTT_PROP_PAYLOAD_FORMAT_INDICATOR.rawValue):
                var value: UInt8 = 0
                if mosquitto_property_read_byte(property, identifier, &value, false) != nil {
                    result.payloadIsUTF8 = value == 1
                }
            default:
                break
            }
            cursor = mosquitto_property_next(property)
        }
        return result
    }

    /// The Receive Maximum of a CONNACK, if the broker sent one.
    static func receiveMaximum(_ list: OpaquePointer?) -> Int? {
        var value: UInt16 = 0
        guard let list,
            mosquitto_property_read_int16(list, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), &value, false) != nil
        else {
            return nil
        }
        return Int(value)
    }
}
