import Bluetooth
import JSON

/// What a device's page sends to the device (docs/web-page.md, "A device's actions"): a command
/// its rule declares, a read of a configured characteristic's attributes, a GATT read or write of
/// a characteristic config.json names for it. Each is made into the MQTT message a client would
/// send — `<base>/<device>/set`, `<base>/<device>/get`, `<bridge>/request/gatt/read|write` — and
/// handled by the same code, with a transaction of its own (`page-<n>`); its response (published
/// as on MQTT) is handed to the caller when it comes, after the GATT operation.
extension Gateway {
    /// What ``pageSend(_:body:answer:)`` did with a request.
    public enum PageSendStart: Sendable, Equatable {
        /// Handed on as an MQTT message; the answer comes with `token` (perhaps already came).
        case waiting(token: Int)
        /// Not sent: why (a body that names no registered device, a characteristic config.json
        /// does not name for it, …).
        case refused(String)
    }

    /// The kinds ``pageSend(_:body:answer:)`` takes (the last levels of `/api/page/send/<kind>`).
    public static let pageSendKinds: Set<String> = ["command", "read", "gatt/read", "gatt/write"]

    /// What a device's page may send it: `{"device", "commands": [{"name", "encoding",
    /// "minimum"?, "maximum"?, "options"?}], "attributes": [what /get reads], "characteristics":
    /// [{"service"?, "characteristic", "from": "subscribe"|"poll"|"command"}], "raw_gatt"}`; nil for
    /// a device neither registered nor named by a rule.
    public func pageActions(of name: String) -> JSONValue? {
        guard let target = pageTarget(name) else { return nil }
        let rule = context.rule(target.ruleIndex)
        let commands: [JSONValue] = rule.commands.map { command in
            var members: [(key: String, value: JSONValue)] = [
                ("name", .string(command.name)), ("encoding", .string(command.encoding.rawValue)),
            ]
            if let minimum = command.minimum { members.append(("minimum", .number(minimum))) }
            if let maximum = command.maximum { members.append(("maximum", .number(maximum))) }
            if let options = command.options { members.append(("options", .array(options.map(JSONValue.string)))) }
            return .object(members)
        }
        var attributes: [String] = []
        for spec in rule.subscribe + rule.poll where !attributes.contains(spec.parser.name) {
            attributes.append(spec.parser.name)
        }
        let characteristics: [JSONValue] = Self.namedCharacteristics(rule).map { named in
            var members: [(key: String, value: JSONValue)] = []
            if let service = named.service { members.append(("service", .string(service.shortDescription))) }
            members.append(("characteristic", .string(named.characteristic.shortDescription)))
            members.append(("from", .string(named.from)))
            return .object(members)
        }
        return .object([
            ("device", .string(target.name)), ("commands", .array(commands)),
            ("attributes", .array(attributes.map(JSONValue.string))), ("characteristics", .array(characteristics)),
            ("raw_gatt", .bool(rule.rawGATT)),
        ])
    }

    /// The device `name` (or address) names: a registered one, or one a rule names by its address
    /// (registered when a command reaches it, as on MQTT); nil for anything else.
    private func pageTarget(_ name: String) -> (name: String, address: BluetoothAddress, ruleIndex: Int)? {
        if let id = registry.id(nameOrAddress: name) {
            let device = registry[id]
            return (device.name, device.address, device.ruleIndex)
        }
        guard let (address, ruleIndex) = registry.rule(naming: name) else { return nil }
        return (name, address, ruleIndex)
    }

    /// The characteristics config.json names for a rule's device (its `subscribe`, `poll` and
    /// `commands`), each once: all a page's GATT read or write may reach.
    static func namedCharacteristics(_ rule: DeviceRule) -> [(
        service: BluetoothUUID?, characteristic: BluetoothUUID,
        from: String
    )] {
        var named: [(service: BluetoothUUID?, characteristic: BluetoothUUID, from: String)] = []
        let all =
            rule.subscribe.map { ($0.service, $0.characteristic, "subscribe") }
            + rule.poll.map { ($0.service, $0.characteristic, "poll") }
            + rule.commands.map { ($0.service, $0.characteristic, "command") }
        for (service, characteristic, from) in all
        where !named.contains(where: { $0.service == service && $0.characteristic == characteristic }) {
            named.append((service, characteristic, from))
        }
        return named
    }

