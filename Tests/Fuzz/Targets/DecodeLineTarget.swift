import Parsers

extension FuzzTargets {
    /// `gattway decode` reads JSON lines from anyone's capture (stdin): each line, whatever it
    /// holds, gives one output line — a decoding or `{"error": …}` — that is itself one line of
    /// JSON. Seeds: every line of both vector files.
    static let decodeLine = FuzzTarget(
        name: "decode-line",
        summary: "gattway decode's input lines (vector format JSON) through VectorLineDecoder",
        seeds: {
            (FixtureFiles.lines("advertisements.jsonl") + FixtureFiles.lines("characteristics.jsonl")).map {
                Array($0.utf8)
            }
        },
        run: { bytes in
            let output = DecodeLineTarget.decoder.decode(line: String(decoding: bytes, as: UTF8.self))
            fuzzProperty(!output.contains("\n"), "an output line holds a newline: \(output)")
            fuzzProperty(
                output.hasPrefix("{\"format\":") || output.hasPrefix("{\"error\":"), "unexpected output line \(output)")
        })
}

enum DecodeLineTarget {
    static let decoder = VectorLineDecoder()
}
