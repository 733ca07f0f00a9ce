import ESPHomeAPI
import Testing

@Suite("ESPHome API frames")
struct FrameTests {
    @Test func plaintextFramesSplitAcrossReads() throws {
        var decoder = PlaintextFrameDecoder(maxPayload: 1024)
        let one = PlaintextFrameDecoder.encode(ServerMessage(type: 1, payload: [0x0A, 0x01, 0x41]))
        let two = PlaintextFrameDecoder.encode(ServerMessage(type: 300, payload: []))
        #expect(one == [0x00, 0x03, 0x01, 0x0A, 0x01, 0x41])
        #expect(two == [0x00, 0x00, 0xAC, 0x02])
        var frames: [UInt16] = []
        for byte in one + two {
            decoder.append([byte])
            while let frame = try decoder.next() { frames.append(frame.type) }
        }
        #expect(frames == [1, 300])
    }

    @Test func plaintextRefusals() {
        var big = PlaintextFrameDecoder(maxPayload: 16)
        big.append([0x00, 0x11, 0x01])
        #expect(throws: FrameError.tooLarge(17)) { _ = try big.next() }
        var wrong = PlaintextFrameDecoder(maxPayload: 16)
        wrong.append([0x01, 0x00, 0x00])
        #expect(throws: FrameError.badPreamble(1)) { _ = try wrong.next() }
        var long = PlaintextFrameDecoder(maxPayload: 16)
        long.append([0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01])
        #expect(throws: FrameError.malformedHeader) { _ = try long.next() }
        var type = PlaintextFrameDecoder(maxPayload: 16)
        type.append([0x00, 0x00, 0x80, 0x80, 0x04])
        #expect(throws: FrameError.malformedHeader) { _ = try type.next() }
    }

    @Test func noiseFrames() throws {
        var decoder = NoiseFrameDecoder(maxFrame: 100)
        decoder.append([0x01, 0x00])
        #expect(try decoder.next() == nil)
        decoder.append([0x02, 0xAA])
        #expect(try decoder.next() == nil)
        decoder.append([0xBB, 0x01, 0x00, 0x00])
        #expect(try decoder.next() == [0xAA, 0xBB])
        #expect(try decoder.next() == [])
        decoder.append([0x01, 0x00, 0x65])
        #expect(throws: FrameError.tooLarge(101)) { _ = try decoder.next() }
        var plain = NoiseFrameDecoder(maxFrame: 100)
        plain.append([0x00])
        #expect(throws: FrameError.badPreamble(0)) { _ = try plain.next() }
    }

    @Test func plaintextTransportBeforeAndAfter() throws {
        var transport = APITransport(encryption: .plaintext, name: "pi", mac: "aabbccddeeff", maxFrame: 1024)
        #expect(transport.isReady)
        let messages = try transport.receive([0x00, 0x00, 0x07])
        #expect(messages.map(\.type) == [7])
        transport.send(.empty(8))
        #expect(transport.outgoing == [0x00, 0x00, 0x08])
        // A Noise client's hello: refused with a frame that tells it this side is plaintext.
        var other = APITransport(encryption: .plaintext, name: "pi", mac: "aabbccddeeff", maxFrame: 1024)
        #expect(throws: APITransport.Failure.frame(.badPreamble(1))) { _ = try other.receive([0x01, 0x00, 0x00]) }
        #expect(other.outgoing.first == 0x00)
    }
}
