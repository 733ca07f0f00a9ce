import Bluetooth
import Parsers
import Testing

/// The advertisement fields of `gattway decode`'s input lines (``VectorLineDecoder/parse(_:)``).
@Suite("Decode input lines")
struct VectorLineInputTests {
    @Test("manufacturer_data and service_data are read into the advertisement, keyed by company id and UUID")
    func dataObjects() {
        let input: [String: Any] = [
            "manufacturer_data": ["76": "0102"] as [String: Any],
            "service_data": ["181a": "ff", "fcd2": ""] as [String: Any],
        ]
        guard case .success(.advertisement(let context)) = VectorLineDecoder.parse(input) else {
            Issue.record("\(VectorLineDecoder.parse(input))")
            return
        }
        #expect(context.advertisement.manufacturerData == [76: [1, 2]])
        #expect(context.advertisement.serviceData == [BluetoothUUID(0x181A): [0xFF], BluetoothUUID(0xFCD2): []])
    }

    @Test(
        "a bad key or value in either object is an error naming the field and the key",
        arguments: [
            (
                #"{"manufacturer_data": {"70000": "01"}}"#,
                #"manufacturer_data: key \"70000\" is not a decimal company id (0-65535)"#
            ),
            (#"{"manufacturer_data": {"76": "012"}}"#, "manufacturer_data.76: expected an even-length hex string"),
            (#"{"service_data": {"xyz": "01"}}"#, #"service_data: key \"xyz\" is not a UUID"#),
            (#"{"service_data": {"181a": 1}}"#, "service_data.181a: expected an even-length hex string"),
        ])
    func badMembers(line: String, message: String) {
        let output = VectorLineDecoder().decode(line: line)
        #expect(output.contains(message), "\(output)")
    }
}
