import Bluetooth

/// Xiaomi MiBeacon (service data UUID 0xFE95), versions 2-5, as documented by the xiaomi-ble
/// and Theengs projects.
///
/// Frame: frame control (u16 LE: bit 3 encrypted, bit 4 MAC included, bit 5 capability
/// included, bit 6 object included, bits 12-15 version), product id (u16 LE), frame counter,
/// [MAC reversed], [capability (+ I/O byte)], objects `type (u16 LE) + length + value`.
/// Encrypted v4/v5 frames are AES-128-CCM with the bind key: objects + 3-byte extended counter
/// + 4-byte MIC, nonce = reversed MAC + product id + frame counter + extended counter, AAD
/// `0x11`. v2/v3 encryption is not supported. Unknown object types are skipped; a frame with
/// no decodable object is `unsupported`.
public struct MiBeacon: AdvertisementParser {
    public init() {}
    public var format: String { "mibeacon" }
    public var keys: [AdvertisementKey] { [.serviceData(0xFE95)] }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        var reader = ByteReader(payload, what: "MiBeacon")
        let control = try reader.u16le()
        let productID = try reader.u16le()
        let frameCounter = try reader.u8()
        let version = control >> 12
        var address = context.address
        var addressOctets: [UInt8]? = address.map { Array($0.octets.reversed()) }
        if control & 0x10 != 0 {
            let octets = try reader.bytes(6)
            addressOctets = octets
            address = BluetoothAddress(littleEndianOctets: octets)
        }
        if control & 0x20 != 0 {
            let capability = try reader.u8()
            if capability & 0x20 != 0 { try reader.skip(2) }
        }
        var readings: [Reading] = []
        if let address { readings.append(Reading("mac", string: address.description)) }
        guard control & 0x40 != 0 else {
            throw ParseError(
                .unsupported, "MiBeacon frame carries no object (product 0x\(String(productID, radix: 16)))")
        }
        let objects: [UInt8]
        var objectStart = reader.offset
        if control & 0x08 != 0 {
            guard version >= 4 else {
                throw ParseError(.unsupported, "MiBeacon v\(version) encryption is not supported")
            }
            guard let key = context.bindKey else {
                throw ParseError(.missingKey, "MiBeacon frame is encrypted; configure the device's bind key")
            }
            guard let mac = addressOctets else {
                throw ParseError(.missingKey, "MiBeacon decryption needs the device address")
            }
            guard reader.remaining >= 8 else {
                throw .tooShort("encrypted MiBeacon frame", need: reader.offset + 8, got: payload.count)
            }
            let end = payload.count
            let ciphertext = Array(payload[reader.offset..<(end - 7)])
            let extended = Array(payload[(end - 7)..<(end - 4)])
            let tag = Array(payload[(end - 4)...])
            let nonce =
                mac + [UInt8(truncatingIfNeeded: productID), UInt8(truncatingIfNeeded: productID >> 8), frameCounter]
                + extended
            guard let plain = AESCCM.decrypt(key: key, nonce: nonce, ciphertext: ciphertext, tag: tag, aad: [0x11])
            else {
                throw ParseError(.decryptionFailed, "MiBeacon MIC check failed (wrong bind key or address)")
            }
            objects = plain
            objectStart = 0
        } else {
            objects = payload
        }
        let before = readings.count
        var objectReader = ByteReader(objects, from: objectStart, what: "MiBeacon object")
        while objectReader.remaining >= 3 {
            let type = try objectReader.u16le()
            let length = Int(try objectReader.u8())
            guard objectReader.remaining >= length else { break }
            let start = objectReader.offset
            try objectReader.skip(length)
            try Self.object(type, objects, start: start, length: length, into: &readings)
        }
        guard readings.count > before else {
            throw ParseError(
                .unsupported, "MiBeacon object types of product 0x\(String(productID, radix: 16)) are not decoded")
        }
        return readings
    }

    /// Appends the readings of one object; unknown types append nothing.
    static func object(_ type: UInt16, _ bytes: [UInt8], start: Int, length: Int, into readings: inout [Reading])
        throws(ParseError)
    {
        var value = ByteReader(bytes, from: start, to: start + length, what: "MiBeacon object")
        func float32() throws(ParseError) -> Double {
            Double(Float(bitPattern: try value.u32le()))
        }
        switch type {
        case 0x000A: readings.append(Reading(.temperature, decimal(try value.s16le(), 2)))  // MMC-W505 body temperature
        case 0x1004: readings.append(Reading(.temperature, decimal(try value.s16le(), 1)))
        case 0x1006: readings.append(Reading(.humidity, decimal(try value.u16le(), 1)))
        case 0x100D:
            readings.append(Reading(.temperature, decimal(try value.s16le(), 1)))
            readings.append(Reading(.humidity, decimal(try value.u16le(), 1)))
        case 0x100A, 0x4803, 0x4C03: readings.append(Reading(.battery, Double(try value.u8())))
        case 0x1007: readings.append(Reading(.illuminance, Double(try value.u24le())))
        case 0x1008: readings.append(Reading(.moisture, Double(try value.u8())))
        case 0x1009: readings.append(Reading(.conductivity, Double(try value.u16le())))
        case 0x1010: readings.append(Reading(.formaldehyde, decimal(try value.u16le(), 2)))
        case 0x1013: readings.append(Reading(name: "consumable", value: .number(Double(try value.u8())), unit: "%"))
        case 0x1015: readings.append(Reading("smoke", bool: try value.u8() != 0, deviceClass: .smoke))
        case 0x1019:
            // 0 open, 1 closed, 2 not closed after timeout.
            readings.append(Reading("opening", bool: try value.u8() != 1, deviceClass: .opening))
        case 0x000F:
            readings.append(Reading("motion", bool: true, deviceClass: .motion))
            readings.append(Reading(.illuminance, Double(try value.u24le())))
        case 0x0003: readings.append(Reading("motion", bool: try value.u8() != 0, deviceClass: .motion))
        case 0x101B, 0x4818: readings.append(Reading("motion", bool: false, deviceClass: .motion))
        case 0x4801, 0x4C01: readings.append(Reading(.temperature, rounded(try float32(), 2)))
        case 0x4802, 0x4C02: readings.append(Reading(.humidity, Double(try value.u8())))
        case 0x4C08: readings.append(Reading(.humidity, rounded(try float32(), 2)))
        case 0x4804: readings.append(Reading("opening", bool: try value.u8() == 1, deviceClass: .opening))
        case 0x4805: readings.append(Reading(.illuminance, rounded(try float32(), 2)))
        case 0x4806: readings.append(Reading("moisture", bool: try value.u8() != 0, deviceClass: .moisture))
        case 0x483C, 0x484E: readings.append(Reading("occupancy", bool: try value.u8() != 0, deviceClass: .occupancy))
        case 0x4A08:
            readings.append(Reading("motion", bool: true, deviceClass: .motion))
            readings.append(Reading(.illuminance, rounded(try float32(), 2)))
        default: break
        }
    }
}
