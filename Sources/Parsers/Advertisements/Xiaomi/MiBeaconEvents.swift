/// MiBeacon event objects: buttons, remotes, the dimmer and cube (0x1001 and the newer
/// per-press objects), motion events, fingerprint readers, door and lock events.
///
/// Events are published as string readings (`button` = `press` / `double_press` /
/// `long_press`, `button_left`, `dimmer` = `rotate_left` + `dimmer_steps`, `lock_action`,
/// `fingerprint_result`); lock and door objects also give the states they imply (`lock`,
/// `door`, `armed`, …; `lock` true means unlocked, as Home Assistant's lock class has it).
/// Layouts and code tables: xiaomi-ble `parser.py` and `locks.py` (after Xiaomi's object
/// definition); which button a code means depends on the model (``MiBeaconProduct``).
extension MiBeacon {
    /// Decodes an event object; false when `type` is not one.
    static func event(
        _ type: UInt16, _ value: inout ByteReader, product: MiBeaconProduct?, into readings: inout [Reading]
    ) throws(ParseError) -> Bool {
        let length = value.remaining
        func text(_ name: String, _ string: String) { readings.append(Reading(name, string: string)) }
        func flag(_ name: String, _ on: Bool, _ deviceClass: DeviceClass? = nil) {
            readings.append(Reading(name, bool: on, deviceClass: deviceClass))
        }
        switch type {
        case 0x0003 where length >= 1:
            // MUE4094RT night light: motion detected. It never sends "clear", so this is
            // also published as the event `motion_event` = `motion_detected`.
            let detected = try value.u8() != 0
            flag("motion", detected, .motion)
            if detected { text("motion_event", "motion_detected") }
        case 0x0006 where length == 5:
            let key = try value.u32le()
            let match = Int(try value.u8())
            text("key_id", keyName(key) ?? String(key))
            flag("fingerprint", match == 0)
            let results = [
                "match_successful", "match_failed", "timeout", "low_quality_too_light_fuzzy", "insufficient_area",
                "skin_is_too_dry", "skin_is_too_wet",
            ]
            if match < results.count { text("fingerprint_result", results[match]) }
        case 0x0007 where length >= 1:
            // Door: 0 opened, 1 closed, 2 left open, 3 knocked, 4 pried, 5 stuck.
            let state = try value.u8()
            guard state <= 5 else { break }
            flag("door", [0, 2, 4].contains(state), .door)
            switch state {
            case 0:
                flag("door_stuck", false, .problem)
                flag("knock_on_the_door", false)
            case 1:
                flag("door_left_open", false, .problem)
                flag("pry_the_door", false, .problem)
            case 2: flag("door_left_open", true, .problem)
            case 3: flag("knock_on_the_door", true)
            case 4: flag("pry_the_door", true, .problem)
            default: flag("door_stuck", true, .problem)
            }
        case 0x0008 where length >= 1:
            // Armed away: 0 armed. DSL-C08 sends it when the outside handle is lifted.
            let armed = try value.u8() == 0
            flag("armed", armed)
            if product == .dslC08 {
                flag("lock", armed, .lock)
                text("lock_action", "lock_outside_the_door")
                text("lock_method", "manual")
            }
        case 0x000B where length == 9: try lock(&value, product: product, into: &readings)
        case 0x100E where length == 1:
            // Lock attribute (DSL-C08): bit 0 locked, bit 3 child lock on (0 = on); bits 4-7
            // reserved (Xiaomi's object definition), so bit 3 is read alone.
            guard product == .dslC08 else { break }
            let attribute = try value.u8()
            flag("lock", attribute & 0x01 == 0, .lock)
            flag("childlock", attribute & 0x08 == 0, .lock)
        case 0x1001 where length == 3: button(try value.u8(), try value.u8(), try value.u8(), product, &readings)
        case 0x4A0C, 0x4A0D, 0x4A0E:
            // Single / double / long press; XMWS01XS: byte 0 left, 1 right.
            let press = pressNames[Int(type - 0x4A0C)]
            if product == .xmws01xs {
                guard length >= 1 else { break }
                let which = try value.u8()
                if which <= 1 { text(which == 0 ? "button_left" : "button_right", press) }
            } else {
                text("button", press)
            }
        case 0x4A13 where length >= 1:
            if try value.u8() == 1 { text("button", "press") }
        case 0x4E0C, 0x4E0D, 0x4E0E:
            let press = pressNames[Int(type - 0x4E0C)]
            switch product {
            case .xmwxkg01yl where length >= 1:
                // 1 left, 2 right, 3 both.
                let which = try value.u8()
                if which & 0x01 != 0 { text("button_left", press) }
                if which & 0x02 != 0 { text("button_right", press) }
            case .k9bb1 where type == 0x4E0C && length >= 1:
                // One object for all: 1 press, 8 long, 15 double.
                switch try value.u8() {
                case 1: text("button", "press")
                case 8: text("button", "long_press")
                case 15: text("button", "double_press")
                default: break
                }
            case .xmwxkg01lm: text("button", press)
            default: break
            }
        case 0x560C, 0x560D, 0x560E:
            let press = pressNames[Int(type - 0x560C)]
            switch product {
            case .ks2bb: text("button", press)
            case .ks1, .ks1bp:
                guard length >= 1 else { break }
                let which = Int(try value.u8())
                let names = ["left", "mid_left", "mid_right", "right"]
                text((1...4).contains(which) ? "button_\(names[which - 1])" : "button", press)
            default: break
            }
        default: return false
        }
        return true
    }

