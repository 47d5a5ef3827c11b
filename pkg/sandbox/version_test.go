/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"strings"
	"testing"

	utilcompatibility "k8s.io/apiserver/pkg/util/compatibility"
)

// TestATestBinaryReportsTheKubernetesItIsBuiltFrom checks the version a test binary's API server reports (test
// binaries are linked without Kubernetes' version): that of the k8s.io/kubernetes module, parseable by clients.
func TestATestBinaryReportsTheKubernetesItIsBuiltFrom(t *testing.T) {
	info := unlinkedVersion(utilcompatibility.DefaultBuildEffectiveVersion())
	if info == nil {
		t.Fatal("a test binary reports its own version, want the module's")
	}
	if !strings.HasPrefix(info.GitVersion, "v1.37.") || info.Major != "1" || info.Minor != "37" {
		t.Errorf("reports %+v, want v1.37.x, major 1, minor 37", info)
	}
}
