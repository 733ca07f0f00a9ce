import Bluetooth

/// The BTHome object ids (bthome.io/format): the id alone fixes a value's type, length and
/// factor. Shared by BTHome v2 (fixed lengths) and v1 (length in a prefix byte).
///
/// An object is plain data (its name a static text), so taking one from the table per value is a
/// copy without reference counting; the name as a `String` comes from ``names``.
struct BTHomeObject: Sendable {
    enum Kind: Sendable {
        /// An integer scaled by `10^-decimals` (or by `factor` when set).
        case number
        case binary
        case buttonEvent
        case dimmerEvent
        case timestamp
        case text
        case raw
        /// Device type id / firmware version: published as a number as sent.
        case info
    }

    /// The reading's name as written in the table.
    let staticName: StaticString
    let kind: Kind
    let size: Int
    let signed: Bool
    let decimals: Int
    let factor: Double?
    let unit: ReadingUnit?
    let deviceClass: DeviceClass?
    /// Index of the name among the table's distinct names (< 128), for cheap repeat detection
    /// and for ``name``.
    var nameIndex = 0

    /// The reading's name.
    @inline(__always)
    var name: String { Self.names[nameIndex] }

    init(
        _ name: StaticString, _ kind: Kind = .number, size: Int, signed: Bool = false, decimals: Int = 0,
        factor: Double? = nil, unit: ReadingUnit? = nil, _ deviceClass: DeviceClass? = nil
    ) {
        self.staticName = name
        self.kind = kind
        self.size = size
        self.signed = signed
        self.decimals = decimals
        self.factor = factor
        self.unit = unit
        self.deviceClass = deviceClass
    }

    static func binary(_ name: StaticString, _ deviceClass: DeviceClass? = nil) -> BTHomeObject {
        BTHomeObject(name, .binary, size: 1, deviceClass)
    }

