import Testing
@Test func placeholderDBus() {}
