import Bluetooth
import JSON
import Parsers

/// What the web page shows of the core (docs/web.md, "The page"), as JSON, read on the loop.
/// Everything from devices (names, strings) is data here: the page puts it in as text.
extension Gateway {
    /// Every registered device, in registration order: `name`, `address`, `local_name`, `model`
    /// (the advertisement format), `rule`, `attributes` (`[{"name", "value", "unit"?}]`: the
    /// last reading of each), `rssi`, `rssi_by_adapter` (when the radio's view holds the address
    /// and several adapters heard it), `last_seen` (ms since 1970), `availability` (`online`,
    /// `offline`, null before the first), `link` (`idle`, `queued`, `connecting`, `connected`,
    /// `disconnecting`; null for a device no rule connects), `parked`, `gave_up`, and in a fleet
    /// `owned` (this gateway owns it). With several adapters, reading it asks for the radio's
    /// view (``demandRadioView()``), which holds the RSSI per adapter.
    public var pageDevices: JSONValue {
        let adapters = context.config.bluetooth.adapters
        if adapters.count > 1 { demandRadioView() }
        return .array(
            registry.order.map { id in
                let device = registry[id]
                var members: [(key: String, value: JSONValue)] = [
                    ("name", .string(device.name)), ("address", .string(device.address.description)),
                ]
                if let localName = device.localName { members.append(("local_name", .string(localName))) }
                members.append(("model", states.format(id).map(JSONValue.string) ?? .null))
                members.append(("rule", .number(Double(device.ruleIndex))))
                members.append(
                    (
                        "attributes",
                        .array(
                            states.readings(id).map { reading in
                                var attribute: [(key: String, value: JSONValue)] = [
                                    ("name", .string(reading.name)), ("value", Self.json(reading.value)),
                                ]
                                if let unit = reading.unit { attribute.append(("unit", .string(unit))) }
                                return .object(attribute)
                            })
                    ))
                members.append(("rssi", device.rssi.map { .number(Double($0)) } ?? .null))
                // Per adapter as the radio's view has it (when several adapters heard the device).
                if let perAdapter = radioView?.entry(device.address)?.rssiByAdapter(adapters: adapters) {
                    members.append(("rssi_by_adapter", perAdapter))
                }
                members.append(("last_seen", device.lastSeenWall.map { .number(Double($0)) } ?? .null))
                members.append(
                    ("availability", availability.published(id).map { .string($0 ? "online" : "offline") } ?? .null))
                let link = connections.link(device.address)
                members.append(("link", link.map { .string("\($0.phase)") } ?? .null))
                members.append(("parked", .bool(link?.parked ?? false)))
                members.append(("gave_up", .bool(link?.gaveUp ?? false)))
                if let fleet { members.append(("owned", .bool(fleet.owns(device.address)))) }
                return .object(members)
            })
    }

    /// The radio's view for the page: `{"reports_per_second", "addresses", "max_addresses",
    /// "evicted", "sequence", "entries": [the raw radio's JSON of each address, with "rule":
    /// true when a rule can be suggested for it]}`; nil when the view is off. Reading it asks for
    /// the view (``demandRadioView()``): it listens from the first ask, for a minute after the last.
    public func pageRadio(since: UInt64 = 0) -> JSONValue? {
        pageRadioText(since: since).map { (try? JSONValue.parse($0)) ?? .null }
    }

