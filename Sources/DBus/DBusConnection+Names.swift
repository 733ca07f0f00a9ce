/// Flags of `org.freedesktop.DBus.RequestName` (`DBUS_NAME_FLAG_*`).
public struct DBusNameFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// `DBUS_NAME_FLAG_ALLOW_REPLACEMENT`: another connection may take the name from us.
    public static let allowReplacement = DBusNameFlags(rawValue: 1)
    /// `DBUS_NAME_FLAG_REPLACE_EXISTING`: take the name if its owner allows replacement.
    public static let replaceExisting = DBusNameFlags(rawValue: 2)
    /// `DBUS_NAME_FLAG_DO_NOT_QUEUE`: fail instead of queueing behind the owner.
    public static let doNotQueue = DBusNameFlags(rawValue: 4)
}

/// Result of `RequestName` (`DBUS_REQUEST_NAME_REPLY_*`).
public enum DBusRequestNameReply: UInt32, Sendable {
    case primaryOwner = 1, inQueue = 2, exists = 3, alreadyOwner = 4
}

/// Result of `ReleaseName` (`DBUS_RELEASE_NAME_REPLY_*`).
public enum DBusReleaseNameReply: UInt32, Sendable {
    case released = 1, nonExistent = 2, notOwner = 3
}

/// One `NameOwnerChanged` signal: nil owners mean "none" (the name appeared or vanished).
public struct DBusNameOwnerChange: Sendable, Hashable {
    public var name: String
    public var oldOwner: String?
    public var newOwner: String?
    public init(name: String, oldOwner: String?, newOwner: String?) {
        self.name = name
        self.oldOwner = oldOwner
        self.newOwner = newOwner
    }
    /// True when a connection left the bus: a unique name lost its owner.
    public var isClientLeaving: Bool { name.hasPrefix(":") && newOwner == nil }
}

extension DBusConnection {
    /// Asks the bus for a well-known name (`RequestName`, asynchronous).
    /// - Throws: ``DBusError`` from the bus, e.g. `AccessDenied` when policy forbids owning it.
    public func requestName(_ name: String, flags: DBusNameFlags = [.doNotQueue]) async throws -> DBusRequestNameReply {
        try LibDBus.validate(name, as: .busName)
        let reply = try await callBus("RequestName", [.string(name), .uint32(flags.rawValue)])
        guard let code = reply.first?.uint32, let result = DBusRequestNameReply(rawValue: code) else {
            throw DBusError(.failed, "RequestName(\(name)) returned \(reply), expected one known uint32 code")
        }
        return result
    }

    /// Gives a well-known name back (`ReleaseName`, asynchronous).
    public func releaseName(_ name: String) async throws -> DBusReleaseNameReply {
        try LibDBus.validate(name, as: .busName)
        let reply = try await callBus("ReleaseName", [.string(name)])
        guard let code = reply.first?.uint32, let result = DBusReleaseNameReply(rawValue: code) else {
            throw DBusError(.failed, "ReleaseName(\(name)) returned \(reply), expected one known uint32 code")
        }
        return result
    }

    /// The unique name owning `name` now, or nil when nobody does (`GetNameOwner`).
    public func nameOwner(_ name: String) async throws -> String? {
        do {
            return try await callBus("GetNameOwner", [.string(name)]).first?.string
        } catch let error as DBusError where error.name == .nameHasNoOwner {
            return nil
        }
    }

    /// `NameOwnerChanged` signals from the bus, for one name or (nil) all names — e.g. `org.bluez`
    /// to follow the daemon's restarts, or a client's unique name to notice it leave.
    ///
    /// Same subscription, buffering and cleanup rules as ``signals(matching:bufferingPolicy:)``.
    public func nameOwnerChanges(
        of name: String? = nil,
        bufferingPolicy: AsyncStream<DBusNameOwnerChange>.Continuation.BufferingPolicy = .unbounded
    ) async throws -> AsyncStream<DBusNameOwnerChange> {
        var rule = DBusMatchRule(
            sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged")
        if let name { rule.arguments[0] = name }
        let (stream, continuation) = AsyncStream.makeStream(
            of: DBusNameOwnerChange.self, bufferingPolicy: bufferingPolicy)
        try await subscribe(
            rule,
            deliver: { message in
                guard message.arguments.count == 3, let name = message.arguments[0].string,
                    let old = message.arguments[1].string, let new = message.arguments[2].string
                else { return }
                continuation.yield(
                    DBusNameOwnerChange(
                        name: name, oldOwner: old.isEmpty ? nil : old, newOwner: new.isEmpty ? nil : new))
            },
            finish: { continuation.finish() },
            setTermination: { handler in continuation.onTermination = { _ in handler() } })
        return stream
    }
}
