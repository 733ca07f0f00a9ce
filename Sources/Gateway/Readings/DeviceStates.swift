import Bluetooth
import FIFOQueue
import JSON
import Parsers

/// The state of every device: its attributes (what its readings said last), the advertisement
/// format, rate control, and the state messages held back for Home Assistant; it decodes what
/// devices send (with the bind keys set at run time, ``bindKeys``) and publishes
/// `<base>/<device>` (and the attribute topics). Loop-confined.
///
/// Kept per registry slot (``DeviceID``): what every device needs inline; what few need (the
/// characteristic each attribute came from, the last parse error, a hold) in a box made the
/// first time it is written.
final class DeviceStates {
    /// One device's state.
    struct State {
        var attributes: [Attribute] = []
        var rate = RateControl()
        /// The advertisement format: an ``AttributeTable`` index, 0 for none.
        var format: UInt16 = 0
        /// The format (0: none yet) and identity (``DecodedAdvertisement/frame``) of the last
        /// advertised frame taken, by which a retransmission of it is dropped.
        var frameFormat: UInt16 = 0
        var frame: UInt64 = 0
        /// The adapter (``BLEDiscovery/adapter``) whose report of ``frame`` was taken.
        var frameAdapter: UInt8 = 0
        /// The counter frames taken before ``frame`` (newest first; 0: none), of the same format:
        /// with several adapters their reports of one frame may arrive out of order (one adapter's
        /// next frame before the other's copy of this one), so a counter frame from another
        /// adapter than the last one's that is among these is a repeat too. From the same adapter
        /// only the last counts (a counter that goes back is a new frame), as do content frames
        /// (no counter): a value that changes and changes back is a new reading.
        var earlierFrames: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var extra: Extra?

        /// Whether `frame`, of the format taken last, is a retransmission of a frame taken: the
        /// last one, or (heard by another adapter) a counter frame among the earlier ones.
        func isRepeat(_ frame: UInt64, format: UInt16, adapter: UInt8) -> Bool {
            guard frameFormat == format else { return false }
            if frame == self.frame { return true }
            return adapter != frameAdapter && frame & (1 << 63) != 0
                && (frame == earlierFrames.0 || frame == earlierFrames.1 || frame == earlierFrames.2)
        }

        /// Takes `frame` of `format`, heard by `adapter`, as the last one.
        mutating func take(_ frame: UInt64, format: UInt16, adapter: UInt8) {
            if frameFormat == format, self.frame & (1 << 63) != 0 {
                earlierFrames = (self.frame, earlierFrames.0, earlierFrames.1)
            } else {
                earlierFrames = (0, 0, 0)
            }
            self.frame = frame
            frameFormat = format
            frameAdapter = adapter
        }
    }

    /// What few devices need: connected devices (``sources``), devices sending garbage
    /// (``lastError``), devices announced to Home Assistant (the hold).
    final class Extra {
        /// Which configured characteristic produced each attribute (for `/get`).
        var sources: [(attribute: String, poll: Bool, index: Int)] = []
        var lastError: String?
        /// The characteristics (`subscribe` indices) whose cut notifications were warned about.
        var cutWarned: Set<Int> = []
        /// The key problem last reported on `bridge/event` (`missingKey` or `decryptionFailed`),
        /// until the key changes or a frame decrypts.
        var keyProblem: ParseError.Kind?
        /// The state is held until then after new discovery configs (HA drops a state that
        /// arrives within ~0.1 s of a new config); nil: not held.
        var heldUntil: Double?
        /// State messages of readings that came during the hold, in order.
        var held = FIFO<MQTTOutboundMessage>()
    }

    /// Most state messages one device keeps while its state is held; beyond it the oldest is
    /// dropped (counted as `dropped.rate_control`). A second of a 100 Hz sensor fits many times.
    static let maxHeldStates = 1024

