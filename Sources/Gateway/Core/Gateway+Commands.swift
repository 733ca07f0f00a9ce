import Bluetooth
import JSON

extension Gateway {
    /// A message on a command topic: `<device>/set`, `<device>/set/<command>`, `<device>/get`
    /// or `bridge/request/<verb>`. Every message gets exactly one response.
    public func handle(_ message: MQTTInboundMessage) {
        if config.homeAssistant.enabled, message.topic == config.homeAssistant.statusTopic { return homeAssistantStatus(message) }
        guard message.topic.hasPrefix(base + "/") else { return }
        let levels = message.topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if levels.first == "bridge" {
            guard levels.count >= 3, levels[1] == "request" else { return }
            let verb = levels[2...].joined(separator: "/")
            if message.retain { return refuseRetained(message, defaultTopic: "\(base)/bridge/response/\(verb)") }
            return bridgeRequest(verb, message)
        }
        guard levels.count >= 2, levels[1] == "set" || levels[1] == "get", levels.count <= (levels[1] == "set" ? 3 : 2) else { return }
        if message.retain { return refuseRetained(message, defaultTopic: "\(base)/\(levels[0])/response") }
        counters.commands += 1
        let now = clock.now()
        var reply = CommandReply(topic: responseTopic(message, default: "\(base)/\(levels[0])/response"),
                                 correlationData: message.correlationData)
        guard let index = device(named: levels[0]) else {
            reply.transaction = CommandRequest.transaction(in: message.payload, maxBytes: config.commands.maxPayloadBytes)
            respond(reply, .error, "unknown device \"\(levels[0])\" (not named by config.json)")
            return
        }
        if let refusal = rateLimit(index, now: now) {
            reply.transaction = CommandRequest.transaction(in: message.payload, maxBytes: config.commands.maxPayloadBytes)
            return respond(reply, .error, refusal)
        }
        let rule = rule(index)
        let limits = config.commands
        let kind: DeviceJob.Kind
        let request: CommandRequest
        var ttl = limits.ttl
        if levels[1] == "set" {
            let parsed = CommandRequest.set(message.payload, command: levels.count == 3 ? levels[2] : nil, rule: rule,
                                            maxBytes: limits.maxPayloadBytes)
            request = parsed.request
            reply.transaction = request.transaction
            switch parsed.writes {
            case .failure(let error): return respond(reply, .error, error.message)
            case .success(let writes):
                kind = .write(writes)
                ttl = writes.compactMap(\.command.ttl).min() ?? ttl
            }
        } else {
            let parsed = CommandRequest.get(message.payload, rule: rule, sources: devices[index].sources, maxBytes: limits.maxPayloadBytes)
            request = parsed.request
            reply.transaction = request.transaction
            switch parsed.reads {
            case .failure(let error): return respond(reply, .error, error.message)
            case .success(let reads): kind = .read(reads)
            }
        }
        submit(kind, index: index, reply: reply, ttl: ttl, sentAt: request.timestamp, now: now)
    }

    /// A command published with the retain flag: the broker hands it to every new subscription,
    /// so running it would actuate again at every start and every broker reconnect. It is
    /// answered once (on its response topic) and counted (`dropped.retained_command`), never run.
    func refuseRetained(_ message: MQTTInboundMessage, defaultTopic: String) {
        counters.commands += 1
        counters.dropped.retainedCommand += 1
        log(.warning, "\(message.topic): retained command not executed (publish commands without the retain flag)")
        var reply = CommandReply(topic: responseTopic(message, default: defaultTopic), correlationData: message.correlationData)
        reply.transaction = CommandRequest.transaction(in: message.payload, maxBytes: config.commands.maxPayloadBytes)
        respond(reply, .error, "retained command not executed")
    }

    /// Where a command's response goes: the MQTT 5 response topic when it is one the gateway may
    /// publish a response on, else `fallback`. A response topic is the requester's choice, and the
    /// gateway publishes with its own rights, so one under the base topic (other than a
    /// `…/response` topic) or the Home Assistant discovery prefix would let a client that may only
    /// send commands overwrite device states or discovery configs; wildcards and `$` topics are
    /// not publishable at all.
    func responseTopic(_ message: MQTTInboundMessage, default fallback: String) -> String {
        guard let topic = message.responseTopic else { return fallback }
        let reserved = topic.hasPrefix(base + "/") && !topic.hasSuffix("/response") && !topic.hasPrefix(base + "/bridge/response/")
        let discovery = config.homeAssistant.enabled && (topic == config.homeAssistant.discoveryPrefix
            || topic.hasPrefix(config.homeAssistant.discoveryPrefix + "/"))
        guard !topic.isEmpty, topic.utf8.count <= 1024, !topic.hasPrefix("$"), !topic.contains("+"), !topic.contains("#"),
            !topic.utf8.contains(0), !reserved, !discovery
        else {
            counters.dropped.responseTopic += 1
            log(.info, "\(message.topic): response topic \"\(topic.prefix(120))\" refused; answering on \(fallback)")
            return fallback
        }
        return topic
    }

