import Bluetooth
import EventLoop
import Gateway
import JSON
import Synchronization
import Testing

@Suite("Value encodings, timestamps, link quality")
struct UnitTests {
    @Test(
        "encodings: byte order, sign, ranges, text forms",
        arguments: [
            (ValueEncoding.u8, JSONValue.number(255), [UInt8(255)]),
            (.s8, .number(-1), [0xFF]),
            (.u16le, .number(513), [0x01, 0x02]),
            (.u16be, .number(513), [0x02, 0x01]),
            (.s16le, .number(-2), [0xFE, 0xFF]),
            (.u32be, .number(0x01020304), [1, 2, 3, 4]),
            (.s32le, .number(-1), [0xFF, 0xFF, 0xFF, 0xFF]),
            (.float32le, .number(1), [0x00, 0x00, 0x80, 0x3F]),
            (.bool, .string("ON"), [1]),
            (.bool, .bool(false), [0]),
            (.hex, .string("01:ff 7E"), [0x01, 0xFF, 0x7E]),
            (.base64, .string("AQL/"), [0x01, 0x02, 0xFF]),
            (.utf8, .string("hé"), [0x68, 0xC3, 0xA9]),
            (.json, .object([("a", .number(1))]), Array(#"{"a":1}"#.utf8)),
        ])
    func encodes(encoding: ValueEncoding, value: JSONValue, bytes: [UInt8]) throws {
        #expect(try encoding.encode(value) == bytes)
    }

    @Test(
        "values that do not fit are errors",
        arguments: [
            (ValueEncoding.u8, JSONValue.number(256)), (.u8, .number(1.5)), (.s8, .number(128)), (.u16le, .number(-1)),
            (.u8, .string("1")), (.hex, .string("abc")), (.base64, .string("*")), (.bool, .number(2)),
            (.utf8, .number(1)),
        ])
    func rejects(encoding: ValueEncoding, value: JSONValue) {
        #expect(throws: CommandError.self) { try encoding.encode(value) }
    }

    @Test("command minimum/maximum narrow the range")
    func bounds() {
        #expect(throws: CommandError.self) { try ValueEncoding.u8.encode(.number(9), minimum: 10, maximum: 20) }
        #expect((try? ValueEncoding.u8.encode(.number(10), minimum: 10, maximum: 20)) == [10])
    }

    @Test(
        "last_seen is ISO 8601 UTC with milliseconds",
        arguments: [
            (Int64(0), "1970-01-01T00:00:00.000Z"),
            (1_796_058_000_123, "2026-11-30T17:00:00.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (4_102_444_799_999, "2099-12-31T23:59:59.999Z"),
        ])
    func timestamps(milliseconds: Int64, text: String) {
        #expect(Timestamp.string(milliseconds: milliseconds) == text)
    }

    @Test(
        "linkquality maps -100…-30 dBm linearly onto 0…255",
        arguments: [(-120, 0), (-100, 0), (-90, 36), (-70, 109), (-60, 146), (-30, 255), (0, 255)])
    func linkQuality(rssi: Int, quality: Int) {
        #expect(LinkQuality.from(rssi: rssi) == quality)
    }

    @Test(
        "the manual clock resumes sleepers and fires timers only when advanced past them, timers in deadline order on their loop"
    )
    func manualClock() async throws {
        let loop = EventLoop()
        defer { loop.shutdown() }
        let clock = ManualClock()
        let task = Task(executorPreference: loop.taskExecutor) { try await clock.sleep(until: 10) }
        await loop.settle()
        #expect(clock.sleeperCount == 1)
        let fired = Mutex<[Int]>([])
        let late = clock.schedule(at: 10, on: loop) { fired.withLock { $0.append(10) } }
        _ = clock.schedule(at: 5, on: loop) { fired.withLock { $0.append(5) } }
        let cancelled = clock.schedule(at: 7, on: loop) { fired.withLock { $0.append(7) } }
        cancelled.cancel()
        clock.advance(by: 9)
        await loop.settle()
        #expect(clock.sleeperCount == 1)
        #expect(fired.withLock { $0 } == [5])
        clock.advance(by: 1)
        try await task.value
        await loop.settle()
        #expect(fired.withLock { $0 } == [5, 10])
        _ = late
        #expect(clock.now() == 10)
    }
}