    /// The table indexed by object id; nil for ids this version does not know.
    static let table: [BTHomeObject?] = {
        var t = [BTHomeObject?](repeating: nil, count: 256)
        t[0x00] = BTHomeObject("packet_id", size: 1)
        t[0x01] = BTHomeObject("battery", size: 1, unit: .percent, .battery)
        t[0x02] = BTHomeObject("temperature", size: 2, signed: true, decimals: 2, unit: .celsius, .temperature)
        t[0x03] = BTHomeObject("humidity", size: 2, decimals: 2, unit: .percent, .humidity)
        t[0x04] = BTHomeObject("pressure", size: 3, decimals: 2, unit: .hectopascals, .atmosphericPressure)
        t[0x05] = BTHomeObject("illuminance", size: 3, decimals: 2, unit: .lux, .illuminance)
        t[0x06] = BTHomeObject("weight", size: 2, decimals: 2, unit: .kilograms, .weight)
        t[0x07] = BTHomeObject("weight", size: 2, decimals: 2, unit: .pounds, .weight)
        t[0x08] = BTHomeObject("dew_point", size: 2, signed: true, decimals: 2, unit: .celsius, .temperature)
        t[0x09] = BTHomeObject("count", size: 1)
        t[0x0A] = BTHomeObject("energy", size: 3, decimals: 3, unit: .kilowattHours, .energy)
        t[0x0B] = BTHomeObject("power", size: 3, decimals: 2, unit: .watts, .power)
        t[0x0C] = BTHomeObject("voltage", size: 2, decimals: 3, unit: .volts, .voltage)
        t[0x0D] = BTHomeObject("pm25", size: 2, unit: .microgramsPerCubicMetre, .pm25)
        t[0x0E] = BTHomeObject("pm10", size: 2, unit: .microgramsPerCubicMetre, .pm10)
        let binaries: [(StaticString, DeviceClass?)] = [
            ("generic", nil), ("power", .power), ("opening", .opening), ("co2", .carbonDioxide), ("voc", nil),
            ("moisture", .moisture), ("battery_low", .battery), ("battery_charging", .batteryCharging),
            ("carbon_monoxide", DeviceClass(rawValue: "carbon_monoxide")), ("cold", DeviceClass(rawValue: "cold")),
            ("connectivity", DeviceClass(rawValue: "connectivity")), ("door", .door),
            ("garage_door", DeviceClass(rawValue: "garage_door")), ("gas", .gas),
            ("heat", DeviceClass(rawValue: "heat")),
            ("light", .light), ("lock", .lock), ("moisture", .moisture), ("motion", .motion),
            ("moving", DeviceClass(rawValue: "moving")), ("occupancy", .occupancy),
            ("plug", DeviceClass(rawValue: "plug")),
            ("presence", .presence), ("problem", .problem),
            ("running", DeviceClass(rawValue: "running")),
            ("safety", DeviceClass(rawValue: "safety")), ("smoke", .smoke), ("sound", DeviceClass(rawValue: "sound")),
            ("tamper", DeviceClass(rawValue: "tamper")), ("vibration", DeviceClass(rawValue: "vibration")),
            ("window", .window),
        ]
        for (offset, entry) in binaries.enumerated() { t[0x0F + offset] = .binary(entry.0, entry.1) }
        // 0x12-0x14 are numbers, not binary sensors; restore them after the loop above.
        t[0x12] = BTHomeObject("co2", size: 2, unit: .ppm, .carbonDioxide)
        t[0x13] = BTHomeObject("voc", size: 2, unit: .microgramsPerCubicMetre, .volatileOrganicCompounds)
        t[0x14] = BTHomeObject("moisture", size: 2, decimals: 2, unit: .percent, .moisture)
        t[0x2E] = BTHomeObject("humidity", size: 1, unit: .percent, .humidity)
        t[0x2F] = BTHomeObject("moisture", size: 1, unit: .percent, .moisture)
        t[0x3A] = BTHomeObject("button", .buttonEvent, size: 1)
        t[0x3C] = BTHomeObject("dimmer", .dimmerEvent, size: 2)
        t[0x3D] = BTHomeObject("count", size: 2)
        t[0x3E] = BTHomeObject("count", size: 4)
        t[0x3F] = BTHomeObject("rotation", size: 2, signed: true, decimals: 1, unit: .degrees)
        t[0x40] = BTHomeObject("distance", size: 2, unit: .millimetres, .distance)
        t[0x41] = BTHomeObject("distance", size: 2, decimals: 1, unit: .metres, .distance)
        t[0x42] = BTHomeObject("duration", size: 3, decimals: 3, unit: .seconds, .duration)
        t[0x43] = BTHomeObject("current", size: 2, decimals: 3, unit: .amperes, .current)
        t[0x44] = BTHomeObject("speed", size: 2, decimals: 2, unit: .metresPerSecond, .speed)
        t[0x45] = BTHomeObject("temperature", size: 2, signed: true, decimals: 1, unit: .celsius, .temperature)
        t[0x46] = BTHomeObject("uv_index", size: 1, decimals: 1)
        t[0x47] = BTHomeObject("volume", size: 2, decimals: 1, unit: .litres, .volume)
        t[0x48] = BTHomeObject("volume", size: 2, unit: .millilitres, .volume)
        t[0x49] = BTHomeObject("volume_flow_rate", size: 2, decimals: 3, unit: .cubicMetresPerHour, .volumeFlowRate)
        t[0x4A] = BTHomeObject("voltage", size: 2, decimals: 1, unit: .volts, .voltage)
        t[0x4B] = BTHomeObject("gas", size: 3, decimals: 3, unit: .cubicMetres, .gas)
        t[0x4C] = BTHomeObject("gas", size: 4, decimals: 3, unit: .cubicMetres, .gas)
        t[0x4D] = BTHomeObject("energy", size: 4, decimals: 3, unit: .kilowattHours, .energy)
        t[0x4E] = BTHomeObject("volume", size: 4, decimals: 3, unit: .litres, .volume)
        t[0x4F] = BTHomeObject("water", size: 4, decimals: 3, unit: .litres, .water)
        t[0x50] = BTHomeObject("timestamp", .timestamp, size: 4, .timestamp)
        t[0x51] = BTHomeObject("acceleration", size: 2, decimals: 3, unit: .metresPerSecondSquared)
        t[0x52] = BTHomeObject("gyroscope", size: 2, decimals: 3, unit: .degreesPerSecond)
        t[0x53] = BTHomeObject("text", .text, size: 0)
        t[0x54] = BTHomeObject("raw", .raw, size: 0)
        t[0x55] = BTHomeObject("volume_storage", size: 4, decimals: 3, unit: .litres, .volumeStorage)
        t[0x56] = BTHomeObject("conductivity", size: 2, unit: .microsiemensPerCentimetre, .conductivity)
        t[0x57] = BTHomeObject("temperature", size: 1, signed: true, unit: .celsius, .temperature)
        t[0x58] = BTHomeObject(
            "temperature", size: 1, signed: true, decimals: 2, factor: 0.35, unit: .celsius, .temperature)
        t[0x59] = BTHomeObject("count", size: 1, signed: true)
        t[0x5A] = BTHomeObject("count", size: 2, signed: true)
        t[0x5B] = BTHomeObject("count", size: 4, signed: true)
        t[0x5C] = BTHomeObject("power", size: 4, signed: true, decimals: 2, unit: .watts, .power)
        t[0x5D] = BTHomeObject("current", size: 2, signed: true, decimals: 3, unit: .amperes, .current)
        t[0x5E] = BTHomeObject("direction", size: 2, decimals: 2, unit: .degrees, .windDirection)
        t[0x5F] = BTHomeObject("precipitation", size: 2, decimals: 1, unit: .millimetres, .precipitation)
        t[0x60] = BTHomeObject("channel", size: 1)
        t[0x61] = BTHomeObject("rotational_speed", size: 2, unit: .rpm)
        t[0x62] = BTHomeObject("speed", size: 4, signed: true, decimals: 6, unit: .metresPerSecond, .speed)
        t[0x63] = BTHomeObject("acceleration", size: 4, signed: true, decimals: 6, unit: .metresPerSecondSquared)
        t[0x64] = BTHomeObject("light_level", size: 1)
        t[0xF0] = BTHomeObject("device_type_id", .info, size: 2)
        t[0xF1] = BTHomeObject("firmware_version", .info, size: 4)
        t[0xF2] = BTHomeObject("firmware_version", .info, size: 3)
        var indices: [String: Int] = [:]
        for id in t.indices {
            guard let name = t[id].map({ $0.staticName.description }) else { continue }
            let index = indices[name] ?? indices.count
            indices[name] = index
            t[id]?.nameIndex = index
        }
        return t
    }()

