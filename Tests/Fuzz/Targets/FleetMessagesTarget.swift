import Gateway

extension FuzzTargets {
    /// Arbitrary bytes as messages under `<base>/fleet/+`: what any MQTT client allowed to publish
    /// there (or a broken gateway) sends to every gateway of a fleet. The input is split at 0xFF
    /// bytes into several messages, each from one of four gateway names picked by its first byte,
    /// all received by one gateway that hears the same devices and decides at each.
    ///
    /// Properties: no trap, no hang; a message that decodes encodes back to bytes that decode to
    /// the same message; the view follows at most ``FleetView/maxPeers`` other gateways; at most
    /// one owner claim per device from this gateway (it never claims what another owner it follows
    /// is better placed for without a claim first); and every device this gateway owns is one it
    /// heard.
    static let fleetMessages = FuzzTarget(
        name: "fleet-messages",
        summary: "arbitrary bytes as fleet messages of other gateways (<base>/fleet/+): decode, follow, decide",
        seeds: {
            [
                #"{"gateway":"b","state":"online","devices":[["a4c138000004",-60,1,"00000000000000a7"],["a4c138000005",-70,0,null]]}"#,
                #"{"gateway":"c","state":"online","devices":[["a4c138000004",-50,2,null]]}"#,
                #"{"gateway":"b","state":"offline","devices":[]}"#,
                #"{"gateway":"c","state":"online","devices":[],"identities":[["c3a1f0e29b7d4410",-71,1],["8000000000000001",null,2]]}"#,
                #"{"gateway":"d","state":"online","devices":[]}"# + "\u{FF}"
                    + #"{"gateway":"b","state":"online","devices":[["a4c138000004",-90,1,null]]}"#,
            ].map { Array($0.utf8) }
        },
        run: { bytes in
            var view = FleetView(
                settings: FleetView.Settings(me: "a", hysteresis: 6, handoverAfter: 2, lease: 3), now: 0)
            let heard: [UInt64] = [0xA4C1_3800_0004, 0xA4C1_3800_0005]
            var now = 0.0
            for chunk in bytes.split(separator: 0xFF, omittingEmptySubsequences: false).prefix(64) {
                now += 0.5
                for address in heard { view.heard(address, rssi: -65, now: now) }
                let payload = Array(chunk)
                guard let message = try? FleetMessageCodec.decode(payload) else { continue }
                let again = try? FleetMessageCodec.decode(FleetMessageCodec.encode(message))
                fuzzProperty(again == message, "a decoded message does not survive encode/decode: \(message)")
                view.received(message, now: now)
                _ = view.evaluate(now: now)
                fuzzProperty(view.peerCount <= FleetView.maxPeers, "\(view.peerCount) peers followed")
                for (address, device) in view.devices where device.role == .owner {
                    fuzzProperty(
                        heard.contains(address) || device.linked, "owns \(address), which it never heard")
                }
            }
            // Time passes: every other gateway lapses; what this gateway hears becomes its own.
            for _ in 0..<12 {
                now += 1
                for address in heard { view.heard(address, rssi: -65, now: now) }
                _ = view.evaluate(now: now)
            }
            fuzzProperty(view.peerCount == 0, "\(view.peerCount) peers after every lease ran out")
            for address in heard {
                fuzzProperty(view.role(address) == .owner, "\(address) not owned after the others lapsed")
            }
        })
}