    private let context: CoreContext
    /// Bind keys set at run time (`bridge/request/device/bindkey`), kept in the state directory.
    private let bindKeys: BindKeys
    private var states: [State] = []
    /// What the last ``decode(_:_:address:adapter:rule:name:)`` of an advertisement made of it
    /// (for the radio's view; a byte stored per decode, read only when the view is on).
    private(set) var outcome = RadioOutcome.decoded
    /// The attribute names, units, device classes and formats all devices share.
    private(set) var table = AttributeTable()
    /// Warnings about undecodable payloads: 20 at once, then one per 3 s, so garbage from many
    /// devices (rotating addresses) cannot flood the journal; what is held back is counted in
    /// the next line and in `parse_errors`.
    private var parseWarnings = TokenBucket(capacity: 20, interval: 3, now: 0)
    private var parseWarningsHeld = 0
    /// The `last_seen` text of the second last written.
    private var timestamps = Timestamp.Cache()
    init(context: CoreContext) {
        self.context = context
        bindKeys = BindKeys(directory: context.stateDirectory)
    }

    /// A device was registered in `id`'s slot: it starts with no state.
    func added(_ id: DeviceID) {
        if id.index >= states.count {
            states.append(contentsOf: repeatElement(State(), count: id.index + 1 - states.count))
        }
        states[id.index] = State()
    }

    /// The device was removed: its retained state is cleared (an empty retained payload on
    /// `<base>/<device>`) and its state goes.
    func removed(_ id: DeviceID, _ device: DeviceRecord, rule: DeviceRule) {
        if rule.retain ?? context.config.mqtt.retain, hasState(id) {
            context.output.publish(device.stateTopic, [], retain: true)
            context.deviceEvents?.noteState(id.index, [])
        }
        states[id.index] = State()
    }

    func attributes(_ id: DeviceID) -> [Attribute] { states[id.index].attributes }
    func hasState(_ id: DeviceID) -> Bool { !states[id.index].attributes.isEmpty }
    /// The device's advertisement format, nil before one was decoded.
    func format(_ id: DeviceID) -> String? { table.format(states[id.index].format) }
    /// The attributes as readings (for Home Assistant discovery).
    func readings(_ id: DeviceID) -> [Reading] { states[id.index].attributes.map { table.reading($0) } }
    /// Which configured characteristic produced each attribute (for `/get`).
    func sources(_ id: DeviceID) -> [(attribute: String, poll: Bool, index: Int)] {
        states[id.index].extra?.sources ?? []
    }

    private func extra(_ id: DeviceID) -> Extra {
        if let extra = states[id.index].extra { return extra }
        let extra = Extra()
        states[id.index].extra = extra
        return extra
    }

    // MARK: Decoding

    /// Decodes an advertisement of the device with the configured parsers (and its bind key:
    /// the rule's, else a runtime one); the readings, or nil when there are none (no parser knows
    /// the format, a frame without values, a repeat of the frame taken last — counted, unless the
    /// rule has `publish_repeats` —, or a payload that failed — counted and logged; an
    /// encrypted frame without a key or with a wrong one is counted, and reported once, see
    /// ``keyFailed(_:_:)``).
    func decode(
        _ id: DeviceID, _ advertisement: AdvertisementData, address: BluetoothAddress, adapter: UInt8 = 0,
        rule: DeviceRule, name: String
    ) -> [Reading]? {
        let bindKey = rule.bindKey ?? bindKeys.key(address)
        do {
            let decoded = try context.config.registry.decode(
                AdvertisementContext(advertisement: advertisement, address: address, bindKey: bindKey))
            if table.format(states[id.index].format) != decoded.format {
                states[id.index].format = table.formatIndex(decoded.format)
            }
            if bindKey != nil, let extra = states[id.index].extra, extra.keyProblem != nil,
                Self.isEncrypted(advertisement, address: address, registry: context.config.registry)
            {
                // The key works (again): a later failure is news.
                extra.keyProblem = nil
            }
            // A recognised frame without values (a BTHome packet with only a packet id) changes nothing.
            guard !decoded.readings.isEmpty else {
                outcome = .noValues
                return nil
            }
            context.counters.decoded += 1
            if !rule.publishRepeats {
                // A retransmission of the frame taken last (equal, not "not newer": a counter
                // that wraps or restarts is a new frame) is dropped; RSSI, last seen and
                // availability already followed it.
                // Another adapter's copy of a counter frame among the last few taken is dropped
                // too (several adapters' reports, out of order).
                let format = states[id.index].format
                if states[id.index].isRepeat(decoded.frame, format: format, adapter: adapter) {
                    context.counters.dropped.repeatedFrame += 1
                    outcome = .repeatedFrame
                    return nil
                }
                states[id.index].take(decoded.frame, format: format, adapter: adapter)
            }
            outcome = .decoded
            return decoded.readings
        } catch {
            outcome = Self.outcome(error.kind)
            switch error.kind {
            case .unknownFormat: return nil
            case .missingKey, .decryptionFailed: keyFailed(id, error, address: address, name: name)
            default: parseFailed(id, name: name, "advertisement", error)
            }
            return nil
        }
    }

