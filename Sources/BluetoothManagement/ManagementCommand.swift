import Bluetooth

/// The commands gattway sends, each encoded as a packet, and decoders (and, for the simulator,
/// encoders) of their return parameters — the `parameters` of
/// ``ManagementEvent/commandComplete(opcode:status:controller:parameters:)``.
public enum ManagementCommand {
    /// Command codes.
    public enum Code {
        public static let readVersion: UInt16 = 0x0001
        public static let readControllerIndexList: UInt16 = 0x0003
        public static let readControllerInfo: UInt16 = 0x0004
        public static let startDiscovery: UInt16 = 0x0023
        public static let stopDiscovery: UInt16 = 0x0024
        public static let loadConnectionParameters: UInt16 = 0x0035
        public static let addAdvertisementPatternsMonitor: UInt16 = 0x0052
        public static let removeAdvertisementMonitor: UInt16 = 0x0053
    }

    /// Command Complete and Command Status status codes gattway names.
    public enum Status {
        public static let success: UInt8 = 0x00
        public static let unknownCommand: UInt8 = 0x01
        public static let busy: UInt8 = 0x0A
        public static let noResources: UInt8 = 0x07
        public static let notSupported: UInt8 = 0x0C
        public static let invalidParameters: UInt8 = 0x0D
        public static let notPowered: UInt8 = 0x0F
        public static let invalidIndex: UInt8 = 0x11
        public static let permissionDenied: UInt8 = 0x14
    }

    /// The discovery address-type bits of Start and Stop Discovery.
    public enum DiscoveryType {
        public static let bredr: UInt8 = 1 << 0
        public static let lePublic: UInt8 = 1 << 1
        public static let leRandom: UInt8 = 1 << 2
        /// LE, public and random: what a BLE scan asks for.
        public static let lowEnergy: UInt8 = lePublic | leRandom
    }

    /// Read Management Version Information (0x0001); answered with ``ManagementVersion``.
    public static func readVersion() -> ManagementPacket {
        ManagementPacket(code: Code.readVersion, controller: ManagementPacket.noController)
    }

    /// Read Controller Index List (0x0003); answered with ``decodeIndexList(_:)``.
    public static func readControllerIndexList() -> ManagementPacket {
        ManagementPacket(code: Code.readControllerIndexList, controller: ManagementPacket.noController)
    }

    /// Read Controller Information (0x0004); answered with ``ControllerInfo``.
    public static func readControllerInfo(controller: UInt16) -> ManagementPacket {
        ManagementPacket(code: Code.readControllerInfo, controller: controller)
    }

    /// Start Discovery (0x0023) of the given ``DiscoveryType`` bits; answered with the same octet.
    public static func startDiscovery(controller: UInt16, addressTypes: UInt8 = DiscoveryType.lowEnergy)
        -> ManagementPacket
    {
        ManagementPacket(code: Code.startDiscovery, controller: controller, parameters: [addressTypes])
    }

    /// Stop Discovery (0x0024); answered with the same octet.
    public static func stopDiscovery(controller: UInt16, addressTypes: UInt8 = DiscoveryType.lowEnergy)
        -> ManagementPacket
    {
        ManagementPacket(code: Code.stopDiscovery, controller: controller, parameters: [addressTypes])
    }

    /// Load Connection Parameters (0x0035): the parameters the kernel asks for when it connects
    /// to each of these LE devices (Param_Count, then per device its address, address type and
    /// the four values); no return parameters. The kernel of Linux 6.1 first drops every entry
    /// of the controller that no connection or auto-connect uses (bluetoothd's loaded ones too),
    /// skips an entry it finds invalid, and does not change a link that is up.
    public static func loadConnectionParameters(controller: UInt16, entries: [ConnectionParameterEntry])
        -> ManagementPacket
    {
        ManagementPacket(
            code: Code.loadConnectionParameters, controller: controller,
            parameters: ConnectionParameterEntry.encodeList(entries))
    }

    /// Add Advertisement Patterns Monitor (0x0052): a monitor that makes the kernel scan passively
    /// while no discovery runs, reporting what it hears as Advertisement Monitor Device Found.
    /// Each pattern's value is sent in its 31-octet field, zero-padded. Answered with the
    /// monitor's handle (``decodeMonitorHandle(_:command:)``).
    public static func addAdvertisementPatternsMonitor(controller: UInt16, patterns: [AdvertisementPattern])
        -> ManagementPacket
    {
        ManagementPacket(
            code: Code.addAdvertisementPatternsMonitor, controller: controller,
            parameters: AdvertisementPattern.encodeList(patterns))
    }

