internal import CDBus

extension DBusMessage {
    /// `values` as the body of a signal, marshalled by libdbus into the wire format, demarshalled
    /// again (which validates it as libdbus validates what it receives) and decoded: the way a
    /// value travels to a peer and back. For the package's fuzz targets and tests.
    /// - Throws: ``DBusError`` when the encoder refuses a value or libdbus refuses the message.
    package static func roundTrip(_ values: [DBusValue]) throws -> DBusMessage {
        try decode(wire: wire(values))
    }

    /// `values` as the body of a signal (`/org/bluez/hci0`, `PropertiesChanged`) in the D-Bus wire
    /// format (`dbus_message_marshal`).
    package static func wire(_ values: [DBusValue]) throws -> [UInt8] {
        let message = try LibDBus.check(
            dbus_message_new_signal("/org/bluez/hci0", "org.freedesktop.DBus.Properties", "PropertiesChanged"),
            "dbus_message_new_signal")
        defer { dbus_message_unref(message) }
        try MessageEncoder.append(values, to: message)
        dbus_message_set_serial(message, 1)
        var buffer: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        try LibDBus.check(dbus_message_marshal(message, &buffer, &length), "dbus_message_marshal")
        defer { dbus_free(buffer) }
        guard let buffer, length > 0 else { return [] }
        return buffer.withMemoryRebound(to: UInt8.self, capacity: Int(length)) {
            Array(UnsafeBufferPointer(start: $0, count: Int(length)))
        }
    }

    /// A message in the D-Bus wire format: validated by libdbus (`dbus_message_demarshal`, as on
    /// receipt) and decoded as a received message is.
    /// - Throws: ``DBusError`` with libdbus's reason when the bytes are not a valid message.
    package static func decode(wire bytes: [UInt8]) throws -> DBusMessage {
        try withDemarshalled(bytes) { try DBusMessage(copying: $0) }
    }

    /// The arguments of a message in the wire format decoded both ways: from the wire format
    /// (``WireDecoder``; nil when it leaves the message to the iterator) and by walking it with
    /// libdbus's iterator. For tests and the `dbus-wire` fuzz target that check the two agree;
    /// `strings` is the cache the wire decoding uses (one per connection in the gateway).
    package static func decodeBothWays(
        wire bytes: [UInt8], strings: StringCache = StringCache()
    ) throws -> (wire: [DBusValue]?, iterator: [DBusValue]) {
        try withDemarshalled(bytes) { message in
            (WireDecoder.values(of: message, strings: strings), try MessageDecoder.iteratorValues(of: message))
        }
    }

    private static func withDemarshalled<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> T) throws -> T {
        guard bytes.count <= Int(Int32.max) else { throw DBusError(.invalidArgs, "message of \(bytes.count) bytes") }
        let message = try LibDBus.withError { error in
            bytes.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) {
                    dbus_message_demarshal($0.baseAddress, Int32(buffer.count), error)
                }
            }
        }
        guard let message else { throw DBusError(.invalidArgs, "not a D-Bus message") }
        defer { dbus_message_unref(message) }
        return try body(message)
    }
}
