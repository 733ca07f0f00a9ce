import Bluetooth
import JSON
import Parsers

/// Fleet mode in the core (docs/fleet.md): this gateway's side of the protocol. It tells the
/// others what it hears (a message on `<base>/fleet/<gateway_id>` every `lease / 5`, and at once
/// when one of its claims changes), reads theirs (`<base>/fleet/+`) and their wills
/// (`<base>/bridge/+/state`), and answers the core's one question — may this gateway publish,
/// connect and command a device — from ``FleetView``. Loop-confined.
final class Fleet {
    private let context: CoreContext
    private(set) var view: FleetView
    /// Where this gateway's messages go.
    let topic: String
    private var nextMessage: Double
    private var nextEvaluation: Double
    /// The claims of the last message sent, to send one at once when they change.
    private var announced: [UInt64: FleetView.Claim] = [:]
    /// Commands held while this gateway claims their device, by hash (``FleetView/hold``).
    private var held: [UInt64: MQTTInboundMessage] = [:]
    /// The names of the presence identities heard here, by their key in the view; bounded (names
    /// set at run time come and go): when full, those the view no longer holds are forgotten.
    private var identityNames: [UInt64: String] = [:]
    /// Fleet messages refused (not this protocol, too big, malformed): counted, logged once a
    /// while.
    private(set) var invalidMessages = 0
    /// The last ownership changes here, oldest first (at most ``keptHandovers``): the page's.
    private(set) var recentHandovers: [Handover] = []
    static let keptHandovers = 32

    /// One change of this gateway's role for a device.
    struct Handover {
        /// Milliseconds since 1970.
        var at: Int64
        var address: BluetoothAddress
        /// This gateway gained the device (else it went to another).
        var gained: Bool
        var reason: String
    }

    init(context: CoreContext, now: Double) {
        self.context = context
        let settings = context.config.fleet
        view = FleetView(
            settings: FleetView.Settings(
                me: context.config.gatewayID, hysteresis: settings.hysteresisDB, handoverAfter: settings.handoverAfter,
                lease: settings.lease),
            now: now)
        topic = context.base + "/fleet/" + context.config.gatewayID
        nextMessage = now
        nextEvaluation = now
    }

    /// The filters to subscribe to: the others' messages and their `bridge/state` (wills).
    static func subscriptions(base: String) -> [String] { [base + "/fleet/+", base + "/bridge/+/state"] }

    /// Whether a message on `topic` is the fleet's.
    func isFleetTopic(_ topic: String) -> Bool {
        topic.hasPrefix(context.base + "/fleet/")
            || (topic.hasPrefix(context.base + "/bridge/") && topic.hasSuffix("/state"))
    }

    private var interval: Double { context.config.fleet.lease / 5 }

    // MARK: The core's questions

    /// Whether this gateway owns the device (publishes it, connects it, runs its commands).
    func owns(_ address: BluetoothAddress) -> Bool { view.role(address.rawValue) == .owner }

    /// Whether this gateway publishes the presence identity `name` (docs/fleet.md, "Presence").
    func ownsIdentity(_ name: String) -> Bool { view.role(FleetView.identityKey(name)) == .owner }

    /// The presence identity of a key of the view (one heard here), if it is one.
    func identityName(_ key: UInt64) -> String? { identityNames[key] }

    /// Readings decoded from an advertisement of the device (every gateway decodes, to know the
    /// payload's counter): whether they go out — owned, and not the reading the previous owner
    /// published last (docs/fleet.md, "No duplicates").
    func decoded(_ address: BluetoothAddress, _ readings: [Reading], now: Double) -> Bool {
        let key = ReadingKey.of(readings, format: nil)
        view.decoded(address.rawValue, key: key)
        return view.publishes(address.rawValue, key: key, now: now)
    }

    // MARK: Commands

    /// A command for the device (docs/fleet.md, "Commands"). One this gateway owns, and ran, is
    /// announced, so that a gateway taking the device over does not run it again. One it does
    /// not own is held while this gateway claims the device, to run if the claim succeeds
    /// (``takeHeld(_:now:)``); else the owner runs it, and it is dropped here (counted,
    /// `dropped.other_owner`).
    func command(_ message: MQTTInboundMessage, for address: BluetoothAddress, owned: Bool, now: Double) {
        let hash = FleetView.commandHash(topic: message.topic, payload: message.payload)
        if owned {
            view.ran(address.rawValue, hash: hash, now: now)
        } else if view.hold(address.rawValue, hash: hash, now: now) {
            held[hash] = message
        } else {
            context.counters.dropped.otherOwner += 1
        }
    }

