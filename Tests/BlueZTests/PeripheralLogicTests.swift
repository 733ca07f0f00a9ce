import BlueZSimulator
import Bluetooth
import DBus
import Testing

@testable import BlueZ

/// The peripheral manager's pure rules: legacy advertising length, ATT error ↔ BlueZ error
/// mapping, flags from properties and permissions, request options, tree validation.
@Suite("PeripheralManager logic")
struct PeripheralLogicTests {
    // MARK: Advertising payload

    @Test("legacy payload length counts flags, UUID lists by width, data, name, appearance and tx power")
    func payloadLength() throws {
        // flags 3 + 16-bit list (2 UUIDs) 2+4 + manufacturer 2+2+3 + service data 180F 2+2+1 + name 2+6 = 29
        let advertisement = Advertisement(
            localName: "gattwy", serviceUUIDs: [BluetoothUUID(0x180F), BluetoothUUID(0x181A)],
            manufacturerData: [0xFFFF: [1, 2, 3]], serviceData: [BluetoothUUID(0x180F): [0x64]])
        #expect(advertisement.legacyPayloadLength == 29)
        try advertisement.checkLegacyLength()
        // A broadcast carries no flags; appearance 4, tx power 3.
        let beacon = Advertisement(
            kind: .broadcast, manufacturerData: [0x004C: Array(repeating: 0, count: 23)], txPower: -8)
        #expect(beacon.legacyPayloadLength == 4 + 23 + 3)
        #expect(Advertisement(kind: .broadcast, appearance: 0x0340).legacyPayloadLength == 4)
        // One 128-bit UUID: 2 + 16.
        let custom = try #require(BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e"))
        #expect(Advertisement(serviceUUIDs: [custom]).legacyPayloadLength == 3 + 18)
        // Service data keyed by a 128-bit UUID carries the whole UUID.
        #expect(Advertisement(kind: .broadcast, serviceData: [custom: [1]]).legacyPayloadLength == 2 + 16 + 1)
        // Solicited UUIDs: their own AD structures per width (0x14, 0x15), after the service UUIDs.
        let soliciting = Advertisement(
            serviceUUIDs: [BluetoothUUID(0x180F)], solicitUUIDs: [BluetoothUUID(0x1805), BluetoothUUID(0x180A), custom])
        #expect(soliciting.legacyPayloadLength == 3 + 4 + (2 + 4) + 18)
        #expect(
            soliciting.legacyFields.map(\.name) == [
                "flags", "16-bit service UUIDs (1)", "16-bit solicited UUIDs (2)", "128-bit solicited UUIDs (1)",
            ])
        #expect(
            soliciting.bluezProperties.first { $0.0 == "SolicitUUIDs" }?.1
                == .strings([
                    "00001805-0000-1000-8000-00805f9b34fb", "0000180a-0000-1000-8000-00805f9b34fb",
                    custom.description.lowercased(),
                ]))
        #expect(Advertisement().bluezProperties.first { $0.0 == "SolicitUUIDs" }?.1 == nil, "absent when empty")
    }

    @Test("an advertisement over 31 bytes is refused before BlueZ sees it, naming the size and what to drop")
    func payloadOverflow() throws {
        let custom = try #require(BluetoothUUID("6e400001-b5a3-f393-e0a9-e50e24dcca9e"))
        // flags 3 + 128-bit list 18 + name "Kitchen sensor" 16 = 37
        let advertisement = Advertisement(localName: "Kitchen sensor", serviceUUIDs: [custom])
        #expect(advertisement.legacyPayloadLength == 37)
        let error = try #require(throws: PeripheralError.self) { try advertisement.checkLegacyLength() }
        #expect(error.code == .advertisementTooLarge)
        #expect(error.message.hasPrefix("advertisement needs 37 bytes, legacy limit is 31"))
        #expect(error.message.contains("6 bytes too many"))
        #expect(error.message.contains("shorten the local name by 6 bytes"))
        #expect(error.message.contains("drop the 128-bit service UUIDs (1)"))
        // Exactly 31 is fine.
        let fits = Advertisement(localName: String(repeating: "x", count: 8), serviceUUIDs: [custom])
        #expect(fits.legacyPayloadLength == 31)
        try fits.checkLegacyLength()
    }

    @Test("advertisement properties are BlueZ's LEAdvertisement1 types, absent fields omitted")
    func advertisementProperties() {
        let properties = Dictionary(
            Advertisement(kind: .broadcast, serviceData: [BluetoothUUID(0xFCD2): [0x40]], txPower: 4).bluezProperties,
            uniquingKeysWith: { a, _ in a })
        #expect(properties["Type"] == .some(.string("broadcast")))
        #expect(properties["LocalName"] == .some(nil))
        #expect(properties["TxPower"] == .some(.int16(4)))
        #expect(properties["Includes"] == .some(.strings(["tx-power"])))
        let serviceData = properties["ServiceData"]??.entries?.first
        #expect(serviceData?.key == .string("0000fcd2-0000-1000-8000-00805f9b34fb"))
        #expect(serviceData?.value == .variant(.bytes([0x40])))
        for (name, type) in Advertisement.propertyTypes {
            if let value = properties[name] ?? nil { #expect(value.type == type, "\(name)") }
        }
    }

    // MARK: ATT errors

    @Test("each ATT error becomes the org.bluez.Error bluetoothd maps back to that code (docs/bluez.md §5.2)")
    func attErrorMapping() {
        let expected: [(ATTError, String, UInt8)] = [
            (.readNotPermitted, "org.bluez.Error.NotPermitted", 0x02),
            (.writeNotPermitted, "org.bluez.Error.NotPermitted", 0x03),
            (.requestNotSupported, "org.bluez.Error.NotSupported", 0x06),
            (.invalidOffset, "org.bluez.Error.InvalidOffset", 0x07),
            (.insufficientAuthorization, "org.bluez.Error.NotAuthorized", 0x08),
            (.invalidAttributeValueLength, "org.bluez.Error.InvalidValueLength", 0x0D),
            (.unlikelyError, "org.bluez.Error.Failed", 0x0E),
            (.cccdImproperlyConfigured, "org.bluez.Error.ImproperlyConfigured", 0xFD),
        ]
        for (error, name, code) in expected {
            #expect(error.bluezError.name.rawValue == name, "\(error)")
            #expect(error.code == code)
            #expect(ATTError(code: code) == error)
        }
        // Application codes travel as Failed with the number as the message.
        #expect(ATTError.application(0x80).bluezError == DBusError("org.bluez.Error.Failed", "0x80"))
        #expect(ATTError.application(0x9f).bluezError.message == "0x9f")
        #expect(ATTError(code: 0x85) == .application(0x85))
        // Outside 0x80…0x9F an "application" code is what bluetoothd would make of it: 0x0E.
        #expect(ATTError.application(0x42).code == 0x0E)
        #expect(ATTError(code: 0x05) == nil)
    }

    @Test(
        "bluetoothd 5.66, as the simulator models it, answers each ATT error's D-Bus error with that code (docs/bluez.md §5.2)"
    )
    func attErrorsThroughBlueZ() {
        // `Failed` with text that is not a number would be 0x80, not 0x0E.
        let errors: [ATTError] = [
            .readNotPermitted, .writeNotPermitted, .requestNotSupported, .invalidOffset, .insufficientAuthorization,
            .invalidAttributeValueLength, .unlikelyError, .application(0x80), .application(0x9F), .application(0x42),
        ]
        for error in errors {
            #expect(
                attError(fromApplication: error.bluezError, write: error == .writeNotPermitted) == error.code,
                "\(error)")
        }
        // ImproperlyConfigured is 0xFD only from BlueZ 5.76; 5.66 answers 0x0E.
        #expect(attError(fromApplication: ATTError.cccdImproperlyConfigured.bluezError, write: false) == 0x0E)
    }

    @Test(
        "request offsets and lengths outside ATT's 512-byte values are refused",
        arguments: [
            (0, 0, nil), (0, 512, nil), (511, 1, nil), (512, 0, nil),
            (-1, 0, ATTError.invalidOffset), (513, 0, .invalidOffset), (Int.max, 1, .invalidOffset),
            (Int.min, 0, .invalidOffset),
            (0, 513, .invalidAttributeValueLength), (500, 13, .invalidAttributeValueLength),
        ])
    func requestBounds(offset: Int, length: Int, refusal: ATTError?) {
        #expect(PeripheralManager.refusal(offset: offset, length: length) == refusal)
    }

    @Test(
        "the errors both roles read alike get the same code in both, with the same text; the others differ by role",
        arguments: [
            ("org.bluez.Error.NotSupported", "Operation is not supported", "operationNotSupported"),
            ("org.bluez.Error.NotReady", "Resource Not Ready", "poweredOff"),
            ("org.freedesktop.DBus.Error.ServiceUnknown", "The name org.bluez was not provided", "bluezUnavailable"),
            ("org.freedesktop.DBus.Error.NameHasNoOwner", "no owner", "bluezUnavailable"),
            ("org.freedesktop.DBus.Error.Disconnected", "gone", "bluezUnavailable"),
            ("org.freedesktop.DBus.Error.NoReply", "Did not receive a reply", "bluezUnavailable"),
            ("org.freedesktop.DBus.Error.AccessDenied", "Rejected send message", "unauthorized"),
            ("org.bluez.Error.Failed", "something else", "failed"),
            ("org.example.Error.Unheard", "x", "failed"),
        ])
    func sharedErrorMapping(name: String, message: String, code: String) {
        let operation = "org.bluez.GattManager1.RegisterApplication"
        let central = CentralError(DBusError(DBusError.Name(name), message), operation: operation)
        let peripheral = PeripheralError(DBusError(DBusError.Name(name), message), operation: operation)
        #expect(central.code.rawValue == code)
        #expect(peripheral.code.rawValue == code)
        #expect(central.description == "\(operation) failed: \(name): \(message)")
        #expect(peripheral.description == central.description)
    }

    @Test("any error wraps the same way in both roles: cancellation is cancelled, the rest failed with its text")
    func wrapping() {
        #expect(
            CentralError.wrap(CancellationError(), operation: "scan").description
                == "scan failed: cancelled (cancelled)")
        #expect(
            PeripheralError.wrap(CancellationError(), operation: "scan").description
                == "scan failed: cancelled (cancelled)")
        let refused = DBusError("org.bluez.Error.NotPermitted", "Read not permitted")
        #expect(CentralError.wrap(refused, operation: "read").code == .notPermitted)
        #expect(PeripheralError.wrap(refused, operation: "read").code == .failed)
        let own = PeripheralError(.unknownAttribute, operation: "notify", message: "not published")
        #expect(PeripheralError.wrap(own, operation: "other") == own)
    }

    @Test("BlueZ registration errors get Core Bluetooth meanings")
    func peripheralErrorMapping() {
        let register = "org.bluez.GattManager1.RegisterApplication"
        let advertise = "org.bluez.LEAdvertisingManager1.RegisterAdvertisement"
        #expect(
            PeripheralError(DBusError("org.bluez.Error.Failed", "No valid service object found"), operation: register)
                .code == .invalidService)
        #expect(
            PeripheralError(DBusError("org.bluez.Error.AlreadyExists", "Already Exists"), operation: register).code
                == .alreadyExists)
        #expect(
            PeripheralError(DBusError("org.bluez.Error.Failed", "Failed to parse advertisement."), operation: advertise)
                .code == .invalidAdvertisement)
        #expect(
            PeripheralError(DBusError("org.bluez.Error.InvalidArguments", "x"), operation: advertise).code
                == .invalidAdvertisement)
        #expect(
            PeripheralError(
                DBusError("org.bluez.Error.NotPermitted", "Maximum advertisements reached"), operation: advertise
            ).code == .tooManyAdvertisements)
        #expect(PeripheralError(DBusError(.unknownMethod, "no"), operation: advertise).code == .operationNotSupported)
        #expect(PeripheralError(DBusError(.serviceUnknown, "gone"), operation: register).code == .bluezUnavailable)
        let error = PeripheralError(
            DBusError("org.bluez.Error.Failed", "No valid service object found"), operation: register)
        #expect(
            error.description
                == "org.bluez.GattManager1.RegisterApplication failed: org.bluez.Error.Failed: No valid service object found"
        )
    }

    // MARK: Flags and validation

    @Test("flags: properties first, then encryption flags only for operations the characteristic has")
    func flags() {
        let readWrite = MutableCharacteristic(
            uuid: BluetoothUUID(0xFF01), properties: [.read, .write, .notify],
            permissions: [.readEncryptionRequired, .writeEncryptionRequired])
        #expect(readWrite.bluezFlags == ["read", "write", "notify", "encrypt-read", "encrypt-write"])
        let readOnly = MutableCharacteristic(
            uuid: BluetoothUUID(0xFF02), properties: [.read],
            permissions: [.readEncryptionRequired, .writeEncryptionRequired])
        #expect(readOnly.bluezFlags == ["read", "encrypt-read"])
        let command = MutableCharacteristic(
            uuid: BluetoothUUID(0xFF03), properties: [.writeWithoutResponse],
            permissions: [.writeAuthenticationRequired])
        #expect(command.bluezFlags == ["write-without-response", "encrypt-authenticated-write"])
        #expect(MutableCharacteristic(uuid: BluetoothUUID(0xFF04), properties: [.indicate]).bluezFlags == ["indicate"])
    }

    @Test("trees bluetoothd would refuse are caught first with a message naming the attribute")
    func validation() {
        let ok = MutableService(
            uuid: BluetoothUUID(0x180F),
            characteristics: [
                MutableCharacteristic(
                    uuid: BluetoothUUID(0x2A19), properties: [.read, .notify], value: [94],
                    descriptors: [.userDescription("Level")])
            ])
        #expect(ok.problem == nil)
        #expect(
            MutableService(uuid: BluetoothUUID(0x1800), characteristics: ok.characteristics).problem?.contains(
                "reserved") == true)
        #expect(
            MutableService(uuid: BluetoothUUID(0x180F), characteristics: []).problem?.contains("no characteristics")
                == true)
        let cccd = MutableService(
            uuid: BluetoothUUID(0x180F),
            characteristics: [
                MutableCharacteristic(
                    uuid: BluetoothUUID(0x2A19), properties: [.notify],
                    descriptors: [MutableDescriptor(uuid: BluetoothUUID(0x2902), value: [1, 0])])
            ])
        #expect(cccd.problem?.contains("2902") == true)
        let none = MutableService(
            uuid: BluetoothUUID(0x180F),
            characteristics: [MutableCharacteristic(uuid: BluetoothUUID(0x2A19), properties: [])])
        #expect(none.problem?.contains("no properties") == true)
        let long = MutableService(
            uuid: BluetoothUUID(0x180F),
            characteristics: [
                MutableCharacteristic(
                    uuid: BluetoothUUID(0x2A19), properties: [.read], value: Array(repeating: 0, count: 513))
            ])
        #expect(long.problem?.contains("512") == true)
    }

    // MARK: Requests

    @Test("request options: the central from the device path, offset, MTU, link; unknown keys ignored")
    func requestContext() {
        let options = DBusValue.variantDictionary([
            "device": .objectPath("/org/bluez/hci1/dev_00_AA_01_00_00_00"), "mtu": .uint16(185), "link": .string("LE"),
            "offset": .uint16(22), "prepare-authorize": .boolean(false), "future": .string("x"),
        ])
        let context = RequestContext(options: options)
        #expect(context.central?.address == BluetoothAddress("00:AA:01:00:00:00"))
        #expect(context.offset == 22)
        #expect(context.mtu == 185)
        #expect(context.link == .le)
        let bare = RequestContext(options: .variantDictionary([String: DBusValue]()))
        #expect(bare.central == nil && bare.offset == 0 && bare.mtu == nil && bare.link == nil)
        #expect(Central(devicePath: "/org/bluez/hci0/service0001") == nil)
    }

    @Test("whether a write waits for the app: BlueZ's type when sent, else write-without-response means no")
    func writeResponse() {
        #expect(PeripheralManager.expectsResponse(type: nil, properties: [.write], noReplyExpected: false))
        #expect(
            !PeripheralManager.expectsResponse(type: nil, properties: [.writeWithoutResponse], noReplyExpected: false))
        #expect(
            !PeripheralManager.expectsResponse(
                type: nil, properties: [.write, .writeWithoutResponse], noReplyExpected: false))
        #expect(
            PeripheralManager.expectsResponse(
                type: "request", properties: [.write, .writeWithoutResponse], noReplyExpected: false))
        #expect(!PeripheralManager.expectsResponse(type: "command", properties: [.write], noReplyExpected: false))
        #expect(!PeripheralManager.expectsResponse(type: "request", properties: [.write], noReplyExpected: true))
    }
}
