import Bluetooth
import FIFOQueue
import JSON

/// Commands: MQTT command topics parsed into jobs, one serial queue per device (GATT operations
/// of a device never interleave), TTL and expiry, `commands.rate_limit`, and exactly one
/// response per command. A job waits for its device's link (asking the connection manager for
/// it ahead of background reconnects), then runs its GATT operations as one job of the core;
/// its completion answers the command and starts the next. Also `bridge/request/gatt/read` and
/// `gatt/write`, which run as jobs of the device's queue. Loop-confined.
///
/// What it needs of the other features it is given when it is made (the registry, the readings'
/// sources, the connections, the fleet); what only the gateway can do — register a device a
/// command names, publish a value read — is a parameter of the call that needs it.
final class CommandRunner {
    /// A device a command names.
    struct Target {
        var id: DeviceID
        var address: BluetoothAddress
        var name: String
        var ruleIndex: Int
    }

    /// The job a device runs now.
    private struct Running {
        var job: DeviceJob
        var name: String
        var ruleIndex: Int
        var startedAt: Double
        var timing = CommandReply.Timing()
        /// Waiting for the link (until it comes up, fails, or the job expires).
        var waiting = true
    }

    private let context: CoreContext
    private let registry: DeviceRegistry
    private let states: DeviceStates
    private let connections: ConnectionManager
    /// In a fleet: a command for a device another gateway owns is that gateway's to run.
    private let fleet: Fleet?
    private var queues: [BluetoothAddress: FIFO<DeviceJob>] = [:]
    private var running: [BluetoothAddress: Running] = [:]
    private var buckets: [BluetoothAddress: TokenBucket] = [:]

    init(
        context: CoreContext, registry: DeviceRegistry, states: DeviceStates, connections: ConnectionManager,
        fleet: Fleet?
    ) {
        self.context = context
        self.registry = registry
        self.states = states
        self.connections = connections
        self.fleet = fleet
    }

    private var base: String { context.base }
    private var limits: CommandSettings { context.config.commands }

    /// Whether the device has a job queued or running (it may not be forgotten or removed).
    func isBusy(_ address: BluetoothAddress) -> Bool {
        running[address] != nil || !(queues[address] ?? []).isEmpty
    }

    /// Whether any device has a job queued or running.
    var isIdle: Bool { running.isEmpty && queues.isEmpty }

    /// The registered device `id` as a command's target.
    private func target(_ id: DeviceID) -> Target {
        let device = registry[id]
        return Target(id: id, address: device.address, name: device.name, ruleIndex: device.ruleIndex)
    }

    // MARK: Messages

    /// A message on a device's command topic: `<device>/set`, `<device>/set/<command>` or
    /// `<device>/get` (other topics are ignored). Every command gets exactly one response — from
    /// this gateway unless a fleet gave the device to another. `resolve` gives the device a topic
    /// level names: a known device, or one a rule names, registered now (the gateway's: every
    /// feature hears of a new device). Whose device it named and whether this gateway took it
    /// (the fleet hears of it: docs/fleet.md, "Commands").
    @discardableResult
    func handle(_ message: MQTTInboundMessage, resolve: (String) -> DeviceID?) -> (
        address: BluetoothAddress, owned: Bool
    )? {
        guard message.topic.hasPrefix(base + "/") else { return nil }
        let levels = message.topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
            .map(String.init)
        if levels.first == "bridge" { return nil }
        guard levels.count >= 2, levels[1] == "set" || levels[1] == "get", levels.count <= (levels[1] == "set" ? 3 : 2)
        else { return nil }
        if message.retain {
            CommandReply.refuseRetained(message, defaultTopic: "\(base)/\(levels[0])/response", context: context)
            return nil
        }
        context.counters.commands += 1
        var reply = CommandReply(to: message, default: "\(base)/\(levels[0])/response", context: context)
        guard let target = resolve(levels[0]).map(target) else {
            // In a fleet every gateway has the same rules: none answers a name none knows twice
            // over — a name this gateway does not know gets no answer from it.
            if !context.config.fleet.enabled {
                reply.transaction = CommandRequest.transaction(in: message.payload, maxBytes: limits.maxPayloadBytes)
                respond(reply, .error, "unknown device \"\(levels[0])\" (not named by config.json)")
            }
            return nil
        }
        // In a fleet the device's owner runs and answers it.
        guard fleet.owns(target.address) else { return (target.address, false) }
        deviceCommand(message, levels: levels, to: target, reply: reply)
        return (target.address, true)
    }

