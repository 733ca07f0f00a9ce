import Bluetooth
import DBus

/// What the central keeps of one `org.bluez.Device1`, in one heap block per device.
///
/// With a thousand advertising devices the generic ``PropertyList`` cost over 500 bytes each
/// (ten named `DBusValue`s, the address and UUIDs as strings, a byte array per data entry). Here
/// the scalar properties are typed fields of the block's header and the advertisement payload —
/// `UUIDs`, `ManufacturerData` and `ServiceData` — is encoded into its tail (see ``Payload``), so
/// a device is one allocation of typically 80–96 bytes. Values are converted on arrival exactly
/// as the readers converted them before (an `Address` that does not parse reads as none, an
/// `RSSI` of another type is present but has no value, a UUID string that does not parse is
/// skipped…), so what the central reads is unchanged. The path is not stored here: the
/// ``DeviceTable`` derives it from its key.
///
/// A value type: the block is copied before a write when it is shared (it never is while it sits
/// in the tree, so an `RSSI` or a same-length `ServiceData` change writes in place).
package struct DeviceObject {
    /// The kept properties, by the name BlueZ gives them.
    package static let keys = [
        "Address", "AddressType", "Name", "Connected", "ServicesResolved", "UUIDs", "ManufacturerData", "ServiceData",
        "TxPower", "RSSI",
    ]

    struct Header {
        var name: String?
        /// Bits 0-47: `Address`; bits 48-63: ``Flags``.
        var addressAndFlags: UInt64 = 0
        /// `RSSI` clamped to 16 bits (valid with ``Flags/rssiIsInteger``).
        var rssi: Int16 = 0
        /// `TxPower` clamped to 16 bits (valid with ``Flags/hasTxPower``).
        var txPower: Int16 = 0
        /// Bytes of encoded payload in the tail.
        var payloadCount: UInt32 = 0
    }

    struct Flags: OptionSet {
        let rawValue: UInt16
        /// `Address` is present and parses.
        static let hasAddress = Flags(rawValue: 1 << 0)
        static let publicAddress = Flags(rawValue: 1 << 1)
        static let randomAddress = Flags(rawValue: 1 << 2)
        static let connected = Flags(rawValue: 1 << 3)
        static let servicesResolved = Flags(rawValue: 1 << 4)
        /// `RSSI` is present (whatever its type: its presence says discovery sees the device).
        static let hasRSSI = Flags(rawValue: 1 << 5)
        /// … and it is an integer (in ``Header/rssi``).
        static let rssiIsInteger = Flags(rawValue: 1 << 6)
        /// `TxPower` is present and an integer (in ``Header/txPower``).
        static let hasTxPower = Flags(rawValue: 1 << 7)
    }

    final class Storage: ManagedBuffer<Header, UInt8> {
        static func make(_ header: Header, capacity: Int) -> Storage {
            var header = header
            header.payloadCount = 0
            return unsafeDowncast(create(minimumCapacity: capacity) { _ in header }, to: Storage.self)
        }
    }

    private var storage: Storage

    /// The entries of an `a{sv}` (`InterfacesAdded`, `GetManagedObjects`); the kept ones are
    /// applied in order (a repeated name: the last wins).
    init(_ entries: [DBusDictionaryEntry]) {
        var header = Header()
        var sections = Payload.Replacement()
        for entry in entries {
            guard let name = entry.key.string else { continue }
            if let section = Payload.Section(name) {
                sections[section] = entry.value
            } else {
                Self.apply(name, entry.value, to: &header)
            }
        }
        storage = Storage.make(header, capacity: 0)
        if !sections.isEmpty { replacePayload(sections) }
    }

    // MARK: Reading

    private var flags: Flags { Flags(rawValue: UInt16(truncatingIfNeeded: storage.header.addressAndFlags >> 48)) }

    package var address: BluetoothAddress? {
        flags.contains(.hasAddress) ? BluetoothAddress(rawValue: storage.header.addressAndFlags) : nil
    }

    package var addressType: BluetoothAddress.AddressType? {
        let flags = flags
        if flags.contains(.publicAddress) { return .public }
        if flags.contains(.randomAddress) { return .random }
        return nil
    }

    package var name: String? { storage.header.name }
    package var isConnected: Bool { flags.contains(.connected) }
    package var servicesResolved: Bool { flags.contains(.servicesResolved) }
    /// Whether BlueZ has an `RSSI` for the device (it invalidates it when discovery stops).
    package var hasRSSI: Bool { flags.contains(.hasRSSI) }
    /// `RSSI` as an integer (127 "not available" included).
    package var rssi: Int? { flags.contains(.rssiIsInteger) ? Int(storage.header.rssi) : nil }
    package var txPower: Int? { flags.contains(.hasTxPower) ? Int(storage.header.txPower) : nil }

    /// `UUIDs` that parse, in BlueZ's order.
    package var serviceUUIDs: [BluetoothUUID] {
        withPayload { payload in
            var uuids: [BluetoothUUID] = []
            payload.forEach { entry in if case .uuid(let uuid) = entry { uuids.append(uuid) } }
            return uuids
        }
    }

    /// The properties as ``AdvertisementData`` (RSSI 127 "not available" becomes nil).
    package var advertisementData: AdvertisementData {
        var data = AdvertisementData()
        data.localName = name
        withPayload { payload in
            payload.forEach { entry in
                switch entry {
                case .uuid(let uuid): data.serviceUUIDs.append(uuid)
                case .manufacturer(let id, let bytes): data.manufacturerData[id] = Array(bytes)
                case .service(let uuid, let bytes): data.serviceData[uuid] = Array(bytes)
                }
            }
        }
        if let power = txPower { data.txPower = Int8(clamping: power) }
        if let rssi, rssi != 127 { data.rssi = Int16(clamping: rssi) }
        return data
    }

    /// The peripheral snapshot, when the device has an address.
    package var peripheral: Peripheral? {
        guard let address else { return nil }
        return Peripheral(
            address: address, addressType: addressType, name: name, isConnected: isConnected,
            servicesResolved: servicesResolved)
    }

    /// Bytes of encoded payload (for tests).
    package var payloadCount: Int { Int(storage.header.payloadCount) }

    private func withPayload<R>(_ body: (Payload) -> R) -> R {
        storage.withUnsafeMutablePointers { header, elements in
            body(Payload(bytes: UnsafeBufferPointer(start: elements, count: Int(header.pointee.payloadCount))))
        }
    }

    // MARK: Writing

    /// Sets (`value`) or invalidates (nil) the property `name`; names not kept are ignored.
    mutating func set(_ name: String, _ value: DBusValue?) {
        if let section = Payload.Section(name) {
            var replacement = Payload.Replacement()
            replacement[section] = value ?? .array(.string, [])
            replacePayload(replacement)
            return
        }
        makeUnique()
        Self.apply(name, value, to: &storage.header)
    }

    /// Applies a `PropertiesChanged` (the payload in one go when several of its parts change).
    mutating func change(_ changed: [String: DBusValue], invalidated: [String]) {
        change(PropertyChanges(changed), invalidated: invalidated)
    }

    /// Applies a `PropertiesChanged` as the signal carried it.
    mutating func change(_ changed: PropertyChanges, invalidated: [String]) {
        var sections = Payload.Replacement()
        changed.forEach { name, value in
            if let section = Payload.Section(name) { sections[section] = value } else { set(name, value) }
        }
        for name in invalidated {
            if let section = Payload.Section(name) { sections[section] = .array(.string, []) } else { set(name, nil) }
        }
        if !sections.isEmpty { replacePayload(sections) }
    }

    private static func apply(_ name: String, _ value: DBusValue?, to header: inout Header) {
        var flags = Flags(rawValue: UInt16(truncatingIfNeeded: header.addressAndFlags >> 48))
        var address = header.addressAndFlags & 0xFFFF_FFFF_FFFF
        switch name {
        case "Address":
            if let parsed = value?.string.flatMap(BluetoothAddress.init) {
                address = parsed.rawValue
                flags.insert(.hasAddress)
            } else {
                address = 0
                flags.remove(.hasAddress)
            }
        case "AddressType":
            flags.subtract([.publicAddress, .randomAddress])
            switch value?.string.flatMap(BluetoothAddress.AddressType.init(rawValue:)) {
            case .public?: flags.insert(.publicAddress)
            case .random?: flags.insert(.randomAddress)
            case nil: break
            }
        case "Name":
            header.name = value?.string
        case "Connected":
            if value?.bool == true { flags.insert(.connected) } else { flags.remove(.connected) }
        case "ServicesResolved":
            if value?.bool == true { flags.insert(.servicesResolved) } else { flags.remove(.servicesResolved) }
        case "RSSI":
            if value != nil { flags.insert(.hasRSSI) } else { flags.remove(.hasRSSI) }
            if let rssi = value?.int {
                header.rssi = Int16(clamping: rssi)
                flags.insert(.rssiIsInteger)
            } else {
                header.rssi = 0
                flags.remove(.rssiIsInteger)
            }
        case "TxPower":
            if let power = value?.int {
                header.txPower = Int16(clamping: power)
                flags.insert(.hasTxPower)
            } else {
                header.txPower = 0
                flags.remove(.hasTxPower)
            }
        default:
            return
        }
        header.addressAndFlags = UInt64(flags.rawValue) << 48 | address
    }

    private mutating func makeUnique() {
        guard !isKnownUniquelyReferenced(&storage) else { return }
        storage = copy(reservingPayload: Int(storage.header.payloadCount))
    }

    private func copy(reservingPayload capacity: Int) -> Storage {
        let copy = Storage.make(storage.header, capacity: capacity)
        storage.withUnsafeMutablePointers { header, elements in
            let count = min(Int(header.pointee.payloadCount), capacity)
            copy.withUnsafeMutablePointerToElements { $0.initialize(from: elements, count: count) }
            copy.header.payloadCount = UInt32(count)
        }
        return copy
    }

    /// Replaces the payload sections in `replacement` with the encoding of their new values,
    /// keeping the others. In place when every replaced section keeps its length (a sensor's
    /// `ServiceData` with new readings); otherwise in a new block of the exact size.
    private mutating func replacePayload(_ replacement: Payload.Replacement) {
        // The new sections are encoded into scratch space on the stack, of a size that holds any
        // advertisement; a larger value (a long list of UUIDs, say) is encoded again into space
        // of the size the first attempt measured. (Measuring first cost a walk of the values.)
        var capacity = 256
        while let needed = replacePayload(replacement, scratchCapacity: capacity) { capacity = needed }
    }

    /// ``replacePayload(_:)`` with `capacity` bytes of scratch space; nil when done, else (with
    /// nothing changed) the space the new sections need.
    private mutating func replacePayload(_ replacement: Payload.Replacement, scratchCapacity capacity: Int) -> Int? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { scratch -> Int? in
            let scratch = scratch.baseAddress!
            // The new sections, encoded one after another into `scratch`.
            var newRanges = Payload.Ranges(0..<0)
            var writer = Payload.Writer(base: scratch, capacity: capacity)
            for section in Payload.Section.allCases {
                guard let value = replacement[section] else { continue }
                let start = writer.count
                Payload.encode(section, value, into: &writer)
                newRanges[section] = start..<writer.count
            }
            guard writer.count <= capacity else { return writer.count }
            let oldRanges = withPayload { $0.sectionRanges() }
            var inPlace = isKnownUniquelyReferenced(&storage)
            var total = 0
            for section in Payload.Section.allCases {
                let range = replacement[section] == nil ? oldRanges[section] : newRanges[section]
                total += range.count
                if range.count != oldRanges[section].count { inPlace = false }
            }
            if inPlace {
                storage.withUnsafeMutablePointerToElements { elements in
                    for section in Payload.Section.allCases where replacement[section] != nil {
                        let new = newRanges[section]
                        (elements + oldRanges[section].lowerBound).update(
                            from: scratch + new.lowerBound, count: new.count)
                    }
                }
                return nil
            }
            let fresh = Storage.make(storage.header, capacity: total)
            storage.withUnsafeMutablePointerToElements { oldElements in
                fresh.withUnsafeMutablePointerToElements { elements in
                    var offset = 0
                    for section in Payload.Section.allCases {
                        let replaced = replacement[section] != nil
                        let range = replaced ? newRanges[section] : oldRanges[section]
                        (elements + offset).initialize(
                            from: (replaced ? scratch : oldElements) + range.lowerBound, count: range.count)
                        offset += range.count
                    }
                }
            }
            fresh.header.payloadCount = UInt32(total)
            storage = fresh
            return nil
        }
    }
}