    /// The distinct names of ``table``, by ``nameIndex``.
    static let names: [String] = {
        var names: [String] = []
        for object in table.compactMap({ $0 }) where object.nameIndex == names.count {
            names.append(object.staticName.description)
        }
        return names
    }()

    static let buttonEvents: [UInt8: String] = [
        0x01: "press", 0x02: "double_press", 0x03: "triple_press", 0x04: "long_press",
        0x05: "long_double_press", 0x06: "long_triple_press", 0x80: "hold_press", 0x81: "hold_release",
        0xFE: "hold",
    ]

    /// Appends the readings for one object whose value bytes are `bytes[start..<start+length]`.
    /// `float` selects IEEE 754 half/single/double values (BTHome v1 data type 2).
    func decode(
        _ bytes: [UInt8], start: Int, length: Int, float: Bool, signedOverride: Bool?,
        into readings: inout [Reading]
    ) throws(ParseError) {
        var reader = ByteReader(bytes, from: start, to: start + length, what: "BTHome object")
        let readingName = name
        switch kind {
        case .number, .info:
            let isSigned = signedOverride ?? signed
            let raw: Double
            if float {
                let bits = try reader.uintLE(length)
                switch length {
                case 2: raw = Double(Float16Bits.toDouble(UInt16(truncatingIfNeeded: bits)))
                case 4: raw = Double(Float(bitPattern: UInt32(truncatingIfNeeded: bits)))
                case 8: raw = Double(bitPattern: bits)
                default: throw ParseError(.malformed, "BTHome float object \(name) has \(length) bytes")
                }
                readings.append(
                    Reading(
                        name: readingName,
                        value: .number(rounded(raw * (factor ?? 1 / powersOfTen[decimals]), max(decimals, 2))),
                        unit: unit, deviceClass: deviceClass))
                return
            }
            raw = isSigned ? Double(try reader.intLE(length)) : Double(try reader.uintLE(length))
            let value = factor.map { rounded(raw * $0, decimals) } ?? raw / powersOfTen[decimals]
            readings.append(Reading(name: readingName, value: .number(value), unit: unit, deviceClass: deviceClass))
        case .binary:
            readings.append(Reading(name: readingName, value: .bool(try reader.u8() != 0), deviceClass: deviceClass))
        case .buttonEvent:
            let event = try reader.u8()
            // "No event" still counts for numbering (button_2 is the second button), so it is
            // kept as a null placeholder until ``numberRepeatedNames(_:)`` removes it.
            let text = Self.buttonEvents[event] ?? "unknown_\(event)"
            readings.append(Reading(name: readingName, value: event == 0 ? .null : .string(text)))
        case .dimmerEvent:
            let event = try reader.u8()
            let steps = try reader.u8()
            guard event != 0 else { return }
            readings.append(
                Reading(
                    name: readingName,
                    value: .string(event == 1 ? "rotate_left" : event == 2 ? "rotate_right" : "unknown_\(event)")))
            readings.append(Reading(name: readingName + "_steps", value: .number(Double(steps))))
        case .timestamp:
            // v1 gives the length in the frame: up to 8 bytes, so up to 2^64 - 1 seconds.
            let seconds = try reader.uintLE(length)
            guard seconds <= latestTimestamp else {
                throw ParseError(.malformed, "BTHome timestamp \(seconds) s is after the year 9999")
            }
            readings.append(
                Reading(
                    name: readingName, value: .string(isoTimestamp(Int64(truncatingIfNeeded: seconds))),
                    deviceClass: .timestamp))
        case .text:
            let text = try reader.bytes(length)
            readings.append(Reading(name: readingName, value: .string(String(decoding: text, as: UTF8.self))))
        case .raw:
            readings.append(Reading(name: readingName, value: .string(try Hex.encode(reader.bytes(length)))))
        }
    }
}

