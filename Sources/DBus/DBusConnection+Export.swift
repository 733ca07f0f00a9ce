internal import CDBus

/// Standard interface names served by every exported object.
enum StandardInterface {
    static let introspectable = "org.freedesktop.DBus.Introspectable"
    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"
    static let peer = "org.freedesktop.DBus.Peer"
}

extension DBusConnection {
    /// Makes `root` an `org.freedesktop.DBus.ObjectManager`: it answers `GetManagedObjects` with
    /// every object below it, and ``export(_:at:announce:)`` / ``unexport(_:at:announce:)`` below it
    /// emit `InterfacesAdded` / `InterfacesRemoved` from `root`.
    public func addObjectManager(at root: DBusObjectPath) {
        objectManagers.insert(root)
    }

    /// Exports `interfaces` at `path` (creating the object if needed).
    ///
    /// Method calls are served from the loop thread (see ``DBusMethod/Handler``); every object also
    /// answers `org.freedesktop.DBus.Properties` and `org.freedesktop.DBus.Introspectable`. When
    /// `path` lies below an object manager and `announce` is true, one `InterfacesAdded` signal
    /// carries the new interfaces with their current properties (plus the two standard interfaces,
    /// as empty dictionaries, when the object is new — as bluetoothd's gdbus does).
    /// - Throws: ``DBusError`` `InvalidArgs` when an interface is already exported at `path` or a
    ///   name is invalid.
    public func export(_ interfaces: [DBusInterface], at path: DBusObjectPath, announce: Bool = true) throws {
        let existing = objects[path]
        for interface in interfaces {
            try LibDBus.validate(interface.name, as: .interface)
            for method in interface.methods { try LibDBus.validate(method.name, as: .member) }
            for property in interface.properties {
                if let value = property.value, property.type != .variant { try value.check(property.type) }
            }
            if existing?.interface(interface.name) != nil
                || interfaces.filter({ $0.name == interface.name }).count > 1
            {
                throw DBusError(.invalidArgs, "interface \(interface.name) is already exported at \(path)")
            }
        }
        let object = existing ?? ExportedObject()
        let added = interfaces.map(ExportedObject.Interface.init)
        object.interfaces += added
        objects[path] = object
        guard announce, let root = managerRoot(for: path) else { return }
        var entries: [DBusDictionaryEntry] = []
        if existing == nil {
            let empty = DBusValue.dictionary(key: .string, value: .variant, [])
            entries.append(DBusDictionaryEntry(.string(StandardInterface.introspectable), empty))
            entries.append(DBusDictionaryEntry(.string(StandardInterface.properties), empty))
        }
        for interface in added {
            entries.append(DBusDictionaryEntry(.string(interface.name), interface.propertyDictionary))
        }
        try emit(
            path: root, interface: StandardInterface.objectManager, member: "InterfacesAdded",
            arguments: [
                .objectPath(path),
                .dictionary(key: .string, value: .dictionary(key: .string, value: .variant), entries),
            ])
    }

    /// Removes interfaces from the object at `path` (the whole object when `interfaceNames` is nil
    /// or names all of them).
    ///
    /// With `announce` and an object manager above `path`, one `InterfacesRemoved` signal lists the
    /// removed interfaces (plus the standard ones when the whole object goes). With
    /// `announce: false` nothing is emitted, which is how a crashed daemon looks to clients.
    /// Calls already being handled may still reply.
    public func unexport(_ interfaceNames: [String]? = nil, at path: DBusObjectPath, announce: Bool = true) throws {
        guard let object = objects[path] else { return }
        let names = interfaceNames ?? object.interfaces.map(\.name)
        object.interfaces.removeAll { names.contains($0.name) }
        let wholeObject = object.interfaces.isEmpty
        if wholeObject { objects.removeValue(forKey: path) }
        guard announce, let root = managerRoot(for: path) else { return }
        var removed = names
        if wholeObject { removed = [StandardInterface.introspectable, StandardInterface.properties] + removed }
        try emit(
            path: root, interface: StandardInterface.objectManager, member: "InterfacesRemoved",
            arguments: [.objectPath(path), .strings(removed)])
    }

    /// Removes every exported object at or below `root` without emitting anything (the "daemon
    /// crashed" case: clients get no `InterfacesRemoved`).
    public func unexportSilently(subtree root: DBusObjectPath = .root) {
        for path in objects.keys where path.isDescendant(of: root) { objects.removeValue(forKey: path) }
    }

    /// The paths exported now, sorted.
    public var exportedPaths: [DBusObjectPath] { objects.keys.sorted() }

