import Bluetooth

/// The encrypted custom beacon of pvvx's ATC_MiThermometer firmware (the bind key option on and
/// the pvvx "Custom" advertising type): service data 0x181A, 11 bytes — frame counter u8, 6
/// bytes AES-128-CCM ciphertext, 4-byte MIC (nonce and key in ``ATCEncryption``). Plaintext,
/// little-endian: temperature int16 × 0.01 °C, humidity u16 × 0.01 %, battery u8 %, flags u8 (the
/// plain format's flags: bit 0 reed switch, bit 1 GPIO_TRG output, bit 2 trigger on, bit 3/4
/// temperature/humidity trigger event). No MAC and no battery voltage, unlike the plain format;
/// the counter is published as `packet_id`. Source: pvvx/ATC_MiThermometer `src/custom_beacon.c`
/// (`pvvx_encrypt_data_beacon`), `custom_beacon.h` (`adv_cust_enc_t`, `adv_cust_data_t`),
/// `src/trigger.h` (the flag bits), `test_adv_cust.py`; bleparser 3.7.3 `atc.py` (15-byte AD
/// structure, "Custom encrypted").
public struct PVVXEncrypted: AdvertisementParser {
    public init() {}
    public var format: String { "pvvx_encrypted" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181A)] }
    /// The frame counter (the first byte, in clear; published as `packet_id`).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? { payload.first.map(UInt32.init) }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 11 else { return nil }
        let (counter, plaintext) = try ATCEncryption.open(payload, context: context, what: "pvvx encrypted")
        var reader = ByteReader(plaintext, what: "pvvx encrypted plaintext")
        let temperature = try reader.s16le()
        let humidity = try reader.u16le()
        let battery = try reader.u8()
        let flags = try reader.u8()
        return [
            Reading(.temperature, decimal(temperature, 2)),
            Reading(.humidity, decimal(humidity, 2)),
            Reading(.battery, Double(battery)),
            Reading("packet_id", Double(counter)),
            Reading("flags", Double(flags)),
        ]
    }
}
