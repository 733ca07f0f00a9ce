import Bluetooth
import JSON

/// The presence identities the core knows: those of `presence.identities` and those set at run
/// time (`<bridge>/request/presence/identity`), with the matcher that ties reports to them. Made
/// only when config.json has a `presence` section. Loop-confined.
///
/// Run-time identities are kept in `identities.json` in the state directory (a ``RuntimeFile``:
/// mode 0600, rewritten atomically at every change, read at start), or in memory only without a
/// state directory. The file: `{"identities":[{"name":"phone_anna","irk":"…"},…]}`, each entry
/// the request's members as they were asked for; at start each is checked as a request is (an
/// entry that is not an identity any more — a name config.json took since, a clash — is skipped
/// with a warning that never quotes it).
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

    /// The file name in the state directory.
    package static let fileName = "identities.json"
    /// Largest file read at start.
    package static let maxFileBytes = 256 * 1024
    /// Where the run-time identities are kept (its path nil: in memory only).
    private var file: RuntimeFile
    /// Each run-time identity's request members (without `transaction`), by name: what the file
    /// keeps.
    private var requested: [String: [(key: String, value: JSONValue)]] = [:]

    package init(settings: PresenceSettings, directory: String? = nil) {
        self.settings = settings
        identities = settings.identities
        matcher = PresenceMatcher(settings.identities)
        file = RuntimeFile(
            directory: directory, name: Self.fileName, holds: "presence identities", maxBytes: Self.maxFileBytes)
    }

    /// The file of the run-time identities, nil without a state directory.
    package var path: String? { file.path }

    /// Reads the file (at start); the problems to report, none quoting the file. A missing file
    /// is no problem.
    package func load() -> [String] {
        let (contents, read) = file.read()
        guard let bytes = contents, let path = file.path else { return read }
        var problems = read
        guard let document = try? JSONValue.parse(bytes), case .array(let entries)? = document["identities"] else {
            return problems + [
                "\(path) is not a presence identity file ({\"identities\":[identity, …]}): ignored (runtime presence identities start empty; it is replaced at the next change)"
            ]
        }
        var next: [PresenceIdentity] = []
        var nextRequested: [String: [(key: String, value: JSONValue)]] = [:]
        var skipped = 0
        for entry in entries {
            guard case .object(let members) = entry, case .success(let identity) = check(members, runtime: next),
                nextRequested[identity.name] == nil
            else {
                skipped += 1
                continue
            }
            next.append(identity)
            nextRequested[identity.name] = members
        }
        runtime = next
        requested = nextRequested
        if skipped > 0 {
            problems.append(
                "\(path): \(skipped) entr\(skipped == 1 ? "y" : "ies") skipped (not an identity, a name config.json has, the same name twice, one that names the device of another, or beyond \(PresenceSettings.maxIdentities) identities)"
            )
        }
        return problems
    }

    /// `presence/identity`: the request's members (without `transaction`) set or remove one
    /// run-time identity. The response's data names it and counts the identities; it never holds
    /// the IRK.
    package func change(_ members: [(key: String, value: JSONValue)], now: Double = 0) -> Result<
        JSONValue, CommandError
    > {
        let members = members.filter { $0.key != "transaction" }
        if case .bool(true)? = JSONValue.object(members)["remove"] {
            return remove(members, now: now)
        }
        let identity: PresenceIdentity
        switch check(members, runtime: runtime) {
        case .success(let checked): identity = checked
        case .failure(let error): return .failure(error)
        }
        var next = runtime
        let replaced = next.firstIndex { $0.name == identity.name }
        if let replaced { next[replaced] = identity } else { next.append(identity) }
        var nextRequested = requested
        nextRequested[identity.name] = members
        if let error = store(next, nextRequested, now: now) { return .failure(error) }
        runtime = next
        requested = nextRequested
        return .success(response(identity.name, replaced == nil ? "added" : "replaced"))
    }

    /// The identity `members` set, checked as a request's among config.json's and `runtime`
    /// (one of the same name there is replaced by it).
    private func check(_ members: [(key: String, value: JSONValue)], runtime: [PresenceIdentity]) -> Result<
        PresenceIdentity, CommandError
    > {
        let object = JSONValue.object(members)
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
        let others = (settings.identities + runtime).filter { $0.name != identity.name }
        if let clash = PresenceSettings.clash(identity, with: others) {
            return .failure(CommandError("\(identity.name) \(clash)"))
        }
        if !runtime.contains(where: { $0.name == identity.name }), others.count >= PresenceSettings.maxIdentities {
            return .failure(
                CommandError("at most \(PresenceSettings.maxIdentities) identities are kept; remove one first"))
        }
        return .success(identity)
    }

    /// Writes `runtime` to the file (when there is one); nil when written, else why not.
    private func store(
        _ runtime: [PresenceIdentity], _ requested: [String: [(key: String, value: JSONValue)]], now: Double
    ) -> CommandError? {
        guard file.path != nil else { return nil }
        let entries = runtime.compactMap { requested[$0.name].map(JSONValue.object) }
        var bytes: [UInt8] = []
        JSONValue.object([("identities", .array(entries))]).write(into: &bytes)
        bytes.append(UInt8(ascii: "\n"))
        return file.write(bytes, now: now, unchanged: "the identities are unchanged")
    }

    private func remove(_ members: [(key: String, value: JSONValue)], now: Double) -> Result<JSONValue, CommandError> {
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
        var next = runtime
        next.remove(at: index)
        var nextRequested = requested
        nextRequested[name] = nil
        if let error = store(next, nextRequested, now: now) { return .failure(error) }
        runtime = next
        requested = nextRequested
        return .success(response(name, "removed"))
    }

    private func response(_ name: String, _ action: String) -> JSONValue {
        .object([
            ("name", .string(name)), ("identity", .string(action)),
            ("identities", .number(Double(settings.identities.count + runtime.count))),
            ("persisted", .bool(file.path != nil)),
        ])
    }

    /// Answers the bridge request and logs what changed (never the key).
    func identityRequest(_ request: BridgeRequest, log: GatewayLogger, now: Double) {
        guard case .object(let members) = request.object else { return request.respond(.error, "expected an object") }
        switch change(members, now: now) {
        case .success(let data):
            if case .string(let name)? = data["name"], case .string(let action)? = data["identity"] {
                log(
                    .notice,
                    "presence identity \(name) \(action) on request (\(file.path.map { "kept in \($0)" } ?? "kept in memory only"))"
                )
            }
            request.respond(.ok, data: data)
        case .failure(let error):
            request.respond(.error, error.message)
        }
    }
}
