import Bluetooth
import BluetoothManagement
import Testing

/// Byte-exact vectors written from the layouts of BlueZ's doc/mgmt-api (all little endian).
@Suite("Management events: byte-exact vectors, bad lengths, round trips")
struct ManagementEventTests {
    static func event(_ bytes: [UInt8]) throws -> ManagementEvent {
        try ManagementEvent.decode(ManagementPacket.decode(bytes))
    }

    /// A Device Found of A4:C1:38:0B:12:34 (LE public, -60 dBm, not connectable) carrying flags
    /// and a BTHome service data structure (FCD2: v2 unencrypted, temperature 23.45 °C).
    static let bthomeDeviceFound: [UInt8] =
        [0x12, 0x00, 0x00, 0x00, 0x19, 0x00]  // Device Found, hci0, 25 parameter octets
        + [0x34, 0x12, 0x0B, 0x38, 0xC1, 0xA4]  // address, least significant first
        + [0x01, 0xC4]  // LE public, RSSI -60
        + [0x04, 0x00, 0x00, 0x00]  // flags: not connectable
        + [0x0B, 0x00]  // 11 octets of AD data
        + [0x02, 0x01, 0x06] + [0x07, 0x16, 0xD2, 0xFC, 0x40, 0x02, 0x29, 0x09]

