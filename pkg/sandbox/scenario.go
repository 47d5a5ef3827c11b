/*
Copyright The Stevedore Authors. Licensed under the Apache License, Version 2.0.
*/

package sandbox

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// A scenario is a scripted story played against a running sandbox; it prints what happens and returns an error
// when an expectation fails.
type scenario func(ctx context.Context, sb *Sandbox, out io.Writer) error

func scenarios() map[string]scenario {
	return map[string]scenario{
		"smoke":   smokeScenario,
		"inflate": inflateScenario,
		"gpu":     gpuScenario,
	}
}

// ScenarioNames lists the scenarios RunScenario knows.
func ScenarioNames() string {
	var names []string
	for n := range scenarios() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// RunScenario plays the named scenario.
func RunScenario(ctx context.Context, sb *Sandbox, name string, out io.Writer) error {
	sc, ok := scenarios()[name]
	if !ok {
		return fmt.Errorf("unknown scenario %q; known: %s", name, ScenarioNames())
	}
	if err := sc(ctx, sb, out); err != nil {
		fmt.Fprintf(out, "scenario %s FAILED: %v\n", name, err)
		return err
	}
	fmt.Fprintf(out, "scenario %s passed\n", name)
	return nil
}
