/// `only_changes` with per-attribute `thresholds`: a state is a change when an attribute is new,
/// differs in kind or text, or a number moved by at least its threshold (default: any amount)
/// since the last published state.
struct ChangeFilter: Sendable {
    var enabled: Bool
    var thresholds: [(name: String, delta: Double)]
    private var published: [Attribute] = []

    init(enabled: Bool, thresholds: [(name: String, delta: Double)]) {
        self.enabled = enabled
        self.thresholds = thresholds
    }

    func isChange(_ state: [Attribute]) -> Bool {
        guard enabled else { return true }
        for attribute in state {
            guard let old = published.first(where: { $0.name == attribute.name }) else { return true }
            if old.value == attribute.value { continue }
            if case .number(let new) = attribute.value, case .number(let previous) = old.value,
                let threshold = thresholds.first(where: { $0.name == attribute.name })?.delta
            {
                if abs(new - previous) >= threshold { return true }
                continue
            }
            return true
        }
        return false
    }

    mutating func record(_ state: [Attribute]) {
        guard enabled else { return }
        published = state
    }
}
