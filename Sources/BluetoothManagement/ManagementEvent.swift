import Bluetooth

/// The events of the management protocol gattway reads, decoded from a packet's parameters
/// (layouts in BlueZ's doc/mgmt-api, all little endian), and encoded back into a packet (the
/// simulator serves them with ``packet``).
///
/// Fixed-size events accept trailing octets (a later kernel may append fields) and ignore them;
/// shorter parameters are an error. An event code not listed is ``other(code:controller:)``.
/// Controller indexes are taken as they come: which ones exist is the reader's business.
public enum ManagementEvent: Sendable, Equatable {
    /// A command finished (0x0001); `parameters` are its return parameters.
    case commandComplete(opcode: UInt16, status: UInt8, controller: UInt16, parameters: [UInt8])
    /// A command's early status (0x0002); a status other than success ends the command.
    case commandStatus(opcode: UInt16, status: UInt8, controller: UInt16)
    /// The controller reported a hardware error (0x0003).
    case controllerError(controller: UInt16, code: UInt8)
    /// A controller appeared (0x0004).
    case indexAdded(controller: UInt16)
    /// A controller went away (0x0005).
    case indexRemoved(controller: UInt16)
    /// A controller's current settings changed (0x0006): bits as in ``ControllerInfo``.
    case newSettings(controller: UInt16, settings: UInt32)
    /// Discovery started or stopped (0x0013); `addressType` is the discovery's type bitmask.
    case discovering(controller: UInt16, addressType: UInt8, discovering: Bool)
    /// An advertisement or inquiry result: Device Found (0x0012) or Advertisement Monitor
    /// Device Found (0x002F, with ``DeviceFound/monitorHandle`` set).
    case deviceFound(DeviceFound)
    /// An advertisement monitor was added (0x002B), by any management socket.
    case advertisementMonitorAdded(controller: UInt16, handle: UInt16)
    /// An advertisement monitor was removed (0x002C), e.g. by bluetoothd, which removes every
    /// monitor of a controller when it takes the controller on.
    case advertisementMonitorRemoved(controller: UInt16, handle: UInt16)
    /// A link went down (0x000C), with the kernel's reason (``DisconnectReason``).
    case deviceDisconnected(
        controller: UInt16, address: BluetoothAddress, addressType: ManagementAddressType, reason: DisconnectReason)
    /// An event gattway does not read; its parameters are dropped.
    case other(code: UInt16, controller: UInt16)

    /// Event codes.
    public enum Code {
        public static let commandComplete: UInt16 = 0x0001
        public static let commandStatus: UInt16 = 0x0002
        public static let controllerError: UInt16 = 0x0003
        public static let indexAdded: UInt16 = 0x0004
        public static let indexRemoved: UInt16 = 0x0005
        public static let newSettings: UInt16 = 0x0006
        public static let deviceDisconnected: UInt16 = 0x000C
        public static let deviceFound: UInt16 = 0x0012
        public static let discovering: UInt16 = 0x0013
        public static let advertisementMonitorAdded: UInt16 = 0x002B
        public static let advertisementMonitorRemoved: UInt16 = 0x002C
        public static let advertisementMonitorDeviceFound: UInt16 = 0x002F
    }

    /// Decodes a packet read from the socket.
    public static func decode(_ packet: ManagementPacket) throws(ManagementDecodeError) -> ManagementEvent {
        // withUnsafeBytes rethrows untyped errors; a Result keeps the type.
        try packet.parameters.withUnsafeBytes { parameters in
            Result { () throws(ManagementDecodeError) in
                try decode(code: packet.code, controller: packet.controller, parameters: parameters)
            }
        }.get()
    }

    /// Decodes one whole packet straight from the bytes of one read (header checked as by
    /// ``ManagementPacket/decode(_:)-(UnsafeRawBufferPointer)``), without copying its parameters
    /// first: the hot path for Device Found.
    public static func decode(packetBytes bytes: UnsafeRawBufferPointer) throws(ManagementDecodeError)
        -> ManagementEvent
    {
        let parameters = try ManagementPacket.parameterBytes(bytes)
        return try decode(code: bytes.uint16(at: 0), controller: bytes.uint16(at: 2), parameters: parameters)
    }

