import JSON

extension Gateway {
    /// The readings history of the device a name or address names (``ReadingHistory``), for the
    /// web page's charts: `{"device": name, "address": …, "series": [{"name": attribute, "unit"?:
    /// symbol, "points": [[milliseconds since 1970, value], …]}, …]}`, oldest point first; nil
    /// when no registered device has that name or address. Read it on the loop.
    public func history(of device: String) -> JSONValue? {
        guard let id = registry.id(nameOrAddress: device) else { return nil }
        let record = registry[id]
        let units = Dictionary(
            states.readings(id).map { ($0.name, $0.unit) }, uniquingKeysWith: { first, _ in first })
        let series: [JSONValue] = history.charts(id).map { chart in
            var members: [(key: String, value: JSONValue)] = [("name", .string(chart.name))]
            if case .some(.some(let unit)) = units[chart.name] { members.append(("unit", .string(unit))) }
            members.append(
                ("points", .array(chart.points.map { .array([.number(Double($0.time)), .number(Double($0.value))]) })))
            return .object(members)
        }
        return .object([
            ("device", .string(record.name)), ("address", .string(record.address.description)),
            ("series", .array(series)),
        ])
    }
}