/// The encoded advertisement payload of a ``DeviceObject``: `UUIDs`, then `ManufacturerData`,
/// then `ServiceData`, each a run of entries that start with a tag byte:
///
/// - `0x01`, `0x02`, `0x03`: a UUID of `UUIDs` in 2, 4 or 16 bytes (SIG 16-bit, SIG 32-bit,
///   128-bit; little-endian value, 128-bit as high then low half);
/// - `0x10`: a `ManufacturerData` entry: company id (2 bytes), length (LEB128), bytes;
/// - `0x21`, `0x22`, `0x23`: a `ServiceData` entry: its UUID as above, length, bytes.
///
/// Only entries the readers used are kept: UUID strings that parse, manufacturer entries with a
/// `q` key and service entries with a UUID string key whose value is an `ay`.
struct Payload {
    let bytes: UnsafeBufferPointer<UInt8>

    enum Section: Int, CaseIterable {
        case uuids, manufacturerData, serviceData

        init?(_ name: String) {
            switch name {
            case "UUIDs": self = .uuids
            case "ManufacturerData": self = .manufacturerData
            case "ServiceData": self = .serviceData
            default: return nil
            }
        }

        init(tag: UInt8) {
            switch tag {
            case 0x10: self = .manufacturerData
            case 0x21...0x23: self = .serviceData
            default: self = .uuids
            }
        }
    }