    /// The radio's name for a parser's refusal.
    private static func outcome(_ kind: ParseError.Kind) -> RadioOutcome {
        switch kind {
        case .unknownFormat: .unknownFormat
        case .missingKey: .keyMissing
        case .decryptionFailed: .keyWrong
        default: .invalidPayload
        }
    }

    /// What the parsers would make of an advertisement of an untracked address (the radio's
    /// view: no rule, or filtered), with the address's runtime bind key: the outcome and the
    /// format that decoded it. Counts nothing, logs nothing, changes no state.
    func trialDecode(_ advertisement: AdvertisementData, address: BluetoothAddress) -> (RadioOutcome, String?) {
        guard !advertisement.serviceData.isEmpty || !advertisement.manufacturerData.isEmpty else {
            return (.noPayload, nil)
        }
        do {
            let decoded = try context.config.registry.decode(
                AdvertisementContext(advertisement: advertisement, address: address, bindKey: bindKeys.key(address)))
            return (decoded.readings.isEmpty ? .noValues : .decoded, decoded.format)
        } catch {
            return (Self.outcome(error.kind), nil)
        }
    }

    /// Whether the advertisement needs a key: it fails with `missingKey` without one (asked only
    /// while a key problem is reported, when a frame decoded with a key: did it decrypt?).
    private static func isEncrypted(
        _ advertisement: AdvertisementData, address: BluetoothAddress, registry: ParserRegistry
    ) -> Bool {
        do {
            _ = try registry.decode(AdvertisementContext(advertisement: advertisement, address: address, bindKey: nil))
            return false
        } catch {
            return error.kind == .missingKey
        }
    }

    /// An encrypted advertisement without a key or with a wrong one: counted each time
    /// (`dropped.key_missing` / `dropped.key_wrong`), reported — logged, and `bridge/event`
    /// `key_missing` / `key_wrong` — only when it is not the problem reported last (since the
    /// device's key changed or a frame of it decrypted), so a device in range does not flood the
    /// log or `bridge/event`.
    private func keyFailed(_ id: DeviceID, _ error: ParseError, address: BluetoothAddress, name: String) {
        let missing = error.kind == .missingKey
        if missing {
            context.counters.dropped.keyMissing += 1
        } else {
            context.counters.dropped.keyWrong += 1
        }
        guard states[id.index].extra?.keyProblem != error.kind else { return }
        extra(id).keyProblem = error.kind
        let problem = missing ? "key_missing" : "key_wrong"
        context.log(
            .warning,
            "\(name) (\(address)): \(problem): \(error.message); reported once until its key changes, counted in dropped.\(problem)"
        )
        BridgePublisher.event(problem, name: name, address: address, error: error.message, context: context)
    }

    /// Reads the runtime bind keys of a previous run (at the start), logging what is wrong with
    /// the file and how many keys it held.
    func loadBindKeys() {
        for problem in bindKeys.load() { context.log(.warning, "bind keys: \(problem)") }
        if bindKeys.count > 0 {
            context.log(.info, "bind keys: \(bindKeys.count) set at run time, from \(bindKeys.path ?? "")")
        }
    }