    /// Remove Advertisement Monitor (0x0053) of `handle` (0: every monitor of the controller);
    /// answered with the same handle.
    public static func removeAdvertisementMonitor(controller: UInt16, handle: UInt16) -> ManagementPacket {
        var parameters: [UInt8] = []
        parameters.appendLittleEndian(handle)
        return ManagementPacket(code: Code.removeAdvertisementMonitor, controller: controller, parameters: parameters)
    }

    /// The `Monitor_Handle` of Add Advertisement Patterns Monitor's or Remove Advertisement
    /// Monitor's return parameters (and of a Remove command's parameters).
    public static func decodeMonitorHandle(_ parameters: [UInt8], command: UInt16) throws(ManagementDecodeError)
        -> UInt16
    {
        guard parameters.count >= 2 else {
            throw .shortReturnParameters(command: command, expected: 2, actual: parameters.count)
        }
        return UInt16(parameters[0]) | UInt16(parameters[1]) << 8
    }

    /// The controller indexes of Read Controller Index List's return parameters
    /// (`Num_Controllers`, then that many indexes). Octets after the list are ignored.
    public static func decodeIndexList(_ parameters: [UInt8]) throws(ManagementDecodeError) -> [UInt16] {
        guard parameters.count >= 2 else {
            throw .shortReturnParameters(command: Code.readControllerIndexList, expected: 2, actual: parameters.count)
        }
        let count = Int(UInt16(parameters[0]) | UInt16(parameters[1]) << 8)
        guard parameters.count >= 2 + 2 * count else {
            throw .shortReturnParameters(
                command: Code.readControllerIndexList, expected: 2 + 2 * count, actual: parameters.count)
        }
        return (0..<count).map { UInt16(parameters[2 + 2 * $0]) | UInt16(parameters[3 + 2 * $0]) << 8 }
    }

    /// Read Controller Index List's return parameters for `indexes` (at most 65,535 are kept).
    public static func encodeIndexList(_ indexes: [UInt16]) -> [UInt8] {
        let kept = indexes.prefix(Int(UInt16.max))
        var parameters: [UInt8] = []
        parameters.reserveCapacity(2 + 2 * kept.count)
        parameters.appendLittleEndian(UInt16(kept.count))
        for index in kept { parameters.appendLittleEndian(index) }
        return parameters
    }
}

/// Read Management Version Information's return parameters.
public struct ManagementVersion: Sendable, Equatable {
    public var version: UInt8
    public var revision: UInt16

    public init(version: UInt8, revision: UInt16) {
        self.version = version
        self.revision = revision
    }

    /// From the three octets of the return parameters (more are ignored).
    public static func decode(_ parameters: [UInt8]) throws(ManagementDecodeError) -> ManagementVersion {
        guard parameters.count >= 3 else {
            throw .shortReturnParameters(
                command: ManagementCommand.Code.readVersion, expected: 3, actual: parameters.count)
        }
        return ManagementVersion(version: parameters[0], revision: UInt16(parameters[1]) | UInt16(parameters[2]) << 8)
    }

    /// The return parameters.
    public var parameters: [UInt8] {
        var parameters = [version]
        parameters.appendLittleEndian(revision)
        return parameters
    }
}

/// Read Controller Information's return parameters.
public struct ControllerInfo: Sendable, Equatable {
    /// Current-settings and supported-settings bits gattway names.
    public enum Setting {
        public static let powered: UInt32 = 1 << 0
        public static let connectable: UInt32 = 1 << 1
        public static let discoverable: UInt32 = 1 << 3
        public static let bondable: UInt32 = 1 << 4
        public static let bredr: UInt32 = 1 << 7
        public static let lowEnergy: UInt32 = 1 << 9
        public static let advertising: UInt32 = 1 << 10
    }

    /// The layout's length: address 6, version 1, manufacturer 2, settings 4 + 4, class 3,
    /// name 249, short name 11.
    public static let length = 280
    static let nameField = 249
    static let shortNameField = 11

    /// The controller's public address (00:00:00:00:00:00 for an LE-only controller without one).
    public var address: BluetoothAddress
    /// The HCI version (e.g. 0x09 for Core 5.0).
    public var bluetoothVersion: UInt8
    /// The company id of the controller's maker.
    public var manufacturer: UInt16
    public var supportedSettings: UInt32
    public var currentSettings: UInt32
    /// The 24-bit class of device.
    public var classOfDevice: UInt32
    /// The local name (up to 248 UTF-8 octets).
    public var name: String
    /// The short name (up to 10 UTF-8 octets), empty when none is set.
    public var shortName: String

