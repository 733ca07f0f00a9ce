import GattwayKit

// The whole tool is in GattwayKit, so a user's package can run the same command line with its own
// Swift parsers (docs/parsers.md, "Your own Swift parsers"). `Gattway.main` never returns and is not
// async: see the reasons in Sources/GattwayKit/Gattway.swift.
Gattway.main()