    static let pressNames = ["press", "double_press", "long_press"]

    /// Object 0x1001: button id, value, press type. The button id names a key of a remote, a
    /// switch combination or the cube's direction; the dimmer uses value and id for steps.
    static func button(
        _ id: UInt8, _ value: UInt8, _ pressType: UInt8, _ product: MiBeaconProduct?, _ readings: inout [Reading]
    ) {
        func text(_ name: String, _ string: String) { readings.append(Reading(name, string: string)) }
        // Remotes and one-button devices: 0 press, 1 double, 2 long; 3-6 dimmer/other codes.
        let press: String? =
            switch pressType {
            case 0, 5: "press"
            case 1: "double_press"
            case 2, 6: "long_press"
            default: nil
            }
        // K9B wall switches swap the double and long codes.
        let switchPress: String? = [0: "press", 1: "long_press", 2: "double_press"][pressType]
        func key(_ names: [String]) -> String? { Int(id) < names.count ? names[Int(id)] : nil }
        switch product {
        case .rtcgq02lm, .ylai003, .jtyjgd03mi, .sjws01lm:
            if let press { text("button", press) }
        case .xmmf01jqd:
            if id <= 1 { text("cube", id == 0 ? "rotate_right" : "rotate_left") }
        case .ylyk01yl:
            guard let press, let name = key(["on", "off", "brightness", "plus", "M", "min"]) else { return }
            if id <= 1 { readings.append(Reading("power", bool: id == 0, deviceClass: .power)) }
            text("button_\(name)", press)
        case .ylyk01ylFan:
            let names = ["fan", "light", "wind_speed", "color_temperature", "wind_mode", "brightness"]
            if let press, let name = key(names) { text("button_\(name)", press) }
        case .ylyk01ylVentilator:
            let names = [
                "swing", "power", "timer_60_minutes", "increase_wind_speed", "timer_30_minutes", "decrease_wind_speed",
            ]
            if let press, let name = key(names) { text("button_\(name)", press) }
        case .ylyb01ylBathroom:
            let names = [
                "stop", "air_exchange", "fan", "increase_speed", "decrease_speed", "dry", "light", "swing", "heat",
            ]
            if let press, let name = key(names) { text("button_\(name)", press) }
        case .ylkg07yl:
            dimmer(id, value, pressType, &readings)
        case .k9b1:
            if id == 0, let switchPress { text("button", switchPress) }
        case .k9b2:
            // 0 left, 1 right, 2 both.
            guard let switchPress, id <= 2 else { return }
            if id != 1 { text("button_left", switchPress) }
            if id != 0 { text("button_right", switchPress) }
        case .k9b3:
            // 0-2 one button, 3-5 two, 6 all three.
            guard let switchPress, id <= 6 else { return }
            let pressed: [[String]] = [
                ["left"], ["middle"], ["right"], ["left", "middle"], ["middle", "right"], ["left", "right"],
                ["left", "middle", "right"],
            ]
            for name in pressed[Int(id)] { text("button_\(name)", switchPress) }
        default:
            break
        }
    }

    /// The YLKG07YL/YLKG08YL dimmer: press type 3 is a press (id 0, value = count) or a long
    /// press (id 1, value = seconds); press type 4 is a rotation by value (id 0, signed) or,
    /// while pressed, by the id (signed).
    static func dimmer(_ id: UInt8, _ value: UInt8, _ pressType: UInt8, _ readings: inout [Reading]) {
        func emit(_ event: String, _ name: String, _ number: UInt8) {
            readings.append(Reading("dimmer", string: event))
            readings.append(Reading(name, Double(number)))
        }
        switch pressType {
        case 3 where id == 0: emit("press", "dimmer_presses", value)
        case 3 where id == 1: emit("long_press", "dimmer_duration", value)
        case 4 where id == 0:
            if value <= 127 {
                emit("rotate_right", "dimmer_steps", value)
            } else {
                emit("rotate_left", "dimmer_steps", 0 &- value)
            }
        case 4:
            if id <= 127 {
                emit("rotate_right_pressed", "dimmer_steps", id)
            } else {
                emit("rotate_left_pressed", "dimmer_steps", 0 &- id)
            }
        default: break
        }
    }

