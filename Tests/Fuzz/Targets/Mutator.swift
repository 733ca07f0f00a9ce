import Retry

/// The fallback fuzzer of builds without libFuzzer (the tests, a plain `swift build`): a seeded
/// mutational loop over a target's seeds — bit flips, byte changes, interesting values,
/// inserts, erases, repeats and splices, a few at a time. Not coverage-guided, but seeded and
/// so reproducible: the same seed and run count give the same inputs.
public struct Mutator {
    var random: SplitMix64
    let maxLength: Int

    public init(seed: UInt64, maxLength: Int = 512) {
        random = SplitMix64(seed: seed)
        self.maxLength = maxLength
    }

    static let interesting: [UInt8] = [0x00, 0x01, 0x02, 0x7F, 0x80, 0x81, 0xFE, 0xFF, 0x10, 0x20, 0x40]

    /// A new input from one of `seeds` (or from nothing), mutated 1–6 times.
    public mutating func next(from seeds: [[UInt8]]) -> [UInt8] {
        var input =
            seeds.isEmpty || random.next() % 16 == 0
            ? randomBytes(Int(random.next() % 48)) : seeds[Int(random.next() % UInt64(seeds.count))]
        for _ in 0...(random.next() % 6) { mutate(&input, seeds: seeds) }
        if input.count > maxLength { input.removeLast(input.count - maxLength) }
        return input
    }

    mutating func randomBytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
    }

    mutating func position(_ count: Int) -> Int { count == 0 ? 0 : Int(random.next() % UInt64(count)) }

    mutating func mutate(_ input: inout [UInt8], seeds: [[UInt8]]) {
        switch random.next() % 9 {
        case 0 where !input.isEmpty:
            input[position(input.count)] ^= 1 << UInt8(random.next() % 8)
        case 1 where !input.isEmpty:
            input[position(input.count)] = UInt8(truncatingIfNeeded: random.next())
        case 2 where !input.isEmpty:
            input[position(input.count)] = Self.interesting[position(Self.interesting.count)]
        case 3:
            input.insert(contentsOf: randomBytes(1 + position(8)), at: position(input.count + 1))
        case 4 where !input.isEmpty:
            let start = position(input.count)
            input.removeSubrange(start..<min(input.count, start + 1 + position(8)))
        case 5 where !input.isEmpty:
            let start = position(input.count)
            let part = input[start..<min(input.count, start + 1 + position(16))]
            input.insert(contentsOf: part, at: position(input.count + 1))
        case 6 where !seeds.isEmpty:
            let other = seeds[position(seeds.count)]
            let cut = position(input.count + 1)
            input = Array(input.prefix(cut)) + other.suffix(position(other.count + 1))
        case 7 where !input.isEmpty:
            input.removeLast(position(input.count) + 1)
        default:
            // A 16- or 32-bit boundary value in either byte order.
            let values: [UInt32] = [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF_FFFF]
            let value = values[position(values.count)]
            let width = random.next() % 2 == 0 ? 2 : 4
            var bytes = (0..<width).map { UInt8(truncatingIfNeeded: value >> (8 * UInt32($0))) }
            if random.next() % 2 == 0 { bytes.reverse() }
            let at = position(input.count + 1)
            input.replaceSubrange(at..<min(input.count, at + width), with: bytes)
        }
    }
}
