import Bluetooth

/// The GATT messages of the Bluetooth proxy (api.proto: BluetoothGATT…): what a client asks of a
/// device the proxy is connected to, by ATT handle, and the answers. Served by ``APIServer`` with
/// its ``BluetoothProxyBackend`` (ProxyConnections.swift); without one each request is answered
/// with BluetoothGATTErrorResponse, not connected.
extension MessageType {
    public static let bluetoothGATTGetServicesRequest: UInt16 = 70
    public static let bluetoothGATTGetServicesResponse: UInt16 = 71
    public static let bluetoothGATTGetServicesDoneResponse: UInt16 = 72
    public static let bluetoothGATTReadRequest: UInt16 = 73
    public static let bluetoothGATTReadResponse: UInt16 = 74
    public static let bluetoothGATTWriteRequest: UInt16 = 75
    public static let bluetoothGATTReadDescriptorRequest: UInt16 = 76
    public static let bluetoothGATTWriteDescriptorRequest: UInt16 = 77
    public static let bluetoothGATTNotifyRequest: UInt16 = 78
    public static let bluetoothGATTNotifyDataResponse: UInt16 = 79
    public static let bluetoothGATTErrorResponse: UInt16 = 82
    public static let bluetoothGATTWriteResponse: UInt16 = 83
    public static let bluetoothGATTNotifyResponse: UInt16 = 84
}

/// A GATT request from a client.
public enum GATTRequest: Equatable, Sendable {
    case getServices(address: UInt64)
    case read(address: UInt64, handle: UInt16)
    case write(address: UInt64, handle: UInt16, withResponse: Bool, data: [UInt8])
    case readDescriptor(address: UInt64, handle: UInt16)
    case writeDescriptor(address: UInt64, handle: UInt16, data: [UInt8])
    case notify(address: UInt64, handle: UInt16, enable: Bool)

    public var address: UInt64 {
        switch self {
        case .getServices(let address), .read(let address, _), .write(let address, _, _, _),
            .readDescriptor(let address, _), .writeDescriptor(let address, _, _), .notify(let address, _, _):
            address
        }
    }

    /// The handle the request is about (0 for get services).
    public var handle: UInt16 {
        switch self {
        case .getServices: 0
        case .read(_, let handle), .write(_, let handle, _, _), .readDescriptor(_, let handle),
            .writeDescriptor(_, let handle, _), .notify(_, let handle, _):
            handle
        }
    }

    static let types: Set<UInt16> = [70, 73, 75, 76, 77, 78]

    /// Decodes a request of type `type` (one of ``types``). A handle above 65535 (ATT handles are
    /// 16-bit) refuses the message.
    static func decode(type: UInt16, payload: ArraySlice<UInt8>) throws(ProtobufError) -> GATTRequest {
        var reader = ProtobufReader(payload)
        var address: UInt64 = 0
        var handle: UInt16 = 0
        var flag = false
        var data: [UInt8] = []
        // Field numbers: address 1, handle 2; write: response 3, data 4; write descriptor: data 3;
        // notify: enable 3.
        while let (field, value) = try reader.next() {
            switch field {
            case 1:
                address = try value.varint(field: field)
            case 2:
                guard let narrow = UInt16(exactly: try value.varint(field: field)) else {
                    throw .valueOutOfRange(field: field)
                }
                handle = narrow
            case 3 where type == MessageType.bluetoothGATTWriteDescriptorRequest:
                data = Array(try value.bytes(field: field))
            case 3
            where type == MessageType.bluetoothGATTWriteRequest || type == MessageType.bluetoothGATTNotifyRequest:
                flag = try value.bool(field: field)
            case 4 where type == MessageType.bluetoothGATTWriteRequest:
                data = Array(try value.bytes(field: field))
            default:
                break
            }
        }
        switch type {
        case MessageType.bluetoothGATTGetServicesRequest: return .getServices(address: address)
        case MessageType.bluetoothGATTReadRequest: return .read(address: address, handle: handle)
        case MessageType.bluetoothGATTWriteRequest:
            return .write(address: address, handle: handle, withResponse: flag, data: data)
        case MessageType.bluetoothGATTReadDescriptorRequest: return .readDescriptor(address: address, handle: handle)
        case MessageType.bluetoothGATTWriteDescriptorRequest:
            return .writeDescriptor(address: address, handle: handle, data: data)
        default: return .notify(address: address, handle: handle, enable: flag)
        }
    }
}

/// One service of a BluetoothGATTGetServicesResponse, with its characteristics and descriptors.
public struct GATTServiceInfo: Equatable, Sendable {
    public var uuid: BluetoothUUID
    public var handle: UInt16
    public var characteristics: [GATTCharacteristicInfo]

    public init(uuid: BluetoothUUID, handle: UInt16, characteristics: [GATTCharacteristicInfo]) {
        self.uuid = uuid
        self.handle = handle
        self.characteristics = characteristics
    }
}

public struct GATTCharacteristicInfo: Equatable, Sendable {
    public var uuid: BluetoothUUID
    public var handle: UInt16
    /// The characteristic properties byte (broadcast 0x01, read 0x02, write without response
    /// 0x04, write 0x08, notify 0x10, indicate 0x20, …).
    public var properties: UInt32
    public var descriptors: [(uuid: BluetoothUUID, handle: UInt16)]