    static func decode(
        code: UInt16, controller: UInt16, parameters: UnsafeRawBufferPointer
    ) throws(ManagementDecodeError) -> ManagementEvent {
        func need(_ count: Int) throws(ManagementDecodeError) {
            guard parameters.count >= count else {
                throw .shortParameters(event: code, expected: count, actual: parameters.count)
            }
        }
        switch code {
        case Code.commandComplete:
            try need(3)
            return .commandComplete(
                opcode: parameters.uint16(at: 0), status: parameters[2], controller: controller,
                parameters: Array(parameters[3...]))
        case Code.commandStatus:
            try need(3)
            return .commandStatus(opcode: parameters.uint16(at: 0), status: parameters[2], controller: controller)
        case Code.controllerError:
            try need(1)
            return .controllerError(controller: controller, code: parameters[0])
        case Code.indexAdded:
            return .indexAdded(controller: controller)
        case Code.indexRemoved:
            return .indexRemoved(controller: controller)
        case Code.newSettings:
            try need(4)
            return .newSettings(controller: controller, settings: parameters.uint32(at: 0))
        case Code.discovering:
            try need(2)
            return .discovering(controller: controller, addressType: parameters[0], discovering: parameters[1] != 0)
        case Code.deviceDisconnected:
            try need(8)
            var raw: UInt64 = 0
            for index in (0..<6).reversed() { raw = raw << 8 | UInt64(parameters[index]) }
            return .deviceDisconnected(
                controller: controller, address: BluetoothAddress(rawValue: raw),
                addressType: ManagementAddressType(rawValue: parameters[6]),
                reason: DisconnectReason(rawValue: parameters[7]))
        case Code.deviceFound:
            return .deviceFound(try DeviceFound(code: code, controller: controller, parameters: parameters, at: 0))
        case Code.advertisementMonitorAdded:
            try need(2)
            return .advertisementMonitorAdded(controller: controller, handle: parameters.uint16(at: 0))
        case Code.advertisementMonitorRemoved:
            try need(2)
            return .advertisementMonitorRemoved(controller: controller, handle: parameters.uint16(at: 0))
        case Code.advertisementMonitorDeviceFound:
            var found = try DeviceFound(code: code, controller: controller, parameters: parameters, at: 2)
            found.monitorHandle = parameters.uint16(at: 0)
            return .deviceFound(found)
        default:
            return .other(code: code, controller: controller)
        }
    }

    /// The event as the kernel would send it.
    public var packet: ManagementPacket {
        var parameters: [UInt8] = []
        switch self {
        case .commandComplete(let opcode, let status, let controller, let returned):
            parameters.appendLittleEndian(opcode)
            parameters.append(status)
            parameters += returned
            return ManagementPacket(code: Code.commandComplete, controller: controller, parameters: parameters)
        case .commandStatus(let opcode, let status, let controller):
            parameters.appendLittleEndian(opcode)
            parameters.append(status)
            return ManagementPacket(code: Code.commandStatus, controller: controller, parameters: parameters)
        case .controllerError(let controller, let code):
            return ManagementPacket(code: Code.controllerError, controller: controller, parameters: [code])
        case .indexAdded(let controller):
            return ManagementPacket(code: Code.indexAdded, controller: controller)
        case .indexRemoved(let controller):
            return ManagementPacket(code: Code.indexRemoved, controller: controller)
        case .newSettings(let controller, let settings):
            parameters.appendLittleEndian(settings)
            return ManagementPacket(code: Code.newSettings, controller: controller, parameters: parameters)
        case .discovering(let controller, let addressType, let discovering):
            return ManagementPacket(
                code: Code.discovering, controller: controller, parameters: [addressType, discovering ? 1 : 0])
        case .deviceDisconnected(let controller, let address, let addressType, let reason):
            for shift in stride(from: 0, to: 48, by: 8) {
                parameters.append(UInt8(truncatingIfNeeded: address.rawValue >> UInt64(shift)))
            }
            parameters += [addressType.rawValue, reason.rawValue]
            return ManagementPacket(code: Code.deviceDisconnected, controller: controller, parameters: parameters)
        case .deviceFound(let found):
            return found.packet
        case .advertisementMonitorAdded(let controller, let handle):
            parameters.appendLittleEndian(handle)
            return ManagementPacket(
                code: Code.advertisementMonitorAdded, controller: controller, parameters: parameters)
        case .advertisementMonitorRemoved(let controller, let handle):
            parameters.appendLittleEndian(handle)
            return ManagementPacket(
                code: Code.advertisementMonitorRemoved, controller: controller, parameters: parameters)
        case .other(let code, let controller):
            return ManagementPacket(code: code, controller: controller)
        }
    }
}