    /// Queues a validated job, or answers `expired` / queue full right away.
    func submit(_ kind: DeviceJob.Kind, index: Int, reply: CommandReply, ttl: Double, sentAt: Int64?, now: Double) {
        var expiresAt = now + ttl
        if let sentAt {
            let age = max(0, Double(clock.wallMilliseconds() - sentAt) / 1000)
            expiresAt -= age
            if expiresAt <= now {
                return respond(reply, .expired, "the command is \(age)s old, older than its TTL of \(ttl)s")
            }
        }
        if (queues[devices[index].address]?.count ?? 0) >= config.commands.queueLimit {
            return respond(reply, .error, "the command queue of \(devices[index].name) is full (\(config.commands.queueLimit) waiting)")
        }
        enqueue(DeviceJob(kind: kind, receivedAt: now, expiresAt: expiresAt, reply: reply), for: index)
    }

    /// The device a topic names: a known device, else a rule's friendly name or an address a
    /// rule names (registered now, so a command can connect to a device not seen yet).
    func device(named name: String) -> Int? {
        if let index = devices.firstIndex(where: { $0.name == name }) { return index }
        for (ruleIndex, rule) in config.devices.enumerated() {
            guard rule.match.addresses.count == 1, let address = rule.match.addresses.first else { continue }
            if rule.name == name || (rule.name == nil && DeviceRecord.defaultName(address) == name) {
                if let known = indexByAddress[address] { return known }
                return register(address, ruleIndex: ruleIndex)
            }
        }
        return nil
    }

    /// Appends a job to the device's queue and starts the device's worker when idle.
    func enqueue(_ job: DeviceJob, for index: Int) {
        let address = devices[index].address
        queues[address, default: []].append(job)
        guard !draining.contains(address) else { return }
        draining.insert(address)
        Task { await self.drain(address) }
    }

    /// The device's worker: runs its jobs one at a time, so GATT operations of one device never
    /// interleave.
    func drain(_ address: BluetoothAddress) async {
        while var queue = queues[address], !queue.isEmpty {
            let job = queue.removeFirst()
            queues[address] = queue.isEmpty ? nil : queue
            activeJobs += 1
            await perform(job, address)
            activeJobs -= 1
        }
        draining.remove(address)
        if let index = indexByAddress[address], !rule(index).connect, devices[index].link == .connected {
            let idle = clock.now() + config.commands.idleDisconnect
            devices[index].idleDisconnectAt = idle
            armTimer(idle)
        }
        signalIdleIfNeeded()
    }

    /// Runs one job of the device at `address`. A device is named by its address across every
    /// suspension: its position in `devices` moves when another device is removed, and it may be
    /// removed itself, so the position is looked up again after each `await` (``current(_:)``).
    func perform(_ job: DeviceJob, _ address: BluetoothAddress) async {
        guard let index = indexByAddress[address] else { return }
        let name = devices[index].name
        var timing = CommandReply.Timing()
        let start = clock.now()
        timing.queued = start - job.receivedAt
        if case .poll = job.kind, devices[index].link != .connected { return }
        var gattStart: Double?
        do {
            if let expiresAt = job.expiresAt, start >= expiresAt { throw JobFailure.expired }
            do {
                try await awaitConnection(address, expiresAt: job.expiresAt)
            } catch let error as BLEPortError {
                throw error.kind == .connectionTimeout ? JobFailure.timeout("connect: \(error)") : JobFailure.error("connect: \(error)")
            }
            let connected = clock.now()
            timing.connect = connected - start
            if let expiresAt = job.expiresAt, connected >= expiresAt { throw JobFailure.expired }
            gattStart = connected
            let data = try await gatt(job.kind, address)
            timing.gatt = clock.now() - connected
            if let reply = job.reply { respond(reply, .ok, nil, timing: timing, data: data) }
        } catch let failure as JobFailure {
            let now = clock.now()
            if let gattStart {
                timing.gatt = now - gattStart
            } else if failure.isConnectFailure {
                timing.connect = now - start
            }
            guard let reply = job.reply else {
                log(.warning, "\(name): poll failed: \(failure)")
                return
            }
            switch failure {
            case .expired: respond(reply, .expired, "not started within its TTL", timing: timing)
            case .timeout(let text): respond(reply, .timeout, text, timing: timing)
            case .error(let text): respond(reply, .error, text, timing: timing)
            }
        } catch {
            if let reply = job.reply { respond(reply, .error, "\(error)", timing: timing) }
        }
    }

