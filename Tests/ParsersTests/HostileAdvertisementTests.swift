import Bluetooth
import Parsers
import Testing

/// Advertisements a neighbour in radio range can send to stop the process, each found by an
/// attacker or a fuzzer; the corpus of Tests/Fixtures/fuzz replays them too.
@Suite("Hostile advertisements")
struct HostileAdvertisementTests {
    /// BTHome v1, object header 0x29 (signed, 9 bytes with the id), id 0x50 (timestamp): an
    /// 8-byte timestamp past 2^63 seconds.
    static let hugeTimestamp = [UInt8](hexString: "2950b727bb495a87a0eb2a4fab074a3e55ddaad4719cdba912")

    @Test("a BTHome v1 timestamp past the year 9999 is a malformed frame, not a trap")
    func bthomeV1HugeTimestamp() {
        let advertisement = AdvertisementData(serviceData: [BluetoothUUID(0x181C): Self.hugeTimestamp])
        do {
            let decoded = try ParserRegistry.builtIn.decode(AdvertisementContext(advertisement: advertisement))
            Issue.record("decoded \(decoded)")
        } catch {
            #expect(error.kind == .malformed)
            #expect(error.message.contains("after the year 9999"), "\(error.message)")
        }
    }

    @Test("gattway decode answers the hostile line with an error and goes on with the next line")
    func decodeLine() {
        let decoder = VectorLineDecoder()
        let hostile = decoder.decode(
            line: #"{"service_data": {"181c": "2950b727bb495a87a0eb2a4fab074a3e55ddaad4719cdba912"}}"#)
        #expect(hostile.hasPrefix(#"{"error":"#), "\(hostile)")
        // The largest timestamp that still has a four-digit year, as 8 bytes, decodes.
        let latest = decoder.decode(line: #"{"service_data": {"181c": "29507f41f4ff3a000000"}}"#)
        #expect(latest.contains("9999-12-31T23:59:59+00:00"), "\(latest)")
    }
}
