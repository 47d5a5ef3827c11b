/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package foundation

import (
	"testing"

	"github.com/stevedore-dev/stevedore/pkg/sandbox"
	"github.com/stevedore-dev/stevedore/test/integration/harness"
)

// sb is the package's sandbox, started once by TestMain.
var sb *sandbox.Sandbox

func TestMain(m *testing.M) {
	harness.Run(m, sandbox.Options{WithScheduler: true}, func(s *sandbox.Sandbox) { sb = s })
}
