/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package version

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEveryShippedDefaultNamesThisRelease: the charts' versions, the image every install path defaults to (chart,
// kustomize base, Terraform, Dockerfile) and a build without a version name Release, the version this tree builds,
// whose CHANGELOG section (or the Unreleased one on its way to it) exists.
func TestEveryShippedDefaultNamesThisRelease(t *testing.T) {
	semver := strings.TrimPrefix(Release, "v")
	for _, tc := range []struct{ file, want string }{
		{"charts/stevedore/Chart.yaml", "\nversion: " + semver + "\n"},
		{"charts/stevedore/Chart.yaml", "\nappVersion: " + Release + "\n"},
		{"charts/stevedore-crd/Chart.yaml", "\nversion: " + semver + "\n"},
		{"charts/stevedore-crd/Chart.yaml", "\nappVersion: " + Release + "\n"},
		{"charts/stevedore/values.yaml", "\nimage: public.ecr.aws/stevedore/scheduler:" + Release + "\n"},
		{"manifests/deploy/deployment.yaml", "image: public.ecr.aws/stevedore/scheduler:" + Release + " "},
		{"deploy/terraform/variables.tf", `"public.ecr.aws/stevedore/scheduler:` + Release + `"`},
		{"Dockerfile", "ARG VERSION=" + Release + "-dev\n"},
	} {
		raw, err := os.ReadFile("../../" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), tc.want) {
			t.Errorf("%s does not name %s: want %q in it", tc.file, Release, strings.TrimSpace(tc.want))
		}
		// and no other version of the scheduler's image
		for _, m := range regexp.MustCompile(`scheduler:(v[0-9][0-9A-Za-z.-]*)`).FindAllStringSubmatch(string(raw), -1) {
			if m[1] != Release {
				t.Errorf("%s names the image %s, not %s", tc.file, m[0], Release)
			}
		}
	}
	if Get().Stevedore != Release+"-dev" && !strings.HasPrefix(Get().Stevedore, "v") {
		t.Errorf("a build with no version given says %q", Get().Stevedore)
	}
	changelog, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`\n## \[` + regexp.QuoteMeta(semver) + `\] - [0-9]{4}-[0-9]{2}-[0-9]{2}\n`).Match(changelog) {
		t.Errorf("CHANGELOG.md has no dated section for %s (## [%s] - YYYY-MM-DD)", semver, semver)
	}
	// the README's install lines name this release, and no other
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	versions := regexp.MustCompile(`--version (\S+)`).FindAllStringSubmatch(string(readme), -1)
	if len(versions) < 2 {
		t.Errorf("the README's install lines give %d chart versions, want the CRD chart's and the chart's", len(versions))
	}
	for _, m := range versions {
		if m[1] != semver {
			t.Errorf("the README installs --version %s, not %s", m[1], semver)
		}
	}
}
