//go:build !jetledger_faults

package consumer

// faultPoint marks a place where tests built with -tags jetledger_faults can
// kill the process. Release builds compile it to nothing.
func faultPoint(string) {}

// faultStop marks a place where those tests can pause the process.
func faultStop(string) {}
