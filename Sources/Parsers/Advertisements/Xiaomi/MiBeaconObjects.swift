#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The MiBeacon object table: sensor values, binary states, toothbrush and scale objects.
/// Button, remote and lock objects are in MiBeaconEvents.swift.
///
/// Object ids, lengths and scales: Xiaomi's object definition
/// (iot.mi.com, "object-definition") as implemented by xiaomi-ble `parser.py`; the
/// model-specific meanings (see ``MiBeaconProduct``) come from there too.
extension MiBeacon {
    /// Appends the readings of one object; unknown types and unexpected lengths append nothing.
    static func object(
        _ type: UInt16, _ value: inout ByteReader, product: MiBeaconProduct?, into readings: inout [Reading]
    ) throws(ParseError) {
        let length = value.remaining
        func add(_ quantity: Quantity, _ number: Double) { readings.append(Reading(quantity, number)) }
        func flag(_ name: String, _ on: Bool, _ deviceClass: DeviceClass? = nil) {
            readings.append(Reading(name, bool: on, deviceClass: deviceClass))
        }
        func float32() throws(ParseError) -> Double { Double(Float(bitPattern: try value.u32le())) }
        if try event(type, &value, product: product, into: &readings) { return }
        switch type {
        case 0x000A where length == 2:
            let raw = try value.s16le()
            if raw != 0 { add(.temperature, decimal(raw, 2)) }  // MMC-W505 body temperature
        case 0x000F where length == 3:
            // Motion with light: MJYD02YL 1/100, RTCGQ02LM 0/256 dark/light; CGPR1 lux.
            let light = try value.u24le()
            flag("motion", true, .motion)
            switch product {
            case .mjyd02yl, .rtcgq02lm: flag("light", light >= 100, .light)
            case .cgpr1: add(.illuminance, Double(light))
            default: break
            }
        case 0x0010 where length >= 1:
            // Toothbrush: 0 on (+ brushing counter), other off (+ score).
            let state = try value.u8()
            flag("toothbrush", state == 0)
            if length > 1 { readings.append(Reading(state == 0 ? "counter" : "score", Double(try value.u8()))) }
        case 0x1004 where length == 2: add(.temperature, decimal(try value.s16le(), 1))
        case 0x1005 where length >= 2:
            flag("power", try value.u8() != 0, .power)
            add(.temperature, Double(try value.u8()))
        case 0x1006 where length == 2: add(.humidity, decimal(try value.u16le(), 1))
        case 0x1007 where length == 3:
            let lux = try value.u24le()
            switch product {
            case .mjyd02yl, .mccgq02hl: flag("light", lux == 100, .light)
            default: add(.illuminance, Double(lux))
            }
        case 0x1008 where length >= 1: add(.moisture, Double(try value.u8()))
        case 0x1009 where length == 2: add(.conductivity, Double(try value.u16le()))
        case 0x100A where length >= 1: add(.battery, Double(try value.u8()))
        case 0x100D where length == 4:
            add(.temperature, decimal(try value.s16le(), 1))
            add(.humidity, decimal(try value.u16le(), 1))
        case 0x1010 where length == 2: add(.formaldehyde, decimal(try value.u16le(), 2))
        case 0x1012 where length >= 1: flag("power", try value.u8() != 0, .power)
        case 0x1013 where length >= 1: add(.consumable, Double(try value.u8()))
        case 0x1014 where length >= 1: flag("moisture", try value.u8() != 0, .moisture)
        case 0x1015 where length >= 1: flag("smoke", try value.u8() != 0, .smoke)
        case 0x1017 where length == 4:
            // Seconds without motion; up to 30 s counts as motion.
            flag("motion", try value.u32le() <= 30, .motion)
        case 0x1018 where length >= 1: flag("light", try value.u8() != 0, .light)
        case 0x1019 where length >= 1:
            // 0 open, 1 closed, 2 not closed after the timeout, 3 reset (nothing).
            switch try value.u8() {
            case 0: flag("opening", true, .opening)
            case 1:
                flag("opening", false, .opening)
                flag("door_left_open", false, .problem)
            case 2:
                flag("opening", true, .opening)
                flag("door_left_open", true, .problem)
            default: break
            }
        case 0x101B: flag("motion", false, .motion)
        case 0x2000 where length == 5:
            // MMC-T201-1: two raw skin temperatures and battery; the body temperature is
            // xiaomi-ble's empirical fit (valid around 36.5-37.8 °C).
            let first = Double(try value.s16le())
            let second = Double(try value.s16le())
            let body =
                3.71934e-11 * exp(0.69314 * first / 100) - 1.02801e-8 * exp(0.53871 * second / 100)
                + 36.413
            add(.temperature, rounded(body, 2))
            add(.battery, Double(try value.u8()))
        case 0x3003 where length >= 1:
            // Brushing: 0 start, 1 end (+ u32 time), a 6th byte is the score.
            let state = try value.u8()
            if state <= 1 { flag("toothbrush", state == 0) }
            if length == 6 {
                try value.skip(4)
                readings.append(Reading("score", Double(try value.u8())))
            }
        case 0x4801 where length == 4, 0x4C01 where length == 4: add(.temperature, rounded(try float32(), 2))
        case 0x4802 where length == 1, 0x4C02 where length == 1: add(.humidity, Double(try value.u8()))
        case 0x4803 where length >= 1, 0x4C03 where length >= 1, 0x5003 where length >= 1:
            add(.battery, Double(try value.u8()))
        case 0x4804 where length >= 1, 0x4A12 where length >= 1:
            // Opening state / event: 1 open, 2 closed.
            switch try value.u8() {
            case 1: flag("opening", true, .opening)
            case 2:
                flag("opening", false, .opening)
                flag("door_left_open", false, .problem)
                flag("device_forcibly_removed", false, .problem)
            default: break
            }
        case 0x4805 where length == 4: add(.illuminance, rounded(try float32(), 2))
        case 0x4806 where length == 1:
            // SJWS02LM has two probes: this is the bottom one.
            flag(product == .sjws02lm ? "bottom_submersion" : "moisture", try value.u8() != 0, .moisture)
        case 0x487B where length == 1 && product == .sjws02lm: flag("top_splash", try value.u8() != 0, .moisture)
        case 0x4A68 where length == 1 && product == .sjws02lm:
            // Leak alarm/clear events: 0/1 bottom probe wet/dry, 2/3 top probe wet/dry.
            let event = try value.u8()
            switch event {
            case 0, 1: flag("bottom_submersion", event == 0, .moisture)
            case 2, 3: flag("top_splash", event == 2, .moisture)
            default: break
            }
        case 0x4808 where length == 4, 0x4C08 where length == 4: add(.humidity, rounded(try float32(), 2))
        case 0x480C where length == 1:
            // 0 open, 1 closed.
            switch try value.u8() {
            case 0: flag("opening", true, .opening)
            case 1: flag("opening", false, .opening)
            default: break
            }
        case 0x4818 where length == 2:
            // Seconds without motion; up to 30 s counts as motion.
            flag("motion", try value.u16le() <= 30, .motion)
        case 0x483C where length == 1: flag("occupancy", try value.u8() != 0, .occupancy)
        case 0x483D where length == 4: add(.pressurePresentDuration, Double(try value.u32le()))
        case 0x483E where length == 4: add(.pressureNotPresentDuration, Double(try value.u32le()))
        case 0x484E where length >= 1:
            // XMOSB01XS: 0 clear, 1 detected, 2 clear; others: non-zero detected.
            let state = try value.u8()
            flag("occupancy", product == .xmosb01xs ? state == 1 : state != 0, .occupancy)
        case 0x4851 where length >= 1: add(.durationDetected, Double(try value.u8()))
        case 0x4852 where length >= 1: add(.durationCleared, Double(try value.u8()))
        case 0x4A08 where length == 4:
            flag("motion", true, .motion)
            add(.illuminance, rounded(try float32(), 2))
        case 0x4A0F where length >= 1:
            if try value.u8() == 1 {
                flag("opening", true, .opening)
                flag("device_forcibly_removed", true, .problem)
            }
        case 0x4A1A where length >= 1:
            if try value.u8() == 1 {
                flag("opening", true, .opening)
                flag("door_left_open", true, .problem)
            }
        case 0x4E16 where length == 9:
            // S200 scale: profile id, weight u32 (/100 kg), timestamp. The S200 sends the object
            // only once the weight is final, so a weight is a stabilized one (xiaomi-ble).
            let profile = try value.u8()
            let weight = try value.u32le()
            if weight != 0 {
                add(.weight, decimal(weight, 2))
                readings.append(Reading("profile_id", Double(profile)))
                flag("stabilized", true)
            }
        case 0x5413 where length >= 1 && product == .es5bb:
            flag("occupancy_close_range", try value.u8() != 0, .occupancy)
        case 0x5422 where length == 1:
            let states = ["Charging", "Not Charging", "Full"]
            let state = Int(try value.u8())
            readings.append(Reading("charging_state", string: state < states.count ? states[state] : "Unknown"))
        case 0x5810 where length == 1: flag("asleep", try value.u8() == 0)
        case 0x6461 where length == 1: flag("wearing", try value.u8() == 0)
        case 0x6E16 where length == 9: try bodyScale(&value, into: &readings)
        default: break
        }
    }

