import Bluetooth
import JSON

extension JSONReader {
    /// A duration string ("500ms", "30s", "5m") greater than zero.
    func positiveDuration() throws -> Double {
        let seconds = try duration()
        guard seconds > 0 else { throw fail("expected a duration greater than zero, e.g. \"30s\"") }
        return seconds
    }

    /// A Bluetooth UUID ("180F", "0000180f-0000-1000-8000-00805f9b34fb").
    func uuid() throws -> BluetoothUUID {
        let text = try string()
        guard let uuid = BluetoothUUID(text) else {
            throw fail(
                "\"\(text)\" is not a Bluetooth UUID (expected 4 or 8 hex digits such as \"180F\", or a 128-bit UUID)")
        }
        return uuid
    }

    /// A non-empty string.
    func nonEmptyString() throws -> String {
        let text = try string()
        guard !text.isEmpty else { throw fail("expected a non-empty string") }
        return text
    }

    /// Topic levels that other topics are built below (a base topic, a discovery prefix): no
    /// wildcards, no leading or trailing "/". `what` names it in the error, `example` is appended.
    func topicPrefix(_ what: String, example: String = "") throws -> String {
        let text = try nonEmptyString()
        guard !text.contains("+"), !text.contains("#"), !text.hasPrefix("/"), !text.hasSuffix("/") else {
            throw fail(
                "\"\(text)\" is not \(what) (expected topic levels without wildcards or leading/trailing \"/\"\(example))"
            )
        }
        return text
    }

    /// A value encoding by name ("u8", "s16le", "hex", …).
    func encoding() throws -> ValueEncoding {
        let text = try string()
        guard let encoding = ValueEncoding(rawValue: text) else {
            throw fail("\"\(text)\" is not an encoding (expected one of \(ValueEncoding.names))")
        }
        return encoding
    }

    /// An MQTT topic name to publish to or subscribe to exactly (no wildcards).
    func topicName() throws -> String {
        let text = try nonEmptyString()
        guard !text.contains("+"), !text.contains("#") else { throw fail("\"\(text)\" is not a topic (no wildcards)") }
        return text
    }

    /// An adapter name such as `hci0`.
    func adapterName() throws -> String {
        let text = try string()
        guard text.hasPrefix("hci"), let number = Int(text.dropFirst(3)), number >= 0 else {
            throw fail("\"\(text)\" is not an adapter name (expected hci0, hci1, …)")
        }
        return text
    }

    /// An MQTT QoS level.
    func qos() throws -> Int { try integer(in: 0...2) }
}
