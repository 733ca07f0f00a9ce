import JSON
import Retry

/// Where a simulated number comes from: a constant, a counter, a repeating sequence or a seeded
/// random walk inside a range. Scenario files write these as `21.5`, `{"counter": {...}}`,
/// `{"sequence": [...]}` or `{"random": {"min": .., "max": ..}}`.
public enum NumberGenerator: Sendable, Equatable {
    case constant(Double)
    /// `start`, then `start + step`, …; wraps to `min`/`max` when it passes the other bound.
    case counter(start: Double, step: Double, min: Double, max: Double)
    /// The values in order, repeating.
    case sequence([Double])
    /// Uniformly random in `min...max`, rounded to `resolution` when given.
    case random(min: Double, max: Double, resolution: Double?)

    static func read(_ reader: JSONReader) throws -> NumberGenerator {
        if let value = try? reader.number() { return .constant(value) }
        let object = try reader.object()
        if let counter = object.optional("counter") {
            let spec = try counter.object()
            let start = try spec.optional("start")?.number() ?? 0
            let step = try spec.optional("step")?.number() ?? 1
            let low = try spec.optional("min")?.number() ?? -Double.greatestFiniteMagnitude
            let high = try spec.optional("max")?.number() ?? Double.greatestFiniteMagnitude
            try spec.finish()
            guard low <= high else { throw counter.fail("min must not exceed max") }
            try object.finish()
            return .counter(start: start, step: step, min: low, max: high)
        }
        if let sequence = object.optional("sequence") {
            let values = try sequence.array().map { try $0.number() }
            guard !values.isEmpty else { throw sequence.fail("expected at least one number") }
            try object.finish()
            return .sequence(values)
        }
        if let random = object.optional("random") {
            let spec = try random.object()
            let low = try spec.required("min").number()
            let high = try spec.required("max").number()
            let resolution = try spec.optional("resolution")?.number()
            try spec.finish()
            guard low <= high else { throw random.fail("min must not exceed max") }
            try object.finish()
            return .random(min: low, max: high, resolution: resolution)
        }
        throw reader.fail("expected a number or an object with \"counter\", \"sequence\" or \"random\"")
    }
}

/// The running state of a ``NumberGenerator``: call ``next()`` for each new value.
public struct NumberSource: Sendable {
    public let generator: NumberGenerator
    private var index = 0
    private var current: Double
    private var rng: SplitMix64

    public init(_ generator: NumberGenerator, seed: UInt64) {
        self.generator = generator
        rng = SplitMix64(seed: seed)
        switch generator {
        case .constant(let value): current = value
        case .counter(let start, _, _, _): current = start
        case .sequence(let values): current = values[0]
        case .random(let low, _, _): current = low
        }
    }

    /// The next value.
    public mutating func next() -> Double {
        switch generator {
        case .constant(let value):
            return value
        case .counter(_, let step, let low, let high):
            let value = current
            var following = current + step
            if following > high { following = low }
            if following < low { following = high }
            current = following
            return value
        case .sequence(let values):
            let value = values[index % values.count]
            index += 1
            return value
        case .random(let low, let high, let resolution):
            let unit = Double(rng.next() >> 11) / Double(1 << 53)
            var value = low + (high - low) * unit
            if let resolution, resolution > 0 { value = (value / resolution).rounded() * resolution }
            return value
        }
    }
}