    /// One value per section, held inline (no array to allocate).
    struct PerSection<Value> {
        private var values: (Value, Value, Value)

        init(_ initial: Value) { values = (initial, initial, initial) }

        subscript(section: Section) -> Value {
            get {
                switch section {
                case .uuids: values.0
                case .manufacturerData: values.1
                case .serviceData: values.2
                }
            }
            set {
                switch section {
                case .uuids: values.0 = newValue
                case .manufacturerData: values.1 = newValue
                case .serviceData: values.2 = newValue
                }
            }
        }
    }

    /// New values for some sections (an empty array for an invalidated one).
    struct Replacement {
        private var values = PerSection<DBusValue?>(nil)

        subscript(section: Section) -> DBusValue? {
            get { values[section] }
            set { values[section] = newValue }
        }

        var isEmpty: Bool { Section.allCases.allSatisfy { values[$0] == nil } }
    }

    enum Entry {
        case uuid(BluetoothUUID)
        case manufacturer(UInt16, UnsafeBufferPointer<UInt8>)
        case service(BluetoothUUID, UnsafeBufferPointer<UInt8>)
    }

    /// Every entry in order.
    func forEach(_ body: (Entry) -> Void) {
        var index = 0
        while index < bytes.count {
            let tag = bytes[index]
            index += 1
            switch tag {
            case 0x01, 0x02, 0x03:
                body(.uuid(readUUID(tag, at: &index)))
            case 0x10:
                let id = UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8
                index += 2
                body(.manufacturer(id, readData(at: &index)))
            default:
                let uuid = readUUID(tag - 0x20, at: &index)
                body(.service(uuid, readData(at: &index)))
            }
        }
    }