    public init(
        address: BluetoothAddress, bluetoothVersion: UInt8, manufacturer: UInt16, supportedSettings: UInt32,
        currentSettings: UInt32, classOfDevice: UInt32, name: String, shortName: String = ""
    ) {
        self.address = address
        self.bluetoothVersion = bluetoothVersion
        self.manufacturer = manufacturer
        self.supportedSettings = supportedSettings
        self.currentSettings = currentSettings
        self.classOfDevice = classOfDevice
        self.name = name
        self.shortName = shortName
    }

    /// From the 280 octets of the return parameters (more are ignored). Names end at their first
    /// NUL; invalid UTF-8 is replaced.
    public static func decode(_ parameters: [UInt8]) throws(ManagementDecodeError) -> ControllerInfo {
        guard parameters.count >= length else {
            throw .shortReturnParameters(
                command: ManagementCommand.Code.readControllerInfo, expected: length, actual: parameters.count)
        }
        func uint32(_ offset: Int) -> UInt32 {
            (0..<4).reduce(0) { $0 | UInt32(parameters[offset + $1]) << UInt32(8 * $1) }
        }
        func string(_ offset: Int, _ field: Int) -> String {
            let bytes = parameters[offset..<(offset + field)]
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return ControllerInfo(
            address: BluetoothAddress(littleEndianOctets: parameters[0..<6]) ?? BluetoothAddress(rawValue: 0),
            bluetoothVersion: parameters[6], manufacturer: UInt16(parameters[7]) | UInt16(parameters[8]) << 8,
            supportedSettings: uint32(9), currentSettings: uint32(13),
            classOfDevice: UInt32(parameters[17]) | UInt32(parameters[18]) << 8 | UInt32(parameters[19]) << 16,
            name: string(20, nameField), shortName: string(20 + nameField, shortNameField))
    }

    /// The return parameters. A name longer than its field (less its NUL) is cut on a UTF-8
    /// character boundary; the class of device keeps its low 24 bits.
    public var parameters: [UInt8] {
        var parameters: [UInt8] = []
        parameters.reserveCapacity(Self.length)
        for shift in stride(from: 0, to: 48, by: 8) {
            parameters.append(UInt8(truncatingIfNeeded: address.rawValue >> UInt64(shift)))
        }
        parameters.append(bluetoothVersion)
        parameters.appendLittleEndian(manufacturer)
        parameters.appendLittleEndian(supportedSettings)
        parameters.appendLittleEndian(currentSettings)
        for shift in stride(from: 0, to: 24, by: 8) {
            parameters.append(UInt8(truncatingIfNeeded: classOfDevice >> UInt32(shift)))
        }
        for (text, field) in [(name, Self.nameField), (shortName, Self.shortNameField)] {
            let utf8 = Self.cut(text, to: field - 1)
            parameters += utf8
            parameters += [UInt8](repeating: 0, count: field - utf8.count)
        }
        return parameters
    }

    /// The UTF-8 of `text` up to `limit` octets, ending on a character boundary and before any NUL.
    static func cut(_ text: String, to limit: Int) -> [UInt8] {
        var utf8 = Array(text.utf8.prefix { $0 != 0 })
        guard utf8.count > limit else { return utf8 }
        utf8.removeSubrange(limit...)
        // Drop a trailing partial sequence: continuation octets, then the lead octet they follow.
        var end = utf8.count
        while end > 0, utf8[end - 1] & 0xC0 == 0x80 { end -= 1 }
        if end > 0, utf8[end - 1] >= 0xC0 {
            let lead = utf8[end - 1]
            let needed = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
            if utf8.count - (end - 1) < needed { utf8.removeSubrange((end - 1)...) }
        }
        return utf8
    }
}

/// One pattern of Add Advertisement Patterns Monitor: an AD structure of `adType` whose data
/// holds `value` at `offset`. Without advertisement filtering offloaded to the controller the
/// kernel ignores the patterns and reports every advertisement (docs/bluez.md §7).
public struct AdvertisementPattern: Sendable, Hashable {
    /// The value field's fixed size on the wire (the longest legacy AD data).
    public static let valueField = 31

    public var adType: UInt8
    public var offset: UInt8
    /// At most 31 octets (more are cut when encoded).
    public var value: [UInt8]

    public init(adType: UInt8, offset: UInt8 = 0, value: [UInt8]) {
        self.adType = adType
        self.offset = offset
        self.value = value
    }

