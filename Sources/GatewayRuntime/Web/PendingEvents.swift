import Gateway

#if canImport(Glibc)
    import Glibc
#endif

/// The event stream's gathered messages (``WebSite``): the latest message of each device topic
/// — `<base>/<device>` and `<base>/<device>/availability`, what becomes an event — in the order
/// the topics first came, until the next flush. The core hands over every message it publishes,
/// a thousand a second at full rate, so a message is kept without a `Dictionary` keyed by
/// `String` (its hash is SipHash over the topic, its comparison a `String` one): the topic's
/// bytes are hashed with FNV-1a in their own storage, looked up in an open-addressing table of
/// indices into ``messages``, and compared with one `memcmp`. Holds at most one message per
/// device topic (bounded by `max_devices`, as the core's devices are). Loop-confined.
struct PendingEvents {
    /// The kept messages, each the latest of its topic, in the order their topics first came.
    private(set) var messages: [MQTTOutboundMessage] = []
    /// Each message's topic hash (the table's key, kept for growing it).
    private var hashes: [UInt64] = []
    /// Indices into ``messages`` (-1: empty), linear probing; at most half full.
    private var table = [Int32](repeating: -1, count: 64)

    let base: [UInt8]
    let bridge: [UInt8]

    private static let availabilitySuffix = Array("/availability".utf8)

    /// `base` and `bridge`: the bytes of `<base>/` and `<base>/bridge`.
    init(base: [UInt8], bridge: [UInt8]) {
        self.base = base
        self.bridge = bridge
    }

    var isEmpty: Bool { messages.isEmpty }

    /// Keeps `message` when its topic is a device's state or availability (anything else —
    /// bridge topics, attribute topics, responses — is no event): it replaces the last one of
    /// its topic, or joins the end. Returns whether it was kept.
    @discardableResult
    mutating func keep(_ message: MQTTOutboundMessage) -> Bool {
        var topic = message.topic
        return topic.withUTF8 { bytes in
            guard Self.isEventTopic(bytes, base: base, bridge: bridge) else { return false }
            let hash = Self.hash(bytes)
            let mask = table.count - 1
            var slot = Int(truncatingIfNeeded: hash) & mask
            while true {
                let index = Int(table[slot])
                if index < 0 { break }
                if hashes[index] == hash, Self.same(messages[index].topic, bytes) {
                    messages[index] = message
                    return true
                }
                slot = (slot + 1) & mask
            }
            table[slot] = Int32(truncatingIfNeeded: messages.count)
            messages.append(message)
            hashes.append(hash)
            if messages.count * 2 > table.count { grow() }
            return true
        }
    }

    /// Empties it for the next interval (the storage kept).
    mutating func removeAll() {
        guard !messages.isEmpty else { return }
        messages.removeAll(keepingCapacity: true)
        hashes.removeAll(keepingCapacity: true)
        table.withUnsafeMutableBufferPointer { $0.update(repeating: -1) }
    }

    private mutating func grow() {
        var table = [Int32](repeating: -1, count: self.table.count * 2)
        let mask = table.count - 1
        for (index, hash) in hashes.enumerated() {
            var slot = Int(truncatingIfNeeded: hash) & mask
            while table[slot] >= 0 { slot = (slot + 1) & mask }
            table[slot] = Int32(truncatingIfNeeded: index)
        }
        self.table = table
    }

    /// Whether a topic's bytes are `<base>/<device>` or `<base>/<device>/availability`, the
    /// device a non-empty level other than under `<base>/bridge` (what ``WebSite/writeEvent(_:base:bridge:into:)``
    /// makes an event of).
    static func isEventTopic(_ bytes: UnsafeBufferPointer<UInt8>, base: [UInt8], bridge: [UInt8]) -> Bool {
        guard bytes.count > base.count, memcmp(bytes.baseAddress!, base, base.count) == 0 else { return false }
        if bytes.count >= bridge.count, memcmp(bytes.baseAddress!, bridge, bridge.count) == 0 { return false }
        let rest = UnsafeBufferPointer(rebasing: bytes[base.count...])
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")) else { return true }
        let suffix = availabilitySuffix
        return slash > 0 && rest.count - slash == suffix.count
            && memcmp(rest.baseAddress! + slash, suffix, suffix.count) == 0
    }

    /// FNV-1a, 64 bits, of a topic's bytes.
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }

    private static func same(_ topic: String, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var topic = topic
        return topic.withUTF8 { kept in
            kept.count == bytes.count && memcmp(kept.baseAddress!, bytes.baseAddress!, bytes.count) == 0
        }
    }
}
