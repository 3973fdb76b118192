package stream

// For the tests of package stream_test.
var SourceStart = sourceStart