    /// `bridge/request/device/bindkey` `{"device": name or address, "key": 32 hex digits, or null
    /// or "" to clear, "transaction"?}`: ``setBindKey(_:_:)`` for the device `registry` says the
    /// name or address names. The key is never echoed.
    func bindKeyRequest(_ request: BridgeRequest, registry: DeviceRegistry) {
        guard case .string(let name)? = request.object["device"] else {
            return request.respond(.error, "device: expected the name or address of a device")
        }
        let key: [UInt8]?
        switch request.object["key"] {
        case .null?, .string("")?: key = nil
        case .string(let text)?:
            guard let bytes = BindKeys.key(text) else { return request.respond(.error, Self.keyExpected) }
            key = bytes
        default: return request.respond(.error, Self.keyExpected)
        }
        guard let device = registry.named(name) else {
            return request.respond(
                .error, "device: expected the name or address of a known device, or an address a device rule can match")
        }
        switch setBindKey(device, key) {
        case .success(let data): request.respond(.ok, data: data)
        case .failure(let error): request.respond(.error, error.message)
        }
    }

    private static let keyExpected = "key: expected 32 hex digits (a 16-byte key), or null or \"\" to clear it"

    /// Sets (nil: clears) the runtime bind key of `device` (a
    /// registered device, or one not seen yet that a rule names or may match). Refused when the
    /// device's rule has a `bindkey` (config.json wins); a device whose rule is not known yet
    /// gets the key, and a rule's key still wins once it is seen. A registered device's next key
    /// problem is reported, and its next frame is taken even when it repeats the last one. The
    /// response's data, which never holds the key.
    func setBindKey(_ device: DeviceRegistry.Named, _ key: [UInt8]?) -> Result<JSONValue, CommandError> {
        if key != nil, let ruleIndex = device.ruleIndex, context.rule(ruleIndex).bindKey != nil {
            return .failure(
                CommandError(
                    "\(device.name) has a bind key in config.json (devices[\(ruleIndex)].bindkey), which wins over a runtime key; change it there"
                ))
        }
        let persisted: Bool
        switch bindKeys.set(device.address, key, now: context.clock.now()) {
        case .failure(let error): return .failure(error)
        case .success(let stored): persisted = stored
        }
        if let id = device.id {
            states[id.index].extra?.keyProblem = nil
            // A frame means something else under another key: the next one is not a repeat.
            states[id.index].frameFormat = 0
        }
        let kept = persisted ? "kept in \(BindKeys.fileName)" : "kept in memory only (no state directory)"
        context.log(
            .notice,
            "\(device.name) (\(device.address)): bind key \(key == nil ? "cleared" : "set, \(kept)") on request")
        return .success(
            .object([
                ("name", .string(device.name)), ("address", .string(device.address.description)),
                ("bindkey", .string(key == nil ? "cleared" : "set")), ("persisted", .bool(persisted)),
            ]))
    }

    /// Decodes a characteristic value of `spec` (`subscribe` or `poll[index]` of the rule); the
    /// readings (each remembered as coming from that characteristic), or nil when the parser
    /// rejected it (counted and logged). A notification on a link of ATT MTU `mtu` that the
    /// parser rejects for its length and that is exactly MTU − 3 bytes long was cut
    /// (``NotificationCut``): counted as `dropped.notification_cut` and warned about once per
    /// device and characteristic, not as a parse error.
    func decode(
        _ id: DeviceID, value: [UInt8], spec: CharacteristicSpec, poll: Bool, index: Int, name: String,
        mtu: Int? = nil
    )
        -> [Reading]?
    {
        do {
            let readings = try spec.parser.decode(value)
            context.counters.decoded += 1
            var sources = states[id.index].extra?.sources ?? []
            let known = sources.count
            for reading in readings where !sources.contains(where: { $0.attribute == reading.name }) {
                sources.append((reading.name, poll, index))
            }
            if sources.count != known { extra(id).sources = sources }
            return readings
        } catch {
            if !poll, let mtu, NotificationCut.isCut(length: value.count, mtu: mtu, error: error) {
                context.counters.dropped.notificationCut += 1
                if extra(id).cutWarned.insert(index).inserted {
                    context.log(
                        .warning,
                        NotificationCut.warning(name, spec.characteristic, length: value.count, mtu: mtu, error))
                }
                return nil
            }
            parseFailed(id, name: name, "\(spec.characteristic.shortDescription) value \(Hex.encode(value))", error)
            return nil
        }
    }