    /// The command's parameters: the count (at most 255 patterns are kept), then each pattern
    /// as type, offset, length and the 31-octet value field.
    public static func encodeList(_ patterns: [AdvertisementPattern]) -> [UInt8] {
        let kept = patterns.prefix(Int(UInt8.max))
        var parameters: [UInt8] = [UInt8(kept.count)]
        parameters.reserveCapacity(1 + kept.count * (3 + valueField))
        for pattern in kept {
            let value = pattern.value.prefix(valueField)
            parameters += [pattern.adType, pattern.offset, UInt8(value.count)]
            parameters += value
            parameters += [UInt8](repeating: 0, count: valueField - value.count)
        }
        return parameters
    }

    /// The patterns of the command's parameters (the simulator's side). A length over 31, or
    /// fewer octets than the count announces, is an error; octets after the list are ignored.
    public static func decodeList(_ parameters: [UInt8]) throws(ManagementDecodeError) -> [AdvertisementPattern] {
        let command = ManagementCommand.Code.addAdvertisementPatternsMonitor
        guard let count = parameters.first else {
            throw .invalidCommandParameters(command: command, reason: "no pattern count")
        }
        let needed = 1 + Int(count) * (3 + valueField)
        guard parameters.count >= needed else {
            throw .invalidCommandParameters(
                command: command, reason: "\(count) patterns need \(needed) octets, got \(parameters.count)")
        }
        var patterns: [AdvertisementPattern] = []
        for index in 0..<Int(count) {
            let start = 1 + index * (3 + valueField)
            let length = Int(parameters[start + 2])
            guard length <= valueField else {
                throw .invalidCommandParameters(command: command, reason: "a pattern of \(length) octets (at most 31)")
            }
            patterns.append(
                AdvertisementPattern(
                    adType: parameters[start], offset: parameters[start + 1],
                    value: Array(parameters[(start + 3)..<(start + 3 + length)])))
        }
        return patterns
    }
}

/// One device of Load Connection Parameters: 15 octets (address, address type, minimum and
/// maximum interval, latency, supervision timeout, little-endian).
public struct ConnectionParameterEntry: Sendable, Hashable {
    public static let length = 15
    public var address: BluetoothAddress
    public var addressType: ManagementAddressType
    public var parameters: ConnectionParameters

    public init(address: BluetoothAddress, addressType: ManagementAddressType, parameters: ConnectionParameters) {
        self.address = address
        self.addressType = addressType
        self.parameters = parameters
    }

    /// Param_Count and the entries.
    public static func encodeList(_ entries: [ConnectionParameterEntry]) -> [UInt8] {
        let kept = entries.prefix((ManagementPacket.maximumParameterLength - 2) / length)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + kept.count * length)
        bytes.appendLittleEndian(UInt16(kept.count))
        for entry in kept {
            for shift in stride(from: 0, to: 48, by: 8) {
                bytes.append(UInt8(truncatingIfNeeded: entry.address.rawValue >> UInt64(shift)))
            }
            bytes.append(entry.addressType.rawValue)
            bytes.appendLittleEndian(entry.parameters.minInterval)
            bytes.appendLittleEndian(entry.parameters.maxInterval)
            bytes.appendLittleEndian(entry.parameters.latency)
            bytes.appendLittleEndian(entry.parameters.supervisionTimeout)
        }
        return bytes
    }

    /// The entries of a Load Connection Parameters command (the simulator's side); a count that
    /// does not match the length refuses the command, as the kernel does.
    public static func decodeList(_ parameters: [UInt8]) throws(ManagementDecodeError) -> [ConnectionParameterEntry] {
        let command = ManagementCommand.Code.loadConnectionParameters
        guard parameters.count >= 2 else {
            throw .shortReturnParameters(command: command, expected: 2, actual: parameters.count)
        }
        let count = Int(UInt16(parameters[0]) | UInt16(parameters[1]) << 8)
        guard parameters.count == 2 + count * length else {
            throw .shortReturnParameters(command: command, expected: 2 + count * length, actual: parameters.count)
        }
        func uint16(_ offset: Int) -> UInt16 { UInt16(parameters[offset]) | UInt16(parameters[offset + 1]) << 8 }
        return (0..<count).map { index in
            let offset = 2 + index * length
            var raw: UInt64 = 0
            for byte in parameters[offset..<(offset + 6)].reversed() { raw = raw << 8 | UInt64(byte) }
            return ConnectionParameterEntry(
                address: BluetoothAddress(rawValue: raw),
                addressType: ManagementAddressType(rawValue: parameters[offset + 6]),
                parameters: ConnectionParameters(
                    minInterval: uint16(offset + 7), maxInterval: uint16(offset + 9), latency: uint16(offset + 11),
                    supervisionTimeout: uint16(offset + 13)))
        }
    }
}