    /// The current value of an exported property (nil when absent or unknown).
    public func property(_ name: String, interface: String, at path: DBusObjectPath) -> DBusValue? {
        objects[path]?.interface(interface)?.values[name]
    }

    /// Changes exported properties and announces them in ONE `PropertiesChanged` signal:
    /// a non-nil value goes into `changed_properties`, nil removes the property (it no longer
    /// exists) and goes into `invalidated_properties` — bluetoothd's semantics (e.g. RSSI when
    /// discovery stops). All changes are checked first; on error nothing changes.
    ///
    /// Every listed property is announced, even when its value did not change (as
    /// `GattCharacteristic1.Value` notifications need). With `emit: false` the values change
    /// silently (as BlueZ's `MTU` after disconnect).
    /// - Throws: ``DBusError`` `UnknownObject`, `UnknownInterface`, `UnknownProperty`, or
    ///   `InvalidArgs` for a value of the wrong type.
    public func setProperties(
        _ changes: KeyValuePairs<String, DBusValue?>, interface: String, at path: DBusObjectPath, emit: Bool = true
    ) throws {
        try applyProperties(changes, interface: interface, at: path, emit: emit)
    }

    /// Changes exported properties from a list built at run time; see
    /// ``setProperties(_:interface:at:emit:)-(KeyValuePairs<String,DBusValue?>,_,_,_)``.
    public func setProperties(
        _ changes: [(key: String, value: DBusValue?)], interface: String, at path: DBusObjectPath, emit: Bool = true
    ) throws {
        try applyProperties(changes, interface: interface, at: path, emit: emit)
    }

    private func applyProperties<Changes: Sequence>(
        _ changes: Changes, interface: String, at path: DBusObjectPath, emit: Bool
    ) throws where Changes.Element == (key: String, value: DBusValue?) {
        let target = try exportedInterface(interface, at: path)
        for (name, value) in changes {
            guard let property = target.property(name) else {
                throw DBusError(.unknownProperty, "no property \(name) in \(interface) at \(path)")
            }
            if let value, property.type != .variant { try value.check(property.type) }
        }
        var changed: [DBusDictionaryEntry] = []
        var invalidated: [DBusValue] = []
        for (name, value) in changes {
            if let value {
                target.values[name] = value
                changed.append(DBusDictionaryEntry(.string(name), .variant(value)))
            } else {
                target.values.removeValue(forKey: name)
                invalidated.append(.string(name))
            }
        }
        guard emit, !(changed.isEmpty && invalidated.isEmpty) else { return }
        try self.emit(
            path: path, interface: StandardInterface.properties, member: "PropertiesChanged",
            arguments: [
                .string(interface), .dictionary(key: .string, value: .variant, changed), .array(.string, invalidated),
            ])
    }

    /// Sets one property; see ``setProperties(_:interface:at:emit:)``.
    public func setProperty(
        _ name: String, to value: DBusValue?, interface: String, at path: DBusObjectPath, emit: Bool = true
    ) throws {
        try setProperties([name: value], interface: interface, at: path, emit: emit)
    }

    // MARK: Serving calls

    private func exportedInterface(_ name: String, at path: DBusObjectPath) throws -> ExportedObject.Interface {
        guard let object = objects[path] else { throw DBusError(.unknownObject, "no object is exported at \(path)") }
        guard let interface = object.interface(name) else {
            throw DBusError(.unknownInterface, "object \(path) has no interface \(name)")
        }
        return interface
    }

    /// The nearest object manager strictly above `path`.
    private func managerRoot(for path: DBusObjectPath) -> DBusObjectPath? {
        var best: DBusObjectPath? = nil
        for root in objectManagers where root != path && path.isDescendant(of: root) {
            if best == nil || root.rawValue.count > best?.rawValue.count ?? 0 { best = root }
        }
        return best
    }