    @Test("Device Found with BTHome service data: fields, AD bytes, and the advertisement they read to")
    func deviceFound() throws {
        let found = DeviceFound(
            controller: 0, address: BluetoothAddress("A4:C1:38:0B:12:34")!, addressType: .lePublic, rssi: -60,
            flags: DeviceFound.notConnectable,
            data: [0x02, 0x01, 0x06, 0x07, 0x16, 0xD2, 0xFC, 0x40, 0x02, 0x29, 0x09])
        #expect(try Self.event(Self.bthomeDeviceFound) == .deviceFound(found))
        #expect(ManagementEvent.deviceFound(found).packet.bytes == Self.bthomeDeviceFound)
        #expect(!found.isConnectable)
        #expect(
            found.advertisementData
                == AdvertisementData(serviceData: [BluetoothUUID(0xFCD2): [0x40, 0x02, 0x29, 0x09]], rssi: -60))
        // The same straight from the read's bytes, without the packet in between.
        let direct = try Self.bthomeDeviceFound.withUnsafeBytes { try ManagementEvent.decode(packetBytes: $0) }
        #expect(direct == .deviceFound(found))
    }

    @Test("Advertisement Monitor Device Found: the handle first, then Device Found's layout")
    func monitorDeviceFound() throws {
        let bytes: [UInt8] =
            [0x2F, 0x00, 0x01, 0x00, 0x13, 0x00]  // 0x002F, hci1, 19 octets
            + [0x05, 0x00]  // monitor handle 5
            + [0x66, 0x55, 0x44, 0x33, 0x22, 0xD1, 0x02, 0x7F]  // D1:22:33:44:55:66, LE random, RSSI unavailable
            + [0x20, 0x00, 0x00, 0x00, 0x03, 0x00]  // scan response, 3 octets
            + [0x02, 0x0A, 0x00]
        let found = DeviceFound(
            controller: 1, address: BluetoothAddress("D1:22:33:44:55:66")!, addressType: .leRandom,
            rssi: DeviceFound.rssiUnavailable, flags: DeviceFound.scanResponse, data: [0x02, 0x0A, 0x00],
            monitorHandle: 5)
        #expect(try Self.event(bytes) == .deviceFound(found))
        #expect(ManagementEvent.deviceFound(found).packet.bytes == bytes)
        #expect(found.advertisementData == AdvertisementData(txPower: 0))
    }

    @Test("an address type the protocol does not define is kept, not refused")
    func unknownAddressType() throws {
        var bytes = Self.bthomeDeviceFound
        bytes[12] = 0x07
        guard case .deviceFound(let found) = try Self.event(bytes) else {
            Issue.record("not a Device Found")
            return
        }
        #expect(found.addressType == .unknown(7) && found.addressType.rawValue == 7)
        #expect(ManagementAddressType(rawValue: 0) == .bredr)
        #expect(ManagementAddressType(rawValue: 1).leAddressType == .public)
        #expect(ManagementAddressType(rawValue: 2).leAddressType == .random)
        #expect(ManagementAddressType.bredr.leAddressType == nil && found.addressType.leAddressType == nil)
    }

    @Test("each fixed-layout event decodes from its vector and encodes back to it")
    func fixedEvents() throws {
        let vectors: [([UInt8], ManagementEvent)] = [
            (
                [0x01, 0x00, 0xFF, 0xFF, 0x06, 0x00, 0x01, 0x00, 0x00, 0x01, 0x16, 0x00],
                .commandComplete(opcode: 0x0001, status: 0, controller: 0xFFFF, parameters: [0x01, 0x16, 0x00])
            ),
            (
                [0x02, 0x00, 0x00, 0x00, 0x03, 0x00, 0x23, 0x00, 0x0A],
                .commandStatus(opcode: 0x0023, status: 0x0A, controller: 0)
            ),
            ([0x03, 0x00, 0x02, 0x00, 0x01, 0x00, 0x42], .controllerError(controller: 2, code: 0x42)),
            ([0x04, 0x00, 0x03, 0x00, 0x00, 0x00], .indexAdded(controller: 3)),
            ([0x05, 0x00, 0x03, 0x00, 0x00, 0x00], .indexRemoved(controller: 3)),
            (
                [0x06, 0x00, 0x00, 0x00, 0x04, 0x00, 0x81, 0x02, 0x00, 0x00],
                .newSettings(controller: 0, settings: 0x0281)
            ),
            (
                [0x13, 0x00, 0x00, 0x00, 0x02, 0x00, 0x06, 0x01],
                .discovering(controller: 0, addressType: 0x06, discovering: true)
            ),
            (
                [0x13, 0x00, 0x00, 0x00, 0x02, 0x00, 0x06, 0x00],
                .discovering(controller: 0, addressType: 0x06, discovering: false)
            ),
            ([0x2B, 0x00, 0x04, 0x00, 0x02, 0x00, 0x01, 0x00], .advertisementMonitorAdded(controller: 4, handle: 1)),
            (
                [0x0C, 0x00, 0x01, 0x00, 0x08, 0x00, 0x13, 0x71, 0xDA, 0x7D, 0x1A, 0x00, 0x01, 0x01],
                .deviceDisconnected(
                    controller: 1, address: BluetoothAddress("00:1A:7D:DA:71:13")!, addressType: .lePublic,
                    reason: .timeout)
            ),
            (
                [0x2C, 0x00, 0x04, 0x00, 0x02, 0x00, 0x02, 0x01],
                .advertisementMonitorRemoved(controller: 4, handle: 0x0102)
            ),
        ]
        for (bytes, event) in vectors {
            #expect(try Self.event(bytes) == event)
            #expect(event.packet.bytes == bytes)
        }
    }

    @Test("unknown events decode as other; any controller index is taken as it comes")
    func unknownEventsAndControllers() throws {
        // Local Name Changed (0x0008) is not read: its parameters are dropped.
        #expect(
            try Self.event([0x08, 0x00, 0x00, 0x00, 0x02, 0x00, 0x41, 0x00]) == .other(code: 0x0008, controller: 0))
        #expect(try Self.event([0xFE, 0xFF, 0x07, 0x00, 0x00, 0x00]) == .other(code: 0xFFFE, controller: 7))
        #expect(try Self.event([0x04, 0x00, 0xFE, 0xFF, 0x00, 0x00]) == .indexAdded(controller: 0xFFFE))
        #expect(
            try Self.event([0x05, 0x00, 0xFF, 0xFF, 0x00, 0x00])
                == .indexRemoved(controller: ManagementPacket.noController))
        #expect(
            ManagementEvent.other(code: 0x0008, controller: 1).packet == ManagementPacket(code: 0x0008, controller: 1))
    }

    @Test("a later kernel's extra trailing octets on a fixed event are ignored")
    func trailingOctets() throws {
        #expect(
            try Self.event([0x06, 0x00, 0x00, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0x00, 0x99])
                == .newSettings(controller: 0, settings: 1))
    }

    @Test("parameters shorter than the event's fixed fields are an error naming the event")
    func shortParameters() throws {
        let cases: [([UInt8], ManagementDecodeError)] = [
            (
                [0x01, 0x00, 0xFF, 0xFF, 0x02, 0x00, 0x01, 0x00],
                .shortParameters(event: 0x0001, expected: 3, actual: 2)
            ),
            ([0x02, 0x00, 0xFF, 0xFF, 0x00, 0x00], .shortParameters(event: 0x0002, expected: 3, actual: 0)),
            ([0x03, 0x00, 0x00, 0x00, 0x00, 0x00], .shortParameters(event: 0x0003, expected: 1, actual: 0)),
            (
                [0x06, 0x00, 0x00, 0x00, 0x03, 0x00, 0x01, 0x00, 0x00],
                .shortParameters(event: 0x0006, expected: 4, actual: 3)
            ),
            ([0x13, 0x00, 0x00, 0x00, 0x01, 0x00, 0x06], .shortParameters(event: 0x0013, expected: 2, actual: 1)),
            (
                Array(Self.bthomeDeviceFound.prefix(6 + 13)).withLength(13),
                .shortParameters(event: 0x0012, expected: 14, actual: 13)
            ),
            (
                [0x2F, 0x00, 0x00, 0x00, 0x0E, 0x00] + Array(Self.bthomeDeviceFound[6..<20]),
                .shortParameters(event: 0x002F, expected: 16, actual: 14)
            ),
            ([0x2C, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01], .shortParameters(event: 0x002C, expected: 2, actual: 1)),
            (
                [0x0C, 0x00, 0x00, 0x00, 0x07, 0x00, 1, 2, 3, 4, 5, 6, 0x01],
                .shortParameters(event: 0x000C, expected: 8, actual: 7)
            ),
        ]
        for (bytes, error) in cases {
            #expect(throws: error) { try Self.event(bytes) }
        }
        #expect(
            "\(ManagementDecodeError.shortParameters(event: 0x0012, expected: 14, actual: 13))"
                == "management event 0x0012 needs at least 14 parameter octets, got 13")
    }

    @Test("Device Found whose AD length disagrees with the octets that follow is refused (truncated EIR)")
    func truncatedData() throws {
        // Declares 11 AD octets, carries 8: the packet's own length is consistent, the EIR is not.
        let truncated = Array(Self.bthomeDeviceFound.prefix(6 + 14 + 8)).withLength(14 + 8)
        #expect(throws: ManagementDecodeError.dataLengthMismatch(event: 0x0012, declared: 11, actual: 8)) {
            try Self.event(truncated)
        }
        // And one octet too many.
        let long = (Self.bthomeDeviceFound + [0x00]).withLength(26)
        #expect(throws: ManagementDecodeError.dataLengthMismatch(event: 0x0012, declared: 11, actual: 12)) {
            try Self.event(long)
        }
    }

    @Test("the packet's own length must match the read: a short header or a mismatch is an error")
    func packetLengths() {
        #expect(throws: ManagementDecodeError.truncatedHeader(length: 5)) {
            try ManagementPacket.decode([0x04, 0x00, 0x00, 0x00, 0x00])
        }
        #expect(throws: ManagementDecodeError.truncatedHeader(length: 0)) { try ManagementPacket.decode([UInt8]()) }
        #expect(throws: ManagementDecodeError.lengthMismatch(declared: 4, actual: 3)) {
            try ManagementPacket.decode([0x06, 0x00, 0x00, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00])
        }
        #expect(throws: ManagementDecodeError.lengthMismatch(declared: 0, actual: 1)) {
            try ManagementPacket.decode([0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])
        }
        #expect(throws: ManagementDecodeError.lengthMismatch(declared: 0xFFFF, actual: 0)) {
            _ = try [UInt8]([0x12, 0x00, 0x00, 0x00, 0xFF, 0xFF]).withUnsafeBytes {
                try ManagementEvent.decode(packetBytes: $0)
            }
        }
    }

    @Test("encode then decode gives the same event, for every case")
    func roundTrips() throws {
        let address = BluetoothAddress("00:1A:7D:DA:71:13")!
        let events: [ManagementEvent] = [
            .commandComplete(opcode: 0x0004, status: 0, controller: 0, parameters: Array(repeating: 0x55, count: 280)),
            .commandStatus(opcode: 0x0024, status: 0x11, controller: 9),
            .controllerError(controller: 0, code: 0),
            .indexAdded(controller: 0), .indexRemoved(controller: 0xFFFE),
            .newSettings(controller: 1, settings: 0xFFFF_FFFF),
            .discovering(controller: 0, addressType: 1, discovering: true),
            .deviceFound(
                DeviceFound(controller: 0, address: address, addressType: .bredr, rssi: -128, flags: 0x3F, data: [])),
            .deviceFound(
                DeviceFound(
                    controller: 2, address: address, addressType: .unknown(0xFF), rssi: 20,
                    data: Array(repeating: 0, count: 300),
                    monitorHandle: 0)),
            .advertisementMonitorAdded(controller: 0, handle: 0xFFFF),
            .advertisementMonitorRemoved(controller: 1, handle: 0),
            .deviceDisconnected(controller: 3, address: address, addressType: .leRandom, reason: .remote),
            .deviceDisconnected(
                controller: 0, address: address, addressType: .unknown(9), reason: DisconnectReason(rawValue: 0xEE)),
            .other(code: 0x0025, controller: 0),
        ]
        for event in events {
            #expect(try ManagementEvent.decode(ManagementPacket.decode(event.packet.bytes)) == event)
        }
    }
}

extension ManagementEventTests {
    @Test("a disconnect reason stands for the HCI code an ESP32 would report; unspecified and unknown ones for none")
    func disconnectReasons() {
        let codes = [0, 1, 2, 3, 4, 5, 6, 0xFF].map { DisconnectReason(rawValue: UInt8($0)).hciCode }
        #expect(codes == [nil, 0x08, 0x16, 0x13, 0x05, 0x16, nil, nil])
    }
}

extension Array where Element == UInt8 {
    /// The packet with its header's parameter length set to `length`.
    func withLength(_ length: Int) -> [UInt8] {
        var bytes = self
        bytes[4] = UInt8(truncatingIfNeeded: length)
        bytes[5] = UInt8(truncatingIfNeeded: length >> 8)
        return bytes
    }
}
