import Bluetooth
import JSON

/// A write a simulated peripheral received (listed by the control interface's `RecordedWrites`).
public struct RecordedWrite: Sendable, Equatable {
    /// The adapter (`hci0`) and device address.
    public var adapter: String
    public var device: BluetoothAddress
    /// The characteristic (or descriptor) UUID and object path.
    public var uuid: BluetoothUUID
    public var path: String
    public var value: [UInt8]
    public var offset: UInt16
    /// "request", "command" (also for AcquireWrite datagrams), "reliable" or "descriptor".
    public var type: String
    /// Seconds since the simulator started.
    public var time: Double
}

/// A summary of the writes a characteristic received (``BlueZSimulator/received(device:uuid:)``).
public struct ReceivedBytes: Sendable, Equatable {
    public var writes = 0
    public var bytes = 0
    /// FNV-1a, 32-bit, of every byte in arrival order.
    public var checksum: UInt32 = ReceivedBytes.fnvOffset
    public var first: Double?
    public var last: Double?

    public static let fnvOffset: UInt32 = 0x811C_9DC5

    public init() {}

    /// The checksum of `bytes` as one stream (what a sender compares with).
    public static func checksum(of bytes: [UInt8]) -> UInt32 {
        var summary = ReceivedBytes()
        summary.add(bytes, at: 0)
        return summary.checksum
    }

    mutating func add(_ value: [UInt8], at time: Double) {
        writes += 1
        bytes += value.count
        for byte in value { checksum = (checksum ^ UInt32(byte)) &* 0x0100_0193 }
        if first == nil { first = time }
        last = time
    }
}

/// When one advertising report was due (its advertising event) and when the simulator sent it
/// (its loop's turn; reports sent in one turn share the time, and their signals one flush), on
/// the monotonic clock of `EventLoop.now()`, in nanoseconds; `sequence` is the device's count
/// of reports before this one (its first is 0), so a frame counter of its payload (`counter`
/// with start 0, step 1) names the report (the bench's report-to-MQTT latency).
public struct ReportTime: Sendable, Equatable {
    public var address: BluetoothAddress
    public var due: UInt64
    public var sent: UInt64
    public var sequence = 0

    public init(address: BluetoothAddress, due: UInt64, sent: UInt64, sequence: Int = 0) {
        self.address = address
        self.due = due
        self.sent = sent
        self.sequence = sequence
    }
}

/// What the simulator has done, for tests and the bench (control interface `Counters`).
public struct SimulatorCounters: Sendable, Equatable {
    public var advertisementReports = 0
    /// `StartDiscovery` calls received (refused ones included), to check clients back off.
    public var startDiscoveryCalls = 0
    /// `Device1.Connect` calls received (refused and failing ones included), so a test can wait
    /// until its call is pending instead of sleeping.
    public var connectCalls = 0
    /// Links that came up.
    public var connects = 0
    public var connectFailures = 0
    public var disconnects = 0
    public var reads = 0
    public var writes = 0
    /// Notifications delivered (as `Value` signals or datagrams on an AcquireNotify socket).
    public var notifications = 0
    /// Notifications of the last burst and the seconds it took to emit them.
    public var lastBurstCount = 0
    public var lastBurstSeconds = 0.0

    public init() {}

    /// As `a{st}` / a dictionary for the control interface.
    public var dictionary: [(String, UInt64)] {
        [
            ("AdvertisementReports", UInt64(advertisementReports)),
            ("StartDiscoveryCalls", UInt64(startDiscoveryCalls)),
            ("ConnectCalls", UInt64(connectCalls)), ("Connects", UInt64(connects)),
            ("ConnectFailures", UInt64(connectFailures)), ("Disconnects", UInt64(disconnects)),
            ("Reads", UInt64(reads)), ("Writes", UInt64(writes)), ("Notifications", UInt64(notifications)),
            ("LastBurstCount", UInt64(lastBurstCount)),
            ("LastBurstMicroseconds", UInt64(saturating: lastBurstSeconds * 1_000_000)),
        ]
    }
}
