/// One external input surface of gattway, as a fuzz target: bytes in, the product's code run
/// on them, and the properties that must hold checked. A property that does not hold (or a
/// trap in the product) ends the process, which is what libFuzzer and the tests count as a
/// crash; a thrown or returned error is fine — that is the clear error or the counted drop.
public struct FuzzTarget: Sendable {
    /// The name used by `gattway-fuzz run NAME`, `make fuzz TARGETS=NAME` and the fixture folder
    /// `Tests/Fixtures/fuzz/NAME/`.
    public let name: String
    /// What reaches this surface from outside, in a line.
    public let summary: String
    /// Real inputs in this target's byte encoding (from `Tests/Fixtures`), the mutators' start.
    public let seeds: @Sendable () -> [[UInt8]]
    /// Runs one input; returns normally unless a property failed (then it traps).
    public let run: @Sendable ([UInt8]) -> Void

    public init(
        name: String, summary: String, seeds: @escaping @Sendable () -> [[UInt8]],
        run: @escaping @Sendable ([UInt8]) -> Void
    ) {
        self.name = name
        self.summary = summary
        self.seeds = seeds
        self.run = run
    }
}

/// A property of the product that an input broke: reported on standard error, then the process
/// traps so the fuzzer saves the input.
public func fuzzProperty(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
    file: StaticString = #fileID, line: UInt = #line
) {
    guard !condition() else { return }
    fatalError("fuzz property failed: \(message())", file: file, line: line)
}