    private func parseFailed(_ id: DeviceID, name: String, _ what: String, _ error: ParseError) {
        context.counters.parseErrors += 1
        let message = "\(name): \(what) not decoded: \(error)"
        // Log each distinct failure once in a row, so a device sending garbage does not flood the
        // journal, and all devices together within ``parseWarnings``.
        guard states[id.index].extra?.lastError != message else { return }
        extra(id).lastError = message
        guard parseWarnings.take(now: context.clock.now()) else {
            parseWarningsHeld += 1
            return
        }
        let held = parseWarningsHeld
        parseWarningsHeld = 0
        context.log(
            .warning,
            held == 0
                ? message : message + " (and \(held) more payloads not decoded and not logged since the last such line)"
        )
    }

    // MARK: Merging and publishing

    /// Merges readings into the device's state; true when an attribute is new (its Home
    /// Assistant config goes out before the state).
    func merge(_ id: DeviceID, _ readings: [Reading]) -> Bool {
        states[id.index].merge(readings, table: &table)
    }

    /// Publishes the state when rate control allows (always with `force`); a deferred publish
    /// asks for the timer.
    func offer(_ id: DeviceID, _ device: DeviceRecord, rule: DeviceRule, now: Double, force: Bool) {
        if force { return publish(id, device, rule: rule, now: now) }
        switch states[id.index].rate.offer(
            states[id.index].attributes, settings: rule.rateControl, names: table.names, now: now)
        {
        case .publish: publish(id, device, rule: rule, now: now)
        case .deferred(let until): context.due(at: until)
        case .drop: context.counters.dropped.rateControl += 1
        }
    }

    /// Publishes `<base>/<device>` (and the attribute topics when configured).
    /// The device's state message as it would be published now (its last readings; the web
    /// server's device list), in a buffer of its own.
    func statePayload(_ id: DeviceID, _ device: DeviceRecord) -> [UInt8] {
        var bytes: [UInt8] = []
        StatePayload.write(
            states[id.index].attributes, keys: table.keys, rssi: device.rssi, lastSeen: device.lastSeenWall,
            into: &bytes, timestamps: &timestamps)
        return bytes
    }

    func publish(_ id: DeviceID, _ device: DeviceRecord, rule: DeviceRule, now: Double) {
        let output = context.output
        let attributes = states[id.index].attributes
        StatePayload.write(
            attributes, keys: table.keys, rssi: device.rssi, lastSeen: device.lastSeenWall,
            into: &output.scratch, timestamps: &timestamps)
        let mqtt = context.config.mqtt
        let retain = rule.retain ?? mqtt.retain
        let qos = rule.qos ?? mqtt.qos
        publishMessage(id, topic: device.stateTopic, payload: output.scratch, retain: retain, qos: qos, state: true)
        if rule.attributeTopics ?? mqtt.attributeTopics {
            for attribute in attributes {
                publishMessage(
                    id, topic: device.stateTopic + "/" + table.name(attribute.name),
                    payload: StatePayload.plain(attribute.value),
                    retain: retain, qos: qos, state: false)
            }
        }
        states[id.index].rate.published(attributes, settings: rule.rateControl, now: now)
        if let next = states[id.index].rate.nextDeadline(settings: rule.rateControl) { context.due(at: next) }
    }

