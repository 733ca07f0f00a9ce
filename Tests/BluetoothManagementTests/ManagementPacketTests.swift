import Bluetooth
import BluetoothManagement
import Testing

@Suite("Management packets: the six-octet header and its length")
struct ManagementPacketTests {
    @Test("a packet encodes code, controller and parameter length little endian, then the parameters")
    func encodesTheHeader() {
        let packet = ManagementPacket(code: 0x0012, controller: 0x0001, parameters: [0xAA, 0xBB, 0xCC])
        #expect(packet.bytes == [0x12, 0x00, 0x01, 0x00, 0x03, 0x00, 0xAA, 0xBB, 0xCC])
        #expect(ManagementCommand.readVersion().bytes == [0x01, 0x00, 0xFF, 0xFF, 0x00, 0x00])
    }

    @Test("one read decodes to the packet it holds")
    func decodesOnePacket() throws {
        let packet = try ManagementPacket.decode([0x04, 0x00, 0x02, 0x00, 0x00, 0x00])
        #expect(packet == ManagementPacket(code: 0x0004, controller: 2, parameters: []))
        #expect(try ManagementEvent.decode(packet) == .indexAdded(controller: 2))
    }
}
