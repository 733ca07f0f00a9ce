import BlueZ
import Bluetooth
import GATTTree
import JSON
import Synchronization

/// `gattway serve --tree FILE.json`: publishes a GATT tree, advertises it, and prints every read,
/// write and subscription as it happens.
struct ServeCommand: Command {
    static let name = "serve"
    static let summary = "Serve a GATT tree from a JSON file, advertise it and print reads, writes and subscriptions."
    static let discussion = """
        Publishes the services of --tree (docs/peripheral.md has the format) as a GATT application with \
        BlueZ (GattManager1) and advertises the primary services' UUIDs and the tree's name (unless \
        --no-advertise; the advertisement options add to it). Reads are answered with the current value, \
        writes replace it (and notify subscribed centrals), `read_error`/`write_error` answer with that ATT \
        error instead. One line per event; JSON lines with --json. After a bluetoothd restart or adapter power \
        cycle everything is registered again.
        """
    static let options: [Option] =
        [
            .value("tree", "FILE", "The GATT tree (JSON)."),
            .flag("no-advertise", "Publish the services without advertising."),
            .flag("json", "Print JSON lines."),
        ] + PeripheralSession.advertisementOptions + PeripheralSession.options

    let tree: GATTTreeFile
    let advertisement: Advertisement?
    let settings: PeripheralSession.Settings

    init(parsing arguments: ParsedArguments) throws {
        guard let path = arguments.value("tree") else { throw CLIError.usage("--tree FILE is required") }
        tree = try GATTTreeFile.load(path: path)
        if arguments.flag("no-advertise") {
            advertisement = nil
        } else {
            let primary = tree.services.filter(\.service.isPrimary).map(\.service.uuid)
            var advertisement = try PeripheralSession.advertisement(arguments, services: primary)
            if advertisement.localName == nil { advertisement.localName = tree.name }
            self.advertisement = try PeripheralSession.checked(advertisement, hint: " (or use --no-advertise)")
        }
        settings = try PeripheralSession.Settings(arguments)
    }

    func run() async throws -> ExitCode {
        let session = try await PeripheralSession.start(settings)
        let server = TreeServer(manager: session.manager, json: settings.json)
        do {
            for (service, entries) in tree.services {
                // Reads come to the server (no cached values), so each one is printed.
                var dynamic = service
                for index in dynamic.characteristics.indices { dynamic.characteristics[index].value = nil }
                let local = try await session.manager.add(dynamic)
                for (characteristic, entry) in zip(local.characteristics, entries) {
                    server.configure(characteristic, entry)
                }
            }
            if let advertisement { try await session.manager.startAdvertising(advertisement) }
        } catch {
            await session.close()
            throw CLIError.failure("\(error)")
        }
        let address = await session.manager.adapterAddress.map(\.description) ?? "?"
        let count = tree.services.reduce(0) { $0 + $1.service.characteristics.count }
        standardOutput(
            PeripheralSession.line(
                json: settings.json, "serving",
                [
                    (key: "address", value: .string(address)),
                    (key: "services", value: .number(Double(tree.services.count))),
                    (key: "characteristics", value: .number(Double(count))),
                    (key: "advertising", value: .bool(advertisement != nil)),
                ],
                text:
                    "serving \(tree.services.count) service(s), \(count) characteristic(s) as \(address)\(advertisement == nil ? "" : ", advertising")"
            ))
        await session.run(duration: settings.duration) { event in await server.handle(event) }
        return .success
    }
}

/// The values `gattway serve` answers reads with, and how it prints events. Values live in a
/// mutex because events are handled in the printer task and set up in `run`.
final class TreeServer: Sendable {
    struct Entry {
        var value: [UInt8]
        var readError: ATTError?
        var writeError: ATTError?
    }

    let manager: PeripheralManager
    let json: Bool
    private let entries = Mutex<[LocalCharacteristic: Entry]>([:])

    init(manager: PeripheralManager, json: Bool) {
        self.manager = manager
        self.json = json
    }

    func configure(_ characteristic: LocalCharacteristic, _ entry: GATTTreeFile.CharacteristicEntry) {
        entries.withLock {
            $0[characteristic] = Entry(
                value: entry.characteristic.value ?? [], readError: entry.readError, writeError: entry.writeError)
        }
    }

