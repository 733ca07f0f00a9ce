import BlueZ
import Bluetooth
import Synchronization

/// The adapters of `gattway run` (`bluetooth.adapters`): one ``CentralManager`` each, every one
/// scanning, and the bookkeeping that makes them one radio for the gateway and the Bluetooth
/// proxy (``AdapterChoice``): which adapter a link goes through, and the reports each delivered.
///
/// Each central follows its own adapter (powered off, pulled out, back again) and re-arms its
/// scan by itself; a link lost with its adapter is reported lost like any other.
public final class GatewayAdapters: Sendable {
    /// The configured names, in order (`hci0`, `hci1`).
    public let names: [String]
    /// One central per name, in the same order.
    public let centrals: [CentralManager]
    private let choice: Mutex<AdapterChoice>
    private let rates: Mutex<[(at: ContinuousClock.Instant, reports: Int)?]>
    private let epoch = ContinuousClock.now

    public init(names: [String], centrals: [CentralManager], slotsPerAdapter: Int) {
        precondition(!centrals.isEmpty && names.count == centrals.count)
        self.names = names
        self.centrals = centrals
        choice = Mutex(AdapterChoice(adapters: centrals.count, slotsPerAdapter: slotsPerAdapter))
        rates = Mutex(Array(repeating: nil, count: centrals.count))
    }

    /// One central as a set (the single-adapter port).
    public convenience init(central: CentralManager) {
        self.init(names: [central.options.adapter.description], centrals: [central], slotsPerAdapter: Int.max)
    }

    /// The first adapter's central (the proxy's MAC address, the D-Bus round trip in health).
    public var primary: CentralManager { centrals[0] }

    private var now: Double {
        let elapsed = ContinuousClock.now - epoch
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    /// A report of the gateway's scan on adapter `index`: counted, and its RSSI remembered for
    /// the choice of a link's adapter. On the loop thread, for every report: one uncontended lock.
    func heard(_ index: Int, _ address: BluetoothAddress, rssi: Int16?) {
        let now = centrals.count > 1 ? self.now : 0
        choice.withLock { $0.heard(index, address, rssi: rssi, at: now) }
    }

    /// A rule's `prefer_adapter` for `address` (``AdapterChoice/prefer(_:adapter:floor:)``); a
    /// name not among ``names`` is ignored (the config check refuses it).
    func prefer(_ adapter: String, floorDBm: Int, for address: BluetoothAddress) {
        guard centrals.count > 1, let index = names.firstIndex(of: adapter) else { return }
        choice.withLock { $0.prefer(address, adapter: index, floor: floorDBm) }
    }

    /// The index of the adapter whose link to `address` is up or being made, else nil.
    func owner(of address: BluetoothAddress) -> Int? { choice.withLock { $0.owners[address] } }

    /// The central that has (or last had) `address`'s link: its GATT operations go there.
    func central(for address: BluetoothAddress) -> CentralManager {
        centrals[owner(of: address) ?? 0]
    }

    /// Picks the adapter for a new link to `address` (``AdapterChoice/best(for:usable:at:)``) and
    /// claims it; a link already up on some adapter is taken as it is.
    func claimForConnect(_ address: BluetoothAddress) async -> Int {
        if let owner = owner(of: address) { return owner }
        var usable: [Bool] = []
        for (index, central) in centrals.enumerated() {
            if await central.peripheral(address).isConnected, claim(address, on: index) { return index }
            usable.append(await central.state == .poweredOn)
        }
        // Heard by one adapter only so far: a moment for the others to hear it too.
        let wait = choice.withLock { [now] in $0.wait(for: address, usable: usable, at: now) }
        if wait > 0 {
            try? await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
            if let owner = owner(of: address) { return owner }
        }
        let now = self.now
        return choice.withLock { choice in
            let index = choice.best(for: address, usable: usable, at: now)
            choice.claim(address, on: index)
            return choice.owners[address] ?? index
        }
    }

    /// A link to `address` through adapter `index` is up; false when another adapter has it.
    @discardableResult
    func claim(_ address: BluetoothAddress, on index: Int) -> Bool {
        choice.withLock { $0.claim(address, on: index) }
    }

    /// The link to `address` through adapter `index` ended (or the attempt failed).
    func release(_ address: BluetoothAddress, on index: Int) {
        choice.withLock { $0.release(address, on: index) }
    }

    /// Whether some adapter other than `index` has a link to `address` up: a link lost on
    /// `index` is then not the device's link.
    func connectedElsewhere(_ address: BluetoothAddress, than index: Int) -> Bool {
        centrals.indices.contains { other in
            other != index && centrals[other].assumeLoopIsolated { $0.peripheral(address).isConnected }
        }
    }

    /// Reports per adapter since the start, and per second since the previous call (0 at the
    /// first): `bridge/health`'s `radio.adapters`. On the loop thread.
    func reportRates() -> [(reports: Int, perSecond: Double)] {
        let counts = choice.withLock { $0.reports }
        let at = ContinuousClock.now
        return rates.withLock { last in
            counts.indices.map { index in
                defer { last[index] = (at, counts[index]) }
                guard let previous = last[index] else { return (counts[index], 0) }
                let elapsed = at - previous.at
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                return (counts[index], seconds > 0 ? Double(counts[index] - previous.reports) / seconds : 0)
            }
        }
    }
}
