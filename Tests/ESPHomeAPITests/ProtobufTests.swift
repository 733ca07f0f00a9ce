import ESPHomeAPI
import Testing

@Suite("ESPHome API protobuf")
struct ProtobufTests {
    @Test func varintsRoundTrip() throws {
        for value: UInt64 in [0, 1, 127, 128, 300, 16_383, 16_384, UInt64(UInt32.max), .max] {
            var bytes: [UInt8] = []
            Protobuf.appendVarint(value, to: &bytes)
            var reader = ProtobufReader(bytes)
            #expect(try reader.readVarint() == value)
        }
        var bytes: [UInt8] = []
        Protobuf.appendVarint(300, to: &bytes)
        #expect(bytes == [0xAC, 0x02])
    }

    @Test func zigzag() {
        #expect(Protobuf.zigzagEncode(0) == 0)
        #expect(Protobuf.zigzagEncode(-1) == 1)
        #expect(Protobuf.zigzagEncode(1) == 2)
        #expect(Protobuf.zigzagEncode(-64) == 127)
        #expect(Protobuf.zigzagEncode(.min) == .max)
        for value: Int32 in [0, 1, -1, 63, -64, .max, .min] {
            #expect(Protobuf.zigzagDecode(Protobuf.zigzagEncode(value)) == value)
        }
    }

    @Test func refusesHostileBytes() {
        func first(_ bytes: [UInt8]) throws(ProtobufError) {
            var reader = ProtobufReader(bytes)
            while try reader.next() != nil {}
        }
        // 11-byte varint, and a 10th byte above 1.
        #expect(throws: ProtobufError.overlongVarint) {
            try first([0x08] + [UInt8](repeating: 0xFF, count: 10) + [0x01])
        }
        #expect(throws: ProtobufError.overlongVarint) {
            try first([0x08] + [UInt8](repeating: 0xFF, count: 9) + [0x02])
        }
        #expect(throws: ProtobufError.truncated) { try first([0x08, 0x80]) }
        #expect(throws: ProtobufError.truncated) { try first([0x0A, 0x05, 0x41]) }
        #expect(throws: ProtobufError.truncated) { try first([0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) }
        #expect(throws: ProtobufError.truncated) { try first([0x0D, 0x01, 0x02]) }
        #expect(throws: ProtobufError.truncated) { try first([0x09, 0x01]) }
        #expect(throws: ProtobufError.invalidFieldNumber) { try first([0x00, 0x00]) }
        #expect(throws: ProtobufError.invalidWireType(3)) { try first([0x0B]) }
        #expect(throws: ProtobufError.invalidWireType(7)) { try first([0x0F]) }
        // A string field sent as a varint.
        #expect(throws: ProtobufError.wrongWireType(field: 1)) {
            _ = try ClientMessage.decode(type: MessageType.helloRequest, payload: [0x08, 0x01])
        }
    }

    @Test func helloRequestSkipsUnknownFields() throws {
        // client_info "HA", major 1, minor 10, then unknown fields of every wire type.
        let payload: [UInt8] = [
            0x0A, 0x02, 0x48, 0x41, 0x10, 0x01, 0x18, 0x0A,
            0x20, 0x05, 0x29, 1, 2, 3, 4, 5, 6, 7, 8, 0x32, 0x01, 0x00, 0x3D, 1, 2, 3, 4,
        ]
        let message = try ClientMessage.decode(type: MessageType.helloRequest, payload: payload[...])
        #expect(message == .hello(clientInfo: "HA", apiVersionMajor: 1, apiVersionMinor: 10))
    }

    @Test func emptyAndUnknownMessages() throws {
        #expect(try ClientMessage.decode(type: 7, payload: []) == .pingRequest)
        #expect(try ClientMessage.decode(type: 11, payload: []) == .listEntitiesRequest)
        #expect(try ClientMessage.decode(type: 9999, payload: [0xFF]) == .unknown(type: 9999))
        #expect(throws: ProtobufError.self) { _ = try ClientMessage.decode(type: 7, payload: [0x08]) }
        #expect(
            try ClientMessage.decode(type: 66, payload: [0x08, 0x01]) == .subscribeBluetoothLEAdvertisements(flags: 1))
        #expect(
            try ClientMessage.decode(type: 37, payload: [0x0D, 0x01, 0x00, 0x00, 0x80])
                == .getTimeResponse(epochSeconds: 0x8000_0001))
    }

    @Test func rawAdvertisementEncoding() {
        let message = ServerMessage.rawAdvertisements([
            .init(address: 0xAABB_CCDD_EEFF, rssi: -60, addressType: 1, data: [0x02, 0x01, 0x06])
        ])
        #expect(message.type == 93)
        // field 1 (message): field 1 varint address, field 2 sint32 -60 → 119, field 3 = 1, field 4 bytes.
        var inner: [UInt8] = [0x08]
        Protobuf.appendVarint(0xAABB_CCDD_EEFF, to: &inner)
        inner += [0x10, 0x77, 0x18, 0x01, 0x22, 0x03, 0x02, 0x01, 0x06]
        #expect(message.payload == [0x0A, UInt8(inner.count)] + inner)
    }

    @Test func deviceInfoCarriesTheProxyFlags() throws {
        let info = ServerMessage.DeviceInfo(
            name: "pi", friendlyName: "Pi", macAddress: "AA:BB:CC:DD:EE:FF", bluetoothMacAddress: "AA:BB:CC:DD:EE:FF",
            esphomeVersion: "2025.8.0", compilationTime: "", model: "gattway", manufacturer: "gattway", projectName: "",
            projectVersion: "", bluetoothProxyFeatures: [.passiveScan, .rawAdvertisements], apiEncryptionSupported: true
        )
        var reader = ProtobufReader(ServerMessage.deviceInfoResponse(info).payload)
        var flags: UInt32?
        var name: String?
        while let (field, value) = try reader.next() {
            if field == 15 { flags = try value.uint32(field: field) }
            if field == 2 { name = try value.string(field: field) }
        }
        #expect(flags == 33)
        #expect(name == "pi")
    }
}
