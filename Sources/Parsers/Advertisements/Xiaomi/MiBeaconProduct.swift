/// The MiBeacon product ids whose objects mean something model-specific (button layouts,
/// light-or-lux objects, leak sensor channels); every other product uses the generic meaning.
///
/// Product ids and model names: xiaomi-ble `devices.py`; which object is model-specific:
/// xiaomi-ble `parser.py`.
enum MiBeaconProduct: UInt16 {
    // Binary-light or lux objects (0x000F, 0x1007).
    case mjyd02yl = 0x07F6
    case mccgq02hl = 0x098B
    case hhccjcy01 = 0x0098
    case gcls002 = 0x03BC
    case rtcgq02lm = 0x0A8D
    case cgpr1 = 0x0A83
    // Object 0x1001 (button) users.
    case ylai003 = 0x07BF
    case jtyjgd03mi = 0x0997
    case sjws01lm = 0x0863
    case xmmf01jqd = 0x04E1
    case ylyk01yl = 0x0153
    case ylyk01ylFan = 0x068E
    case ylyk01ylVentilator = 0x04E6
    case ylyb01ylBathroom = 0x03BF
    case ylkg07yl = 0x03B6
    case k9b1 = 0x1568
    case k9b2 = 0x1569
    case k9b3 = 0x0DFD
    // Newer button objects (0x4A0C-0x4A0E, 0x4E0C-0x4E0E, 0x560C-0x560E).
    case xmws01xs = 0x5968
    case xmwxkg01yl = 0x1949
    case xmwxkg01lm = 0x2387
    case k9bb1 = 0x1C10
    case ks1 = 0x3A61
    case ks1bp = 0x3E17
    case ks2bb = 0x520B
    // Locks.
    case dslC08 = 0x0380
    case znms17lm = 0x069F
    // Others.
    case sjws02lm = 0x6375
    case xmosb01xs = 0x4683
    case es5bb = 0x6A0F
}
