import Parsers

/// `gattway decode`: decodes JSON lines in the test-vector input format from stdin and prints one
/// JSON line per input (`{"format":…,"readings":…}` or `{"error":…}`); see docs/parsers.md.
/// Exits 0 even when single lines fail, so it can be used in pipes over mixed captures.
struct DecodeCommand: Command {
    static let name = "decode"
    static let summary = "Decode advertisement or characteristic JSON lines from stdin."
    static let discussion = """
        Each input line is a JSON object with manufacturer_data {company id in decimal: hex}, \
        service_data {uuid: hex}, service_uuids, name, address and bindkey — or uuid and hex for a \
        characteristic value. Each output line is {"format": …, "readings": {…}} or {"error": …}.
        """

    init(parsing arguments: ParsedArguments) throws {}

    func run() async throws -> ExitCode {
        let decoder = VectorLineDecoder()
        var output = ""
        while let line = readLine(strippingNewline: true) {
            if line.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\r" }) { continue }
            output += decoder.decode(line: line)
            output += "\n"
            if output.utf8.count > 64 * 1024 {
                standardOutput(output)
                output = ""
            }
        }
        if !output.isEmpty { standardOutput(output) }
        return .success
    }
}