    /// The gateway's wall clock and local UTC offset, for template commands.
    private func commandTime() -> CommandTime {
        let milliseconds = context.clock.wallMilliseconds()
        return CommandTime(
            unixSeconds: milliseconds / 1000,
            utcOffsetSeconds: context.clock.utcOffsetSeconds(atWallMilliseconds: milliseconds))
    }

    /// `<device>/set`, `<device>/set/<command>` or `<device>/get` for a device this gateway owns:
    /// rate limited, parsed against the device's rule, queued.
    private func deviceCommand(_ message: MQTTInboundMessage, levels: [String], to target: Target, reply: CommandReply)
    {
        var reply = reply
        let now = context.clock.now()
        if let refusal = rateLimit(target.address, name: target.name, now: now) {
            reply.transaction = CommandRequest.transaction(in: message.payload, maxBytes: limits.maxPayloadBytes)
            return respond(reply, .error, refusal)
        }
        let rule = context.rule(target.ruleIndex)
        let kind: DeviceJob.Kind
        var ttl = limits.ttl
        let sentAt: Int64?
        if levels[1] == "set" {
            let parsed = CommandRequest.set(
                message.payload, command: levels.count == 3 ? levels[2] : nil, rule: rule,
                maxBytes: limits.maxPayloadBytes, time: commandTime())
            reply.transaction = parsed.request.transaction
            sentAt = parsed.request.timestamp
            switch parsed.writes {
            case .failure(let error): return respond(reply, .error, error.message)
            case .success(let writes):
                kind = .write(writes)
                ttl = writes.compactMap(\.command.ttl).min() ?? ttl
            }
        } else {
            let parsed = CommandRequest.get(
                message.payload, rule: rule, sources: states.sources(target.id), maxBytes: limits.maxPayloadBytes)
            reply.transaction = parsed.request.transaction
            sentAt = parsed.request.timestamp
            switch parsed.reads {
            case .failure(let error): return respond(reply, .error, error.message)
            case .success(let reads): kind = .read(reads)
            }
        }
        submit(kind, to: target, reply: reply, ttl: ttl, sentAt: sentAt, now: now)
    }

    /// `bridge/request/gatt/read|write` with `{"device", "service"?, "characteristic", "value"?,
    /// "response"?, "transaction"?}`, only for devices whose rule sets `raw_gatt`. `resolve` as
    /// for ``handle(_:resolve:)``; a known device may also be named by its address.
    func gattRequest(_ request: BridgeRequest, resolve: (String) -> DeviceID?) {
        let now = context.clock.now()
        let object = request.object
        let verb = request.verb
        func respond(_ status: CommandReply.Status, _ error: String) { request.respond(status, error) }
        guard case .string(let name)? = object["device"],
            let target = (resolve(name) ?? (BluetoothAddress(name) != nil ? registry.id(nameOrAddress: name) : nil))
                .map(target)
        else {
            return respond(.error, "device: expected the name or address of a device config.json names")
        }
        if let refusal = rateLimit(target.address, name: target.name, now: now) {
            return respond(.error, refusal)
        }
        guard context.rule(target.ruleIndex).rawGATT else {
            return respond(
                .error, "raw GATT access to \(target.name) is not allowed (set raw_gatt in its device rule)")
        }
        guard case .string(let uuidText)? = object["characteristic"], let uuid = BluetoothUUID(uuidText) else {
            return respond(.error, "characteristic: expected a characteristic UUID")
        }
        var service: BluetoothUUID?
        if let value = object["service"] {
            guard case .string(let text) = value, let parsed = BluetoothUUID(text) else {
                return respond(.error, "service: expected a service UUID")
            }
            service = parsed
        }
        let kind: DeviceJob.Kind
        if verb == "gatt/read" {
            kind = .rawRead(service: service, characteristic: uuid)
        } else {
            guard case .string(let hex)? = object["value"], let bytes = Hex.decode(hex) else {
                return respond(.error, "value: expected the bytes to write as hex, e.g. \"01ff\"")
            }
            var withResponse = true
            if let flag = object["response"] {
                guard case .bool(let value) = flag else {
                    return respond(.error, "response: expected true or false")
                }
                withResponse = value
            }
            kind = .rawWrite(service: service, characteristic: uuid, value: bytes, withResponse: withResponse)
        }
        submit(kind, to: target, reply: request.commandReply, ttl: limits.ttl, sentAt: nil, now: now)
    }

