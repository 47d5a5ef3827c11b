/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package bench

import (
	"os"
	"testing"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
)

// TestMain tunes this process's collector as a process hosting a sandbox should: the sandbox's CPU is reported
// apart from the scheduler's, and is less of the two cores they share.
func TestMain(m *testing.M) {
	sandbox.TuneHost()
	os.Exit(m.Run())
}