extension BTHomeObject {
    /// Tracks which reading names a payload produced, so the renaming pass of
    /// ``numberRepeatedNames(_:names:)`` runs only when needed and compares small tags instead
    /// of strings: each reading's tag is its object's name index and its place among the
    /// readings of that object (a dimmer gives `dimmer` and `dimmer_steps`).
    struct NameSet {
        var low: UInt64 = 0
        var high: UInt64 = 0
        var repeated = false
        var hasButton = false
        /// One tag per reading appended, while there are at most ``NameSet/capacity``.
        var tags = InlineArray<64, UInt8>(repeating: 0)
        var tagged = 0
        static let capacity = 64
        var needsPass: Bool { repeated || hasButton }

        mutating func insert(_ object: BTHomeObject) {
            let bit = UInt64(1) << UInt64(object.nameIndex & 63)
            if object.nameIndex < 64 {
                if low & bit != 0 { repeated = true }
                low |= bit
            } else {
                if high & bit != 0 { repeated = true }
                high |= bit
            }
            if object.kind == .buttonEvent { hasButton = true }
        }

        /// Tags the readings an object appended (`count` of them, at most two).
        mutating func tag(_ object: BTHomeObject, appended count: Int) {
            for place in 0..<count {
                if tagged < Self.capacity {
                    tags[tagged] = UInt8(truncatingIfNeeded: object.nameIndex &* 2 &+ min(place, 1))
                }
                tagged &+= 1
            }
        }
    }