    /// Spends a token of the device's `commands.rate_limit` bucket; the error text when empty.
    private func rateLimit(_ address: BluetoothAddress, name: String, now: Double) -> String? {
        let limit = limits.rateLimit
        guard limit.enabled else { return nil }
        // Made at the first command: a bucket made at registration would be just as full by then.
        var bucket = buckets[address] ?? TokenBucket(capacity: limit.burst, interval: limit.interval, now: now)
        let took = bucket.take(now: now)
        buckets[address] = bucket
        guard !took else { return nil }
        context.counters.dropped.rateLimited += 1
        return
            "rate limited: \(name) takes \(limit.burst) commands at once, then one per \(JSONValue.number(limit.interval).serialized)s (commands.rate_limit)"
    }

    // MARK: Queues

    /// Queues a validated job, or answers `expired` / queue full right away.
    private func submit(
        _ kind: DeviceJob.Kind, to target: Target, reply: CommandReply, ttl: Double, sentAt: Int64?, now: Double
    ) {
        var expiresAt = now + ttl
        if let sentAt {
            let age = max(0, Double(context.clock.wallMilliseconds() - sentAt) / 1000)
            expiresAt -= age
            if expiresAt <= now {
                return respond(reply, .expired, "the command is \(age)s old, older than its TTL of \(ttl)s")
            }
        }
        if (queues[target.address]?.count ?? 0) >= limits.queueLimit {
            return respond(reply, .error, "the command queue of \(target.name) is full (\(limits.queueLimit) waiting)")
        }
        enqueue(DeviceJob(kind: kind, receivedAt: now, expiresAt: expiresAt, reply: reply), for: target)
    }

    /// Appends a job (a poll, a read-once) to the registered device's queue and starts it when
    /// the device is idle.
    func enqueue(_ job: DeviceJob, for id: DeviceID) { enqueue(job, for: target(id)) }

    /// Appends a job (a command, a `/get`, a poll, a read-once) to the device's queue and starts
    /// it when the device is idle.
    private func enqueue(_ job: DeviceJob, for target: Target) {
        queues[target.address, default: []].append(job)
        if running[target.address] == nil { advance(target.address, name: target.name, ruleIndex: target.ruleIndex) }
    }

    /// Starts the device's next job: answered at once when it expired, dropped when it is a poll
    /// of a device no longer connected, run when the link is up, else waiting for the link.
    private func advance(_ address: BluetoothAddress, name: String, ruleIndex: Int) {
        while let job = queues[address]?.popFirst() {
            if queues[address]?.isEmpty == true { queues[address] = nil }
            let now = context.clock.now()
            var entry = Running(job: job, name: name, ruleIndex: ruleIndex, startedAt: now)
            entry.timing.queued = now - job.receivedAt
            if case .poll = job.kind, !connections.isConnected(address) { continue }
            if let expiresAt = job.expiresAt, now >= expiresAt {
                finish(entry, failure: .expired)
                continue
            }
            if connections.isConnected(address) {
                running[address] = entry
                return startGATT(address)
            }
            running[address] = entry
            if let expiresAt = job.expiresAt { context.due(at: expiresAt) }
            connections.requestForCommand(address, ruleIndex: ruleIndex)
            return
        }
        // The queue ran empty: an on-demand link may end when idle.
        guard let id = registry.id(address) else { return }
        connections.scheduleIdleDisconnect(address, rule: registry.rule(id), now: context.clock.now())
    }

    /// The device's link is up: a job waiting for it runs.
    func linkUp(_ address: BluetoothAddress) {
        guard running[address]?.waiting == true else { return }
        startGATT(address)
    }

