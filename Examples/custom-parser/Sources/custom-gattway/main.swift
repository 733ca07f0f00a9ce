import GattwayKit

// gattway with two more parsers: the strap's characteristic (config.json names it
// `"parser": "strap_pulse"`) and the Mystery Tag's advertisements (decoded without any config).
// Nothing may run before this call: it sets up the process and never returns.
Gattway.main(parsers: [StrapPulse()], advertisementParsers: [MysteryTag()])