    func handle(_ event: PeripheralEvent) async {
        switch event {
        case .read(let request):
            guard case .characteristic(let characteristic) = request.attribute else {
                return request.fail(.readNotPermitted)
            }
            let entry = entries.withLock { $0[characteristic] }
            if let error = entry?.readError {
                request.fail(error)
            } else {
                request.respond(withWholeValue: entry?.value ?? [])
            }
            print("read", request.attribute, request.context, value: entry?.value ?? [], error: entry?.readError)
        case .write(let request):
            guard case .characteristic(let characteristic) = request.attribute else {
                return request.fail(.writeNotPermitted)
            }
            let error = entries.withLock { $0[characteristic]?.writeError }
            if let error {
                request.fail(error)
            } else {
                let value = entries.withLock { entries -> [UInt8] in
                    var current = entries[characteristic]?.value ?? []
                    if !request.isPrepareAuthorization {
                        current =
                            Array(current.prefix(request.offset))
                            + Array(repeating: 0, count: max(0, request.offset - current.count)) + request.value
                        entries[characteristic, default: Entry(value: [])].value = current
                    }
                    return current
                }
                request.respond()
                if !request.isPrepareAuthorization {
                    _ = try? await manager.updateValue(value, for: characteristic)
                }
            }
            print(
                "write", request.attribute, request.context, value: request.value, error: error,
                extra: [(key: "with_response", value: .bool(request.expectsResponse))])
        case .subscribed(let characteristic):
            emit(
                "subscribed", [(key: "characteristic", value: .string(characteristic.uuid.shortDescription))],
                "subscribed \(characteristic.uuid.shortDescription)")
        case .unsubscribed(let characteristic):
            emit(
                "unsubscribed", [(key: "characteristic", value: .string(characteristic.uuid.shortDescription))],
                "unsubscribed \(characteristic.uuid.shortDescription)")
        case .indicationConfirmed(let characteristic):
            emit(
                "confirmed", [(key: "characteristic", value: .string(characteristic.uuid.shortDescription))],
                "indication confirmed \(characteristic.uuid.shortDescription)")
        case .servicesRegistered(let services):
            emit(
                "registered", [(key: "services", value: .number(Double(services.count)))],
                "registered \(services.count) service(s)")
        case .advertisingStarted:
            emit("advertising", [], "advertising")
        case .advertisingStopped(let reason):
            emit("advertising_stopped", [(key: "reason", value: .string(reason))], "advertising stopped: \(reason)")
        case .registrationFailed(let error):
            emit("error", [(key: "error", value: .string("\(error)"))], "\(error)")
        }
    }

    private func print(
        _ kind: String, _ attribute: LocalAttribute, _ context: RequestContext, value: [UInt8], error: ATTError?,
        extra: [(key: String, value: JSONValue)] = []
    ) {
        var fields: [(key: String, value: JSONValue)] =
            [
                (key: "characteristic", value: .string(attribute.uuid.shortDescription)),
                (key: "central", value: context.central.map { .string($0.address.description) } ?? .null),
                (key: "offset", value: .number(Double(context.offset))),
                (key: "mtu", value: context.mtu.map { .number(Double($0)) } ?? .null),
                (key: "hex", value: .string(Hex.encode(value))),
            ] + extra
        if let error { fields.append((key: "error", value: .number(Double(error.code)))) }
        let who = context.central.map(\.address.description) ?? "?"
        var text = "\(kind) \(attribute.uuid.shortDescription) by \(who) offset \(context.offset)"
        if let mtu = context.mtu { text += " mtu \(mtu)" }
        text += ": " + (value.isEmpty ? "(empty)" : Hex.encode(value, separator: " "))
        if let error { text += " -> \(error)" }
        if kind == "write", extra.first?.value == .bool(false) { text += " (without response)" }
        emit(kind, fields, text)
    }

    private func emit(_ event: String, _ fields: [(key: String, value: JSONValue)], _ text: String) {
        standardOutput(PeripheralSession.line(json: json, event, fields, text: text))
    }
}