    /// Serves a method call addressed to this connection. Returns false only for messages that
    /// are not well-formed calls (libdbus then answers them).
    func handleMethodCall(_ message: OpaquePointer) -> Bool {
        guard dbus_message_get_path(message) != nil, dbus_message_get_member(message) != nil else { return false }
        guard let call = try? DBusMessage(copying: message), let path = call.path, let member = call.member else {
            return false
        }
        if call.interface == StandardInterface.peer { return false }  // libdbus answers Peer itself
        let object = objects[path]
        let isManager = objectManagers.contains(path)
        switch (call.interface, member) {
        case (StandardInterface.introspectable, "Introspect"), (nil, "Introspect"):
            let children = childNames(of: path)
            guard object != nil || isManager || !children.isEmpty else { break }
            let xml = Introspection.xml(
                interfaces: object?.interfaces.map(\.definition) ?? [], isObjectManager: isManager, children: children)
            sendReply(to: call, result: .success([.string(xml)]), outputSignature: [.string])
            return true
        case (StandardInterface.objectManager, "GetManagedObjects") where isManager:
            sendReply(to: call, result: .success([managedObjects(under: path)]), outputSignature: nil)
            return true
        case (StandardInterface.properties, _) where object != nil:
            sendReply(
                to: call, result: Result { try serveProperties(call, object: object) }.mapError(Self.asDBusError),
                outputSignature: nil)
            return true
        default:
            break
        }
        guard let object else {
            sendReply(
                to: call, result: .failure(DBusError(.unknownObject, "No such object path '\(path)'")),
                outputSignature: nil)
            return true
        }
        let found: (ExportedObject.Interface, DBusMethod)?
        if let name = call.interface {
            guard let interface = object.interface(name) else {
                sendReply(
                    to: call,
                    result: .failure(DBusError(.unknownInterface, "Unknown interface '\(name)' on object '\(path)'")),
                    outputSignature: nil)
                return true
            }
            found = interface.method(member).map { (interface, $0) }
        } else {
            found =
                object.interfaces.lazy.compactMap { interface in interface.method(member).map { (interface, $0) } }
                .first
        }
        guard let (_, method) = found else {
            sendReply(
                to: call,
                result: .failure(
                    DBusError(
                        .unknownMethod,
                        "Unknown method '\(member)' on interface '\(call.interface ?? "")' with signature '\(call.signature)'"
                    )),
                outputSignature: nil)
            return true
        }
        do {
            if let input = method.inputSignature { try DBusValue.check(call.arguments, against: input) }
        } catch {
            sendReply(to: call, result: .failure(Self.asDBusError(error)), outputSignature: nil)
            return true
        }
        switch method.handler {
        case .immediate(let body):
            sendReply(
                to: call, result: Result { try body(call) }.mapError(Self.asDBusError),
                outputSignature: method.outputSignature)
        case .async(let body):
            let output = method.outputSignature
            Task {
                let result: Result<[DBusValue], DBusError>
                do { result = .success(try await body(call)) } catch { result = .failure(Self.asDBusError(error)) }
                self.sendReply(to: call, result: result, outputSignature: output)
            }
        case .deferred(let body):
            body(call, DBusPendingReply(call: call, connection: self, outputSignature: method.outputSignature))
        }
        return true
    }

    private func serveProperties(_ call: DBusMessage, object: ExportedObject?) throws -> [DBusValue] {
        guard let object, let member = call.member else { throw DBusError(.unknownObject, "no object") }
        switch member {
        case "Get":
            try DBusValue.check(call.arguments, against: [.string, .string])
            let interfaceName = call.arguments[0].string ?? "", name = call.arguments[1].string ?? ""
            guard let interface = object.interface(interfaceName) else {
                throw DBusError(.invalidArgs, "No such interface '\(interfaceName)'")
            }
            guard let property = interface.property(name), property.access != .write,
                let value = interface.values[name]
            else { throw DBusError(.invalidArgs, "No such property '\(name)'") }
            return [.variant(value)]
        case "GetAll":
            try DBusValue.check(call.arguments, against: [.string])
            let interfaceName = call.arguments[0].string ?? ""
            guard let interface = object.interface(interfaceName) else {
                if interfaceName == StandardInterface.properties || interfaceName == StandardInterface.introspectable {
                    return [.dictionary(key: .string, value: .variant, [])]
                }
                throw DBusError(.invalidArgs, "No such interface '\(interfaceName)'")
            }
            return [interface.propertyDictionary]
        case "Set":
            try DBusValue.check(call.arguments, against: [.string, .string, .variant])
            let interfaceName = call.arguments[0].string ?? "", name = call.arguments[1].string ?? ""
            let value = call.arguments[2].unwrappedOnce
            guard let interface = object.interface(interfaceName) else {
                throw DBusError(.unknownInterface, "No such interface '\(interfaceName)'")
            }
            guard let property = interface.property(name) else {
                throw DBusError(.unknownProperty, "No such property '\(name)'")
            }
            guard property.access != .read else {
                throw DBusError(.propertyReadOnly, "Property '\(name)' is not writable")
            }
            if property.type != .variant && value.type != property.type {
                throw DBusError(
                    .invalidSignature, "Property '\(name)' has type '\(property.type)', not '\(value.type)'")
            }
            try property.onSet?(value, call)
            guard let path = call.path else { return [] }
            try setProperties([name: value], interface: interfaceName, at: path)
            return []
        default:
            throw DBusError(.unknownMethod, "Unknown method '\(member)' on interface '\(StandardInterface.properties)'")
        }
    }

