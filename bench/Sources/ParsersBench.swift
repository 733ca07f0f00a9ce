import Bluetooth
import BluetoothManagement
import Foundation
import Parsers

/// `gattway-bench run parsers`: advertisement and characteristic decoding throughput on one core,
/// over the decodable vectors of Tests/Fixtures (inputs are parsed before the clock starts).
enum ParsersBench: BenchSuite {
    static let name = "parsers"

    static func fixture(_ file: String) -> [[String: Any]] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/\(file)")
        let text = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }

    static func run() async throws -> [BenchRow] {
        let registry = ParserRegistry.builtIn
        var adverts: [AdvertisementContext] = []
        var plainLines: [Int] = []
        var encrypted = 0
        let environment = ProcessInfo.processInfo.environment
        let onlyLines = environment["GATTWAY_BENCH_PARSER_LINES"].flatMap {
            try? String(contentsOfFile: $0, encoding: .utf8)
        }
        .map { Set($0.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }) }
        for (index, object) in fixture("advertisements.jsonl").enumerated() {
            guard case .success(.advertisement(let context)) = VectorLineDecoder.parse(object),
                (try? registry.decode(context)) != nil, onlyLines?.contains(index) ?? true
            else { continue }
            if context.bindKey != nil { encrypted += 1 } else { plainLines.append(index) }
            adverts.append(context)
        }
        let plain = adverts.filter { $0.bindKey == nil }
        // GATTWAY_BENCH_PARSER_ROUNDS=R: R untimed rounds over the plain mix, for an allocation
        // count under valgrind (rounds 0 and R, the difference per advertisement); prints the
        // line indexes of that mix (GATTWAY_BENCH_PARSER_LINES=file restricts it to such a list).
        if let rounds = environment["GATTWAY_BENCH_PARSER_ROUNDS"].flatMap(Int.init) {
            var readings = 0
            for _ in 0..<rounds {
                plain.withUnsafeBufferPointer { contexts in
                    for index in contexts.indices {
                        readings &+= (try? registry.decode(contexts[index]))?.readings.count ?? 0
                    }
                }
            }
            print("plain lines: \(plainLines.map(String.init).joined(separator: " "))")
            print("rounds \(rounds) over \(plain.count) adverts, \(readings) readings")
            return []
        }
        var characteristics: [(BluetoothUUID, [UInt8])] = []
        for object in fixture("characteristics.jsonl") {
            guard case .success(.characteristic(let uuid, let bytes)) = VectorLineDecoder.parse(object),
                (try? registry.decode(characteristic: uuid, value: bytes)) != nil
            else { continue }
            characteristics.append((uuid, bytes))
        }

        func measure(_ count: Int, _ body: () -> Int) -> Double {
            _ = body()  // warm-up
            let clock = ContinuousClock()
            var total = 0
            var rounds = 0
            let start = clock.now
            repeat {
                total &+= body()
                rounds += 1
            } while clock.now - start < .seconds(2)
            let elapsed = clock.now - start
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            if total == -1 { print(total) }
            return Double(rounds * count) / seconds
        }

        let allRate = measure(adverts.count) {
            var readings = 0
            for index in adverts.indices { readings &+= (try? registry.decode(adverts[index]))?.readings.count ?? 0 }
            return readings
        }
        let plainRate = measure(plain.count) {
            var readings = 0
            plain.withUnsafeBufferPointer { contexts in
                for index in contexts.indices {
                    readings &+= (try? registry.decode(contexts[index]))?.readings.count ?? 0
                }
            }
            return readings
        }
        let characteristicRate = measure(characteristics.count) {
            var readings = 0
            for (uuid, bytes) in characteristics {
                readings &+= (try? registry.decode(characteristic: uuid, value: bytes))?.count ?? 0
            }
            return readings
        }
        // The same advertisements as the kernel's management socket would deliver them: one read
        // of a Device Found event each, decoded in place and its AD structures read.
        let reads: [[UInt8]] = plain.enumerated().map { index, context in
            DeviceFound(
                controller: 0, address: BluetoothAddress(rawValue: UInt64(index)), addressType: .lePublic, rssi: -60,
                data: AdvertisementBytes.build(context.advertisement)
            ).packet.bytes
        }
        let managementRate = measure(reads.count) {
            var fields = 0
            for read in reads {
                let event = read.withUnsafeBytes { try? ManagementEvent.decode(packetBytes: $0) }
                if case .deviceFound(let found) = event {
                    let advertisement = found.advertisementData
                    fields &+= advertisement.serviceData.count + advertisement.manufacturerData.count
                }
            }
            return fields
        }
        return [
            BenchRow(
                name: "management Device Found reads decoded to AdvertisementData", value: managementRate,
                unit: "reads/s",
                detail: "\(reads.count) plain vectors as Device Found packets (AD bytes rebuilt), one core"),
            BenchRow(
                name: "advertisements decoded (plain vector mix)", value: plainRate, unit: "adverts/s",
                target: "≥ 2000000", detail: "\(plain.count) decodable unencrypted vectors, one core"),
            BenchRow(
                name: "advertisements decoded (mix incl. AES-CCM)", value: allRate, unit: "adverts/s",
                detail: "\(adverts.count) vectors, \(encrypted) encrypted (OpenSSL EVP per frame)"),
            BenchRow(
                name: "characteristic values decoded", value: characteristicRate, unit: "values/s",
                detail: "\(characteristics.count) valid SIG characteristic vectors, one core"),
        ]
    }
}
