import BlueZ
import Bluetooth
import Gateway
import JSON

/// The JSON file `gattway serve --tree` publishes (docs/peripheral.md):
///
/// ```json
/// {"name": "gattway", "services": [
///   {"uuid": "180F", "characteristics": [
///     {"uuid": "2A19", "properties": ["read", "notify"], "value": 94, "encoding": "u8",
///      "descriptors": [{"uuid": "2901", "value": "Level"}]},
///     {"uuid": "FF01", "properties": ["write", "write-without-response"]},
///     {"uuid": "FF03", "properties": ["read"], "read_error": 128}]}]}
/// ```
///
/// Values are written in their `encoding` (the command encodings: u8…s32be, float32le, bool, hex,
/// base64, utf8, json; default utf8). Properties are BlueZ flag names. Every error names its JSON path.
///
/// A library of its own because it needs both the peripheral types of `BlueZ` and the value
/// encodings of `Gateway`, which may not import each other; the CLI loads the file
/// (`GATTTreeFile.load(path:)` in the executable) and the fuzz target parses hostile ones.
public struct GATTTreeFile {
    public struct CharacteristicEntry {
        public var characteristic: MutableCharacteristic
        /// ATT error codes to answer reads / writes with (to try a central's error handling).
        public var readError: ATTError?
        public var writeError: ATTError?
    }

    public var name: String?
    public var services: [(service: MutableService, entries: [CharacteristicEntry])]

    /// Parses the file's text; every error is a ``JSONPathError`` naming the JSON path.
    public static func parse<C: Collection>(_ bytes: C) throws -> GATTTreeFile where C.Element == UInt8 {
        try parse(JSONReader.parse(bytes))
    }

    public static func parse(_ root: JSONReader) throws -> GATTTreeFile {
        let object = try root.object()
        let name = try object.optional("name")?.string()
        var services: [(MutableService, [CharacteristicEntry])] = []
        for reader in try object.required("services").array() {
            let entry = try reader.object()
            let uuid = try uuid(entry.required("uuid"))
            let primary = try entry.optional("primary")?.bool() ?? true
            let characteristics = try entry.required("characteristics").array().map(characteristic)
            try entry.finish()
            let service = MutableService(
                uuid: uuid, isPrimary: primary, characteristics: characteristics.map(\.characteristic))
            if let problem = service.problem { throw reader.fail(problem) }
            services.append((service, characteristics))
        }
        try object.finish()
        guard !services.isEmpty else { throw root.fail("services: expected at least one service") }
        return GATTTreeFile(name: name, services: services)
    }

    private static func characteristic(_ reader: JSONReader) throws -> CharacteristicEntry {
        let object = try reader.object()
        let uuid = try uuid(object.required("uuid"))
        let properties = try flags(object.required("properties"))
        let encoding = try self.encoding(object.optional("encoding"))
        let value = try object.optional("value").map { try bytes($0, encoding) }
        let descriptors =
            try object.optional("descriptors")?.array().map { reader -> MutableDescriptor in
                let descriptor = try reader.object()
                let uuid = try self.uuid(descriptor.required("uuid"))
                let encoding = try self.encoding(descriptor.optional("encoding"))
                let value = try bytes(descriptor.required("value"), encoding)
                try descriptor.finish()
                return MutableDescriptor(uuid: uuid, value: value)
            } ?? []
        let readError = try object.optional("read_error").map(attError)
        let writeError = try object.optional("write_error").map(attError)
        try object.finish()
        return CharacteristicEntry(
            characteristic: MutableCharacteristic(
                uuid: uuid, properties: properties, value: value, descriptors: descriptors),
            readError: readError, writeError: writeError)
    }

    private static func uuid(_ reader: JSONReader) throws -> BluetoothUUID {
        guard let uuid = BluetoothUUID(try reader.string()) else {
            throw reader.fail("expected a UUID such as \"180F\"")
        }
        return uuid
    }

    private static func flags(_ reader: JSONReader) throws -> CharacteristicProperties {
        var unknown: [String] = []
        let properties = CharacteristicProperties(
            bluezFlags: try reader.array().map { try $0.string() }, unknown: &unknown)
        if let flag = unknown.first {
            throw reader.fail(
                "\"\(flag)\" is not a BlueZ flag (read, write, write-without-response, notify, indicate, encrypt-read, …)"
            )
        }
        return properties
    }

    private static func encoding(_ reader: JSONReader?) throws -> ValueEncoding {
        guard let reader else { return .utf8 }
        let text = try reader.string()
        guard let encoding = ValueEncoding(rawValue: text) else {
            throw reader.fail(
                "expected an encoding (\(ValueEncoding.allCases.map(\.rawValue).joined(separator: ", "))), got \"\(text)\""
            )
        }
        return encoding
    }

    private static func bytes(_ reader: JSONReader, _ encoding: ValueEncoding) throws -> [UInt8] {
        do throws(CommandError) {
            return try encoding.encode(reader.value)
        } catch {
            throw reader.fail(error.message)
        }
    }

    private static func attError(_ reader: JSONReader) throws -> ATTError {
        let code = try reader.integer(in: 0...255)
        guard let error = ATTError(code: UInt8(code)) else {
            throw reader.fail("expected an ATT error an application can return (2, 3, 6, 7, 8, 13, 14, 128…159, 253)")
        }
        return error
    }
}