    /// `a{oa{sa{sv}}}` for every object strictly below `root`, sorted by path.
    private func managedObjects(under root: DBusObjectPath) -> DBusValue {
        let empty = DBusValue.dictionary(key: .string, value: .variant, [])
        var result: [DBusDictionaryEntry] = []
        for path in objects.keys.sorted() where path != root && path.isDescendant(of: root) {
            guard let object = objects[path] else { continue }
            var interfaces = [
                DBusDictionaryEntry(.string(StandardInterface.introspectable), empty),
                DBusDictionaryEntry(.string(StandardInterface.properties), empty),
            ]
            for interface in object.interfaces {
                interfaces.append(DBusDictionaryEntry(.string(interface.name), interface.propertyDictionary))
            }
            result.append(
                DBusDictionaryEntry(
                    .objectPath(path),
                    .dictionary(key: .string, value: .dictionary(key: .string, value: .variant), interfaces)))
        }
        return .dictionary(
            key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)),
            result)
    }

    /// Names of the direct children of `path` that lead to exported objects.
    private func childNames(of path: DBusObjectPath) -> [String] {
        var names: Set<String> = []
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        for other in objects.keys where other != path && other.rawValue.hasPrefix(prefix) {
            let rest = other.rawValue.dropFirst(prefix.count)
            names.insert(String(rest.prefix { $0 != "/" }))
        }
        return names.sorted()
    }

    static func asDBusError(_ error: any Error) -> DBusError {
        error as? DBusError ?? DBusError(.failed, "\(error)")
    }

    /// Sends the reply owed to `call`: a method return with `values` (checked against
    /// `outputSignature` when given) or an error. Nothing is sent when the caller asked for no
    /// reply or the connection is closed.
    func sendReply(to call: DBusMessage, result: Result<[DBusValue], DBusError>, outputSignature: DBusSignature?) {
        guard raw != nil, !call.noReplyExpected else { return }
        var result = result
        if case .success(let values) = result, let outputSignature {
            do { try DBusValue.check(values, against: outputSignature) } catch {
                result = .failure(
                    DBusError(
                        .failed,
                        "handler of \(call.member ?? "?") returned a wrong reply: \(Self.asDBusError(error).message)"))
            }
        }
        do {
            try sendReplyMessage(to: call, result: result)
        } catch {
            // The reply could not be built (e.g. a bad error name): tell the caller something.
            try? sendReplyMessage(to: call, result: .failure(Self.asDBusError(error)))
        }
    }

    private func sendReplyMessage(to call: DBusMessage, result: Result<[DBusValue], DBusError>) throws {
        let type: Int32
        switch result {
        case .success: type = DBUS_MESSAGE_TYPE_METHOD_RETURN
        case .failure: type = DBUS_MESSAGE_TYPE_ERROR
        }
        let reply = try LibDBus.check(dbus_message_new(type), "dbus_message_new")
        defer { dbus_message_unref(reply) }
        try LibDBus.check(dbus_message_set_reply_serial(reply, call.serial), "dbus_message_set_reply_serial")
        dbus_message_set_no_reply(reply, 1)
        if let sender = call.sender {
            try LibDBus.check(
                sender.withCString { dbus_message_set_destination(reply, $0) }, "dbus_message_set_destination")
        }
        switch result {
        case .success(let values):
            try MessageEncoder.append(values, to: reply)
        case .failure(let error):
            let name = (try? LibDBus.validate(error.name.rawValue, as: .errorName)) != nil ? error.name : .failed
            try LibDBus.check(
                name.rawValue.withCString { dbus_message_set_error_name(reply, $0) }, "dbus_message_set_error_name")
            try MessageEncoder.append([.string(error.message.replacingNUL())], to: reply)
        }
        try sendMessage(reply)
    }
}

extension DBusValue {
    /// Removes exactly one variant layer (for `Properties.Set`, whose value of a `v`-typed
    /// property may itself be a variant).
    var unwrappedOnce: DBusValue {
        if case .variant(let inner) = self { return inner }
        return self
    }
}

extension String {
    fileprivate func replacingNUL() -> String {
        utf8.contains(0) ? String(decoding: utf8.map { $0 == 0 ? UInt8(ascii: "?") : $0 }, as: UTF8.self) : self
    }
}
