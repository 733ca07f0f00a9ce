import Bluetooth

extension ByteReader {
    /// Reads a GSS `date_time` (uint16 year, month, day, hours, minutes, seconds) as
    /// `YYYY-MM-DDTHH:MM:SS`; zeros ("unknown") are kept as zeros.
    mutating func dateTime() throws(ParseError) -> String {
        let year = Int(try u16le())
        let month = Int(try u8()), day = Int(try u8())
        let hours = Int(try u8()), minutes = Int(try u8()), seconds = Int(try u8())
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let yearText = year < 10 ? "000\(year)" : year < 100 ? "00\(year)" : year < 1000 ? "0\(year)" : "\(year)"
        return "\(yearText)-\(two(month))-\(two(day))T\(two(hours)):\(two(minutes)):\(two(seconds))"
    }
}
