import Bluetooth
import BluetoothManagement

extension FuzzTargets {
    /// One read of the kernel's Bluetooth management socket: whatever the kernel (or anything
    /// with CAP_NET_ADMIN beside it) sends, Device Found carrying any device's advertising data.
    ///
    /// Encoding: the bytes are the read. Properties: nothing traps; the packet decoder and the
    /// direct decoder (`decode(packetBytes:)`) agree; a decoded packet encodes back to the read; a
    /// decoded event encodes to a packet that decodes to the same event; the AD reader's output is
    /// no bigger than its input, and what AdvertisementBytes rebuilds from it reads back to a
    /// subset of it, after which the round trip is exact; Command Complete's parameters through
    /// every return-parameter decoder, whose output encodes and decodes to itself.
    static let managementEvent = FuzzTarget(
        name: "mgmt-event",
        summary: "reads of the kernel's management socket: packet, event, Device Found's AD data, return parameters",
        seeds: { ManagementSeeds.all },
        run: { bytes in
            let viaPacket: Result<ManagementEvent, ManagementDecodeError>
            switch Result(catching: { () throws(ManagementDecodeError) in try ManagementPacket.decode(bytes) }) {
            case .success(let packet):
                fuzzProperty(packet.bytes == bytes, "packet \(packet) encodes to other bytes than it was read from")
                viaPacket = Result { () throws(ManagementDecodeError) in try ManagementEvent.decode(packet) }
            case .failure(let error):
                viaPacket = .failure(error)
            }
            let direct = bytes.withUnsafeBytes { buffer in
                Result { () throws(ManagementDecodeError) in try ManagementEvent.decode(packetBytes: buffer) }
            }
            fuzzProperty(viaPacket == direct, "decoders disagree: \(viaPacket) against \(direct)")
            guard case .success(let event) = direct else { return }
            let again = Result { () throws(ManagementDecodeError) in
                try ManagementEvent.decode(ManagementPacket.decode(event.packet.bytes))
            }
            fuzzProperty(again == .success(event), "\(event) re-encoded decodes as \(again)")
            switch event {
            case .deviceFound(let found):
                checkAdvertisingData(found.data)
                _ = found.advertisementData
            case .commandComplete(_, _, _, let parameters):
                checkReturnParameters(parameters)
            case .deviceDisconnected(_, _, _, let reason):
                // An HCI code for every reason the protocol defines, and only for those.
                fuzzProperty((reason.hciCode != nil) == (1...5).contains(reason.rawValue), "reason \(reason.rawValue)")
            default:
                break
            }
        })

    static func checkAdvertisingData(_ data: [UInt8]) {
        let read = AdvertisementData(advertisingData: data)
        let payload =
            read.manufacturerData.values.reduce(0) { $0 + $1.count + 2 }
            + read.serviceData.values.reduce(0) { $0 + $1.count + 2 }
        fuzzProperty(payload <= data.count, "AD reader made \(payload) octets of data from \(data.count)")
        fuzzProperty(read.rssi == nil, "AD reader set an RSSI")
        let rebuilt = AdvertisementData(advertisingData: AdvertisementBytes.build(read))
        for (company, value) in rebuilt.manufacturerData {
            fuzzProperty(read.manufacturerData[company] == value, "rebuilt manufacturer data \(company) differs")
        }
        for (uuid, value) in rebuilt.serviceData {
            fuzzProperty(read.serviceData[uuid] == value, "rebuilt service data \(uuid) differs")
        }
        fuzzProperty(rebuilt.serviceUUIDs.allSatisfy(read.serviceUUIDs.contains), "rebuilt service UUIDs not a subset")
        fuzzProperty(rebuilt.txPower == nil || rebuilt.txPower == read.txPower, "rebuilt TX power differs")
        if let name = rebuilt.localName {
            fuzzProperty(read.localName?.utf8.starts(with: name.utf8) == true, "rebuilt name \(name) is not a prefix")
        }
        let twice = AdvertisementData(advertisingData: AdvertisementBytes.build(rebuilt))
        fuzzProperty(twice == rebuilt, "AD round trip not exact after one pass: \(rebuilt) then \(twice)")
    }

    static func checkReturnParameters(_ parameters: [UInt8]) {
        if let version = try? ManagementVersion.decode(parameters) {
            fuzzProperty((try? ManagementVersion.decode(version.parameters)) == version, "version round trip")
        }
        if let indexes = try? ManagementCommand.decodeIndexList(parameters) {
            fuzzProperty(indexes.count * 2 + 2 <= parameters.count, "index list longer than its octets")
            let again = try? ManagementCommand.decodeIndexList(ManagementCommand.encodeIndexList(indexes))
            fuzzProperty(again == indexes, "index list round trip")
        }
        if let info = try? ControllerInfo.decode(parameters) {
            // Invalid UTF-8 in a name reads as U+FFFD, which may not fit the field again: exact
            // from the second pass on.
            let second = try? ControllerInfo.decode(info.parameters)
            fuzzProperty(
                second?.address == info.address && second?.currentSettings == info.currentSettings,
                "controller info fields")
            if let second {
                fuzzProperty((try? ControllerInfo.decode(second.parameters)) == second, "controller info round trip")
            }
        }
    }
}

/// Seeds: one read of each event the codec decodes, built from the protocol's layouts.
enum ManagementSeeds {
    static var all: [[UInt8]] {
        let address = BluetoothAddress(rawValue: 0xA4C1_380B_1234)
        let bthome: [UInt8] = [0x02, 0x01, 0x06, 0x07, 0x16, 0xD2, 0xFC, 0x40, 0x02, 0x29, 0x09]
        let rich = AdvertisementBytes.build(
            AdvertisementData(
                localName: "Ruuvi 4A5F", serviceUUIDs: [BluetoothUUID(0x180F), BluetoothUUID(bits32: 0x1234_5678)],
                manufacturerData: [0x0499: [0x05, 0x12, 0xFC]], serviceData: [BluetoothUUID(0xFE95): [0x50, 0x20]],
                txPower: -4))
        let info = ControllerInfo(
            address: address, bluetoothVersion: 9, manufacturer: 2, supportedSettings: 0x1FEFF, currentSettings: 0x281,
            classOfDevice: 0x0C010C, name: "gattway", shortName: "gw")
        let events: [ManagementEvent] = [
            .deviceFound(
                DeviceFound(controller: 0, address: address, addressType: .lePublic, rssi: -60, flags: 4, data: bthome)),
            .deviceFound(
                DeviceFound(
                    controller: 1, address: address, addressType: .leRandom, rssi: 127, flags: 0x20, data: rich,
                    monitorHandle: 0)),
            .commandComplete(opcode: 0x0001, status: 0, controller: 0xFFFF, parameters: [0x01, 0x16, 0x00]),
            .commandComplete(
                opcode: 0x0003, status: 0, controller: 0xFFFF, parameters: ManagementCommand.encodeIndexList([0, 1])),
            .commandComplete(opcode: 0x0004, status: 0, controller: 0, parameters: info.parameters),
            .commandStatus(opcode: 0x0023, status: 0x0A, controller: 0),
            .controllerError(controller: 0, code: 1),
            .indexAdded(controller: 0), .indexRemoved(controller: 0),
            .newSettings(controller: 0, settings: 0x281),
            .discovering(controller: 0, addressType: 6, discovering: true),
            .deviceDisconnected(controller: 0, address: address, addressType: .lePublic, reason: .timeout),
            .other(code: 0x0008, controller: 0),
        ]
        return events.map(\.packet.bytes)
    }
}
