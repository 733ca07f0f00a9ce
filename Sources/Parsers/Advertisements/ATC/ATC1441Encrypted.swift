import Bluetooth

/// The encrypted "ATC" beacon of pvvx's ATC_MiThermometer firmware (LYWSD03MMC, MHO-C401, CGG1,
/// CGDK2, MJWSD05MMC, … with the bind key option on and the atc1441 advertising type): service
/// data 0x181A, 8 bytes — frame counter u8, 3 bytes AES-128-CCM ciphertext, 4-byte MIC (nonce and
/// key in ``ATCEncryption``). Plaintext: temperature u8 in 0.5 °C steps from −40 °C (°C = raw / 2
/// − 40), humidity u8 in 0.5 % steps (% = raw / 2), battery: bits 0–6 level %, bit 7 the
/// firmware's `trigger_on` flag (the GPIO_TRG output follows the temperature/humidity thresholds;
/// bit 2 of the pvvx flags). The counter is published as `packet_id`, as in the plain format.
/// Source: pvvx/ATC_MiThermometer `src/custom_beacon.c` (`atc_encrypt_data_beacon`),
/// `custom_beacon.h` (`adv_atc_enc_t`, `adv_atc_data_t`), `test_adv_cust.py`; bleparser 3.7.3
/// `atc.py` (12-byte AD structure, "Atc1441 encrypted").
public struct ATC1441Encrypted: AdvertisementParser {
    public init() {}
    public var format: String { "atc1441_encrypted" }
    public var keys: [AdvertisementKey] { [.serviceData(0x181A)] }
    /// The frame counter (the first byte, in clear; published as `packet_id`).
    public func frameCounter(_ payload: [UInt8], readings: [Reading]) -> UInt32? { payload.first.map(UInt32.init) }

    public func decode(_ payload: [UInt8], key: AdvertisementKey, context: AdvertisementContext)
        throws(ParseError) -> [Reading]?
    {
        guard payload.count == 8 else { return nil }
        let (counter, plaintext) = try ATCEncryption.open(payload, context: context, what: "ATC encrypted")
        var reader = ByteReader(plaintext, what: "ATC encrypted plaintext")
        let temperature = try reader.u8()
        let humidity = try reader.u8()
        let battery = try reader.u8()
        return [
            Reading(.temperature, Double(Int(temperature) - 80) * 0.5),
            Reading(.humidity, Double(humidity) * 0.5),
            Reading(.battery, Double(battery & 0x7F)),
            Reading("trigger", bool: battery & 0x80 != 0),
            Reading("packet_id", Double(counter)),
        ]
    }
}
