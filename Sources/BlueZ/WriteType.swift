/// How a characteristic value is written (`CBCharacteristicWriteType`).
public enum WriteType: String, Sendable, Hashable {
    /// ATT Write Request (long write when longer than MTU − 3); the peripheral acknowledges.
    case withResponse
    /// ATT Write Command: no acknowledgement, at most MTU − 3 bytes.
    case withoutResponse
}
