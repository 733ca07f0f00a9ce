import Gateway
import Glibc
import LocalSystem
import Synchronization

/// Queue files for ``FuzzTargets/storeAndForward``: the one temporary directory of this process,
/// the structured encoding of fuzzed records, and the seeds (files written by ``DiskQueue``).
///
/// Record encoding (repeated to the end of the input): a kind byte, then —
/// - bit 7 set: raw bytes (a chunk) appended as they are: torn or garbage data between records;
/// - else bit 6 set: a chunk as the body of a record with a valid header (a wrong layout under a
///   good CRC);
/// - else bit 0 set: a removal mark for the next u64 sequence;
/// - else a message: sequence (bit 1: a u64, else a byte), capture time (bit 2: an i64, else a
///   fixed time), qos byte, retain byte, topic chunk (≤ 64), correlation data (bit 3: a chunk),
///   payload chunk.
enum QueueFileRecords {
    /// A directory made once per process (on tmpfs when there is one: the queue's fsyncs are
    /// then free); each input uses a file of its own in it (``newPath()``) and removes it afterwards.
    static let directory: String = {
        for base in ["/dev/shm", "/tmp"] where LocalFile.isDirectory(base) {
            var template = Array("\(base)/gattway-fuzz-XXXXXX".utf8CString)
            if let made = mkdtemp(&template) { return String(cString: made) }
        }
        fatalError("gattway-fuzz: cannot make a temporary directory")
    }()

    private static let inputs = Atomic<Int>(0)

    /// A file name for one input: the tests run a target's replay and mutations at once in one
    /// process, so two inputs must never share the file.
    static func newPath() -> String {
        directory + "/queue-\(inputs.add(1, ordering: .relaxed).newValue)"
    }

    static func frame(_ input: inout FuzzInput) -> [UInt8] {
        var file: [UInt8] = []
        while !input.isEmpty {
            let kind = input.byte()
            if kind & 0x80 != 0 {
                file += input.chunk()
                continue
            }
            var body: [UInt8]
            if kind & 0x40 != 0 {
                body = input.chunk()
            } else if kind & 1 != 0 {
                body = [2]
                append(input.uint64(), &body)
            } else {
                body = [1]
                append(kind & 2 != 0 ? input.uint64() : UInt64(input.byte()), &body)
                append(kind & 4 != 0 ? input.uint64() : 1_767_225_600_000, &body)
                body.append(input.byte())
                body.append(input.byte())
                appendField(input.chunk(limit: 64), &body)
                if kind & 8 != 0 {
                    body.append(1)
                    appendField(input.chunk(), &body)
                } else {
                    body.append(0)
                }
                appendField(input.chunk(), &body)
            }
            file += QueueRecord.frame(body)
        }
        return file
    }

    /// Writes `bytes` as the whole file (no fsync, no rename: the file is thrown away after the input).
    static func write(_ bytes: [UInt8], to path: String) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return bytes.withUnsafeBytes { raw in raw.isEmpty || Glibc.write(fd, raw.baseAddress, raw.count) == raw.count }
    }

    static func append(_ value: UInt64, _ bytes: inout [UInt8]) {
        for shift in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(shift)))) }
    }

    static func append32(_ value: UInt32, _ bytes: inout [UInt8]) {
        for shift in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(shift)))) }
    }

    static func appendField(_ field: [UInt8], _ bytes: inout [UInt8]) {
        append32(UInt32(field.count), &bytes)
        bytes += field
    }

    /// Files written by DiskQueue itself (messages of every shape, removal marks, a torn tail),
    /// as raw-mode inputs, and a few structured inputs.
    static let seeds: [[UInt8]] = {
        let seedPath = newPath()
        defer { unlink(seedPath) }
        func written(_ body: (DiskQueue) -> Void) -> [UInt8] {
            unlink(seedPath)
            guard
                let queue = try? DiskQueue(
                    path: seedPath, limits: DiskQueue.Limits(maxMessages: 100, maxBytes: 1 << 20, maxAge: 1e6))
            else { return [] }
            body(queue)
            queue.close()
            return LocalFile.read(seedPath) ?? []
        }
        let now: Int64 = 1_767_225_600_000
        let state = MQTTOutboundMessage(
            topic: "gattway/kitchen", payload: Array(#"{"temperature":21.5,"humidity":45}"#.utf8), qos: 1,
            retain: true)
        let response = MQTTOutboundMessage(
            topic: "gattway/bridge/response/1", payload: Array(#"{"status":"ok"}"#.utf8), qos: 2,
            retain: false, correlationData: [0xDE, 0xAD, 0xBE, 0xEF])
        let files = [
            written { $0.append(state, capturedAt: now, now: now) },
            written { queue in
                for index in 0..<4 {
                    queue.append(index % 2 == 0 ? state : response, capturedAt: now + Int64(index), now: now)
                }
                if let first = queue.firstSequence { queue.remove(first) }
            },
            written { queue in
                queue.append(
                    MQTTOutboundMessage(topic: "gattway/ü/é", payload: [], qos: 0, retain: false), capturedAt: 0,
                    now: now)
                queue.append(response, capturedAt: now, now: now)
            },
        ]
        var seeds = files.map { [0] + $0 }
        if let last = files.last, last.count > 3 { seeds.append([0] + last.dropLast(3)) }  // a torn tail
        seeds.append([0] + (files.first ?? []) + [0xFF, 0xFF, 0xFF, 0x7F, 0, 0, 0, 0])  // a length past the end
        // Structured: two messages and a removal mark; a message with a full u64 sequence. (The
        // compaction step has a fixture instead, Tests/Fixtures/fuzz/store-and-forward/compaction:
        // a seed would make a tenth of the tests' debug-build mutations write 1 MB.)
        seeds.append(
            [1, 0x00, 7, 1, 0, 5] + Array("a/b/c".utf8) + [2, 0x7B, 0x7D, 0x08, 9, 2, 1, 3] + Array("x/y".utf8) + [
                2, 1, 2, 1, 0x41,
                0x01, 8, 0, 0, 0, 0, 0, 0, 0,
            ])
        seeds.append([0x01, 0x02, 0x07, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 1, 0x74, 1, 0x70])
        return seeds
    }()
}
