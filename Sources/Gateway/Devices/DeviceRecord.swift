import Bluetooth

/// Who a device is and when it was last heard of: what the registry keeps for every device that
/// matched a rule. The state, links, commands and discovery of a device are kept by their own
/// features, by ``DeviceID``.
///
/// Optionals of 8-byte values are stored with a sentinel rather than as `Optional` (which takes
/// 16 bytes): with `max_devices` rotating sensors the records are most of the registry's memory.
struct DeviceRecord: Sendable {
    let address: BluetoothAddress
    /// The topic level: friendly name, else the address without colons.
    let name: String
    /// `<base>/<name>`, kept (one string per device) rather than made for every state message.
    let stateTopic: String
    /// The advertised service UUIDs, usually a list shared with other devices (``ServiceLists``).
    var services = ServiceList.empty
    var localName: String?
    /// Monotonic time of the last advertisement or GATT value (registration time before that):
    /// advertisement-only devices silent for `bluetooth.forget_after` are forgotten.
    var lastActivity: Double = 0
    private var lastSeenMilliseconds = Int64.min
    private let rule: UInt32
    private var signal = Int16.min

    var ruleIndex: Int { Int(rule) }
    var rssi: Int? {
        get { signal == .min ? nil : Int(signal) }
        // RSSI comes from an Int8; clamping keeps the sentinel out of reach.
        set { signal = newValue.map { Int16(clamping: max($0, Int(Int16.min) + 1)) } ?? .min }
    }
    var lastSeenWall: Int64? {
        get { lastSeenMilliseconds == .min ? nil : lastSeenMilliseconds }
        set { lastSeenMilliseconds = newValue ?? .min }
    }

    init(address: BluetoothAddress, name: String, stateTopic: String, ruleIndex: Int) {
        self.address = address
        self.name = name
        self.stateTopic = stateTopic
        self.rule = UInt32(ruleIndex)
    }

    /// The default topic name of an address: upper case without colons (`A4C138000001`).
    static func defaultName(_ address: BluetoothAddress) -> String {
        String(address.description.filter { $0 != ":" })
    }
}
