import Bluetooth

/// Qingping (ClearGrass) service data, UUID 0xFDCD: CGG1, CGDK2, CGP1W, CGP23W, CGC1/CGD1, CGDN1,
/// CGH1, CGPR1 and the other device ids qingping-ble lists.
///
/// Layout (qingping-ble `parser.py`, pvvx's TLB2Z `qingping_adv.h` and `scaning.c`, Theengs
/// decoder `CG*_json.h`): byte 0 flags (bit 6: event frame), byte 1 device id, bytes 2–7 the MAC
/// reversed, then objects `id, length, value` (little-endian): `01`/4 temperature int16 × 0.1 °C +
/// humidity uint16 × 0.1 %; `02`/1 battery % in bits 0–6 (the CGC1/CGD1 sets bit 7; Theengs masks
/// it), `FF` on external power, read as 100 % (qingping-ble); `04`/1 door (0 open, 1 closed, 2
/// open too long); `07`/2 pressure uint16 × 0.1 hPa; `08`/4 motion byte + illuminance uint24 lx;
/// `09`/4 illuminance uint32 lx; `0F`/1 packet counter; `11`/1 light (0 dark, 1 bright); `12`/4
/// PM2.5 + PM10 uint16 µg/m³; `13`/2 CO₂ uint16 ppm.
///
/// Two deviations from a plain object walk: in event frames the bytes after the motion byte of `08`
/// are not illuminance (pvvx, qingping-ble issue #84), so only motion is read; and the CGH1 sends
/// its door state as a second `0F` object in its periodic frames (Theengs `CGH1_json.h`).
public struct Qingping: AdvertisementParser {
    public init() {}
    public var format: String { "qingping" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFDCD)] }
    /// The packet counter object (`packet_id`).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? {
        readings.frameCounter(named: "packet_id")
    }

    /// Device ids qingping-ble knows, plus 0x10 (CGDK2, Theengs `CGDK2_json.h`).
    static let devices: Set<UInt8> = [
        0x01, 0x04, 0x07, 0x09, 0x0C, 0x0E, 0x0F, 0x10, 0x12, 0x15, 0x16, 0x18, 0x1E, 0x24, 0x33, 0x4F, 0x5D,
    ]
    static let doorSensor: UInt8 = 0x04

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count >= 8, Self.devices.contains(payload[1]) else { return nil }
        let event = payload[0] & 0x40 != 0
        let device = payload[1]
        var reader = ByteReader(payload, from: 8, what: "Qingping service data")
        var readings = [Reading].reserved()
        var counters = 0
        while !reader.isAtEnd {
            let id = try reader.u8()
            let length = Int(try reader.u8())
            var value = ByteReader(try reader.bytes(length), what: "Qingping object")
            switch (id, length) {
            case (0x01, 4):
                readings.append(Reading(.temperature, decimal(try value.s16le(), 1)))
                readings.append(Reading(.humidity, decimal(try value.u16le(), 1)))
            case (0x02, 1):
                let battery = try value.u8()
                readings.append(Reading(.battery, Double(battery == 0xFF ? 100 : battery & 0x7F)))
            case (0x04, 1):
                appendDoor(try value.u8(), to: &readings)
            case (0x07, 2):
                readings.append(Reading(.pressure, decimal(try value.u16le(), 1)))
            case (0x08, 4):
                readings.append(Reading("motion", bool: try value.u8() != 0, deviceClass: .motion))
                if !event { readings.append(Reading(.illuminance, Double(try value.u24le()))) }
            case (0x09, 4):
                readings.append(Reading(.illuminance, Double(try value.u32le())))
            case (0x0F, 1):
                counters += 1
                let byte = try value.u8()
                if counters == 1 {
                    readings.append(Reading("packet_id", Double(byte)))
                } else if device == Self.doorSensor {
                    appendDoor(byte, to: &readings)
                }
            case (0x11, 1):
                readings.append(Reading("light", bool: try value.u8() != 0, deviceClass: .light))
            case (0x12, 4):
                readings.append(Reading(.pm25, Double(try value.u16le())))
                readings.append(Reading(.pm10, Double(try value.u16le())))
            case (0x13, 2):
                readings.append(Reading(.co2, Double(try value.u16le())))
            default:
                continue
            }
        }
        return readings
    }

    /// The door object: 0 open, 1 closed, 2 open for too long.
    func appendDoor(_ state: UInt8, to readings: inout [Reading]) {
        readings.append(Reading("opening", bool: state != 1, deviceClass: .opening))
        readings.append(Reading("left_open", bool: state == 2, deviceClass: .problem))
    }
}