    /// Publishes one state message of the device now, or keeps it while the state is held,
    /// stamped with the time it would have gone out (its capture time if it ends up queued).
    /// `state`: the message is `<base>/<device>` (not an attribute topic), which the web page's
    /// event stream shows while it watches (``CoreContext/deviceEvents``).
    private func publishMessage(_ id: DeviceID, topic: String, payload: [UInt8], retain: Bool, qos: Int, state: Bool) {
        guard let extra = states[id.index].extra, extra.heldUntil != nil else {
            if state, let events = context.deviceEvents {
                // The copy the output would make, kept by the marks too (no second copy).
                let owned = Output.exactCopy(payload)
                context.output.publish(topic, owned: owned, retain: retain, qos: qos)
                events.noteState(id.index, owned)
            } else {
                context.output.publish(topic, payload, retain: retain, qos: qos)
            }
            return
        }
        if extra.held.count >= Self.maxHeldStates {
            extra.held.removeFirst()
            context.counters.dropped.rateControl += 1
        }
        extra.held.append(
            MQTTOutboundMessage(
                topic: topic, payload: Output.exactCopy(payload), qos: qos, retain: retain,
                capturedAt: context.clock.wallMilliseconds()))
    }

    /// Holds the device's state messages until `until`: readings meanwhile are kept, not merged
    /// away; ``tick(_:_:rule:now:)`` publishes each of them, in order, when the hold ends.
    func hold(_ id: DeviceID, until: Double) {
        extra(id).heldUntil = until
        context.due(at: until)
    }

    /// What is due for the device at `now`: the end of a hold (every state message kept
    /// meanwhile goes out in order; when none came, the current state — what Home Assistant
    /// waits for after a new config), else a deferred publish or a heartbeat.
    func tick(_ id: DeviceID, _ device: DeviceRecord, rule: DeviceRule, now: Double) {
        if let extra = states[id.index].extra, let until = extra.heldUntil {
            guard now >= until else { return }
            extra.heldUntil = nil
            let held = extra.held
            extra.held = []
            guard !held.isEmpty else { return publish(id, device, rule: rule, now: now) }
            for message in held {
                context.output.send(message)
                if let events = context.deviceEvents, message.topic == device.stateTopic {
                    events.noteState(id.index, message.payload)
                }
            }
        } else if states[id.index].rate.due(now: now, settings: rule.rateControl) {
            publish(id, device, rule: rule, now: now)
        }
    }

    /// When the device next needs ``tick(_:_:rule:now:)``: the end of its hold, a deferred
    /// publish or a heartbeat.
    func nextDeadline(_ id: DeviceID, rule: DeviceRule) -> Double? {
        if let until = states[id.index].extra?.heldUntil { return until }
        return states[id.index].rate.nextDeadline(settings: rule.rateControl)
    }
}

extension DeviceStates.State {
    /// Merges readings into the state (attributes keep their first-seen order); true when an
    /// attribute is new. New attributes get exactly the room they need: most devices send the
    /// same set every time, so the array never grows again.
    mutating func merge(_ readings: [Reading], table: inout AttributeTable) -> Bool {
        var added = false
        var names = table.names
        for (position, reading) in readings.enumerated() {
            // A device's readings come in the same order every time: look at the same position first.
            let index =
                position < attributes.count && names[Int(attributes[position].name)] == reading.name
                ? position : attributes.firstIndex(where: { names[Int($0.name)] == reading.name })
            if let index {
                attributes[index].value = reading.value
                // A reading without a unit or class keeps the one known.
                let old = table.info(attributes[index].info)
                let unit = reading.unitCode ?? old.unit
                let deviceClass = reading.deviceClass ?? old.deviceClass
                if unit != old.unit || deviceClass != old.deviceClass {
                    attributes[index].info = table.infoIndex(unit: unit, deviceClass: deviceClass)
                }
                continue
            }
            guard let name = table.nameIndex(reading.name) else { continue }
            let needed = attributes.count + readings.count - position
            if !added, attributes.capacity < needed {
                // The readings from here on: a bound (one may repeat a known name), usually exact.
                attributes.reserveCapacity(needed)
            }
            added = true
            attributes.append(
                Attribute(
                    name: name, value: reading.value,
                    info: table.infoIndex(unit: reading.unitCode, deviceClass: reading.deviceClass)))
            names = table.names  // the new name is in the table now
        }
        return added
    }
}
