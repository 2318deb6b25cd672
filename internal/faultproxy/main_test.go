package faultproxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any goroutine outlives the tests: every Proxy
// (and every test backend) must have returned all of its goroutines by then.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
