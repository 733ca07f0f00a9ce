import BlueZ
import Bluetooth
import JSON
import LocalSystem
import Parsers

#if canImport(Glibc)
    import Glibc
#endif

/// The devices seen so far and their rendering as a table or JSON.
struct ScanTable {
    private var rows: [BluetoothAddress: ScanResult] = [:]

    mutating func update(_ result: ScanResult) {
        rows[result.peripheral.address] = result
    }

    /// The whole table, with ANSI escapes to redraw it from the top left; each line is cut to
    /// `width` characters so a long decoded advertisement never wraps and scrolls the table.
    func render(width: Int = 200) -> String {
        var out = "\u{1B}[H\u{1B}[2J"
        func line(_ text: String) {
            out += text.count > width ? String(text.prefix(max(1, width - 1))) + "…\n" : text + "\n"
        }
        line("ADDRESS            RSSI  NAME                  SERVICES            DECODED")
        for (address, result) in rows.sorted(by: { ($0.value.rssi ?? -127) > ($1.value.rssi ?? -127) }) {
            let data = result.advertisementData
            let name = (data.localName ?? result.peripheral.name ?? "").padded(to: 20)
            let services = data.serviceUUIDs.map(\.shortDescription).joined(separator: ",").padded(to: 18)
            let rssi = data.rssi.map { String($0) } ?? "-"
            line("\(address)  \(rssi.padded(to: 4))  \(name)  \(services)  \(Self.decoded(result))")
        }
        line("\(rows.count) device(s); Ctrl-C to stop")
        return out
    }

    /// The terminal's width in columns (`stty size` on the controlling terminal), else 120.
    static func terminalWidth() -> Int {
        if let columns = LocalEnvironment.value("COLUMNS").flatMap(Int.init), columns > 20 { return columns }
        guard access("/dev/tty", R_OK) == 0, let stream = popen("/bin/stty size </dev/tty 2>/dev/null", "r") else {
            return 120
        }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = fread(&buffer, 1, buffer.count, stream)
            guard count > 0 else { break }
            output += buffer[..<count]
        }
        pclose(stream)
        let parts = String(decoding: output, as: UTF8.self).split(separator: " ")
        guard parts.count == 2, let columns = Int(parts[1].trimmingWhitespace()), columns > 20 else {
            return 120
        }
        return columns
    }

    static func decoded(_ result: ScanResult) -> String {
        guard
            let decoded = try? ParserRegistry.active.decode(
                AdvertisementContext(advertisement: result.advertisementData, address: result.peripheral.address))
        else { return "" }
        return decoded.format + " " + text(decoded.readings)
    }

    /// `name=value[unit]` of each reading, space-separated (empty for none).
    static func text(_ readings: [Reading]) -> String {
        readings.map { "\($0.name)=\(text($0.value))\($0.unit ?? "")" }.joined(separator: " ")
    }

    /// `{"name": value, …}` of the readings.
    static func json(_ readings: [Reading]) -> JSONValue {
        .object(readings.map { (key: $0.name, value: json($0.value)) })
    }

    static func text(_ value: ReadingValue) -> String {
        switch value {
        case .number(let number):
            number.rounded() == number && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        case .bool(let flag): flag ? "true" : "false"
        case .string(let string): string
        case .null: "null"
        case .numbers(let numbers): numbers.map { String($0) }.joined(separator: ",")
        }
    }

    static func json(_ value: ReadingValue) -> JSONValue {
        switch value {
        case .number(let number): .number(number)
        case .bool(let flag): .bool(flag)
        case .string(let string): .string(string)
        case .null: .null
        case .numbers(let numbers): .array(numbers.map { .number($0) })
        }
    }

    /// One discovery as a compact JSON object.
    static func jsonLine(_ result: ScanResult) -> String {
        let data = result.advertisementData
        var members: [(key: String, value: JSONValue)] = [
            (key: "address", value: .string(result.peripheral.address.description))
        ]
        members.append((key: "name", value: (data.localName ?? result.peripheral.name).map { .string($0) } ?? .null))
        members.append((key: "rssi", value: data.rssi.map { .number(Double($0)) } ?? .null))
        if let power = data.txPower { members.append((key: "tx_power", value: .number(Double(power)))) }
        members.append((key: "services", value: .array(data.serviceUUIDs.map { .string($0.shortDescription) })))
        members.append(
            (
                key: "manufacturer_data",
                value: .object(
                    data.manufacturerData.sorted { $0.key < $1.key }.map {
                        (key: String($0.key), value: .string(Hex.encode($0.value)))
                    })
            ))
        members.append(
            (
                key: "service_data",
                value: .object(
                    data.serviceData.sorted { $0.key < $1.key }.map {
                        (key: $0.key.shortDescription, value: .string(Hex.encode($0.value)))
                    })
            ))
        if let decoded = try? ParserRegistry.active.decode(
            AdvertisementContext(advertisement: data, address: result.peripheral.address))
        {
            members.append(
                (
                    key: "decoded",
                    value: .object([
                        (key: "format", value: .string(decoded.format)),
                        (
                            key: "readings",
                            value: .object(decoded.readings.map { (key: $0.name, value: json($0.value)) })
                        ),
                    ])
                ))
        }
        return JSONValue.object(members).serialized
    }
}
