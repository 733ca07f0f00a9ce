import Bluetooth
import JSON

/// Where and how a command's single response is published.
struct CommandReply: Sendable {
    enum Status: String, Sendable {
        case ok, error, timeout, expired
    }

    /// `<base>/<device>/response`, `<base>/bridge/response/<verb>` or the MQTT 5 response topic.
    var topic: String
    var correlationData: [UInt8]?
    /// The `transaction` of the request, echoed as given (string or number); null when absent.
    var transaction: JSONValue?

    /// `{"transaction":…,"status":…,"error":…,"timing_ms":{"queued":…,"connect":…,"gatt":…}}`
    /// plus `data` for raw reads, and `att_error` ("0x80") when the device answered a GATT
    /// operation with an ATT error.
    func payload(
        _ status: Status, error: String?, timing: Timing, data: JSONValue? = nil, attError: UInt8? = nil
    ) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("transaction", transaction ?? .null),
            ("status", .string(status.rawValue)),
            ("error", error.map { .string($0) } ?? .null),
            (
                "timing_ms",
                .object([
                    ("queued", .number(timing.queued.milliseconds)),
                    ("connect", .number(timing.connect.milliseconds)),
                    ("gatt", .number(timing.gatt.milliseconds)),
                ])
            ),
        ]
        if let attError { members.append(("att_error", .string("0x" + Hex.encode([attError])))) }
        if let data { members.append(("data", data)) }
        return .object(members)
    }

    /// Seconds spent per stage.
    struct Timing: Sendable {
        var queued: Double = 0
        var connect: Double = 0
        var gatt: Double = 0
    }
}

extension CommandReply {
    /// The reply to `message`: on its MQTT 5 response topic when it is one the gateway may publish
    /// a response on, else on `fallback`; with its correlation data.
    init(to message: MQTTInboundMessage, default fallback: String, context: CoreContext) {
        self.init(
            topic: Self.responseTopic(message, default: fallback, context: context),
            correlationData: message.correlationData)
    }

    /// Where a command's response goes: the MQTT 5 response topic when it is one the gateway may
    /// publish a response on, else `fallback`. A response topic is the requester's choice, and
    /// the gateway publishes with its own rights, so one under the base topic (other than a
    /// `…/response` topic) or the Home Assistant discovery prefix would let a client that may
    /// only send commands overwrite device states or discovery configs; wildcards and `$` topics
    /// are not publishable at all.
    private static func responseTopic(_ message: MQTTInboundMessage, default fallback: String, context: CoreContext)
        -> String
    {
        guard let topic = message.responseTopic else { return fallback }
        let base = context.base
        let homeAssistant = context.config.homeAssistant
        let reserved =
            topic.hasPrefix(base + "/") && !topic.hasSuffix("/response")
            && !topic.hasPrefix(context.bridge + "/response/")
        let discovery =
            homeAssistant.enabled
            && (topic == homeAssistant.discoveryPrefix
                || topic.hasPrefix(homeAssistant.discoveryPrefix + "/"))
        guard !topic.isEmpty, topic.utf8.count <= 1024, !topic.hasPrefix("$"), !topic.contains("+"),
            !topic.contains("#"),
            !topic.utf8.contains(0), !reserved, !discovery
        else {
            context.counters.dropped.responseTopic += 1
            context.log(
                .info, "\(message.topic): response topic \"\(topic.prefix(120))\" refused; answering on \(fallback)")
            return fallback
        }
        return topic
    }

    /// A command published with the retain flag: the broker hands it to every new subscription,
    /// so running it would actuate again at every start and every broker reconnect. It is
    /// answered once (on its response topic) and counted (`dropped.retained_command`), never run.
    static func refuseRetained(_ message: MQTTInboundMessage, defaultTopic: String, context: CoreContext) {
        context.counters.commands += 1
        context.counters.dropped.retainedCommand += 1
        context.log(
            .warning, "\(message.topic): retained command not executed (publish commands without the retain flag)")
        var reply = CommandReply(to: message, default: defaultTopic, context: context)
        reply.transaction = CommandRequest.transaction(
            in: message.payload, maxBytes: context.config.commands.maxPayloadBytes)
        reply.send(.error, "retained command not executed", context: context)
    }

    /// Publishes the one response of a command (counted in `command_errors` unless `ok`).
    func send(
        _ status: Status, _ error: String?, timing: Timing = .init(), data: JSONValue? = nil, attError: UInt8? = nil,
        context: CoreContext
    ) {
        if status != .ok { context.counters.commandErrors += 1 }
        let output = context.output
        output.scratch.removeAll(keepingCapacity: true)
        payload(status, error: error, timing: timing, data: data, attError: attError).write(into: &output.scratch)
        output.publish(topic, output.scratch, retain: false, correlationData: correlationData)
    }
}

extension Double {
    /// Seconds as whole milliseconds.
    var milliseconds: Double { (self * 1000).rounded() }
}