/// Why a link went down, as the kernel tells its management sockets in Device Disconnected. The
/// kernel folds the controller's HCI reason into these: 0x08 → timeout; 0x13, 0x14, 0x15 →
/// remote; 0x16 → local host; an authentication failure it saw itself → authentication failure.
public struct DisconnectReason: Sendable, Hashable, RawRepresentable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let unspecified = DisconnectReason(rawValue: 0x00)
    /// The link's supervision timeout passed (the device went out of range or silent).
    public static let timeout = DisconnectReason(rawValue: 0x01)
    /// This host ended it (a Disconnect, a power-off).
    public static let localHost = DisconnectReason(rawValue: 0x02)
    /// The peer ended it.
    public static let remote = DisconnectReason(rawValue: 0x03)
    public static let authenticationFailure = DisconnectReason(rawValue: 0x04)
    /// This host ended it to suspend.
    public static let localHostSuspend = DisconnectReason(rawValue: 0x05)

    /// The HCI error code that stands for the reason (what an ESP32 reports): 0x08 connection
    /// timeout, 0x16 terminated by the local host, 0x13 remote user terminated, 0x05
    /// authentication failure; nil for unspecified and values the protocol does not define.
    public var hciCode: UInt8? {
        switch self {
        case .timeout: 0x08
        case .localHost, .localHostSuspend: 0x16
        case .remote: 0x13
        case .authenticationFailure: 0x05
        default: nil
        }
    }
}

/// The kind of a peer's address in the management protocol.
public enum ManagementAddressType: Sendable, Hashable {
    case bredr
    case lePublic
    case leRandom
    /// A value the protocol does not define (yet); kept so the event still decodes.
    case unknown(UInt8)

