import Bluetooth
import BluetoothManagement
import EventLoop
import LocalSystem

#if canImport(Glibc)
    import Glibc
#endif

/// Where the management protocol is read from.
public enum ManagementEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// The kernel's Bluetooth management socket (`AF_BLUETOOTH`, `BTPROTO_HCI`,
    /// `HCI_CHANNEL_CONTROL`), beside bluetoothd.
    case kernel
    /// A Unix `SOCK_SEQPACKET` socket that serves the same protocol, one packet per datagram:
    /// the simulator's virtual controllers (`gattway simulate --mgmt-socket PATH`).
    case socket(path: String)

    /// `GATTWAY_MGMT_SOCKET=<path>` names a served socket (the simulator's); else the kernel's.
    public static func fromEnvironment(_ environment: [String: String]) -> ManagementEndpoint {
        if let path = environment["GATTWAY_MGMT_SOCKET"], !path.isEmpty { return .socket(path: path) }
        return .kernel
    }

    /// ``fromEnvironment(_:)`` of this process's environment.
    public static var current: ManagementEndpoint {
        guard let path = getenv("GATTWAY_MGMT_SOCKET") else { return .kernel }
        return fromEnvironment(["GATTWAY_MGMT_SOCKET": String(cString: path)])
    }

    public var description: String {
        switch self {
        case .kernel: "the kernel's Bluetooth management socket"
        case .socket(let path): "the management socket at \(path)"
        }
    }
}

