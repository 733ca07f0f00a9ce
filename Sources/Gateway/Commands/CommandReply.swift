import Bluetooth
import JSON

/// Where and how a command's single response is published.
struct CommandReply: Sendable {
    enum Status: String, Sendable {
        case ok, error, timeout, expired
    }

    /// `<base>/<device>/response`, `<base>/bridge/response/<verb>` or the MQTT 5 response topic.
    var topic: String
    var correlationData: [UInt8]?
    /// The `transaction` of the request, echoed as given (string or number); null when absent.
    var transaction: JSONValue?

    /// `{"transaction":…,"status":…,"error":…,"timing_ms":{"queued":…,"connect":…,"gatt":…}}`
    /// plus `data` for raw reads, and `att_error` ("0x80") when the device answered a GATT
    /// operation with an ATT error.
    func payload(
        _ status: Status, error: String?, timing: Timing, data: JSONValue? = nil, attError: UInt8? = nil
    ) -> JSONValue {
        var members: [(key: String, value: JSONValue)] = [
            ("transaction", transaction ?? .null),
            ("status", .string(status.rawValue)),
            ("error", error.map { .string($0) } ?? .null),
            (
                "timing_ms",
                .object([
                    ("queued", .number(timing.queued.milliseconds)),
                    ("connect", .number(timing.connect.milliseconds)),
                    ("gatt", .number(timing.gatt.milliseconds)),
                ])
            ),
        ]
        if let attError { members.append(("att_error", .string("0x" + Hex.encode([attError])))) }
        if let data { members.append(("data", data)) }
        return .object(members)
    }

    /// Seconds spent per stage.
    struct Timing: Sendable {
        var queued: Double = 0
        var connect: Double = 0
        var gatt: Double = 0
    }
}

extension Double {
    /// Seconds as whole milliseconds.
    var milliseconds: Double { (self * 1000).rounded() }
}