    public init(
        uuid: BluetoothUUID, handle: UInt16, properties: UInt32, descriptors: [(uuid: BluetoothUUID, handle: UInt16)]
    ) {
        self.uuid = uuid
        self.handle = handle
        self.properties = properties
        self.descriptors = descriptors
    }

    public static func == (lhs: GATTCharacteristicInfo, rhs: GATTCharacteristicInfo) -> Bool {
        lhs.uuid == rhs.uuid && lhs.handle == rhs.handle && lhs.properties == rhs.properties
            && lhs.descriptors.map(\.uuid) == rhs.descriptors.map(\.uuid)
            && lhs.descriptors.map(\.handle) == rhs.descriptors.map(\.handle)
    }
}

extension ServerMessage {
    /// The UUID of a service, characteristic or descriptor is either `uuid` (field 1: two uint64,
    /// the high half first) or `short_uuid` (the message's last field) for a SIG-based UUID when
    /// the client speaks API 1.12 or later. Fields are written in field-number order, as protobuf
    /// encoders do.
    static func longUUID(_ uuid: BluetoothUUID, short: Bool, to writer: inout ProtobufWriter) {
        guard !short || uuid.uint32 == nil else { return }
        var packed: [UInt8] = []
        Protobuf.appendVarint(uuid.high, to: &packed)
        Protobuf.appendVarint(uuid.low, to: &packed)
        writer.bytes(1, packed)
    }

    static func shortUUID(_ uuid: BluetoothUUID, field: UInt32, short: Bool, to writer: inout ProtobufWriter) {
        guard short, let value = uuid.uint32 else { return }
        writer.uint32(field, value, always: true)
    }

    /// BluetoothGATTGetServicesResponse: the services of `address`; `shortUUIDs` for clients of
    /// API 1.12 or later. A device with many services is sent in several of these (the caller
    /// splits), then ``gattServicesDone(address:)``.
    public static func gattServices(address: UInt64, services: [GATTServiceInfo], shortUUIDs: Bool) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        for service in services {
            var entry = ProtobufWriter()
            longUUID(service.uuid, short: shortUUIDs, to: &entry)
            entry.uint32(2, UInt32(service.handle))
            for characteristic in service.characteristics {
                var item = ProtobufWriter()
                longUUID(characteristic.uuid, short: shortUUIDs, to: &item)
                item.uint32(2, UInt32(characteristic.handle))
                item.uint32(3, characteristic.properties)
                for descriptor in characteristic.descriptors {
                    var inner = ProtobufWriter()
                    longUUID(descriptor.uuid, short: shortUUIDs, to: &inner)
                    inner.uint32(2, UInt32(descriptor.handle))
                    shortUUID(descriptor.uuid, field: 3, short: shortUUIDs, to: &inner)
                    item.message(4, inner, always: true)
                }
                shortUUID(characteristic.uuid, field: 5, short: shortUUIDs, to: &item)
                entry.message(3, item, always: true)
            }
            shortUUID(service.uuid, field: 4, short: shortUUIDs, to: &entry)
            writer.message(2, entry, always: true)
        }
        return ServerMessage(type: MessageType.bluetoothGATTGetServicesResponse, payload: writer.bytes)
    }

    public static func gattServicesDone(address: UInt64) -> ServerMessage {
        addressAndHandle(MessageType.bluetoothGATTGetServicesDoneResponse, address, nil)
    }

    public static func gattRead(address: UInt64, handle: UInt16, data: [UInt8]) -> ServerMessage {
        addressHandleAndData(MessageType.bluetoothGATTReadResponse, address, handle, data)
    }

    public static func gattNotifyData(address: UInt64, handle: UInt16, data: [UInt8]) -> ServerMessage {
        addressHandleAndData(MessageType.bluetoothGATTNotifyDataResponse, address, handle, data)
    }

    /// A value message (read answer, notification): address, handle, then the bytes as field 3.
    private static func addressHandleAndData(_ type: UInt16, _ address: UInt64, _ handle: UInt16, _ data: [UInt8])
        -> ServerMessage
    {
        var message = addressAndHandle(type, address, handle)
        var writer = ProtobufWriter()
        writer.bytes(3, data)
        message.payload += writer.bytes
        return message
    }

    public static func gattWriteDone(address: UInt64, handle: UInt16) -> ServerMessage {
        addressAndHandle(MessageType.bluetoothGATTWriteResponse, address, handle)
    }

    public static func gattNotifyDone(address: UInt64, handle: UInt16) -> ServerMessage {
        addressAndHandle(MessageType.bluetoothGATTNotifyResponse, address, handle)
    }

    /// BluetoothGATTErrorResponse: `error` as ESPHome reports it (an ATT error code, or -1 for a
    /// device the proxy is not connected to).
    public static func gattError(address: UInt64, handle: UInt16, error: Int32) -> ServerMessage {
        var message = addressAndHandle(MessageType.bluetoothGATTErrorResponse, address, handle)
        var writer = ProtobufWriter()
        writer.int32(3, error)
        message.payload += writer.bytes
        return message
    }

    private static func addressAndHandle(_ type: UInt16, _ address: UInt64, _ handle: UInt16?) -> ServerMessage {
        var writer = ProtobufWriter()
        writer.varint(1, address)
        if let handle { writer.uint32(2, UInt32(handle)) }
        return ServerMessage(type: type, payload: writer.bytes)
    }
}