    /// Object 0x6E16 (S400 body composition scale): profile id, then a u32 packing weight
    /// (bits 0-10, /10 kg), heart rate (bits 11-17, + 50 bpm) and impedance (bits 18-31,
    /// /10 Ω); weight + impedance is the 50 kHz (low) measurement, impedance alone the final
    /// 250 kHz (high) one, all zero means the person stepped off. The S400 Pro (MJTZC03YM) sends
    /// weight bits all ones (0x7FF) for no weight (xiaomi-ble).
    static func bodyScale(_ value: inout ByteReader, into readings: inout [Reading]) throws(ParseError) {
        let profile = try value.u8()
        let packed = try value.u32le()
        let mass = packed & 0x7FF == 0x7FF ? 0 : packed & 0x7FF
        let heartRate = (packed >> 11) & 0x7F
        let impedance = packed >> 18
        readings.append(Reading("profile_id", Double(profile)))
        func stabilized(_ on: Bool) { readings.append(Reading("stabilized", bool: on)) }
        if mass == 0 && heartRate == 0 && impedance == 0 {
            stabilized(false)
            return
        }
        if mass != 0 { readings.append(Reading(.weight, decimal(mass, 1))) }
        if heartRate > 0 && heartRate < 127 { readings.append(Reading(.heartRate, Double(heartRate + 50))) }
        if mass == 0 && heartRate == 0 {
            readings.append(Reading(.impedanceHigh, decimal(impedance, 1)))
            stabilized(true)
        } else if impedance != 0 {
            readings.append(Reading(.impedanceLow, decimal(impedance, 1)))
            stabilized(false)
        } else {
            stabilized(true)
        }
    }
}