/// Why the management socket cannot serve as the radio; the text says what to do.
public struct KernelRadioError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Every advertising report the kernel delivers, read from its Bluetooth management socket on
/// the loop thread (an ``EventLoop`` watch: no thread, no task per report), beside bluetoothd.
///
/// bluetoothd keeps everything else — discovery, connections, GATT, pairing, the adapter's
/// power. This socket mostly listens: it sends three read-only commands (Read Management Version
/// Information, Read Controller Index List, Read Controller Information), which change no state
/// of the kernel or of bluetoothd, the monitor commands of passive scans, and Load Connection
/// Parameters for the devices with `connection_params` (docs/bluez.md, "The kernel's management socket"). The kernel
/// sends Device Found to every *trusted* management socket (one bound with `CAP_NET_ADMIN`)
/// while a discovery, bluetoothd's, runs.
///
/// An actor on the loop's executor, like the managers. `deliver` gets each report on the loop
/// thread, inside the read of the socket.
public actor KernelRadio: LoopIsolated {
    public nonisolated let loop: EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
    public nonisolated let endpoint: ManagementEndpoint

    private let fd: Int32
    private var watch: EventLoop.Token?
    private let deliver: @Sendable (DeviceFound) -> Void
    private let events: (@Sendable (ManagementEvent) -> Void)?
    private let closed: (@Sendable () -> Void)?
    private var pending: [Pending] = []
    private var buffer = [UInt8](repeating: 0, count: 6 + Int(UInt16.max))
    private var nextRequest = 0
    /// Seconds the socket rests after a read while no command waits for its answer
    /// (``setCoalescing(_:)``); 0: never.
    private var coalescing: Double = 0

    /// Reports handed on.
    public private(set) var reports = 0
    /// Packets that did not decode (counted, logged by the caller through ``droppedPackets``).
    public private(set) var droppedPackets = 0
    /// Whether the socket is still open (a served socket's peer may go away).
    public private(set) var isOpen = true

    /// The controllers whose passive scan is wanted (``holdPassiveScan(controller:)``): one
    /// monitor each (several adapters of one gateway share this socket).
    private var passiveControllers: Set<UInt16> = []
    /// The handle of this socket's advertisement monitor per controller, while the kernel has it.
    private var monitorHandles: [UInt16: UInt16] = [:]
    /// Controllers whose monitor is being added (one command at a time per controller).
    private var addingMonitor: Set<UInt16> = []
    /// Pending re-add after someone else (bluetoothd starting) removed a monitor.
    private var readdTimer: EventLoop.Token?
    /// Times a monitor was removed by someone else and added again.
    public private(set) var monitorReadds = 0
    /// The connection parameters this socket loaded per controller
    /// (``loadConnectionParameters(_:controller:)``), oldest first, at most
    /// ``maxConnectionParameters`` each.
    private var connectionParameters: [UInt16: [ConnectionParameterEntry]] = [:]
    /// Entries kept per controller: a proxy client may ask for parameters of every device it
    /// connects, so the oldest entry goes beyond this (a device rule's is loaded again before each
    /// of its connects anyway).
    public static let maxConnectionParameters = 64
    /// Where the monitor's controller and handle are written while the kernel holds it
    /// (``keepMonitorRecord(at:)``), nil: nowhere.
    private var monitorRecordPath: String?
    /// The pattern of gattway's monitor. The kernel needs one for the command; without
    /// controller offload (no MSFT extension) it ignores it and reports every advertisement,
    /// Flags or not (docs/bluez.md §7).
    public static let monitorPatterns = [AdvertisementPattern(adType: 0x01, value: [0x06])]

    private struct Pending {
        let id: Int
        let opcode: UInt16
        let controller: UInt16
        let continuation: CheckedContinuation<[UInt8], any Error>
    }

    /// Opens the endpoint and starts reading. For the kernel's socket the process must hold
    /// `CAP_NET_ADMIN` (checked first: an untrusted socket opens but never hears a report).
    /// - Parameters:
    ///   - deliver: every Device Found and Advertisement Monitor Device Found, on the loop thread.
    ///   - events: every other event (controllers added or removed, discovering), on the loop thread.
    ///   - closed: once, on the loop thread, when the socket ended by itself (a served socket's
    ///     peer went away, a read error) — not after ``close()``.
    public static func open(
        _ endpoint: ManagementEndpoint, loop: EventLoop, deliver: @escaping @Sendable (DeviceFound) -> Void,
        events: (@Sendable (ManagementEvent) -> Void)? = nil, closed: (@Sendable () -> Void)? = nil
    ) async throws(KernelRadioError) -> KernelRadio {
        let fd = try openSocket(endpoint)
        do {
            return try await loop.submit {
                let radio = KernelRadio(
                    fd: fd, endpoint: endpoint, loop: loop, deliver: deliver, events: events, closed: closed)
                radio.assumeLoopIsolated { $0.startReading() }
                return radio
            }
        } catch {
            Glibc.close(fd)
            throw KernelRadioError("the event loop is gone")
        }
    }

    private init(
        fd: Int32, endpoint: ManagementEndpoint, loop: EventLoop, deliver: @escaping @Sendable (DeviceFound) -> Void,
        events: (@Sendable (ManagementEvent) -> Void)?, closed: (@Sendable () -> Void)?
    ) {
        self.fd = fd
        self.endpoint = endpoint
        self.loop = loop
        self.deliver = deliver
        self.events = events
        self.closed = closed
    }

    private func startReading() {
        watch = loop.addWatch(fd: fd, events: .readable) { [weak self] events in
            _ = self?.assumeLoopIsolated { $0.readAvailable(events) }
        }
    }

    /// Coalesces the reports: once the socket was read, it is not polled again for `seconds`
    /// while no command waits for its answer, so a steady stream of reports is read in batches,
    /// one wake-up per `seconds` (``EventLoop/setCoalescing(_:interval:)``, `bluetooth.report_batch`).
    /// The first report after a quiet spell is read at once; a command's answer is never held.
    /// 0 (the default): every report is read as it arrives.
    public func setCoalescing(_ seconds: Double) {
        coalescing = seconds.isFinite && seconds > 0 ? seconds : 0
        applyCoalescing()
    }

    /// The watch's rest now: none while a command waits for its answer.
    private func applyCoalescing() {
        guard let watch else { return }
        loop.setCoalescing(watch, interval: pending.isEmpty ? coalescing : 0)
    }

    /// At most this many packets are read per readiness: the rest wait for the loop's next turn
    /// (the watch is level-triggered), so a flood cannot hold the loop from its other sockets.
    static let packetsPerTurn = 256

    /// Reads the packets waiting (one per `recv`, at most ``packetsPerTurn``), then returns to the
    /// loop; true when the budget ran out before the socket was empty.
    @discardableResult
    private func readAvailable(_ events: EventLoop.IOEvents) -> Bool {
        var budget = Self.packetsPerTurn
        while isOpen {
            guard budget > 0 else { return true }
            budget -= 1
            let count = buffer.withUnsafeMutableBytes {
                recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_TRUNC))
            }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    if events.contains(.hangup) || events.contains(.error) { break }
                    return false
                }
                break
            }
            if count == 0 { break }  // a served socket's peer hung up (the kernel's never sends 0)
            guard count <= buffer.count else {
                droppedPackets += 1
                continue
            }
            handle(count: count)
        }
        guard isOpen else { return false }
        close()
        closed?()
        return false
    }

    // MARK: Links down

    /// A link the kernel said went down, and when (``disconnectReason(controller:address:)``).
    private struct Disconnect {
        let controller: UInt16
        let address: BluetoothAddress
        let reason: DisconnectReason
        let at: UInt64
    }

    /// The last Device Disconnected events, oldest first, at most ``rememberedDisconnects``.
    private var disconnects: [Disconnect] = []
    static let rememberedDisconnects = 64

    /// Why the kernel says the link to `address` on `controller` went down: the reason of its
    /// Device Disconnected for it in the last 10 s, taken (a second ask gets nil). What waits on
    /// the socket is read first: the kernel sends the event to every management socket before
    /// bluetoothd hears of it, so once bluetoothd's D-Bus signal of the link has arrived, the
    /// event is here. Nil when the kernel told nothing (or the socket's queue overflowed).
    public func disconnectReason(controller: UInt16, address: BluetoothAddress) -> DisconnectReason? {
        for _ in 0..<16 where readAvailable([]) {}
        guard
            let index = disconnects.lastIndex(where: { $0.controller == controller && $0.address == address })
        else { return nil }
        let found = disconnects.remove(at: index)
        return EventLoop.now() &- found.at <= 10_000_000_000 ? found.reason : nil
    }

    private func rememberDisconnect(controller: UInt16, address: BluetoothAddress, reason: DisconnectReason) {
        if disconnects.count >= Self.rememberedDisconnects { disconnects.removeFirst() }
        disconnects.append(Disconnect(controller: controller, address: address, reason: reason, at: EventLoop.now()))
    }

    private func handle(count: Int) {
        let event: ManagementEvent
        do {
            event = try buffer.withUnsafeBytes { bytes throws(ManagementDecodeError) in
                try ManagementEvent.decode(packetBytes: UnsafeRawBufferPointer(rebasing: bytes[0..<count]))
            }
        } catch {
            droppedPackets += 1
            return
        }
        switch event {
        case .deviceFound(let found):
            reports &+= 1
            deliver(found)
        case .commandComplete(let opcode, let status, let controller, let parameters):
            answer(opcode: opcode, controller: controller, status: status, parameters: parameters)
        case .commandStatus(let opcode, let status, let controller):
            answer(opcode: opcode, controller: controller, status: status, parameters: [])
        case .advertisementMonitorRemoved(let controller, let handle)
        where passiveControllers.contains(controller) && (handle == monitorHandles[controller] || handle == 0):
            // bluetoothd removes every monitor of a controller it takes on (its start): add
            // ours again, after a pause so that a daemon doing it in a loop costs nothing.
            monitorHandles.removeValue(forKey: controller)
            writeMonitorRecord()
            events?(event)
            scheduleReadd()
        case .indexRemoved(let controller) where passiveControllers.contains(controller):
            // The adapter is gone (a dongle pulled): its monitor went with it; added again
            // when the controller comes back (Index Added).
            monitorHandles.removeValue(forKey: controller)
            writeMonitorRecord()
            events?(event)
        case .indexAdded(let controller) where passiveControllers.contains(controller):
            events?(event)
            scheduleReadd()
        case .deviceDisconnected(let controller, let address, _, let reason):
            rememberDisconnect(controller: controller, address: address, reason: reason)
            events?(event)
        default:
            events?(event)
        }
    }

    private func answer(opcode: UInt16, controller: UInt16, status: UInt8, parameters: [UInt8]) {
        guard let index = pending.firstIndex(where: { $0.opcode == opcode && $0.controller == controller }) else {
            return
        }
        let request = pending.remove(at: index)
        if pending.isEmpty, coalescing > 0 { applyCoalescing() }
        if status == 0 {
            request.continuation.resume(returning: parameters)
        } else {
            request.continuation.resume(
                throwing: KernelRadioError(
                    "management command 0x\(Hex.encode(UInt64(opcode), digits: 4)) failed: status 0x\(Hex.encode(UInt64(status), digits: 2))"
                ))
        }
    }

    /// Sends `command` and returns the parameters of its Command Complete (after the opcode and
    /// status). Fails on a non-zero status, a closed socket or no answer within `timeout`.
    public func request(_ command: ManagementPacket, timeout: Double = 3) async throws -> [UInt8] {
        guard isOpen else { throw KernelRadioError("the management socket is closed") }
        let bytes = command.bytes
        let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
        guard sent == bytes.count else {
            throw KernelRadioError("cannot send a management command: \(String(cString: strerror(errno)))")
        }
        nextRequest += 1
        let id = nextRequest
        let timer = loop.addTimer(after: timeout) { [weak self] in
            self?.assumeLoopIsolated { radio in
                guard let index = radio.pending.firstIndex(where: { $0.id == id }) else { return }
                let request = radio.pending.remove(at: index)
                if radio.pending.isEmpty, radio.coalescing > 0 { radio.applyCoalescing() }
                request.continuation.resume(
                    throwing: KernelRadioError("no answer to a management command within \(timeout) s"))
            }
        }
        defer { loop.cancelTimer(timer) }
        return try await withCheckedThrowingContinuation { continuation in
            pending.append(
                Pending(id: id, opcode: command.code, controller: command.controller, continuation: continuation))
            if pending.count == 1, coalescing > 0 { applyCoalescing() }
        }
    }

    /// The management interface's version (Read Management Version Information).
    public func version(timeout: Double = 3) async throws -> ManagementVersion {
        try ManagementVersion.decode(try await request(ManagementCommand.readVersion(), timeout: timeout))
    }

    /// The controllers the kernel has (Read Controller Index List): `hciN` is index N.
    public func controllers(timeout: Double = 3) async throws -> [UInt16] {
        try ManagementCommand.decodeIndexList(
            try await request(ManagementCommand.readControllerIndexList(), timeout: timeout))
    }

    /// One controller's address, settings and name (Read Controller Information).
    public func controllerInfo(_ controller: UInt16) async throws -> ControllerInfo {
        try ControllerInfo.decode(try await request(ManagementCommand.readControllerInfo(controller: controller)))
    }

    // MARK: Connection parameters

    /// Makes the kernel ask for `entry`'s parameters when it next connects to its device on
    /// `controller` (Load Connection Parameters, docs/bluez.md §7.2). The command replaces what the
    /// kernel keeps for devices it does not connect or auto-connect now (on Linux 6.1 every such
    /// entry is dropped first), so every entry this socket loaded for the controller is sent again
    /// with it (the newest ``maxConnectionParameters``); an entry for the same address replaces the
    /// earlier one. A link that is up keeps its
    /// parameters (kernel 6.1). Throws when the kernel refuses the command (status, no answer).
    public func loadConnectionParameters(_ entry: ConnectionParameterEntry, controller: UInt16) async throws {
        var entries = connectionParameters[controller, default: []].filter { $0.address != entry.address }
        entries.append(entry)
        if entries.count > Self.maxConnectionParameters { entries.removeFirst() }
        connectionParameters[controller] = entries
        _ = try await request(ManagementCommand.loadConnectionParameters(controller: controller, entries: entries))
    }

    /// The parameters this socket loaded for `address` on `controller`, if any.
    public func loadedConnectionParameters(_ address: BluetoothAddress, controller: UInt16) -> ConnectionParameters? {
        connectionParameters[controller]?.last { $0.address == address }?.parameters
    }

    // MARK: Passive scan

    /// Makes the kernel scan `controller` passively while no discovery runs, delivering every
    /// advertisement as Advertisement Monitor Device Found (handle 0): an advertisement monitor
    /// of this socket (Add Advertisement Patterns Monitor). A discovery that runs meanwhile
    /// (bluetoothd's, active) takes the radio; the kernel returns to the passive scan after it.
    /// Idempotent; one monitor per controller (the adapters of one gateway share the socket);
    /// the monitor is added again when someone else removes it or the controller comes back.
    public func holdPassiveScan(controller: UInt16) async throws {
        passiveControllers.insert(controller)
        try await addMonitor(controller)
    }

    /// Removes this socket's monitor of `controller` (Remove Advertisement Monitor): the
    /// kernel's passive scan for it stops. Errors are ignored (the socket or controller may be gone).
    public func releasePassiveScan(controller: UInt16) async {
        guard passiveControllers.remove(controller) != nil else { return }
        if passiveControllers.isEmpty, let readdTimer {
            loop.cancelTimer(readdTimer)
            self.readdTimer = nil
        }
        guard let handle = monitorHandles.removeValue(forKey: controller) else { return }
        _ = try? await request(ManagementCommand.removeAdvertisementMonitor(controller: controller, handle: handle))
        writeMonitorRecord()
    }

    /// Removes every monitor of this socket (the stop).
    public func releasePassiveScan() async {
        for controller in passiveControllers.sorted() { await releasePassiveScan(controller: controller) }
    }

    /// Whether the kernel holds this socket's monitor of some controller now.
    public var isHoldingPassiveScan: Bool { !monitorHandles.isEmpty }

    /// Whether the kernel holds this socket's monitor of `controller` now.
    public func isHoldingPassiveScan(controller: UInt16) -> Bool { monitorHandles[controller] != nil }

    /// The handle of this socket's monitor (the first controller's), while the kernel has it.
    public var monitorHandle: UInt16? { monitorHandles.sorted { $0.key < $1.key }.first?.value }

    /// Keeps the monitors' controllers and handles in the file at `path` (a line "controller
    /// handle" each) while the kernel holds them, and first removes the monitors a previous
    /// process recorded there. The kernel keeps an advertisement monitor until someone removes
    /// it, not until its socket closes: a process killed before ``releasePassiveScan()``
    /// (SIGKILL, a crash) would leave the controller scanning passively for nobody until
    /// bluetoothd restarts. Errors are ignored (the monitor may be gone already: bluetoothd
    /// removes every monitor when it starts).
    public func keepMonitorRecord(at path: String) async {
        monitorRecordPath = path
        // A regular file of a few lines, looked at before it is read (the state directory may
        // hold anything): anything else is not used, and written anew below.
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_size <= Self.maximumRecordBytes,
            let text = LocalFile.readText(path)
        else {
            writeMonitorRecord()
            return
        }
        for line in text.split(separator: "\n").prefix(Self.maximumRecordedMonitors) {
            let fields = line.split(whereSeparator: \.isWhitespace).compactMap { UInt16($0) }
            // (Not ours: a monitor this radio added before this call may have the same handle.)
            guard fields.count == 2, fields[1] != 0, monitorHandles[fields[0]] != fields[1] else { continue }
            staleMonitorsRemoved += 1
            _ = try? await request(
                ManagementCommand.removeAdvertisementMonitor(controller: fields[0], handle: fields[1]), timeout: 1)
        }
        // The record is this process's now: the monitors of ours held meanwhile are written again.
        writeMonitorRecord()
    }

    /// Bytes of a monitor record read at most (16 lines of two numbers fit many times over).
    static let maximumRecordBytes = 4096

    /// Lines of a monitor record read at most (one per adapter: `bluetooth.adapters` has at most 8).
    static let maximumRecordedMonitors = 16

    /// Monitors a previous process left behind and this one removed (``keepMonitorRecord(at:)``).
    public private(set) var staleMonitorsRemoved = 0

    /// Writes (or, without a monitor, removes) the record of ``keepMonitorRecord(at:)``.
    private func writeMonitorRecord() {
        guard let path = monitorRecordPath else { return }
        if monitorHandles.isEmpty {
            unlink(path)
        } else {
            let lines = monitorHandles.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)\n" }
            try? LocalFile.write(lines.joined(), to: path)
        }
    }

    private func addMonitor(_ controller: UInt16) async throws {
        guard passiveControllers.contains(controller), monitorHandles[controller] == nil,
            !addingMonitor.contains(controller)
        else { return }
        addingMonitor.insert(controller)
        defer { addingMonitor.remove(controller) }
        let command = ManagementCommand.addAdvertisementPatternsMonitor(
            controller: controller, patterns: Self.monitorPatterns)
        let handle = try ManagementCommand.decodeMonitorHandle(
            try await request(command), command: ManagementCommand.Code.addAdvertisementPatternsMonitor)
        if passiveControllers.contains(controller) {
            monitorHandles[controller] = handle
            writeMonitorRecord()
        } else {
            // Released while the command was under way.
            _ = try? await request(ManagementCommand.removeAdvertisementMonitor(controller: controller, handle: handle))
        }
    }

    private func scheduleReadd() {
        guard readdTimer == nil, isOpen else { return }
        readdTimer = loop.addTimer(after: 1) { [weak self] in
            self?.assumeLoopIsolated { radio in
                radio.readdTimer = nil
                let missing = radio.passiveControllers.filter { radio.monitorHandles[$0] == nil }.sorted()
                guard !missing.isEmpty else { return }
                radio.monitorReadds += 1
                Task {
                    for controller in missing { try? await radio.addMonitor(controller) }
                }
            }
        }
    }

    /// Stops reading and closes the socket; waiting requests fail.
    public func close() {
        guard isOpen else { return }
        if let readdTimer { loop.cancelTimer(readdTimer) }
        readdTimer = nil
        isOpen = false
        if let watch { loop.removeWatch(watch) }
        watch = nil
        Glibc.close(fd)
        let waiting = pending
        pending = []
        for request in waiting {
            request.continuation.resume(throwing: KernelRadioError("the management socket was closed"))
        }
    }

    // MARK: Opening

    /// `AF_BLUETOOTH`, `BTPROTO_HCI`, `HCI_CHANNEL_CONTROL`, `HCI_DEV_NONE` (linux/bluetooth headers).
    static let afBluetooth: Int32 = 31
    static let btprotoHCI: Int32 = 1
    static let hciChannelControl: UInt16 = 3
    static let hciDevNone: UInt16 = 0xFFFF
    /// `CAP_NET_ADMIN`'s bit in the capability sets.
    static let capNetAdmin = 12

    private static func openSocket(_ endpoint: ManagementEndpoint) throws(KernelRadioError) -> Int32 {
        switch endpoint {
        case .kernel:
            guard hasNetAdmin() else {
                throw KernelRadioError(
                    "the process lacks CAP_NET_ADMIN, without which the kernel sends no advertising report to its management socket (run as root, or give the service AmbientCapabilities=CAP_NET_ADMIN)"
                )
            }
            let fd = socket(afBluetooth, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), btprotoHCI)
            guard fd >= 0 else {
                let reason = errno == EAFNOSUPPORT ? "the kernel has no Bluetooth support (AF_BLUETOOTH)" : errnoText()
                throw KernelRadioError("cannot open the management socket: \(reason)")
            }
            // struct sockaddr_hci { sa_family_t hci_family; unsigned short hci_dev, hci_channel; }
            var address: (UInt16, UInt16, UInt16) = (UInt16(afBluetooth), hciDevNone, hciChannelControl)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, 6) }
            }
            guard bound == 0 else {
                let reason = errnoText()
                Glibc.close(fd)
                throw KernelRadioError("cannot bind the management socket: \(reason)")
            }
            return fd
        case .socket(let path):
            let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw KernelRadioError("cannot open a Unix socket: \(errnoText())") }
            guard let address = UnixSocketAddress(path) else {
                Glibc.close(fd)
                throw KernelRadioError("not a usable path for the management socket: \(path)")
            }
            let connected = address.withSockaddr { connect(fd, $0, $1) }
            guard connected == 0 else {
                let reason = errnoText()
                Glibc.close(fd)
                throw KernelRadioError("cannot connect to the management socket at \(path): \(reason)")
            }
            return fd
        }
    }

    /// Whether `CAP_NET_ADMIN` is in the effective set (`CapEff` of /proc/self/status).
    public static func hasNetAdmin() -> Bool {
        let fd = Glibc.open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return false }
        let status = String(decoding: bytes[0..<count], as: UTF8.self)
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            let hex = line.dropFirst("CapEff:".count).filter { !$0.isWhitespace }
            guard let mask = UInt64(hex, radix: 16) else { return false }
            return mask & (1 << UInt64(capNetAdmin)) != 0
        }
        return false
    }

    private static func errnoText() -> String { String(cString: strerror(errno)) }
}
