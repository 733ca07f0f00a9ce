/// The proleptic Gregorian date (UTC) of a count of days since 1970-01-01, by Howard Hinnant's
/// `civil_from_days`: integer arithmetic only, no allocation. BTHome's timestamps and the
/// gateway's payload timestamps are written with it.
public struct CivilDate: Sendable, Hashable {
    public let year: Int64
    /// 1…12.
    public let month: Int64
    /// 1…31.
    public let day: Int64

    @inlinable
    public init(days: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * mp + 2) / 5 + 1
        month = mp < 10 ? mp + 3 : mp - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }
}