    /// Sends one of ``pageSendKinds`` with `body` (its JSON object: `{"device", "command",
    /// "value"}`, `{"device", "attribute"}`, `{"device", "service"?, "characteristic", "value"?}`)
    /// as the MQTT message a client would send, handled at once by the same code; `answer` gets
    /// its response (the payload published on the response topic) when it comes — maybe before
    /// this returns (a refused command is answered at once). ``pageSendAbandoned(_:)`` with the
    /// token stops waiting. Call it on the loop, outside the core's handling of an event.
    public func pageSend(_ kind: String, body: [UInt8], answer: @escaping @Sendable (JSONValue) -> Void)
        -> PageSendStart
    {
        guard Self.pageSendKinds.contains(kind) else { return .refused("no such action \"\(kind)\"") }
        guard case .object(let members)? = try? JSONValue.parse(body) else {
            return .refused("expected a JSON object")
        }
        let object = JSONValue.object(members)
        guard case .string(let name)? = object["device"], let device = pageTarget(name) else {
            return .refused("device: expected the name or address of a device config.json names or that is registered")
        }
        // In a fleet the owner runs a device's commands; its own page sends them.
        guard fleet.owns(device.address) else {
            return .refused("another gateway of the fleet owns \(device.name): send from its page")
        }
        let output = context.output
        let token = output.newToken()
        let transaction = JSONValue.string("page-\(token)")
        let request: (topic: String, payload: JSONValue, response: String)
        switch kind {
        case "command":
            guard case .string(let command)? = object["command"], let value = object["value"] else {
                return .refused("expected {\"device\", \"command\", \"value\"}")
            }
            request = (
                "\(context.base)/\(device.name)/set", .object([(command, value), ("transaction", transaction)]),
                "\(context.base)/\(device.name)/response"
            )
        case "read":
            guard case .string(let attribute)? = object["attribute"] else {
                return .refused("expected {\"device\", \"attribute\"}")
            }
            request = (
                "\(context.base)/\(device.name)/get",
                .object([(attribute, .string("")), ("transaction", transaction)]),
                "\(context.base)/\(device.name)/response"
            )
        default:
            // A GATT read or write: only of a characteristic config.json names for this device.
            guard case .string(let text)? = object["characteristic"], let characteristic = BluetoothUUID(text) else {
                return .refused("characteristic: expected a characteristic UUID")
            }
            var service: BluetoothUUID?
            if case .string(let text)? = object["service"] {
                guard let uuid = BluetoothUUID(text) else { return .refused("service: expected a service UUID") }
                service = uuid
            }
            guard
                let named = Self.namedCharacteristics(context.rule(device.ruleIndex)).first(where: {
                    $0.characteristic == characteristic
                        && (service == nil || $0.service == nil || $0.service == service)
                })
            else {
                return .refused(
                    "characteristic \(characteristic.shortDescription) is not named for \(device.name) by config.json "
                        + "(its subscribe, poll or commands)")
            }
            var payload: [(key: String, value: JSONValue)] = [("device", .string(device.name))]
            if let chosen = service ?? named.service { payload.append(("service", .string(chosen.description))) }
            payload.append(("characteristic", .string(characteristic.description)))
            if kind == "gatt/write" {
                guard let value = object["value"] else { return .refused("value: expected the bytes to write as hex") }
                payload.append(("value", value))
            }
            payload.append(("transaction", transaction))
            request = (context.bridge + "/request/" + kind, .object(payload), context.bridge + "/response/" + kind)
        }
        output.watch(token) { [unowned output] message in
            guard message.topic == request.response, let response = try? JSONValue.parse(message.payload),
                response["transaction"] == transaction
            else { return }
            output.unwatch(token)
            answer(response)
        }
        var bytes: [UInt8] = []
        request.payload.write(into: &bytes)
        handle(MQTTInboundMessage(topic: request.topic, payload: bytes))
        return .waiting(token: token)
    }

    /// Stops waiting for the response of ``pageSend(_:body:answer:)``'s request `token` (the page
    /// gave up: its own timeout, the server's stop). The request itself runs on.
    public func pageSendAbandoned(_ token: Int) { context.output.unwatch(token) }
}
