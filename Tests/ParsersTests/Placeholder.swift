import Testing
@Test func placeholderParsers() {}