    /// A range per section.
    typealias Ranges = PerSection<Range<Int>>

    /// Where each section lies (sections are stored in order; an empty one is an empty range
    /// where it would start).
    func sectionRanges() -> Ranges {
        var manufacturerStart = bytes.count
        var serviceStart = bytes.count
        var index = 0
        while index < bytes.count {
            let section = Section(tag: bytes[index])
            if section.rawValue >= Section.manufacturerData.rawValue, manufacturerStart == bytes.count {
                manufacturerStart = index
            }
            if section == .serviceData {
                serviceStart = index
                break
            }
            index = entryEnd(at: index)
        }
        var ranges = Ranges(0..<0)
        ranges[.uuids] = 0..<manufacturerStart
        ranges[.manufacturerData] = manufacturerStart..<serviceStart
        ranges[.serviceData] = serviceStart..<bytes.count
        return ranges
    }

    private func entryEnd(at start: Int) -> Int {
        var index = start + 1
        let tag = bytes[start]
        if tag == 0x10 {
            index += 2
        } else {
            switch tag & 0x0F {
            case 0x01: index += 2
            case 0x02: index += 4
            default: index += 16
            }
            if tag < 0x20 { return index }
        }
        _ = readData(at: &index)
        return index
    }

    private func readUUID(_ width: UInt8, at index: inout Int) -> BluetoothUUID {
        switch width {
        case 0x01:
            defer { index += 2 }
            return BluetoothUUID(UInt16(bytes[index]) | UInt16(bytes[index + 1]) << 8)
        case 0x02:
            defer { index += 4 }
            return BluetoothUUID(bits32: UInt32(truncatingIfNeeded: readWord(at: index, count: 4)))
        default:
            defer { index += 16 }
            return BluetoothUUID(high: readWord(at: index, count: 8), low: readWord(at: index + 8, count: 8))
        }
    }

    private func readWord(at index: Int, count: Int) -> UInt64 {
        var word: UInt64 = 0
        for offset in (0..<count).reversed() { word = word << 8 | UInt64(bytes[index + offset]) }
        return word
    }

    private func readData(at index: inout Int) -> UnsafeBufferPointer<UInt8> {
        var length = 0
        var shift = 0
        while true {
            let byte = bytes[index]
            index += 1
            length |= Int(byte & 0x7F) << shift
            shift += 7
            if byte & 0x80 == 0 { break }
        }
        defer { index += length }
        return UnsafeBufferPointer(rebasing: bytes[index..<(index + length)])
    }

    // MARK: Encoding

    /// Writes into `capacity` bytes at `base`; past them it only counts (``count`` is then the
    /// space the encoding needs).
    struct Writer {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int
        var count = 0

