import Bluetooth

/// The service UUIDs a device advertised (in first-seen order): one of the lists many devices
/// share, kept once in the gateway's ``ServiceLists``, or — when that table is full — its own.
enum ServiceList: Sendable, Equatable {
    /// An index into ``ServiceLists``; 0 is the empty list.
    case shared(UInt16)
    case own([BluetoothUUID])

    static let empty = ServiceList.shared(0)
}

/// The distinct service UUID lists of all devices, each stored once: sensors of one model
/// advertise the same list, so a few lists serve a thousand devices.
///
/// Lists are never removed; the table stops at ``capacity`` lists (a neighbourhood of devices
/// each advertising a list of its own fills it), after which a new list stays with its device.
struct ServiceLists: Sendable {
    /// Index 0 is the empty list.
    private var table: Interned<[BluetoothUUID]>

    /// The most lists kept (the empty one included).
    static let capacity = 256

    init() {
        table = Interned(capacity: Self.capacity)
        _ = table.index(of: [])
    }

    var count: Int { table.values.count }

    func list(_ services: ServiceList) -> [BluetoothUUID] {
        switch services {
        case .shared(let index): table.values[Int(index)]
        case .own(let list): list
        }
    }

    /// The shared list equal to `list`, stored if new; `list` itself when the table is full.
    mutating func store(_ list: [BluetoothUUID]) -> ServiceList {
        table.index(of: list).map(ServiceList.shared) ?? .own(list)
    }

    /// `services` with the UUIDs of `advertised` it lacks appended; nil when it has them all
    /// (the usual case: no list is made).
    mutating func adding(_ advertised: [BluetoothUUID], to services: ServiceList) -> ServiceList? {
        let known = list(services)
        guard advertised.contains(where: { !known.contains($0) }) else { return nil }
        var merged = known
        for uuid in advertised where !merged.contains(uuid) { merged.append(uuid) }
        return store(merged)
    }
}
