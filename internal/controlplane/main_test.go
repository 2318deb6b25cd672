package controlplane

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts has ended when the tests end: servers,
// dispatchers, schedulers and gateways stop with their owners.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
