import JSON

/// The pure part of a `/set` or `/get` message: parsed, checked against the device rule and
/// encoded before anything is queued, so a bad command writes nothing.
struct CommandRequest {
    /// `transaction` from the JSON payload, when it could be read.
    var transaction: JSONValue?
    /// `timestamp` from the payload in milliseconds since 1970.
    var timestamp: Int64?

    /// Parses `{"<command>": value, …, "transaction": id?, "timestamp": ms?}` (or, with
    /// `command`, a plain value) into encoded writes.
    /// `time` is the gateway's clock for template commands (docs/config.md, "Command templates").
    static func set(_ payload: [UInt8], command: String?, rule: DeviceRule, maxBytes: Int, time: CommandTime)
        -> (request: CommandRequest, writes: Result<[PlannedWrite], CommandError>)
    {
        var request = CommandRequest()
        guard payload.count <= maxBytes else {
            return (
                request, .failure(CommandError("payload of \(payload.count) bytes exceeds the limit of \(maxBytes)"))
            )
        }
        if let command {
            guard let spec = rule.commands.first(where: { $0.name == command }) else {
                return (request, .failure(unknownCommand(command, rule)))
            }
            do {
                let value = try spec.value(fromPlainText: String(decoding: payload, as: UTF8.self))
                return (request, .success([try planned(spec, value, time: time)]))
            } catch {
                return (request, .failure(CommandError("\(command): \(error.message)")))
            }
        }
        let members: [(key: String, value: JSONValue)]
        switch parseObject(payload) {
        case .success(let object): members = object
        case .failure(let error): return (request, .failure(error))
        }
        request.read(members)
        var writes: [PlannedWrite] = []
        for (key, value) in members where key != "transaction" && key != "timestamp" {
            guard let spec = rule.commands.first(where: { $0.name == key }) else {
                return (request, .failure(unknownCommand(key, rule)))
            }
            do {
                writes.append(try planned(spec, value, time: time))
            } catch {
                return (request, .failure(CommandError("\(key): \(error.message)")))
            }
        }
        if let error = request.timestampError { return (request, .failure(error)) }
        guard !writes.isEmpty else {
            return (request, .failure(CommandError("no command in the payload (expected {\"<command>\": value})")))
        }
        return (request, .success(writes))
    }

    /// `value` encoded for `spec`; the value is kept when a template reads the clock.
    private static func planned(_ spec: CommandSpec, _ value: JSONValue, time: CommandTime) throws(CommandError)
        -> PlannedWrite
    {
        let bytes = try spec.encode(value, time: time)
        let readsClock = spec.template?.readsClock(value) == true
        return PlannedWrite(command: spec, bytes: bytes, clockValue: readsClock ? value : nil)
    }

    /// Parses `{"<attribute>": "", …}` of `/get` into the configured characteristics to read.
    static func get(
        _ payload: [UInt8], rule: DeviceRule, sources: [(attribute: String, poll: Bool, index: Int)], maxBytes: Int
    )
        -> (request: CommandRequest, reads: Result<[CharacteristicRef], CommandError>)
    {
        var request = CommandRequest()
        guard payload.count <= maxBytes else {
            return (
                request, .failure(CommandError("payload of \(payload.count) bytes exceeds the limit of \(maxBytes)"))
            )
        }
        let members: [(key: String, value: JSONValue)]
        switch parseObject(payload) {
        case .success(let object): members = object
        case .failure(let error): return (request, .failure(error))
        }
        request.read(members)
        var reads: [CharacteristicRef] = []
        for (key, _) in members where key != "transaction" && key != "timestamp" {
            let ref: CharacteristicRef?
            if let source = sources.first(where: { $0.attribute == key }) {
                ref = CharacteristicRef(poll: source.poll, index: source.index)
            } else if let index = rule.subscribe.firstIndex(where: {
                $0.parser.name == key || $0.characteristic.shortDescription == key.uppercased()
            }) {
                ref = CharacteristicRef(poll: false, index: index)
            } else if let index = rule.poll.firstIndex(where: {
                $0.parser.name == key || $0.characteristic.shortDescription == key.uppercased()
            }) {
                ref = CharacteristicRef(poll: true, index: index)
            } else {
                ref = nil
            }
            guard let ref else {
                return (
                    request,
                    .failure(
                        CommandError("\"\(key)\" is not an attribute of a configured characteristic of this device"))
                )
            }
            if !reads.contains(ref) { reads.append(ref) }
        }
        if let error = request.timestampError { return (request, .failure(error)) }
        guard !reads.isEmpty else {
            return (request, .failure(CommandError("nothing to read (expected {\"<attribute>\": \"\"})")))
        }
        return (request, .success(reads))
    }

    private var timestampError: CommandError?

    private mutating func read(_ members: [(key: String, value: JSONValue)]) {
        for (key, value) in members {
            if key == "transaction" { transaction = value }
            if key == "timestamp" {
                // Seconds or milliseconds since 1970: anything below 1e11 is seconds. A number
                // past Int64's milliseconds (1e19, say) is refused, not converted.
                if case .number(let number) = value, number > 0,
                    let milliseconds = Int64(exactly: (number < 1e11 ? number * 1000 : number).rounded(.down))
                {
                    timestamp = milliseconds
                } else {
                    timestampError = CommandError(
                        "timestamp: expected the send time in (milli)seconds since 1970, got \(value.serialized)")
                }
            }
        }
    }

    /// The `transaction` of a payload that may be anything (for answers to refused commands);
    /// nil for a payload over `maxBytes`, which is not parsed.
    static func transaction(in payload: [UInt8], maxBytes: Int) -> JSONValue? {
        guard payload.count <= maxBytes, case .success(let members) = parseObject(payload) else { return nil }
        return members.last(where: { $0.key == "transaction" })?.value
    }

    static func parseObject(_ payload: [UInt8]) -> Result<[(key: String, value: JSONValue)], CommandError> {
        do {
            guard case .object(let members) = try JSONValue.parse(payload) else {
                return .failure(CommandError("expected a JSON object"))
            }
            return .success(members)
        } catch {
            return .failure(CommandError("malformed JSON: \(error)"))
        }
    }

    static func unknownCommand(_ name: String, _ rule: DeviceRule) -> CommandError {
        let known = rule.commands.map(\.name)
        return CommandError(
            "unknown command \"\(name)\""
                + (known.isEmpty
                    ? " (this device has no commands)" : " (expected one of \(known.joined(separator: ", ")))"))
    }
}
