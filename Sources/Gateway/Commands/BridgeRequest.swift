import JSON

/// A request on `<bridge>/request/<verb>`, `{…, "transaction"?}`, checked the same way whichever
/// feature it is for: counted as a command; refused when retained, larger than
/// `commands.max_payload_bytes` or not a JSON object. The gateway hands it to the feature that
/// owns the verb (`gatt/read` and `gatt/write`: ``CommandRunner``; `device/bindkey`:
/// ``DeviceStates``; `device/remove`: the gateway), which answers it with ``respond(_:_:data:)``.
struct BridgeRequest {
    let verb: String
    /// The request's members.
    let object: JSONValue
    private let reply: CommandReply
    private let context: CoreContext

    /// The verb of a message on `<bridge>/request/<verb>`; nil for any other topic.
    static func verb(of topic: String, context: CoreContext) -> String? {
        let requests = context.bridge + "/request/"
        guard topic.hasPrefix(requests) else { return nil }
        return String(topic.dropFirst(requests.count))
    }

    /// The request `message` on `<bridge>/request/<verb>` makes; nil when it was refused
    /// (answered here).
    init?(_ message: MQTTInboundMessage, verb: String, context: CoreContext) {
        let defaultTopic = "\(context.bridge)/response/\(verb)"
        if message.retain {
            CommandReply.refuseRetained(message, defaultTopic: defaultTopic, context: context)
            return nil
        }
        context.counters.commands += 1
        var reply = CommandReply(to: message, default: defaultTopic, context: context)
        let limit = context.config.commands.maxPayloadBytes
        guard message.payload.count <= limit else {
            reply.send(
                .error, "payload of \(message.payload.count) bytes exceeds the limit of \(limit)", context: context)
            return nil
        }
        let members: [(key: String, value: JSONValue)]
        switch CommandRequest.parseObject(message.payload) {
        case .success(let object): members = object
        case .failure(let error):
            reply.send(.error, error.message, context: context)
            return nil
        }
        object = JSONValue.object(members)
        reply.transaction = object["transaction"]
        self.verb = verb
        self.reply = reply
        self.context = context
    }

    /// The request's one response: `ok` (with `data`) or `error` with why.
    func respond(_ status: CommandReply.Status, _ error: String? = nil, data: JSONValue? = nil) {
        reply.send(status, error, data: data, context: context)
    }

    /// The command job that carries the request out answers it (``CommandRunner``).
    var commandReply: CommandReply { reply }
}
