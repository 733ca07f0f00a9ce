/// A signal match rule, as given to the bus's `AddMatch` (D-Bus specification, "Match Rules").
///
/// Unset fields match anything. The bus delivers the union of all rules a connection added, so the
/// connection also applies each rule locally and a stream sees only what its own rule matches.
/// `sender` may be a unique name or a well-known name; for a well-known name the connection
/// tracks the name's current owner (`GetNameOwner` + `NameOwnerChanged`) to match locally.
public struct DBusMatchRule: Hashable, Sendable, CustomStringConvertible {
    public var sender: String?
    public var path: DBusObjectPath?
    /// Matches the path and every path below it.
    public var pathNamespace: DBusObjectPath?
    public var interface: String?
    public var member: String?
    /// `argN='…'`: string arguments that must be equal, by index (0…63).
    public var arguments: [Int: String]

    public init(
        sender: String? = nil, path: DBusObjectPath? = nil, pathNamespace: DBusObjectPath? = nil,
        interface: String? = nil, member: String? = nil, arguments: [Int: String] = [:]
    ) {
        self.sender = sender
        self.path = path
        self.pathNamespace = pathNamespace
        self.interface = interface
        self.member = member
        self.arguments = arguments
    }

    /// The rule string for `AddMatch`, e.g. `type='signal',interface='org.freedesktop.DBus.Properties'`.
    public var description: String {
        var parts = ["type='signal'"]
        func add(_ key: String, _ value: String?) {
            guard let value else { return }
            // Inside quotes only the apostrophe needs escaping: close, escaped quote, reopen.
            parts.append("\(key)='\(value.replacingApostrophes())'")
        }
        add("sender", sender)
        add("path", path?.rawValue)
        add("path_namespace", pathNamespace?.rawValue)
        add("interface", interface)
        add("member", member)
        for (index, value) in arguments.sorted(by: { $0.key < $1.key }) { add("arg\(index)", value) }
        return parts.joined(separator: ",")
    }

    /// Checks the rule's arguments: indices 0…63 (the specification's limit).
    func validate() throws {
        for index in arguments.keys where !(0...63).contains(index) {
            throw DBusError(.matchRuleInvalid, "arg\(index): argument indices go from 0 to 63")
        }
        if path != nil && pathNamespace != nil {
            throw DBusError(.matchRuleInvalid, "path and path_namespace cannot both be set")
        }
    }

    /// True when `sender` is a well-known name other than the bus's own (which the bus uses
    /// literally as the sender of its signals).
    var hasWellKnownSender: Bool {
        guard let sender else { return false }
        return !sender.hasPrefix(":") && sender != "org.freedesktop.DBus"
    }

    func matchesArguments(_ values: [DBusValue]) -> Bool {
        for (index, want) in arguments {
            guard index < values.count, case .string(let have) = values[index], have == want else { return false }
        }
        return true
    }
}

extension String {
    fileprivate func replacingApostrophes() -> String {
        guard utf8.contains(UInt8(ascii: "'")) else { return self }
        return split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''")
    }
}