        init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
            self.base = base
            self.capacity = capacity
        }

        mutating func put(_ byte: UInt8) {
            if count < capacity { base[count] = byte }
            count += 1
        }

        mutating func put(_ word: UInt64, bytes: Int) {
            for index in 0..<bytes { put(UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))) }
        }

        mutating func putLength(_ length: Int) {
            var rest = UInt(length)
            while rest >= 0x80 {
                put(UInt8(truncatingIfNeeded: rest) | 0x80)
                rest >>= 7
            }
            put(UInt8(rest))
        }

        /// A UUID's width tag (plus `tagBase`) and value.
        mutating func put(_ uuid: BluetoothUUID, tagBase: UInt8) {
            switch uuid.width {
            case .bits16:
                put(tagBase | 0x01)
                put(uuid.high >> 32, bytes: 2)
            case .bits32:
                put(tagBase | 0x02)
                put(uuid.high >> 32, bytes: 4)
            case .bits128:
                put(tagBase | 0x03)
                put(uuid.high, bytes: 8)
                put(uuid.low, bytes: 8)
            }
        }

        /// The `.byte` elements of an `ay` with their count first.
        mutating func putData(_ elements: [DBusValue]) {
            var count = 0
            for element in elements { if case .byte = element { count += 1 } }
            putLength(count)
            for case .byte(let byte) in elements { put(byte) }
        }
    }

    /// Encodes a section's value as the readers read it: `UUIDs` as strings (`as`, `ao`, `ag`)
    /// that parse as UUIDs; data maps as their entries whose value is an `ay` (through variants)
    /// and whose key is a `q` (manufacturer) or a UUID string (service).
    static func encode(_ section: Section, _ value: DBusValue, into writer: inout Writer) {
        switch section {
        case .uuids:
            guard case .array(let type, let elements) = value.unwrapped,
                type == .string || type == .objectPath || type == .signature
            else { return }
            for element in elements {
                let text: String
                switch element {
                case .string(let string): text = string
                case .objectPath(let path): text = path.rawValue
                case .signature(let signature): text = signature.description
                default: continue
                }
                guard let uuid = parseUUID(text) else { continue }
                writer.put(uuid, tagBase: 0)
            }
        case .manufacturerData:
            for entry in value.entries ?? [] {
                guard let id = entry.key.uint16, let elements = byteElements(entry.value) else { continue }
                writer.put(0x10)
                writer.put(UInt64(id), bytes: 2)
                writer.putData(elements)
            }
        case .serviceData:
            for entry in value.entries ?? [] {
                guard let uuid = entry.key.string.flatMap(parseUUID), let elements = byteElements(entry.value) else {
                    continue
                }
                writer.put(uuid, tagBase: 0x20)
                writer.putData(elements)
            }
        }
    }

    /// `BluetoothUUID(text)`, with BlueZ's own spelling (`0000181a-0000-1000-8000-00805f9b34fb`:
    /// 36 characters, hyphens after 8, 12, 16 and 20 hex digits) read straight from its bytes.
    /// The general parser walks Unicode scalars, and a service data key is parsed for every
    /// advertisement report; any other text goes to it.
    static func parseUUID(_ text: String) -> BluetoothUUID? {
        let parsed = text.utf8.withContiguousStorageIfAvailable { bytes -> BluetoothUUID? in
            let hyphen = UInt8(ascii: "-")
            guard bytes.count == 36, bytes[8] == hyphen, bytes[13] == hyphen, bytes[18] == hyphen, bytes[23] == hyphen
            else { return nil }
            let text = bytes.baseAddress!  // 36 bytes
            var invalid: UInt8 = 0  // bit 4 set by any byte that is not a hex digit
            func hex(_ range: Range<Int>, into word: inout UInt64) {
                for index in range {
                    let nibble = Hex.value(text[index])
                    invalid |= nibble
                    word = word << 4 | UInt64(nibble & 0xF)
                }
            }
            var high: UInt64 = 0
            var low: UInt64 = 0
            hex(0..<8, into: &high)
            hex(9..<13, into: &high)
            hex(14..<18, into: &high)
            hex(19..<23, into: &low)
            hex(24..<36, into: &low)
            return invalid & 0x10 == 0 ? BluetoothUUID(high: high, low: low) : nil
        }
        return (parsed ?? nil) ?? BluetoothUUID(text)
    }

    /// The elements of an `ay` (through variants), without copying them into bytes.
    static func byteElements(_ value: DBusValue) -> [DBusValue]? {
        guard case .array(.byte, let elements) = value.unwrapped else { return nil }
        return elements
    }
}
