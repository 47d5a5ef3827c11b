/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package e2e

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// karpenterVersion is the release of Karpenter's AWS provider whose CRD chart the migration test installs as
// release karpenter-crd, as a cluster running Karpenter has it.
const karpenterVersion = "v1.15.2"

// karpenterCRDChart writes Karpenter's own CRD chart (charts/karpenter-crd of github.com/aws/karpenter-provider-aws
// at karpenterVersion) into dir, taken from the module's zip as the Go module proxy serves it, and returns its
// folder. go mod download fetches the zip even though the module asks for a newer Go than this one to build; only
// the chart's files are read.
func karpenterCRDChart(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/aws/karpenter-provider-aws@"+karpenterVersion)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, _ := cmd.Output() // the Go version the module asks for is reported as its Error; the zip is there
	var mod struct{ Zip string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Zip == "" {
		t.Fatalf("go mod download of Karpenter %s: %v\n%s", karpenterVersion, err, out)
	}
	zr, err := zip.OpenReader(mod.Zip)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	prefix := "github.com/aws/karpenter-provider-aws@" + karpenterVersion + "/charts/karpenter-crd/"
	chart := filepath.Join(dir, "karpenter-crd")
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, prefix)
		if !ok || strings.HasSuffix(f.Name, "/") || strings.Contains(name, "..") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, name)), 0o750); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(chart, name), string(body))
	}
	if _, err := os.Stat(filepath.Join(chart, "templates", "autoscaling.x-k8s.io_capacitybuffers.yaml")); err != nil {
		t.Fatalf("Karpenter %s's CRD chart has no CapacityBuffer CRD: %v", karpenterVersion, err)
	}
	return chart
}