    /// Where the device at `address` is in `devices` now; fails the job when it was removed.
    func current(_ address: BluetoothAddress) throws(JobFailure) -> Int {
        guard let index = indexByAddress[address] else { throw JobFailure.error("the device was removed") }
        return index
    }

    /// The GATT part of a job; returns the `data` of the response (raw reads).
    private func gatt(_ kind: DeviceJob.Kind, _ address: BluetoothAddress) async throws -> JSONValue? {
        switch kind {
        case .write(let writes):
            for write in writes {
                let index = try current(address)
                guard let characteristic = devices[index].characteristics.first(where: { write.command.matches($0) }) else {
                    throw JobFailure.error("\(write.command.name): characteristic \(write.command.characteristic.shortDescription) not found on the device")
                }
                try await operation("\(write.command.name): write") { [ble] in
                    try await ble.write(address, characteristic: characteristic, value: write.bytes, withResponse: write.command.withResponse)
                }
            }
            return nil
        case .read(let refs):
            for ref in refs { try await read(ref, address, force: true) }
            return nil
        case .poll(let spec):
            try await read(CharacteristicRef(poll: true, index: spec), address, force: false)
            return nil
        case .rawRead(let service, let uuid):
            let characteristic = try rawCharacteristic(try current(address), service, uuid)
            let value = try await operation("read") { [ble] in try await ble.read(address, characteristic: characteristic) }
            return .object([("value", .string(value.hexText))])
        case .rawWrite(let service, let uuid, let value, let withResponse):
            let characteristic = try rawCharacteristic(try current(address), service, uuid)
            try await operation("write") { [ble] in
                try await ble.write(address, characteristic: characteristic, value: value, withResponse: withResponse)
            }
            return nil
        }
    }

    private func read(_ ref: CharacteristicRef, _ address: BluetoothAddress, force: Bool) async throws {
        let index = try current(address)
        let specs = ref.poll ? rule(index).poll : rule(index).subscribe
        guard specs.indices.contains(ref.index) else { return }
        let spec = specs[ref.index]
        guard let characteristic = devices[index].characteristics.first(where: { spec.matches($0) }) else {
            throw JobFailure.error("characteristic \(spec.characteristic.shortDescription) not found on the device")
        }
        let value = try await operation("read \(spec.characteristic.shortDescription)") { [ble] in
            try await ble.read(address, characteristic: characteristic)
        }
        counters.reads += 1
        guard let now = indexByAddress[address] else { return }
        characteristicValue(now, poll: ref.poll, spec: ref.index, value: value, force: force)
    }

    private func rawCharacteristic(_ index: Int, _ service: BluetoothUUID?, _ uuid: BluetoothUUID) throws -> BLECharacteristic {
        guard let characteristic = devices[index].characteristics.first(where: { $0.uuid == uuid && (service == nil || $0.service == service) })
        else { throw JobFailure.error("characteristic \(uuid.shortDescription) not found on the device") }
        return characteristic
    }

    /// One GATT operation with the configured timeout, its errors mapped to a response status.
    private func operation<T: Sendable>(_ what: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = config.bluetooth.gattTimeout
        do {
            return try await withDeadline(clock.now() + timeout, clock: clock, body)
        } catch is DeadlineExceeded {
            throw JobFailure.timeout("\(what) did not complete in \(timeout)s")
        } catch let error as BLEPortError {
            throw error.kind == .connectionTimeout ? JobFailure.timeout("\(what): \(error)") : JobFailure.error("\(what): \(error)")
        }
    }

    func respond(_ reply: CommandReply, _ status: CommandReply.Status, _ error: String?, timing: CommandReply.Timing = .init(),
                 data: JSONValue? = nil) {
        if status != .ok { counters.commandErrors += 1 }
        scratch.removeAll(keepingCapacity: true)
        reply.payload(status, error: error, timing: timing, data: data).write(into: &scratch)
        publish(reply.topic, scratch, retain: false, correlationData: reply.correlationData)
    }