    /// `_1` … `_16`, made once: the numbering of repeated names appends one per renamed reading.
    static let suffixes: [String] = (0...16).map { "_" + String($0) }

    static func occurrenceSuffix(_ occurrence: Int) -> String {
        occurrence < suffixes.count ? suffixes[occurrence] : "_" + String(occurrence)
    }

    /// Numbers readings whose name repeats (`temperature_1`, `temperature_2`), as bthome-ble does,
    /// then drops the "no event" placeholders of button objects.
    static func numberRepeatedNames(_ readings: inout [Reading], names: NameSet) {
        if names.repeated {
            let count = readings.count
            if names.tagged == count && count <= NameSet.capacity {
                // Two passes over the tags: how often each occurs, then the numbers in order.
                var totals = InlineArray<256, UInt8>(repeating: 0)
                var seen = InlineArray<256, UInt8>(repeating: 0)
                for i in 0..<count { totals[Int(names.tags[i])] &+= 1 }
                for i in 0..<count {
                    let tag = Int(names.tags[i])
                    guard totals[tag] > 1 else { continue }
                    seen[tag] &+= 1
                    readings[i].name.append(occurrenceSuffix(Int(seen[tag])))
                }
            } else {
                // Beyond 64 readings (only a long extended-advertising payload): the names
                // themselves, all counted first, then numbered backwards so the names before
                // `i` are still the original ones.
                withUnsafeTemporaryAllocation(of: Int.self, capacity: count) { totals in
                    for i in 0..<count {
                        var total = 0
                        for j in 0..<count where readings[j].name == readings[i].name { total += 1 }
                        totals[i] = total
                    }
                    for i in stride(from: count - 1, through: 0, by: -1) where totals[i] > 1 {
                        var occurrence = 1
                        for j in 0..<i where readings[j].name == readings[i].name { occurrence += 1 }
                        readings[i].name.append(occurrenceSuffix(occurrence))
                    }
                }
            }
        }
        if names.hasButton, readings.contains(where: { $0.value == .null }) {
            readings.removeAll { $0.value == .null && $0.name.hasPrefix("button") }
        }
    }
}

/// IEEE 754 binary16 → Double, without relying on the platform's `Float16`.
enum Float16Bits {
    static func toDouble(_ bits: UInt16) -> Double {
        let sign: Double = bits & 0x8000 != 0 ? -1 : 1
        let exponent = Int((bits >> 10) & 0x1F)
        let fraction = Double(bits & 0x3FF)
        switch exponent {
        case 0: return sign * fraction / 1024 / 16384
        case 31: return fraction == 0 ? sign * .infinity : .nan
        default:
            var scale = 1.0
            if exponent > 15 {
                for _ in 0..<(exponent - 15) { scale *= 2 }
            } else {
                for _ in 0..<(15 - exponent) { scale /= 2 }
            }
            return sign * (1 + fraction / 1024) * scale
        }
    }
}

/// 9999-12-31T23:59:59Z in Unix seconds: the last moment ``isoTimestamp(_:)`` writes with a
/// four-digit year.
let latestTimestamp: UInt64 = 253_402_300_799

/// `2023-05-14T19:41:17+00:00` for Unix seconds (proleptic Gregorian, UTC), for
/// `0...latestTimestamp`.
func isoTimestamp(_ seconds: Int64) -> String {
    let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
    let secondsOfDay = seconds - days * 86400
    let date = CivilDate(days: days)
    func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
    return
        "\(date.year)-\(two(date.month))-\(two(date.day))T\(two(secondsOfDay / 3600)):\(two(secondsOfDay % 3600 / 60)):\(two(secondsOfDay % 60))+00:00"
}
