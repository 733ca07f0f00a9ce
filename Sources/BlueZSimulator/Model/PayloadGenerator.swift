import Bluetooth

/// The running state of a ``PayloadSpec``: fixed bytes, or the next generated number or sensor
/// advertisement on every ``next()``.
struct PayloadGenerator {
    private enum Kind {
        case fixed([UInt8])
        case number(NumberSource, NumberFormat)
        case template(AdvertisementTemplate, [(String, NumberSource)])
    }

    private var kind: Kind
    private let address: BluetoothAddress

    init(_ spec: PayloadSpec, seed: UInt64, address: BluetoothAddress) {
        self.address = address
        switch spec {
        case .bytes(let bytes):
            kind = .fixed(bytes)
        case .number(let generator, let format):
            kind = .number(NumberSource(generator, seed: seed), format)
        case .template(let template, let fields):
            var sources: [(String, NumberSource)] = []
            for (index, name) in fields.keys.sorted().enumerated() {
                if let generator = fields[name] {
                    sources.append((name, NumberSource(generator, seed: seed &+ UInt64(index) &* 0x9E37)))
                }
            }
            kind = .template(template, sources)
        }
    }

    /// The next payload.
    mutating func next() -> [UInt8] {
        switch kind {
        case .fixed(let bytes):
            return bytes
        case .number(var source, let format):
            let value = source.next()
            kind = .number(source, format)
            return format.encode(value)
        case .template(let template, var sources):
            var values: [String: Double] = [:]
            for index in sources.indices { values[sources[index].0] = sources[index].1.next() }
            kind = .template(template, sources)
            return template.encode(values, address: address)
        }
    }
}
