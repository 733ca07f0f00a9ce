import JSON

extension JSONValue {
    /// A copy with the member at `path` (object keys) set to `value`.
    func replacing(_ path: [String], with value: JSONValue) -> JSONValue {
        guard let key = path.first else { return value }
        guard case .object(var members) = self else { return self }
        if let index = members.lastIndex(where: { $0.key == key }) {
            members[index].value = members[index].value.replacing(Array(path.dropFirst()), with: value)
        } else {
            members.append((key, JSONValue.object([]).replacing(Array(path.dropFirst()), with: value)))
        }
        return .object(members)
    }
}
