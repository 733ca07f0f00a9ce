import JSON

/// The built-in named actions: for each `model` a device rule may name, the `commands` it adds,
/// written in the same JSON a user writes under a rule's `commands` (docs/config.md, "Device
/// models"), so a user can copy an entry and change it for a device not listed here.
///
/// Byte layouts (public descriptions of the devices' protocols, checked against two
/// independent implementations each):
/// - LYWSD02 clock: service EBE0CCB0-…, characteristic EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6,
///   write without response of the UTC time as u32 little endian and the time zone as a signed
///   byte of whole hours. Users report the MHO-C303 and LYWSD02MMC take the same write.
/// - PVVX custom firmware (LYWSD03MMC, MHO-C401, CGG1, …): service 1F10, characteristic 1F1F,
///   command byte 0x23 then the local time (UTC plus the offset) as u32 little endian.
/// - SwitchBot Bot: service CBA20D00-…, characteristic CBA20002-224D-11E6-9FB8-0002A5D5C51B,
///   57 01 00 press, 57 01 01 on, 57 01 02 off (a Bot without a password).
/// - SwitchBot Curtain: the same characteristic, 57 0F 45 01 05 FF then the position 0 (open)
///   to 100 (closed); 57 0F 45 01 00 FF stops.
public enum DeviceModels {
    /// Other names of a model that take the same writes.
    static let aliases = ["LYWSD02MMC": "LYWSD02", "MHO-C303": "LYWSD02"]

    /// The table, a JSON object of model name → commands object.
    public static let json = """
        {
          "LYWSD02": {
            "set_time": {
              "service": "EBE0CCB0-7A0A-4B0C-8A1A-6FF2997DA3A6",
              "characteristic": "EBE0CCB7-7A0A-4B0C-8A1A-6FF2997DA3A6",
              "response": false,
              "template": [
                {"value": "timestamp", "type": "u32le"},
                {"value": "tz_offset", "type": "s8"}
              ]
            }
          },
          "PVVX": {
            "set_time": {
              "service": "1F10",
              "characteristic": "1F1F",
              "response": false,
              "template": [
                {"hex": "23"},
                {"value": "local_time", "type": "u32le"}
              ]
            }
          },
          "SwitchBot Bot": {
            "press": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [{"hex": "570100"}]
            },
            "on": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [{"hex": "570101"}]
            },
            "off": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [{"hex": "570102"}]
            }
          },
          "SwitchBot Curtain": {
            "open": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [{"hex": "570F450105FF00"}]
            },
            "close": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [{"hex": "570F450105FF64"}]
            },
            "stop": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [{"hex": "570F450100FF"}]
            },
            "position": {
              "service": "CBA20D00-224D-11E6-9FB8-0002A5D5C51B",
              "characteristic": "CBA20002-224D-11E6-9FB8-0002A5D5C51B",
              "template": [
                {"hex": "570F450105FF"},
                {"value": "position", "type": "u8", "minimum": 0, "maximum": 100}
              ]
            }
          }
        }
        """

    /// Every model name a rule may give (the table's and the aliases), sorted.
    public static var names: [String] {
        (table.map(\.model) + aliases.keys).sorted()
    }

    /// The commands of `model` (a name or an alias), nil when there is no such model.
    static func commands(_ model: String) -> [CommandSpec]? {
        let name = aliases[model] ?? model
        return table.first { $0.model == name }?.commands
    }

    /// The table parsed once; a problem in it is a bug the unit tests catch (``problems``).
    static let parsed: (table: [(model: String, commands: [CommandSpec])], problems: [JSONPathError]) = {
        let problems = ConfigProblems()
        var table: [(model: String, commands: [CommandSpec])] = []
        if let reader = problems.attempt({ try JSONReader.parse(Array(json.utf8)) }),
            let models = problems.attempt({ try reader.object() })
        {
            for (model, value) in models.entries() {
                var commands: [CommandSpec] = []
                if let object = ConfigObject(value, problems) {
                    for (name, item) in object.reader.entries() {
                        if let command = CommandSpec(name: name, item, problems: problems) { commands.append(command) }
                    }
                }
                table.append((model, commands))
            }
        }
        return (table, problems.errors)
    }()

    static var table: [(model: String, commands: [CommandSpec])] { parsed.table }

    /// Problems in the built-in table (empty unless the table above is broken).
    public static var problems: [JSONPathError] { parsed.problems }
}