    /// The device's link ended or an attempt failed: a job waiting for it fails with that error.
    func linkFailed(_ address: BluetoothAddress, _ error: BLEPortError) {
        guard var entry = running[address], entry.waiting else { return }
        running[address] = nil
        entry.timing.connect = context.clock.now() - entry.startedAt
        finish(
            entry,
            failure: error.kind == .connectionTimeout ? .timeout("connect: \(error)") : .error("connect: \(error)"))
        advance(address, name: entry.name, ruleIndex: entry.ruleIndex)
    }

    /// Jobs waiting for a link past their TTL at `now` are answered `expired`; a device that was
    /// only queued for a slot for them leaves the queue.
    func tick(now: Double) {
        for (address, entry) in running where entry.waiting {
            guard let expiresAt = entry.job.expiresAt, expiresAt <= now else { continue }
            running[address] = nil
            finish(entry, failure: .expired)
            connections.abandonQueued(address, rule: context.rule(entry.ruleIndex))
            advance(address, name: entry.name, ruleIndex: entry.ruleIndex)
        }
    }

    /// The earliest expiry of a job waiting for its link.
    var nextDeadline: Double? {
        running.values.filter(\.waiting).compactMap(\.job.expiresAt).min()
    }

    /// Runs the GATT part of the device's current job as a job of the core.
    private func startGATT(_ address: BluetoothAddress) {
        guard var entry = running[address] else { return }
        let now = context.clock.now()
        entry.waiting = false
        entry.timing.connect = now - entry.startedAt
        if let expiresAt = entry.job.expiresAt, now >= expiresAt {
            running[address] = nil
            finish(entry, failure: .expired)
            return advance(address, name: entry.name, ruleIndex: entry.ruleIndex)
        }
        running[address] = entry
        let steps = plan(
            entry.job.kind, rule: context.rule(entry.ruleIndex), characteristics: connections.characteristics(address))
        let ble = context.ble
        let clock = context.clock
        let timeout = context.config.bluetooth.gattTimeout
        context.jobs.spawn {
            .gatt(address, await Self.run(steps, address: address, ble: ble, clock: clock, timeout: timeout))
        }
    }

    /// The GATT operations of a job, with their characteristics resolved now.
    private func plan(_ kind: DeviceJob.Kind, rule: DeviceRule, characteristics: [BLECharacteristic]) -> [GATTStep] {
        func configured(_ ref: CharacteristicRef) -> GATTStep? {
            let specs = ref.poll ? rule.poll : rule.subscribe
            guard specs.indices.contains(ref.index) else { return nil }
            let spec = specs[ref.index]
            return GATTStep(
                action: .read(ref), characteristic: characteristics.first { spec.matches($0) },
                what: "read \(spec.characteristic.shortDescription)",
                missing: "characteristic \(spec.characteristic.shortDescription) not found on the device")
        }
        func raw(_ service: BluetoothUUID?, _ uuid: BluetoothUUID, _ action: GATTStep.Action, _ what: String)
            -> GATTStep
        {
            GATTStep(
                action: action,
                characteristic: characteristics.first { $0.uuid == uuid && (service == nil || $0.service == service) },
                what: what, missing: "characteristic \(uuid.shortDescription) not found on the device")
        }
        switch kind {
        case .write(let writes):
            return writes.map { write in
                var bytes = write.bytes
                if let value = write.clockValue, let now = try? write.command.encode(value, time: commandTime()) {
                    bytes = now
                }
                return GATTStep(
                    action: .write(bytes, withResponse: write.command.withResponse),
                    characteristic: characteristics.first { write.command.matches($0) },
                    what: "\(write.command.name): write",
                    missing:
                        "\(write.command.name): characteristic \(write.command.characteristic.shortDescription) not found on the device"
                )
            }
        case .read(let refs): return refs.compactMap(configured)
        case .poll(let spec): return [configured(CharacteristicRef(poll: true, index: spec))].compactMap { $0 }
        case .rawRead(let service, let uuid): return [raw(service, uuid, .read(nil), "read")]
        case .rawWrite(let service, let uuid, let value, let withResponse):
            return [raw(service, uuid, .write(value, withResponse: withResponse), "write")]
        }
    }

