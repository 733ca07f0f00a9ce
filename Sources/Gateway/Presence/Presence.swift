import Bluetooth
import JSON

/// The presence identities the core knows: those of `presence.identities` and those set at run
/// time (`<bridge>/request/presence/identity`, in memory only), with the matcher that ties reports
/// to them. Made only when config.json has a `presence` section. Loop-confined.
///
/// A name of config.json cannot be changed or removed by request (config.json wins, as for bind
/// keys); a run-time identity of the same name is replaced; no two identities share a name or
/// what identifies them; at most ``PresenceSettings/maxIdentities`` in all.
package final class Presence {
    package let settings: PresenceSettings
    /// The identities set at run time, in the order they were first set.
    package private(set) var runtime: [PresenceIdentity] = [] {
        didSet {
            identities = settings.identities + runtime
            earlier.add(matcher.resolver)
            matcher = PresenceMatcher(identities)
        }
    }
    /// Config.json's identities, then the run-time ones: what ``matcher``'s indexes point into.
    package private(set) var identities: [PresenceIdentity]
    /// Ties reports to ``identities`` (indexes into it); made anew when they change.
    package private(set) var matcher: PresenceMatcher

    /// What is known of each identity heard since the start, by name (a replaced run-time
    /// identity keeps it; a removed one's goes when its `not_home` is published).
    package internal(set) var tracks: [String: PresenceTrack] = [:]
    /// The resolver counts of the matchers replaced since the start.
    var earlier = ResolverCounts()
    /// The identities whose Home Assistant configs were published (at their first message).
    var discovered: Set<String> = []

    /// At most one `<base>/presence/<name>` message per identity per interval while it is home
    /// (seconds); arriving and leaving are published at once.
    package static let publishInterval = 2.0

    package init(settings: PresenceSettings) {
        self.settings = settings
        identities = settings.identities
        matcher = PresenceMatcher(settings.identities)
    }

    /// `presence/identity`: the request's members (without `transaction`) set or remove one
    /// run-time identity. The response's data names it and counts the identities; it never holds
    /// the IRK.
    package func change(_ members: [(key: String, value: JSONValue)]) -> Result<JSONValue, CommandError> {
        let members = members.filter { $0.key != "transaction" }
        let object = JSONValue.object(members)
        if case .bool(true)? = object["remove"] {
            return remove(members)
        }
        let problems = ConfigProblems()
        guard var reader = ConfigObject(JSONReader(path: "", value: object), problems),
            let identity = PresenceIdentity(&reader)
        else {
            return .failure(CommandError(problems.errors.map(\.description).joined(separator: "; ")))
        }
        if settings.identities.contains(where: { $0.name == identity.name }) {
            return .failure(
                CommandError(
                    "\"\(identity.name)\" is an identity of config.json (presence.identities); change it there"))
        }
        let others = identities.filter { $0.name != identity.name }
        if let clash = PresenceSettings.clash(identity, with: others) {
            return .failure(CommandError("\(identity.name) \(clash)"))
        }
        let replaced = runtime.firstIndex { $0.name == identity.name }
        if replaced == nil, others.count >= PresenceSettings.maxIdentities {
            return .failure(
                CommandError("at most \(PresenceSettings.maxIdentities) identities are kept; remove one first"))
        }
        if let replaced { runtime[replaced] = identity } else { runtime.append(identity) }
        return .success(response(identity.name, replaced == nil ? "added" : "replaced"))
    }

    private func remove(_ members: [(key: String, value: JSONValue)]) -> Result<JSONValue, CommandError> {
        let object = JSONValue.object(members)
        let unknown = members.map(\.key).filter { $0 != "name" && $0 != "remove" }
        guard unknown.isEmpty else {
            return .failure(
                CommandError("\(unknown.joined(separator: ", ")): not a key of a removal (expected name and remove)"))
        }
        guard case .string(let name)? = object["name"] else {
            return .failure(CommandError("name: expected the name of a run-time identity"))
        }
        if settings.identities.contains(where: { $0.name == name }) {
            return .failure(
                CommandError("\"\(name)\" is an identity of config.json (presence.identities); remove it there"))
        }
        guard let index = runtime.firstIndex(where: { $0.name == name }) else {
            return .failure(CommandError("name: no run-time identity is named \"\(name)\""))
        }
        runtime.remove(at: index)
        return .success(response(name, "removed"))
    }

    private func response(_ name: String, _ action: String) -> JSONValue {
        .object([
            ("name", .string(name)), ("identity", .string(action)),
            ("identities", .number(Double(settings.identities.count + runtime.count))), ("persisted", .bool(false)),
        ])
    }

    /// Answers the bridge request and logs what changed (never the key).
    func identityRequest(_ request: BridgeRequest, log: GatewayLogger) {
        guard case .object(let members) = request.object else { return request.respond(.error, "expected an object") }
        switch change(members) {
        case .success(let data):
            if case .string(let name)? = data["name"], case .string(let action)? = data["identity"] {
                log(.notice, "presence identity \(name) \(action) on request (kept in memory only)")
            }
            request.respond(.ok, data: data)
        case .failure(let error):
            request.respond(.error, error.message)
        }
    }
}
