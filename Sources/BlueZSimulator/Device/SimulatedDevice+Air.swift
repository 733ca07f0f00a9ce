import EventLoop
import JSON

/// The link's throughput (`timing.connection_interval` > 0, docs/simulator.md "The link's
/// throughput"): ATT PDUs leave in connection events `connection_interval` apart, at most
/// `packets_per_event` per event, one PDU per LL packet (a data length that fits the ATT MTU).
/// As bluetoothd's ATT layer (src/shared/att.c) orders them: a request when none is outstanding
/// first, then write commands in the order they came; a request's response arrives in the first
/// connection event at least `gatt_latency` (and at least one interval) after it went out.
/// bluetoothd answers a write command's `WriteValue` when it is queued, not sent, and bounds
/// nothing: neither does this queue.
struct AirQueue {
    /// Write commands waiting for a packet: the characteristic's object path and the value.
    var commands: [(path: String, bytes: [UInt8])] = []
    var commandsHead = 0
    /// Requests waiting to go out: `send` is called when the request leaves, with the delay to
    /// its response's connection event.
    var requests: [(Double) -> Void] = []
    var requestOutstanding = false
    /// The next connection event's timer (nil: the link is idle, no event scheduled).
    var timer: EventLoop.Token?
    /// The first connection event of this link (ns, `EventLoop.now()`): events are on its grid.
    var anchor: UInt64?

    var queuedCommands: Int { commands.count - commandsHead }
    var isIdle: Bool { queuedCommands == 0 && requests.isEmpty }
}

extension SimulatedDevice {
    /// Whether the link model is on.
    static func airModelled(_ simulator: isolated BlueZSimulator) -> Bool {
        simulator.timing.connectionInterval > 0
    }

    /// A write command for `characteristic` waits for a packet of a connection event.
    func queueCommand(
        _ bytes: [UInt8], for characteristic: SimulatedCharacteristic, in simulator: isolated BlueZSimulator
    ) {
        air.commands.append((characteristic.path.rawValue, bytes))
        scheduleConnectionEvent(in: simulator)
    }

    /// A request waits for its turn on the air; `respond` runs at its response's connection event.
    func queueRequest(_ respond: @escaping () -> Void, in simulator: isolated BlueZSimulator) {
        let path = self.path
        air.requests.append { delay in
            _ = simulator.after(delay) {
                simulator.devices[path]?.air.requestOutstanding = false
                respond()
                simulator.devices[path]?.scheduleConnectionEvent(in: simulator)
            }
        }
        scheduleConnectionEvent(in: simulator)
    }

    /// Arms the timer for the next connection event on the link's grid, unless one is armed.
    func scheduleConnectionEvent(in simulator: isolated BlueZSimulator) {
        guard air.timer == nil, !air.isIdle, case .connected = link else { return }
        let interval = max(1, UInt64(saturating: simulator.timing.connectionInterval * 1e9))
        let now = EventLoop.now()
        let anchor = air.anchor ?? now
        air.anchor = anchor
        let next = anchor + (now &- anchor + interval - 1) / interval * interval
        let path = self.path
        air.timer = simulator.after(Double(next &- now) / 1e9) {
            guard let device = simulator.devices[path] else { return }
            device.air.timer = nil
            device.connectionEvent(in: simulator)
        }
    }

    /// One connection event: the packets it carries reach the peer.
    func connectionEvent(in simulator: isolated BlueZSimulator) {
        guard case .connected = link else { return }
        let timing = simulator.timing
        var packets = timing.packetsPerEvent
        if !air.requestOutstanding, !air.requests.isEmpty {
            let send = air.requests.removeFirst()
            air.requestOutstanding = true
            packets -= 1
            let events = max(1, (timing.gattLatency / timing.connectionInterval).rounded(.up))
            send(events * timing.connectionInterval)
        }
        while packets > 0, air.queuedCommands > 0 {
            let (path, bytes) = air.commands[air.commandsHead]
            air.commandsHead += 1
            packets -= 1
            guard let characteristic = characteristics.first(where: { $0.path.rawValue == path }) else { continue }
            characteristic.peerReceivedWrite(bytes, offset: 0, type: "command", of: self, in: simulator)
        }
        if air.commandsHead >= 1024 || air.queuedCommands == 0 {
            air.commands.removeFirst(air.commandsHead)
            air.commandsHead = 0
        }
        scheduleConnectionEvent(in: simulator)
    }

    /// The link is down: queued commands are lost, queued requests fail (their responses check
    /// the link), the grid starts again at the next connection.
    func airLinkDown(in simulator: isolated BlueZSimulator) {
        simulator.cancel(air.timer)
        let requests = air.requests
        air = AirQueue()
        for send in requests { send(0) }
    }
}