    /// The commands held for a device this gateway now owns that its previous owner did not run.
    func takeHeld(_ address: BluetoothAddress, now: Double) -> [MQTTInboundMessage] {
        let messages = view.takeHeld(address.rawValue, now: now).compactMap { held[$0] }
        pruneHeld()
        return messages
    }

    /// Held messages whose device no longer holds them (run, or the claim withdrawn) go.
    private func pruneHeld() {
        guard !held.isEmpty else { return }
        let still = Set(view.devices.values.flatMap { $0.heldHashes })
        held = held.filter { still.contains($0.key) }
    }

    // MARK: Inputs

    /// This gateway heard the device; `rule` is the device's (its `prefer_gateway`).
    func heard(_ address: BluetoothAddress, rssi: Int16?, rule: DeviceRule?, now: Double) {
        view.heard(address.rawValue, rssi: rssi.map(Int.init), now: now, preference: Self.preference(rule))
    }

    /// This gateway heard the presence identity `name` (a report matched to it).
    func heardIdentity(_ name: String, rssi: Int16?, now: Double) {
        let key = FleetView.identityKey(name)
        if identityNames[key] == nil, identityNames.count >= 2 * PresenceSettings.maxIdentities {
            identityNames = identityNames.filter { view.devices[$0.key] != nil }
        }
        identityNames[key] = name
        view.heard(key, rssi: rssi.map(Int.init), now: now)
    }

    /// A rule's preferred gateway, in the view's terms.
    static func preference(_ rule: DeviceRule?) -> FleetView.Preference? {
        guard let rule, let gateway = rule.preferGateway else { return nil }
        return FleetView.Preference(gateway: gateway, floor: Double(rule.preferFloorDBm))
    }

    func decoded(_ address: BluetoothAddress, key: UInt64) { view.decoded(address.rawValue, key: key) }

    func linked(_ address: BluetoothAddress, _ up: Bool, rule: DeviceRule?, now: Double) {
        view.linked(address.rawValue, up, now: now, preference: Self.preference(rule))
    }

    /// A message on a fleet topic; returns the role changes it caused.
    func received(_ message: MQTTInboundMessage, now: Double) -> [FleetView.Change] {
        if message.topic.hasPrefix(context.base + "/bridge/") {
            // `<base>/bridge/<gateway>/state`: offline is a gateway's will (or its orderly stop).
            let gateway = message.topic.dropFirst(context.base.count + 8).dropLast(6)
            guard !gateway.contains("/"), !gateway.isEmpty,
                message.payload.count <= 64, String(decoding: message.payload, as: UTF8.self).contains("offline")
            else { return [] }
            view.wentOffline(String(gateway))
            return evaluate(now: now)
        }
        let decoded: FleetView.Message
        do {
            decoded = try FleetMessageCodec.decode(message.payload)
        } catch {
            invalidMessages += 1
            if invalidMessages == 1 || invalidMessages % 1000 == 0 {
                context.log(
                    .warning, "fleet: message on \(message.topic) refused: \(error) (\(invalidMessages) so far)")
            }
            return []
        }
        // The topic names the sender: a message may not speak for another gateway.
        guard message.topic == context.base + "/fleet/" + decoded.gateway else {
            invalidMessages += 1
            return []
        }
        guard view.received(decoded, now: now) else {
            invalidMessages += 1
            return []
        }
        return evaluate(now: now)
    }

    // MARK: Time

    /// Re-decides and sends this gateway's message when due (or when a claim changed); returns
    /// the role changes.
    func tick(now: Double) -> [FleetView.Change] {
        var changes: [FleetView.Change] = []
        if now >= nextEvaluation || now >= view.nextDecision { changes = evaluate(now: now) }
        if now >= nextMessage { announce(now: now) }
        return changes
    }

    /// When ``tick(now:)`` is next due: the next message, the once-a-second decision, or a
    /// decision due by itself (``FleetView/nextDecision``).
    var nextDeadline: Double { min(nextMessage, nextEvaluation, view.nextDecision) }

    private func evaluate(now: Double) -> [FleetView.Change] {
        nextEvaluation = now + 1
        let changes = view.evaluate(now: now)
        if !changes.isEmpty {
            let wall = context.clock.wallMilliseconds()
            for change in changes {
                let (address, gained) =
                    switch change {
                    case .gained(let raw): (raw, true)
                    case .lost(let raw): (raw, false)
                    }
                let reason = view.reasons.first { $0.address == address }?.reason ?? ""
                recentHandovers.append(
                    Handover(at: wall, address: BluetoothAddress(rawValue: address), gained: gained, reason: reason))
            }
            if recentHandovers.count > Self.keptHandovers {
                recentHandovers.removeFirst(recentHandovers.count - Self.keptHandovers)
            }
        }
        pruneHeld()
        if view.claims != announced { announce(now: now) }
        return changes
    }

