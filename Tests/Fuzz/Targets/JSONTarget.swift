import JSON

extension FuzzTargets {
    /// The JSON reader every file and payload goes through (config.json, scenarios, `--tree`
    /// files, MQTT command payloads): arbitrary bytes, invalid UTF-8, huge numbers and deep
    /// nesting. Properties: no trap; a rejected text has an error message; whatever parses
    /// serializes to text that parses back to an equal value and serializes to the same text.
    ///
    /// Encoding: a mode byte, then the text. Bit 0 of the mode wraps the text in u16 (max
    /// 65,535) levels of `[` (or, with bit 1, `{"k":`), so nesting far past the parser's depth
    /// limit is tried on every run, not only when the mutator happens to grow it.
    static let json = FuzzTarget(
        name: "json",
        summary: "arbitrary bytes through the JSON parser, path reader and serializer (round trip)",
        seeds: { JSONSeeds.all },
        run: { bytes in
            var input = FuzzInput(bytes)
            let mode = input.byte()
            var text: [UInt8] = []
            if mode & 1 != 0 {
                let depth = Int(input.uint16())
                let open: [UInt8] = mode & 2 != 0 ? Array("{\"k\":".utf8) : [UInt8(ascii: "[")]
                let close = mode & 2 != 0 ? UInt8(ascii: "}") : UInt8(ascii: "]")
                text.reserveCapacity(depth * (open.count + 1) + input.remaining)
                for _ in 0..<depth { text += open }
                text += input.rest()
                text += [UInt8](repeating: close, count: depth)
            } else {
                text = input.rest()
            }
            let value: JSONValue
            do {
                value = try JSONValue.parse(text)
            } catch {
                fuzzProperty(!"\(error)".isEmpty, "a JSON syntax error without a message")
                do {
                    _ = try JSONReader.parse(text)
                    fuzzProperty(false, "JSONReader accepted what JSONValue rejected")
                } catch {
                    fuzzProperty(!"\(error)".isEmpty, "a JSON path error without a message")
                }
                return
            }
            let serialized = value.serialized
            let reparsed: JSONValue
            do {
                reparsed = try JSONValue.parse(Array(serialized.utf8))
            } catch {
                fuzzProperty(false, "serialized JSON does not parse: \(error) — \(serialized.prefix(200))")
                return
            }
            fuzzProperty(reparsed == value, "serialize → parse changed the value: \(serialized.prefix(200))")
            fuzzProperty(
                reparsed.serialized == serialized, "serializing twice gave two texts: \(serialized.prefix(200))")
            // The path reader over the parsed value: every accessor either answers or names the path.
            let reader = JSONReader(path: "", value: value)
            _ = try? reader.integer(in: Int.min...Int.max)
            _ = try? reader.integer(in: 0...255)
            _ = try? reader.duration()
            if let items = try? reader.array() {
                for item in items.prefix(16) { _ = try? item.integer(in: -1000...1000) }
            }
            if let object = try? reader.object() {
                for (_, member) in object.entries().prefix(16) { _ = try? member.duration() }
            }
        })
}

/// Seeds for ``FuzzTargets/json``: every JSON document in the repository (config.json, the
/// scenario and tree files, the fixtures' lines, the docs' JSON blocks), plain and nested.
enum JSONSeeds {
    static let all: [[UInt8]] = {
        var documents: [[UInt8]] = []
        for path in [
            "config.json", "Tests/RealBlueZ/simulator-scenario.json", "Tests/RealBlueZ/serve-tree.json",
            "Tests/RealBlueZ/known-differences.json", "Tests/Conformance/linked-scenario.json",
        ] {
            if let bytes = FixtureFiles.repositoryFile(path) { documents.append(bytes) }
        }
        for name in ["advertisements.jsonl", "characteristics.jsonl"] {
            documents += FixtureFiles.lines(name).prefix(40).map { Array($0.utf8) }
        }
        for path in FixtureFiles.repositoryFiles(in: "docs", suffix: ".md") {
            documents += FixtureFiles.markdownJSONBlocks(path)
        }
        documents += [
            "\"\\ud83d\\ude00 \\u00e9\\t\\n\"", "[1e308, -1e-320, 0.1, 9007199254740993, -0]",
            "{\"a\":{\"b\":[null,true,false]}}",
            "\"\\ud800\"", "[\"\u{FFFD}\"]",
        ].map { Array($0.utf8) }
        var seeds = documents.map { [0] + $0 }
        seeds.append([1, 0x00, 0x01] + Array("1".utf8))  // 256 levels of [: one past the limit
        seeds.append([3, 0xFF, 0x00] + Array("{}".utf8))  // 255 levels of {"k":
        seeds.append([0] + [UInt8](repeating: UInt8(ascii: "["), count: 4096))
        seeds.append([0, 0x22, 0xC3, 0x28, 0xFF, 0xED, 0xA0, 0x80, 0x22])  // invalid UTF-8 in a string
        return seeds
    }()
}
