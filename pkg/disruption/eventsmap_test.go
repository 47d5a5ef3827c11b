/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package disruption

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestTheEventsMapNamesEventsStevedoreRecords: every Stevedore reason that docs/operations.md maps Karpenter's
// events to is a reason the code records (a string literal of a non-test source file), so the map cannot send a
// runbook after an event that does not exist.
func TestTheEventsMapNamesEventsStevedoreRecords(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "## Karpenter's events and Stevedore's")
	if start < 0 {
		t.Fatal("docs/operations.md has no section mapping Karpenter's events to Stevedore's")
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var source strings.Builder
	err = filepath.WalkDir(filepath.Join("..", ".."), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "test" || d.Name() == "hack" || strings.HasPrefix(d.Name(), ".")) && path != filepath.Join("..", "..") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			//nolint:gosec // G122: the repository's own source tree, read by a test
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			source.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	code := source.String()
	reason := regexp.MustCompile("`([A-Z][A-Za-z]+)`")
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "Karpenter") || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		rows++
		for _, m := range reason.FindAllStringSubmatch(cells[2], -1) {
			if name := m[1]; !strings.Contains(code, `"`+name+`"`) {
				t.Errorf("docs/operations.md maps Karpenter's %s to %s, which no Stevedore source records", strings.TrimSpace(cells[1]), name)
			}
		}
	}
	if rows < 10 {
		t.Errorf("the events map has %d rows; want one per Karpenter reason", rows)
	}
}