    /// Sends this gateway's message now.
    func announce(now: Double) {
        let message = view.message(now: now)
        announced = view.claims
        nextMessage = now + interval
        context.output.publish(topic, owned: FleetMessageCodec.encode(message), retain: false, kind: .snapshot)
    }

    /// The orderly stop: an offline message, so the others take over at once.
    func leave(now: Double) {
        let message = view.message(now: now, online: false)
        context.output.publish(topic, owned: FleetMessageCodec.encode(message), retain: false, kind: .snapshot)
    }

    /// The page's fleet view (docs/web-page.md): `{"gateway_id", "peers": [{"gateway",
    /// "last_message_s"}], "devices": [{"address", "name"?, "owner" (a gateway id or null), "role"
    /// (this gateway's: owner, claiming, none), "gateways": [{"gateway", "rssi", "claim"}], this
    /// gateway first}], "handovers": [{"at" (ms since 1970), "address", "name"?, "gained",
    /// "reason"}] newest first, "handovers_total"}`. `name` gives a registered device's name.
    func page(now: Double, name: (BluetoothAddress) -> String?) -> JSONValue {
        let me = view.settings.me
        let peers = view.peerSightings
        func claim(_ claim: FleetView.Claim) -> String {
            switch claim {
            case .owner: "owner"
            case .claiming: "claiming"
            case .none: "none"
            }
        }
        func rssi(_ value: Double?) -> JSONValue { value.map { .number($0.rounded()) } ?? .null }
        let devices: [JSONValue] = view.devices.keys.filter { !FleetView.isIdentity($0) }.sorted().map { raw in
            let address = BluetoothAddress(rawValue: raw)
            let device = view.devices[raw]
            let role: String =
                switch view.role(raw) {
                case .owner: "owner"
                case .claiming: "claiming"
                case .none: "none"
                }
            var owner: String? = role == "owner" ? me : nil
            var gateways: [JSONValue] = [
                .object([("gateway", .string(me)), ("rssi", rssi(device?.rssi)), ("claim", .string(role))])
            ]
            for peer in peers {
                guard let sighting = peer.sightings[raw] else { continue }
                if sighting.claim == .owner, owner == nil { owner = peer.gateway }
                gateways.append(
                    .object([
                        ("gateway", .string(peer.gateway)), ("rssi", rssi(sighting.rssi)),
                        ("claim", .string(claim(sighting.claim))),
                    ]))
            }
            var members: [(key: String, value: JSONValue)] = [("address", .string(address.description))]
            if let name = name(address) { members.append(("name", .string(name))) }
            members += [
                ("owner", owner.map(JSONValue.string) ?? .null), ("role", .string(role)),
                ("gateways", .array(gateways)),
            ]
            return .object(members)
        }
        let handovers: [JSONValue] = recentHandovers.reversed().filter { !FleetView.isIdentity($0.address.rawValue) }
            .map {
                handover in
                var members: [(key: String, value: JSONValue)] = [
                    ("at", .number(Double(handover.at))), ("address", .string(handover.address.description)),
                ]
                if let name = name(handover.address) { members.append(("name", .string(name))) }
                members += [("gained", .bool(handover.gained)), ("reason", .string(handover.reason))]
                return .object(members)
            }
        return .object([
            ("gateway_id", .string(me)),
            (
                "peers",
                .array(
                    peers.map {
                        .object([
                            ("gateway", .string($0.gateway)),
                            ("last_message_s", .number(((now - $0.lastMessage) * 10).rounded() / 10)),
                        ])
                    })
            ),
            ("devices", .array(devices)), ("handovers", .array(handovers)),
            ("handovers_total", .number(Double(view.handovers))),
        ])
    }

    /// The `fleet` section of `bridge/health`.
    var health: JSONValue {
        .object([
            ("gateway_id", .string(view.settings.me)),
            ("peers", .number(Double(view.peerCount))),
            ("owned", .number(Double(view.ownedCount))),
            ("handovers", .number(Double(view.handovers))),
            ("invalid_messages", .number(Double(invalidMessages))),
        ])
    }
}

extension Fleet? {
    /// Whether this gateway publishes, connects and commands the device: always, unless it is in
    /// a fleet that gave the device to another gateway (docs/fleet.md). The one question the
    /// features ask the fleet; those that ask are given the fleet (nil: off) when they are made.
    func owns(_ address: BluetoothAddress) -> Bool { self?.owns(address) ?? true }

    /// Whether this gateway publishes the presence identity `name`: always, unless it is in a
    /// fleet where another gateway hears it best (docs/fleet.md, "Presence").
    func ownsIdentity(_ name: String) -> Bool { self?.ownsIdentity(name) ?? true }
}