    public init(rawValue: UInt8) {
        switch rawValue {
        case 0: self = .bredr
        case 1: self = .lePublic
        case 2: self = .leRandom
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: UInt8 {
        switch self {
        case .bredr: 0
        case .lePublic: 1
        case .leRandom: 2
        case .unknown(let value): value
        }
    }
    /// The LE address type as the rest of gattway names it; nil for BR/EDR and unknown values.
    public var leAddressType: BluetoothAddress.AddressType? {
        switch self {
        case .lePublic: .public
        case .leRandom: .random
        case .bredr, .unknown: nil
        }
    }
}

/// A Device Found (0x0012) or Advertisement Monitor Device Found (0x002F) event: one
/// advertising report (advertisement and scan response merged by the kernel) or inquiry result.
public struct DeviceFound: Sendable, Hashable {
    /// Flags bit 0: the kernel asks whether user space knows the name (Confirm Name).
    public static let confirmName: UInt32 = 1 << 0
    /// Flags bit 1: legacy pairing is likely.
    public static let legacyPairing: UInt32 = 1 << 1
    /// Flags bit 2: the device does not accept connections (e.g. a broadcaster).
    public static let notConnectable: UInt32 = 1 << 2
    /// Flags bit 3: found while a connection was being initiated.
    public static let initiatedConnection: UInt32 = 1 << 3
    /// Flags bit 4: resolving the name failed.
    public static let nameRequestFailed: UInt32 = 1 << 4
    /// Flags bit 5: the data includes a scan response.
    public static let scanResponse: UInt32 = 1 << 5
    /// The RSSI value that means "not available".
    public static let rssiUnavailable: Int8 = 127

    /// Fixed octets before the AD data (address, type, RSSI, flags, data length).
    static let fixedLength = 14

    public var controller: UInt16
    public var address: BluetoothAddress
    public var addressType: ManagementAddressType
    /// dBm, or ``rssiUnavailable``.
    public var rssi: Int8
    /// The bits above.
    public var flags: UInt32
    /// The AD / EIR structures as the kernel delivered them.
    public var data: [UInt8]
    /// The monitor's handle for Advertisement Monitor Device Found (0 when the kernel reports
    /// every advertisement for software filtering); nil for Device Found.
    public var monitorHandle: UInt16?

    public init(
        controller: UInt16, address: BluetoothAddress, addressType: ManagementAddressType, rssi: Int8,
        flags: UInt32 = 0, data: [UInt8], monitorHandle: UInt16? = nil
    ) {
        self.controller = controller
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.flags = flags
        self.data = data
        self.monitorHandle = monitorHandle
    }

    /// Reads the fields from `offset` on (2 for the monitor's event, after its handle).
    init(
        code: UInt16, controller: UInt16, parameters: UnsafeRawBufferPointer, at offset: Int
    ) throws(ManagementDecodeError) {
        guard parameters.count >= offset + Self.fixedLength else {
            throw .shortParameters(event: code, expected: offset + Self.fixedLength, actual: parameters.count)
        }
        let declared = Int(parameters.uint16(at: offset + 12))
        let actual = parameters.count - offset - Self.fixedLength
        guard declared == actual else { throw .dataLengthMismatch(event: code, declared: declared, actual: actual) }
        var raw: UInt64 = 0
        for index in (offset..<(offset + 6)).reversed() { raw = raw << 8 | UInt64(parameters[index]) }
        self.init(
            controller: controller, address: BluetoothAddress(rawValue: raw),
            addressType: ManagementAddressType(rawValue: parameters[offset + 6]),
            rssi: Int8(bitPattern: parameters[offset + 7]), flags: parameters.uint32(at: offset + 8),
            data: Array(parameters[(offset + Self.fixedLength)...]))
    }

    /// The event as the kernel would send it: Advertisement Monitor Device Found when
    /// ``monitorHandle`` is set, else Device Found. AD data beyond what the packet can carry is
    /// left out.
    public var packet: ManagementPacket {
        let room = ManagementPacket.maximumParameterLength - Self.fixedLength - (monitorHandle == nil ? 0 : 2)
        let count = min(data.count, room)
        var parameters: [UInt8] = []
        parameters.reserveCapacity(Self.fixedLength + 2 + count)
        if let monitorHandle { parameters.appendLittleEndian(monitorHandle) }
        for shift in stride(from: 0, to: 48, by: 8) {
            parameters.append(UInt8(truncatingIfNeeded: address.rawValue >> UInt64(shift)))
        }
        parameters.append(addressType.rawValue)
        parameters.append(UInt8(bitPattern: rssi))
        parameters.appendLittleEndian(flags)
        parameters.appendLittleEndian(UInt16(count))
        parameters += data.prefix(count)
        return ManagementPacket(
            code: monitorHandle == nil
                ? ManagementEvent.Code.deviceFound : ManagementEvent.Code.advertisementMonitorDeviceFound,
            controller: controller, parameters: parameters)
    }

    /// The AD structures read into ``AdvertisementData``, with the RSSI (nil when unavailable).
    public var advertisementData: AdvertisementData {
        var advertisement = AdvertisementData(advertisingData: data)
        if rssi != Self.rssiUnavailable { advertisement.rssi = Int16(rssi) }
        return advertisement
    }

    /// True unless the kernel flagged the device as not connectable.
    public var isConnectable: Bool { flags & Self.notConnectable == 0 }
}