    /// ``pageRadio(since:)`` as JSON text, written without building a ``JSONValue`` (the page
    /// reads it every 2 s while it shows the radio: up to `max_addresses` entries).
    public func pageRadioText(since: UInt64 = 0) -> [UInt8]? {
        demandRadioView()
        guard let snapshot = radioSnapshot(since: since) else { return nil }
        let adapters = context.config.bluetooth.adapters
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + 400 * snapshot.entries.count)
        bytes += #"{"reports_per_second":"#.utf8
        JSONValue.writeNumber((snapshot.reportsPerSecond * 10).rounded() / 10, into: &bytes)
        bytes += #","addresses":"#.utf8
        JSONValue.writeInteger(Int64(snapshot.addresses), into: &bytes)
        bytes += #","max_addresses":"#.utf8
        JSONValue.writeInteger(Int64(snapshot.maxAddresses), into: &bytes)
        bytes += #","evicted":"#.utf8
        JSONValue.writeInteger(Int64(snapshot.evicted), into: &bytes)
        bytes += #","sequence":"#.utf8
        JSONValue.writeNumber(Double(snapshot.sequence), into: &bytes)
        bytes += #","entries":["#.utf8
        for (index, entry) in snapshot.entries.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            let suggestion = RuleSuggestion.suggest(for: entry, config: context.config) != nil
            entry.write(adapters: adapters, into: &bytes, rule: suggestion)
        }
        bytes += "]}".utf8
        return bytes
    }

    /// The device rule that would publish `address` (``suggestedRule(for:)``) for the page to show:
    /// `{"rule": one element of config.json's devices, "notes": […]}`; nil when there is none.
    public func pageRule(for address: String) -> JSONValue? {
        guard let address = BluetoothAddress(address), let suggestion = suggestedRule(for: address) else { return nil }
        return .object([("rule", suggestion.rule), ("notes", .array(suggestion.notes.map(JSONValue.string)))])
    }

    /// `config check` for the page: `{"running": the running configuration's summary, "path",
    /// "file": {"ok": true, "summary", "same": whether its summary is the running one's} or
    /// {"ok": false, "problems": [one line each]}}` — the file at `path` read now (an edit since the
    /// start is applied by a restart). Secrets (the running configuration's, and the file's when it
    /// is valid) are replaced by `***`.
    public func pageConfigCheck(path: String) -> JSONValue {
        let running = context.config
        var secrets = running.secrets
        let file: Result<GatewayConfig, GatewayConfigError> = Result { () throws(GatewayConfigError) in
            try GatewayConfig.load(path: path)
        }
        if case .success(let config) = file { secrets += config.secrets }
        secrets = secrets.filter { $0.count >= 3 }.sorted { $0.count > $1.count }
        let redacted = { (text: String) in JSONValue.string(GatewayLogger.redact(text, secrets)) }
        let fileMembers: [(key: String, value: JSONValue)] =
            switch file {
            case .success(let config):
                [
                    ("ok", .bool(true)), ("summary", redacted(config.summary)),
                    ("same", .bool(config.summary == running.summary)),
                ]
            case .failure(let error): [("ok", .bool(false)), ("problems", .array(error.lines.map(redacted)))]
            }
        return .object([
            ("running", redacted(running.summary)), ("path", .string(path)), ("file", .object(fileMembers)),
        ])
    }

    /// The fleet's view for the page (``Fleet/page(now:name:)``); nil when not in a fleet.
    public var pageFleet: JSONValue? {
        fleet?.page(now: context.clock.now()) { [registry] address in registry.id(address).map { registry[$0].name } }
    }

    /// The bridge requests the page sends (``pageRequest(verb:payload:)``): those the core answers
    /// at once.
    public static let pageVerbs: Set<String> = ["device/remove", "device/bindkey"]

    /// One of ``pageVerbs`` with `payload` (its JSON object), handled by the same code as a message
    /// on `<bridge>/request/<verb>` — checks, counting, logging, `bridge/event`, the response
    /// published on `<bridge>/response/<verb>` — and that response as JSON; nil for another verb.
    /// Call it on the loop, outside the core's handling of an event (a web request).
    public func pageRequest(verb: String, payload: [UInt8]) -> JSONValue? {
        guard Self.pageVerbs.contains(verb) else { return nil }
        final class Answer { var payload: [UInt8]? }
        let answer = Answer()
        let topic = context.bridge + "/response/" + verb
        let output = context.output
        let token = output.newToken()
        output.watch(token) { message in
            if message.topic == topic, answer.payload == nil { answer.payload = message.payload }
        }
        handle(MQTTInboundMessage(topic: context.bridge + "/request/" + verb, payload: payload))
        output.unwatch(token)
        return answer.payload.flatMap { try? JSONValue.parse($0) }
    }

    private static func json(_ value: ReadingValue) -> JSONValue {
        switch value {
        case .number(let number): number.isFinite ? .number(number) : .null
        case .bool(let flag): .bool(flag)
        case .null: .null
        case .string(let text): .string(text)
        case .numbers(let numbers): .array(numbers.map { $0.isFinite ? .number($0) : .null })
        }
    }
}
