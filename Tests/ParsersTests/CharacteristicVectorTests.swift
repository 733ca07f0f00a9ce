import Bluetooth
import Foundation
import Parsers
import Testing

/// Every line of characteristics.jsonl must decode exactly as expected (docs/parsers.md, Byte formats:
/// SIG characteristics).
@Suite("SIG characteristic vectors")
struct CharacteristicVectorTests {
    /// The vectors' field names that differ from ours.
    static let names = ["battery_level": "battery"]
    /// Vector keys that give the unit of one of our readings rather than a reading.
    static let unitKeys = ["unit": ["temperature", "systolic"], "weight_unit": ["weight"], "height_unit": ["height"]]

    @Test("decodes each characteristic vector as the oracle expects", arguments: Fixtures.characteristics)
    func vector(_ line: VectorLine) throws {
        let object = line.json
        let uuid = try #require(BluetoothUUID(object["uuid"] as? String ?? ""))
        let bytes = [UInt8](hexString: object["hex"] as? String ?? "")
        let expected = try #require(object["expected"] as? [String: Any])
        let result = Result { () throws(ParseError) in
            try ParserRegistry.builtIn.decode(characteristic: uuid, value: bytes)
        }
        if let kind = expected["error"] as? String {
            switch result {
            case .success(let readings): Issue.record("expected error \(kind), decoded \(readings)")
            case .failure(let error): #expect(error.kind.rawValue == kind, "\(error)")
            }
            return
        }
        let readings = try result.get()
        var expectedNames: Set<String> = []
        for (key, value) in expected {
            if let owners = Self.unitKeys[key] {
                let owner = readings.first { owners.contains($0.name) }
                #expect(owner?.unit == value as? String, "\(key)")
                continue
            }
            let name = Self.names[key] ?? key
            expectedNames.insert(name)
            let reading = readings.first { $0.name == name }
            #expect(reading != nil, "missing \(name)")
            if let reading {
                #expect(VectorValue.matches(reading.value, value), "\(name): \(reading.value) vs \(value)")
            }
        }
        #expect(Set(readings.map(\.name)) == expectedNames)
    }
}

/// Compares a reading value with a JSON value from a vector.
enum VectorValue {
    static func matches(_ value: ReadingValue, _ json: Any, tolerance: Double = 1e-9) -> Bool {
        switch value {
        case .null: return json is NSNull
        case .bool(let flag): return (json as? Bool) == flag
        case .string(let text): return (json as? String) == text
        case .number(let number):
            guard !(json is String), !(json is NSNull), let other = (json as? NSNumber)?.doubleValue else {
                return false
            }
            return abs(number - other) <= tolerance + abs(other) * 1e-9
        case .numbers(let list):
            guard let others = json as? [Any], others.count == list.count else { return false }
            return zip(list, others).allSatisfy { matches(.number($0), $1, tolerance: tolerance) }
        }
    }
}
