/// The connection's record of one exported object path: its interfaces with their current
/// property values. A class so property updates mutate in place (no copy-on-write of the value
/// tables on the hot `PropertiesChanged` path). Owned by the connection; loop thread only.
final class ExportedObject {
    final class Interface {
        let definition: DBusInterface
        let methodIndex: [String: Int]
        let propertyIndex: [String: Int]
        /// Current values by property name; absent properties have no entry.
        var values: [String: DBusValue]

        init(_ definition: DBusInterface) {
            self.definition = definition
            var methods: [String: Int] = [:]
            for (index, method) in definition.methods.enumerated() { methods[method.name] = index }
            methodIndex = methods
            var properties: [String: Int] = [:]
            var values: [String: DBusValue] = [:]
            for (index, property) in definition.properties.enumerated() {
                properties[property.name] = index
                if let value = property.value { values[property.name] = value }
            }
            propertyIndex = properties
            self.values = values
        }

        var name: String { definition.name }

        func property(_ name: String) -> DBusProperty? {
            propertyIndex[name].map { definition.properties[$0] }
        }

        func method(_ name: String) -> DBusMethod? {
            methodIndex[name].map { definition.methods[$0] }
        }

        /// `a{sv}` of the readable properties that exist now, in declaration order.
        var propertyDictionary: DBusValue {
            var entries: [DBusDictionaryEntry] = []
            entries.reserveCapacity(values.count)
            for property in definition.properties where property.access != .write {
                if let value = values[property.name] {
                    entries.append(DBusDictionaryEntry(.string(property.name), .variant(value)))
                }
            }
            return .dictionary(key: .string, value: .variant, entries)
        }
    }

    /// In export order.
    var interfaces: [Interface] = []

    func interface(_ name: String) -> Interface? {
        interfaces.first { $0.name == name }
    }
}
