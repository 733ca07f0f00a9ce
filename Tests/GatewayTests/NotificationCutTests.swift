import Bluetooth
import Parsers
import Testing

@testable import Gateway

@Suite("Notifications cut at the link's MTU − 3")
struct NotificationCutTests {
    static let short = ParseError(.tooShort, "field tail needs 25 bytes, got 20")
    static let wrongLength = ParseError(.length, "Temperature must be 2 bytes, got 20")

    @Test("exactly MTU − 3 bytes that the parser finds too short or of the wrong length: cut")
    func cut() {
        #expect(NotificationCut.isCut(length: 20, mtu: 23, error: Self.short))
        #expect(NotificationCut.isCut(length: 244, mtu: 247, error: Self.wrongLength))
        #expect(NotificationCut.isCut(length: 514, mtu: 517, error: Self.short))
        #expect(
            NotificationCut.isCut(length: 43, mtu: 48, error: Self.short),
            "MTU − 5: a Multiple Handle Value Notification, as bluetoothd 5.66 sends them to bluetoothd")
    }

    @Test("shorter than MTU − 3 (the device sent less), another parse error, or an impossible MTU: not cut")
    func notCut() {
        #expect(!NotificationCut.isCut(length: 19, mtu: 23, error: Self.short), "the device sent 19 bytes")
        #expect(!NotificationCut.isCut(length: 44, mtu: 48, error: Self.short), "neither MTU − 3 nor MTU − 5")
        #expect(!NotificationCut.isCut(length: 21, mtu: 23, error: Self.short), "more than a notification carries")
        #expect(!NotificationCut.isCut(length: 20, mtu: 23, error: ParseError(.malformed, "bad flags")))
        #expect(!NotificationCut.isCut(length: 20, mtu: 23, error: ParseError(.reservedValue, "0xFF")))
        #expect(!NotificationCut.isCut(length: 19, mtu: 22, error: Self.short), "below ATT's minimum MTU of 23")
        #expect(!NotificationCut.isCut(length: 0, mtu: 3, error: Self.short))
    }

    @Test("the warning names the device, the characteristic, the MTU and the length")
    func warning() {
        let text = NotificationCut.warning("lamp", BluetoothUUID(0xFF02), length: 20, mtu: 23, Self.short)
        #expect(text.contains("lamp: notification of FF02 cut to 20 bytes"), "\(text)")
        #expect(text.contains("by the link's ATT MTU of 23"), "\(text)")
        #expect(text.contains("MTU − 3 = 20") && text.contains("MTU − 5 = 18"), "\(text)")
        #expect(text.contains("dropped.notification_cut"), "\(text)")
    }
}