    /// Object 0x000B: action (low nibble) and method (high nibble), key id (u32), timestamp.
    static func lock(_ value: inout ByteReader, product: MiBeaconProduct?, into readings: inout [Reading])
        throws(ParseError)
    {
        let first = try value.u8()
        let key = try value.u32le()
        // (unlocked afterwards, which lock, event)
        let actions: [UInt8: (Bool, String, String)] = [
            0x0: (true, "lock", "unlock_outside_the_door"), 0x1: (false, "lock", "locked"),
            0x2: (false, "antilock", "turn_on_antilock"), 0x3: (true, "antilock", "release_the_antilock"),
            0x4: (true, "lock", "unlock_inside_the_door"), 0x5: (false, "lock", "lock_inside_the_door"),
            0x6: (false, "childlock", "turn_on_child_lock"), 0x7: (true, "childlock", "turn_off_child_lock"),
            0x8: (false, "lock", "lock_outside_the_door"), 0xF: (true, "lock", "abnormal"),
        ]
        let methods: [UInt8: String] = [
            0x0: "bluetooth", 0x1: "password", 0x2: "biometrics", 0x3: "key_method", 0x4: "turntable_method",
            0x5: "nfc_method", 0x6: "one_time_password", 0x7: "two_step_verification", 0x8: "coercion_method",
            0x9: "homekit", 0xA: "manual", 0xB: "automatic", 0xF: "abnormal",
        ]
        guard let action = actions[first & 0x0F], let method = methods[first >> 4] else { return }
        // Only ZNMS17LM has child lock and anti-lock; on other locks every action is the lock's.
        let which = product == .znms17lm ? action.1 : "lock"
        readings.append(Reading(which, bool: action.0, deviceClass: .lock))
        if key >> 16 == 0xC0DE, let error = lockErrors[UInt16(truncatingIfNeeded: key)] {
            readings.append(Reading("lock_error", string: error))
        } else {
            readings.append(Reading("key_id", string: keyName(key) ?? lockKeyName(key)))
        }
        readings.append(Reading("lock_action", string: action.2))
        readings.append(Reading("lock_method", string: method))
    }

    /// The special operator key ids of locks and fingerprint readers.
    static func keyName(_ key: UInt32) -> String? {
        switch key {
        case 0x0000_0000: "administrator"
        case 0xFFFF_FFFF: "unknown operator"
        case 0xDEAD_BEEF: "invalid operator"
        default: nil
        }
    }

    /// A lock key id: Bluetooth keys up to 0x7FFFFFFF, then one 64 Ki range per key method.
    static func lockKeyName(_ key: UInt32) -> String {
        if key <= 0x7FFF_FFFF { return "Bluetooth key \(key)" }
        let short = key & 0xFFFF
        let kinds = [
            "Fingerprint", "Password", "Keys", "NFC", "Two-step verification", "Human face", "Finger veins",
            "Palm print",
        ]
        for (index, kind) in kinds.enumerated() where key <= 0x8001_FFFF + UInt32(index) << 16 {
            return "\(kind) key id \(short)"
        }
        return "key id \(short)"
    }

    /// Lock error key ids 0xC0DExxxx, by the low 16 bits.
    static let lockErrors: [UInt16: String] = [
        0x0000: "frequent_unlocking_with_incorrect_password", 0x0001: "frequent_unlocking_with_wrong_fingerprints",
        0x0002: "operation_timeout_password_input_timeout", 0x0003: "lock_picking",
        0x0004: "reset_button_is_pressed", 0x0005: "the_wrong_key_is_frequently_unlocked",
        0x0006: "foreign_body_in_the_keyhole", 0x0007: "the_key_has_not_been_taken_out",
        0x0008: "error_nfc_frequently_unlocks", 0x0009: "timeout_is_not_locked_as_required",
        0x000A: "failure_to_unlock_frequently_in_multiple_ways", 0x000B: "unlocking_the_face_frequently_fails",
        0x000C: "failure_to_unlock_the_vein_frequently", 0x000D: "hijacking_alarm",
        0x000E: "unlock_inside_the_door_after_arming", 0x000F: "palmprints_frequently_fail_to_unlock",
        0x0010: "the_safe_was_moved", 0x1000: "the_battery_level_is_less_than_10_percent",
        0x1001: "the_battery_level_is_less_than_5_percent", 0x1002: "the_fingerprint_sensor_is_abnormal",
        0x1003: "the_accessory_battery_is_low", 0x1004: "mechanical_failure", 0x1005: "the_lock_sensor_is_faulty",
    ]
}
