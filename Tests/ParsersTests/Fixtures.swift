import Foundation
import Testing

/// One line of a fixture file, named by its `source` so each parameterised case says where it
/// came from.
struct VectorLine: Sendable, CustomTestStringConvertible {
    let index: Int
    let text: String

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
    }

    var testDescription: String {
        let object = json
        let source = object["source"] as? String ?? ""
        let description = object["description"] as? String
        return "#\(index) " + (description.map { "\(object["name"] ?? ""): \($0)" } ?? source)
    }
}

enum Fixtures {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    static func lines(_ file: String) -> [VectorLine] {
        let text = (try? String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").enumerated().map { VectorLine(index: $0.offset, text: String($0.element)) }
    }

    static let characteristics = lines("characteristics.jsonl")
    static let advertisements = lines("advertisements.jsonl")
    static let oracleNames = OracleNames(file: directory.appendingPathComponent("oracle-names.json"))
}

/// Tests/Fixtures/oracle-names.json: how the oracles' field names map to ours (its `_about` says
/// what each part is); the oracle lane (Tests/Oracles/theengs_oracle.py) reads the same file.
struct OracleNames {
    let names: [String: String]
    let deviceNames: [String: [String: String]]
    let notOnAir: Set<String>
    let theengsButtons: [Int: String]

    init(file: URL) {
        let data = (try? Data(contentsOf: file)) ?? Data()
        let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        names = object["names"] as? [String: String] ?? [:]
        deviceNames = object["deviceNames"] as? [String: [String: String]] ?? [:]
        notOnAir = Set(object["notOnAir"] as? [String] ?? [])
        let buttons = object["theengsButtons"] as? [String: String] ?? [:]
        theengsButtons = Dictionary(
            uniqueKeysWithValues: buttons.compactMap { key, value in Int(key).map { ($0, value) } })
    }
}

extension [UInt8] {
    init(hexString: String) {
        var bytes: [UInt8] = []
        var index = hexString.startIndex
        while index < hexString.endIndex, let next = hexString.index(index, offsetBy: 2, limitedBy: hexString.endIndex)
        {
            bytes.append(UInt8(hexString[index..<next], radix: 16) ?? 0)
            index = next
        }
        self = bytes
    }
}
