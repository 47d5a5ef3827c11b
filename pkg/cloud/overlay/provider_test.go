/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package overlay

import (
	"context"
	"testing"

	"github.com/stevedore-dev/stevedore/pkg/cloud"
	"github.com/stevedore-dev/stevedore/pkg/cloud/fake"
)

// collecting is a provider that keeps launch templates and placement groups, counting the collector's calls.
type collecting struct {
	*fake.Provider
	templates, groups int
}

func (c *collecting) CollectLaunchTemplates(context.Context) (int, error) {
	c.templates++
	return 1, nil
}
func (c *collecting) CollectPlacementGroups(context.Context) (int, error) { c.groups++; return 2, nil }

// TestTheWrapperPassesTheGarbageCollectorThrough: the garbage collector finds the launch template and placement
// group collectors of a provider through the NodeOverlay wrapper every controller is given, and a provider that
// keeps neither collects nothing.
func TestTheWrapperPassesTheGarbageCollectorThrough(t *testing.T) {
	base, err := fake.New([]string{"zone-a"}, "m5.large")
	if err != nil {
		t.Fatal(err)
	}
	inner := &collecting{Provider: base}
	var wrapped cloud.Provider = NewProvider(inner, nil)
	lc, ok := wrapped.(cloud.LaunchTemplateCollector)
	if !ok {
		t.Fatal("the wrapper hides the launch template collector")
	}
	pc, ok := wrapped.(cloud.PlacementGroupCollector)
	if !ok {
		t.Fatal("the wrapper hides the placement group collector")
	}
	if n, err := lc.CollectLaunchTemplates(context.Background()); n != 1 || err != nil || inner.templates != 1 {
		t.Errorf("CollectLaunchTemplates = %d, %v after %d calls; want the provider's 1 after 1", n, err, inner.templates)
	}
	if n, err := pc.CollectPlacementGroups(context.Background()); n != 2 || err != nil || inner.groups != 1 {
		t.Errorf("CollectPlacementGroups = %d, %v after %d calls; want the provider's 2 after 1", n, err, inner.groups)
	}
	plain := NewProvider(base, nil)
	if n, err := plain.CollectLaunchTemplates(context.Background()); n != 0 || err != nil {
		t.Errorf("a provider without launch templates collected %d (%v)", n, err)
	}
}
