import Synchronization

/// Process-wide tables of the short texts a reading carries besides its name — units and Home
/// Assistant device classes — each stored once and named by a 16-bit code, so that a ``Reading``
/// holds two small integers instead of two strings (copying and destroying a reading is then no
/// reference counting for them: most of a parser's cost was that).
///
/// The built-in parsers' texts are entered when first used; configuration (declarative parsers)
/// adds its own at load time. Growth is bounded by the code: a table holds at most 65,535 texts,
/// after which a new text is stored as ``overflow`` (never reached: the parsers' vocabulary is
/// fixed and a configuration file is small).
final class InternedTexts: Sendable {
    private struct Table {
        var texts: [String] = [""]  // code 0: reserved
        var codes: [String: UInt16] = [:]
    }
    private let table = Mutex(Table())
    /// The code given when the table is full.
    static let overflow: UInt16 = 0

    /// The code of `text`, entered if new.
    func code(_ text: String) -> UInt16 {
        table.withLock { table in
            if let code = table.codes[text] { return code }
            guard table.texts.count <= Int(UInt16.max) else { return Self.overflow }
            let code = UInt16(table.texts.count)
            table.texts.append(text)
            table.codes[text] = code
            return code
        }
    }

    /// The text of a code from ``code(_:)``.
    func text(_ code: UInt16) -> String {
        table.withLock { table in Int(code) < table.texts.count ? table.texts[Int(code)] : "" }
    }

    static let units = InternedTexts()
    static let deviceClasses = InternedTexts()
}

/// A unit of measurement as Home Assistant spells it (`°C`, `%`, `hPa`): a code for a text in a
/// process-wide table (``InternedTexts``), so that readings copy it as a number.
public struct ReadingUnit: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    @usableFromInline let code: UInt16

    public init(_ symbol: String) { code = InternedTexts.units.code(symbol) }
    public init(stringLiteral symbol: String) { self.init(symbol) }

    /// The unit as text, e.g. `°C`.
    public var symbol: String { InternedTexts.units.text(code) }
    public var description: String { symbol }

    public static let celsius: ReadingUnit = "°C"
    public static let fahrenheit: ReadingUnit = "°F"
    public static let percent: ReadingUnit = "%"
    public static let seconds: ReadingUnit = "s"
    public static let minutes: ReadingUnit = "min"
    public static let ticks1024: ReadingUnit = "1/1024 s"
    public static let volts: ReadingUnit = "V"
    public static let amperes: ReadingUnit = "A"
    public static let watts: ReadingUnit = "W"
    public static let kilowatts: ReadingUnit = "kW"
    public static let kilowattHours: ReadingUnit = "kWh"
    public static let kilojoules: ReadingUnit = "kJ"
    public static let hectopascals: ReadingUnit = "hPa"
    public static let pascals: ReadingUnit = "Pa"
    public static let kilopascals: ReadingUnit = "kPa"
    public static let millimetresOfMercury: ReadingUnit = "mmHg"
    public static let bar: ReadingUnit = "bar"
    public static let lux: ReadingUnit = "lx"
    public static let ppm: ReadingUnit = "ppm"
    public static let microgramsPerCubicMetre: ReadingUnit = "µg/m³"
    public static let milligramsPerCubicMetre: ReadingUnit = "mg/m³"
    public static let microsiemensPerCentimetre: ReadingUnit = "µS/cm"
    public static let kilograms: ReadingUnit = "kg"
    public static let grams: ReadingUnit = "g"
    public static let pounds: ReadingUnit = "lb"
    public static let kilogramsPerSquareMetre: ReadingUnit = "kg/m²"
    public static let ohms: ReadingUnit = "Ω"
    public static let litres: ReadingUnit = "L"
    public static let millilitres: ReadingUnit = "mL"
    public static let cubicMetres: ReadingUnit = "m³"
    public static let cubicMetresPerHour: ReadingUnit = "m³/h"
    public static let metres: ReadingUnit = "m"
    public static let centimetres: ReadingUnit = "cm"
    public static let millimetres: ReadingUnit = "mm"
    public static let metresPerSecond: ReadingUnit = "m/s"
    public static let metresPerSecondSquared: ReadingUnit = "m/s²"
    public static let degrees: ReadingUnit = "°"
    public static let degreesPerSecond: ReadingUnit = "°/s"
    public static let rpm: ReadingUnit = "rpm"
    public static let dBm: ReadingUnit = "dBm"
    public static let dBA: ReadingUnit = "dBA"
    public static let bpm: ReadingUnit = "bpm"
}