    /// The GATT job: each step with `bluetooth.gatt_timeout`, stopping at the first failure.
    private static func run(
        _ steps: [GATTStep], address: BluetoothAddress, ble: any BLEPort, clock: any GatewayClock,
        timeout: Double
    ) async -> GATTOutcome {
        let start = clock.now()
        var outcome = await perform(steps, address: address, ble: ble, clock: clock, timeout: timeout)
        outcome.seconds = clock.now() - start
        return outcome
    }

    private static func perform(
        _ steps: [GATTStep], address: BluetoothAddress, ble: any BLEPort, clock: any GatewayClock,
        timeout: Double
    ) async -> GATTOutcome {
        var outcome = GATTOutcome()
        for step in steps {
            guard let characteristic = step.characteristic else {
                outcome.failure = .error(step.missing)
                return outcome
            }
            do {
                switch step.action {
                case .write(let value, let withResponse):
                    try await withDeadline(clock.now() + timeout, clock: clock) {
                        try await ble.write(
                            address, characteristic: characteristic, value: value, withResponse: withResponse)
                    }
                case .read(let ref):
                    let value = try await withDeadline(clock.now() + timeout, clock: clock) {
                        try await ble.read(address, characteristic: characteristic)
                    }
                    if let ref {
                        outcome.values.append((ref, value))
                    } else {
                        outcome.data = .object([("value", .string(Hex.encode(value)))])
                    }
                }
            } catch is DeadlineExceeded {
                outcome.failure = .timeout("\(step.what) did not complete in \(timeout)s")
                return outcome
            } catch let error as BLEPortError {
                outcome.failure =
                    error.kind == .connectionTimeout
                    ? .timeout("\(step.what): \(error)") : .error("\(step.what): \(error)", attError: error.attError)
                return outcome
            } catch {
                outcome.failure = .error("\(step.what): \(error)")
                return outcome
            }
        }
        return outcome
    }

    /// A GATT job of the device ended: the values read go to `valueRead` (decoded and published
    /// by the gateway; `force`: republished even when rate control would hold it), the command is
    /// answered, and the device's next job starts.
    func finished(
        _ address: BluetoothAddress, _ outcome: GATTOutcome,
        valueRead: (BluetoothAddress, CharacteristicRef, [UInt8], _ force: Bool) -> Void
    ) {
        guard var entry = running.removeValue(forKey: address) else { return }
        let force: Bool
        if case .poll = entry.job.kind { force = false } else { force = true }
        for (ref, value) in outcome.values {
            context.counters.reads += 1
            valueRead(address, ref, value, force)
        }
        entry.timing.gatt = outcome.seconds
        finish(entry, failure: outcome.failure, data: outcome.data)
        advance(address, name: entry.name, ruleIndex: entry.ruleIndex)
    }

    /// Answers the job: `ok` with `data`, or its failure (a poll's failure is logged instead).
    private func finish(_ entry: Running, failure: JobFailure?, data: JSONValue? = nil) {
        guard let reply = entry.job.reply else {
            if let failure { context.log(.warning, "\(entry.name): poll failed: \(failure)") }
            return
        }
        switch failure {
        case nil: respond(reply, .ok, nil, timing: entry.timing, data: data)
        case .expired: respond(reply, .expired, "not started within its TTL", timing: entry.timing)
        case .timeout(let text): respond(reply, .timeout, text, timing: entry.timing)
        case .error(let text, let attError): respond(reply, .error, text, timing: entry.timing, attError: attError)
        }
    }

    private func respond(
        _ reply: CommandReply, _ status: CommandReply.Status, _ error: String?, timing: CommandReply.Timing = .init(),
        data: JSONValue? = nil, attError: UInt8? = nil
    ) {
        reply.send(status, error, timing: timing, data: data, attError: attError, context: context)
    }

    /// The device is removed: what it still had queued or running is answered with that.
    func removed(_ address: BluetoothAddress, name: String) {
        var entries: [Running] = []
        if let entry = running.removeValue(forKey: address) { entries.append(entry) }
        for job in queues.removeValue(forKey: address) ?? [] {
            entries.append(Running(job: job, name: name, ruleIndex: 0, startedAt: context.clock.now()))
        }
        buckets[address] = nil
        for entry in entries { finish(entry, failure: .error("the device was removed")) }
    }
}