    /// `bridge/request/gatt/read|write` with `{"device", "service"?, "characteristic", "value"?,
    /// "response"?, "transaction"?}`, only for devices whose rule sets `raw_gatt`.
    func bridgeRequest(_ verb: String, _ message: MQTTInboundMessage) {
        counters.commands += 1
        let now = clock.now()
        var reply = CommandReply(topic: responseTopic(message, default: "\(base)/bridge/response/\(verb)"),
                                 correlationData: message.correlationData)
        guard message.payload.count <= config.commands.maxPayloadBytes else {
            return respond(reply, .error, "payload of \(message.payload.count) bytes exceeds the limit of \(config.commands.maxPayloadBytes)")
        }
        let members: [(key: String, value: JSONValue)]
        switch CommandRequest.parseObject(message.payload) {
        case .success(let object): members = object
        case .failure(let error): return respond(reply, .error, error.message)
        }
        let object = JSONValue.object(members)
        reply.transaction = object["transaction"]
        if verb == "device/remove" { return removeRequest(object, reply: reply) }
        guard verb == "gatt/read" || verb == "gatt/write" else {
            return respond(reply, .error, "unknown request \"\(verb)\" (expected gatt/read, gatt/write or device/remove)")
        }
        guard case .string(let name)? = object["device"], let index = device(named: name) ?? addressDevice(name) else {
            return respond(reply, .error, "device: expected the name or address of a device config.json names")
        }
        if let refusal = rateLimit(index, now: now) { return respond(reply, .error, refusal) }
        guard rule(index).rawGATT else {
            return respond(reply, .error, "raw GATT access to \(devices[index].name) is not allowed (set raw_gatt in its device rule)")
        }
        guard case .string(let uuidText)? = object["characteristic"], let uuid = BluetoothUUID(uuidText) else {
            return respond(reply, .error, "characteristic: expected a characteristic UUID")
        }
        var service: BluetoothUUID?
        if let value = object["service"] {
            guard case .string(let text) = value, let parsed = BluetoothUUID(text) else {
                return respond(reply, .error, "service: expected a service UUID")
            }
            service = parsed
        }
        let kind: DeviceJob.Kind
        if verb == "gatt/read" {
            kind = .rawRead(service: service, characteristic: uuid)
        } else {
            guard case .string(let hex)? = object["value"], let bytes = ValueEncoding.hexBytes(hex) else {
                return respond(reply, .error, "value: expected the bytes to write as hex, e.g. \"01ff\"")
            }
            var withResponse = true
            if let flag = object["response"] {
                guard case .bool(let value) = flag else { return respond(reply, .error, "response: expected true or false") }
                withResponse = value
            }
            kind = .rawWrite(service: service, characteristic: uuid, value: bytes, withResponse: withResponse)
        }
        submit(kind, index: index, reply: reply, ttl: config.commands.ttl, sentAt: nil, now: now)
    }

    /// Spends a token of the device's `commands.rate_limit` bucket; the error text when empty.
    func rateLimit(_ index: Int, now: Double) -> String? {
        let limit = config.commands.rateLimit
        guard limit.enabled else { return nil }
        // Made at the first command: a bucket made at registration would be just as full by then.
        var bucket = devices[index].commandBucket ?? TokenBucket(capacity: limit.burst, interval: limit.interval, now: now)
        let took = bucket.take(now: now)
        devices[index].commandBucket = bucket
        guard !took else { return nil }
        counters.dropped.rateLimited += 1
        return "rate limited: \(devices[index].name) takes \(limit.burst) commands at once, then one per \(JSONValue.number(limit.interval).serialized)s (commands.rate_limit)"
    }

    private func addressDevice(_ text: String) -> Int? {
        guard let address = BluetoothAddress(text) else { return nil }
        return indexByAddress[address]
    }

    /// Registers a device a rule names by address before it was seen.
    func register(_ address: BluetoothAddress, ruleIndex: Int, advertisement: AdvertisementData? = nil) -> Int {
        let rule = config.devices[ruleIndex]
        let name = rule.name ?? DeviceRecord.defaultName(address)
        var record = DeviceRecord(address: address, name: name, stateTopic: base + "/" + name, ruleIndex: ruleIndex)
        record.pollDue = rule.poll.map { _ in .infinity }
        if let advertisement {
            record.rssi = advertisement.rssi.map(Int.init)
            record.localName = advertisement.localName
            record.services = serviceLists.store(advertisement.serviceUUIDs)
        }
        record.lastActivity = clock.now()
        devices.append(record)
        indexByAddress[address] = devices.count - 1
        publishDevices()
        if config.homeAssistant.enabled, !rule.commands.isEmpty { publishDiscovery(devices.count - 1) }
        return devices.count - 1
    }
}

extension JobFailure {
    var isConnectFailure: Bool {
        switch self {
        case .timeout(let text), .error(let text): text.hasPrefix("connect: ")
        case .expired: false
        }
    }
}
